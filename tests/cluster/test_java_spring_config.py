"""A Spring Boot application's configuration, live from Git: Flux, zkop and Spring Cloud Zookeeper Config 5.0.1.

``zkop.interop.springconfig.SpringConfigApp`` (``tests/interop/java-spring``, the real libraries from Maven
Central) imports its configuration from ZooKeeper (``spring.config.import=zookeeper:``: the znodes under
``/config/<spring.application.name>``) into a ``@ConfigurationProperties`` bean and a ``@RefreshScope`` bean, and
serves both values on ``GET /config``. The znode is a ZooKeeperConfig in a Git repository: Flux's own
source-controller and kustomize-controller apply it, zkop writes it; Spring Cloud Zookeeper Config's watcher (a
Curator ``TreeCache`` on the application's context) publishes a ``RefreshEvent`` and both values change while the
same JVM runs. How long from ``git push`` to the application's new value is printed, never asserted on.

The second story keeps the application's whole property set in one file of the repository: a ConfigMap holding its
``application.properties`` and one ZooKeeperConfigTree at ``/config/<application>`` expanding it, one znode a
property; a one-line change of that file reaches the running application.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from cluster_support import WORKLOAD_LATENCIES, Story
from kazoo.client import KazooClient
from zkop_testing.java_interop import JavaProgram
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import read
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

APP = "orders"
GREETING = f"/config/{APP}/shop/greeting"


def config(name: str, path: str, value: str) -> str:
    """A ZooKeeperConfig as a file in the repository (no namespace: the Kustomization sets it)."""
    return yaml.safe_dump({"apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperConfig",
                           "metadata": {"name": name}, "spec": {"path": path, "stringData": value}})


@pytest.fixture
def zkop(zkop_kubeconfig: str, namespace: str, zk_server: ZooKeeperServer, zk_base: str) -> Iterator[OperatorProcess]:
    """``zkop run`` as its ServiceAccount for this namespace, chrooted at ``zk_base``; stopped at the end."""
    with OperatorProcess(zkop_kubeconfig, f"{zk_server.hosts}{zk_base}",
                         ["--config-trees", "--namespace", namespace]) as proc:
        yield proc
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()


def spring_config_app(connect: str) -> JavaProgram:
    """The application named :data:`APP`, its configuration imported from ZooKeeper at ``connect`` (discovery off)."""
    return JavaProgram("springconfig.SpringConfigApp", [
        f"--spring.cloud.zookeeper.connect-string={connect}", f"--spring.application.name={APP}",
        "--spring.config.import=zookeeper:", "--spring.cloud.zookeeper.discovery.enabled=false",
        "--server.port=0", "--server.address=127.0.0.1", "--spring.main.banner-mode=off",
        "--logging.level.root=WARN"], project="java-spring")


def values(port: int, endpoint: str = "config") -> dict[str, Any]:
    """``GET /config``: the value as the ``@ConfigurationProperties`` and the ``@RefreshScope`` bean hold it;
    ``GET /settings``: the ``shop.settings.*`` map as the ``@ConfigurationProperties`` bean holds it."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/{endpoint}", timeout=10) as answer:
        return dict(json.load(answer))


def property_set(settings: dict[str, str], greeting: str) -> str:
    """The application's configuration as one file of the repository: a ConfigMap with its ``application.properties``
    (``shop.greeting`` and every ``shop.settings.*``) and the ZooKeeperConfigTree at ``/config/<application>``
    expanding it (no namespace: the Kustomization sets it)."""
    text = f"shop.greeting={greeting}\n" + "".join(f"shop.settings.{k}={v}\n" for k, v in settings.items())
    return yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{APP}-properties"},
         "data": {"application.properties": text}},
        {"apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperConfigTree", "metadata": {"name": APP},
         "spec": {"path": f"/config/{APP}", "from": [{"configMapRef": {"name": f"{APP}-properties"},
                                                      "key": "application.properties", "format": "properties"}]}},
    ])


def test_a_git_commit_changes_a_running_spring_applications_configuration(
        zkop: OperatorProcess, story: Story, zk_server: ZooKeeperServer, zk_base: str, zk: KazooClient) -> None:
    sha, _ = story.push("the shop's greeting", {"zookeeper/greeting.yaml": config("greeting", GREETING, "hello")})
    wait_for(lambda: read(zk, zk_base + GREETING) == b"hello", message="znode written")
    story.ready(sha)
    with spring_config_app(f"{zk_server.hosts}{zk_base}") as app:
        port = int(app.call("port")["port"])
        assert values(port) == {"properties": "hello", "refreshScope": "hello"}
        pid = app.proc.pid if app.proc is not None else None

        for value in ("bonjour", "hallo"):
            sha, pushed = story.push(f"greet with {value}", {"zookeeper/greeting.yaml": config("greeting", GREETING,
                                                                                                 value)})
            wait_for(lambda v=value: values(port) == {"properties": v, "refreshScope": v},  # type: ignore[misc]
                     interval=0.05, message=f"the application reads {value!r}")
            WORKLOAD_LATENCIES.append((story.test, "git push -> Spring @ConfigurationProperties and @RefreshScope "
                                       "value (Spring Cloud Zookeeper Config)", time.monotonic() - pushed))
            story.ready(sha)

        # The same JVM all along: changed live, never restarted.
        assert app.returncode() is None and app.proc is not None and app.proc.pid == pid


def test_a_spring_application_reads_its_whole_property_set_from_one_tree_and_a_one_line_commit_reaches_it(
        zkop: OperatorProcess, story: Story, zk_server: ZooKeeperServer, zk_base: str, zk: KazooClient) -> None:
    settings = {f"setting{i:03d}": f"value-{i}" for i in range(200)}
    sha, _ = story.push("the orders application's properties", {"zookeeper/orders.yaml": property_set(settings,
                                                                                                      "hello")})
    story.ready(sha)  # the tree is Ready: every child written
    root = f"{zk_base}/config/{APP}"
    assert len(zk.get_children(root)) == 201 and read(zk, f"{root}/shop.settings.setting042") == b"value-42"
    with spring_config_app(f"{zk_server.hosts}{zk_base}") as app:
        port = int(app.call("port")["port"])
        assert values(port, "settings") == settings
        assert values(port) == {"properties": "hello", "refreshScope": "hello"}
        pid = app.proc.pid if app.proc is not None else None

        before = {c: zk.exists(f"{root}/{c}").mzxid for c in zk.get_children(root)}
        changed = {**settings, "setting042": "changed in git"}
        sha, pushed = story.push("one property", {"zookeeper/orders.yaml": property_set(changed, "hello")})
        wait_for(lambda: values(port, "settings") == changed, interval=0.05,
                 message="the application reads the changed property")
        WORKLOAD_LATENCIES.append((story.test, "git push of one line of a ZooKeeperConfigTree's properties -> Spring "
                                   "@ConfigurationProperties map (Spring Cloud Zookeeper Config)",
                                   time.monotonic() - pushed))
        story.ready(sha)
        after = {c: zk.exists(f"{root}/{c}").mzxid for c in zk.get_children(root)}
        assert [c for c in after if after[c] != before[c]] == ["shop.settings.setting042"]  # one znode rewritten
        assert values(port) == {"properties": "hello", "refreshScope": "hello"}

        # The same JVM all along: changed live, never restarted.
        assert app.returncode() is None and app.proc is not None and app.proc.pid == pid
