"""The controller builder (:mod:`zkop.runtime.builder`), on the real kube-apiserver: the declared sources enqueue
what they say, the workers wait for every source, the built controller reconciles through its queue, and
``detach`` removes exactly the handlers the builder registered."""

from __future__ import annotations

import threading

import pytest
from zkop_testing.controlplane import ControlPlane
from zkop_testing.resources import create, zkc
from zkop_testing.waiting import EVENTUALLY, wait_for

from zkop.kube.client import JSON
from zkop.runtime.builder import ControllerBuilder
from zkop.runtime.cache import FuncHandler, Informer, ResourceRef
from zkop.runtime.controller import Result
from zkop.zkconfig.controller import ZOOKEEPERCONFIGS

CONFIGMAPS = ResourceRef("", "v1", "configmaps")


class Recording:
    """A reconciler that records each key it is given."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.lock = threading.Lock()

    def reconcile(self, key: str) -> Result:
        with self.lock:
            self.keys.append(key)
        return Result()

    def seen(self) -> set[str]:
        with self.lock:
            return set(self.keys)


def test_a_built_controller_reconciles_its_kind_and_what_its_watches_map_to(control_plane: ControlPlane,
                                                                           namespace: str) -> None:
    with control_plane.admin() as kube:
        objects = Informer(kube, ZOOKEEPERCONFIGS, namespaces=[namespace], name="builder-objects")
        configmaps = Informer(kube, CONFIGMAPS, namespaces=[namespace], name="builder-configmaps")
        followed: list[str] = []
        reconciler = Recording()

        def owner_of(obj: JSON) -> list[str]:  # a ConfigMap "cm-<name>" maps to ZooKeeperConfig <name>
            name = str(obj["metadata"]["name"])
            return [f"{namespace}/{name[3:]}"] if name.startswith("cm-") else []

        builder = ControllerBuilder("builder-test", workers=2)
        built = (builder.for_(objects)
                 .watches(configmaps, owner_of)
                 .handles(objects, FuncHandler(lambda obj: followed.append(str(obj["metadata"]["name"]))))
                 .complete(reconciler))
        controller = built.controller
        assert built.informers == [objects, configmaps]
        assert controller.queue is builder.queue and controller.workers == 2
        assert [informer for informer, _ in built.handlers] == [objects, configmaps, objects]
        with pytest.raises(RuntimeError, match="already built"):
            builder.complete(reconciler)
        assert not controller.has_synced()  # the workers wait for every declared source

        create(kube, zkc("first", "/builder/first", b"x", namespace=namespace))
        for informer in built.informers:
            informer.start()
        try:
            wait_for(controller.has_synced, message="both sources listed")
            controller.start()
            wait_for(lambda: f"{namespace}/first" in reconciler.seen(), message="the listed object reconciled")
            kube.request("POST", f"/api/v1/namespaces/{namespace}/configmaps",
                         body={"metadata": {"name": "cm-mapped"}, "data": {}})
            wait_for(lambda: f"{namespace}/mapped" in reconciler.seen(), message="the ConfigMap's mapped key")
            assert "first" in followed

            built.detach()
            assert built.handlers == []
            later: list[str] = []  # a handler registered after ours were removed: events reach it in order
            objects.add_event_handler(FuncHandler(lambda obj: later.append(str(obj["metadata"]["name"]))))
            create(kube, zkc("after", "/builder/after", b"x", namespace=namespace))
            wait_for(lambda: "after" in later, message="the event delivered")
            assert "after" not in followed
            controller.queue.add("marker")  # behind any key a removed handler could have added
            wait_for(lambda: "marker" in reconciler.seen(), message="the queue drained up to the marker")
            assert f"{namespace}/after" not in reconciler.seen()
        finally:
            controller.stop(EVENTUALLY)
            for informer in built.informers:
                informer.stop(EVENTUALLY)
