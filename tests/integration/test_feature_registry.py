"""The feature registry (:mod:`zkop.operator.registry`): ``zkop run`` builds every enabled feature from it, and a
new feature is one registry line.

The example feature here is a whole controller in a few lines: an informer on ZooKeeperConfigs, a controller, a
reconciler that writes ``/example/<namespace>.<name>`` holding the object's ``spec.path``. Added to the registry
with one :class:`~zkop.operator.registry.Feature` line, the Operator builds it with the shared
:class:`~zkop.feature.context.FeatureContext` (the flags' session, the shared settings), runs it while leading, and
its resync hook is called when the session comes back; on the real kube-apiserver as zkop's ServiceAccount and on
real ZooKeeper.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass

from kazoo.client import KazooClient
from zkop_testing.resources import create, zkc
from zkop_testing.waiting import EVENTUALLY, wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.feature.context import FeatureContext
from zkop.kube.client import KubeClient
from zkop.operator.options import OperatorOptions
from zkop.operator.registry import FEATURES, Feature
from zkop.operator.run import Operator
from zkop.runtime.builder import ControllerBuilder
from zkop.runtime.cache import Informer
from zkop.runtime.controller import Controller, Result
from zkop.runtime.manager import ManagerOptions
from zkop.zkconfig.controller import ZOOKEEPERCONFIGS
from zkop.zookeeper.actions import CreateNode
from zkop.zookeeper.adapter import ConcurrentModification, ConnectionOptions, ZooKeeperAdapter


@dataclass(frozen=True)
class ExampleOptions:
    root: str = "/example"


@dataclass
class ExampleParts:
    informer: Informer
    controller: Controller
    reconnected: threading.Event


class ExampleReconciler:
    def __init__(self, cache: Informer, zookeeper: ZooKeeperAdapter, root: str) -> None:
        self.cache, self.zookeeper, self.root = cache, zookeeper, root

    def reconcile(self, key: str) -> Result:
        obj = self.cache.indexer.get(key)
        if obj is not None:
            with contextlib.suppress(ConcurrentModification):  # created by an earlier pass
                self.zookeeper.execute([CreateNode(f"{self.root}/{key.replace('/', '.')}",
                                                   str(obj["spec"]["path"]).encode())])
        return Result()


def setup(context: FeatureContext, options: ExampleOptions) -> ExampleParts:
    """The example feature's whole wiring, in the shape of every feature's ``setup``."""
    settings = context.settings
    informer = Informer(context.client, ZOOKEEPERCONFIGS, namespaces=settings.namespaces, name="example-objects",
                        resync_period=settings.sync_period, inactivity_timeout=settings.inactivity_timeout)
    built = (ControllerBuilder("example", workers=settings.workers).for_(informer)
             .complete(ExampleReconciler(informer, context.zookeeper, options.root)))
    context.manager.add_controllers(built.informers, [built.controller])
    reconnected = threading.Event()
    context.on_new_session(context.zookeeper, reconnected.set)
    return ExampleParts(informer, built.controller, reconnected)


#: The one line that adds the example feature.
EXAMPLE = Feature("example", __name__, lambda o: ExampleOptions())


def test_one_registry_line_adds_a_controller_that_runs_on_the_real_planes(
        kubeconfig: str, kube: KubeClient, zk_server: ZooKeeperServer, zk_base: str, zk: KazooClient,
        namespace: str) -> None:
    options = OperatorOptions(
        kubeconfig=kubeconfig, zookeeper=ConnectionOptions(hosts=f"{zk_server.hosts}{zk_base}", session_timeout=4),
        manager=ManagerOptions(metrics_bind_address="127.0.0.1:0", health_probe_bind_address="127.0.0.1:0"), workers=1,
        namespaces=[namespace])
    operator = Operator(options, features=(*FEATURES, EXAMPLE))
    assert list(operator.features) == ["zookeeperconfig", "example"]
    parts = operator.features["example"]
    assert isinstance(parts, ExampleParts)
    runner = threading.Thread(target=operator.run, name="test-operator-run")
    runner.start()
    try:
        create(kube, zkc("seen", "/app/seen", b"x", namespace=namespace))
        wait_for(lambda: zk.exists(f"{zk_base}/example/{namespace}.seen") is not None,
                 message="the example feature's znode")
        assert zk.get(f"{zk_base}/example/{namespace}.seen")[0] == b"/app/seen"
        # Its resync hook follows the flags' session, as every feature's does.
        operator.zookeeper.client.stop()
        operator.zookeeper.client.start()
        wait_for(parts.reconnected.is_set, message="the example feature's resync hook called")
    finally:
        operator.stop()
        runner.join(EVENTUALLY)
    assert not runner.is_alive()
