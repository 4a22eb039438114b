"""A Spring Boot application's configuration, live from Git: Flux, zkop and Spring Cloud Zookeeper Config 5.0.1.

``zkop.interop.springconfig.SpringConfigApp`` (``tests/interop/java-spring``, the real libraries from Maven
Central) imports its configuration from ZooKeeper (``spring.config.import=zookeeper:``: the znodes under
``/config/<spring.application.name>``) into a ``@ConfigurationProperties`` bean and a ``@RefreshScope`` bean, and
serves both values on ``GET /config``. The znode is a ZooKeeperConfig in a Git repository: Flux's own
source-controller and kustomize-controller apply it, zkop writes it; Spring Cloud Zookeeper Config's watcher (a
Curator ``TreeCache`` on the application's context) publishes a ``RefreshEvent`` and both values change while the
same JVM runs. How long from ``git push`` to the application's new value is printed, never asserted on.
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
    with OperatorProcess(zkop_kubeconfig, f"{zk_server.hosts}{zk_base}", ["--namespace", namespace]) as proc:
        yield proc
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()


def spring_config_app(connect: str) -> JavaProgram:
    """The application named :data:`APP`, its configuration imported from ZooKeeper at ``connect`` (discovery off)."""
    return JavaProgram("springconfig.SpringConfigApp", [
        f"--spring.cloud.zookeeper.connect-string={connect}", f"--spring.application.name={APP}",
        "--spring.config.import=zookeeper:", "--spring.cloud.zookeeper.discovery.enabled=false",
        "--server.port=0", "--server.address=127.0.0.1", "--spring.main.banner-mode=off",
        "--logging.level.root=WARN"], project="java-spring")


def values(port: int) -> dict[str, Any]:
    """``GET /config``: the value as the ``@ConfigurationProperties`` and the ``@RefreshScope`` bean hold it."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/config", timeout=10) as answer:
        return dict(json.load(answer))


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
