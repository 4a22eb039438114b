"""A ZooKeeper outage over many objects does not become an Event storm on a real kube-apiserver.

``docs/operations.md`` (Permissions, ``events``; Metrics, ``zkop_events_dropped_total``): Events are
correlated as client-go's ``EventCorrelator`` does. During an outage every object's status message
changes at each retry (``ZooKeeper session SUSPENDED for 4.2 s …``), so every retry is a Warning with a
new message: from the tenth within 10 minutes on they are one aggregate Event per object whose ``count``
goes up, instead of one Event object each. ZooKeeper is real and reached through a TCP proxy the test cuts.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import ZKC, read, synced, zkc
from zkop_testing.tcpproxy import TcpProxy
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import KubeClient, resource_path
from zkop.kube.correlator import AGGREGATE_MAX_EVENTS, AGGREGATE_PREFIX, SPAM_BURST

OBJECTS = 25
#: Warnings per object the outage lasts for: more than aggregation needs, fewer than the object's budget.
WARNINGS = AGGREGATE_MAX_EVENTS + 4


@pytest.fixture
def proxy(zk_server: ZooKeeperServer) -> Iterator[TcpProxy]:
    host, port = zk_server.hosts.rsplit(":", 1)
    with TcpProxy((host, int(port))) as running:
        yield running


def unavailable_events(kube: KubeClient, namespace: str) -> dict[str, list[dict[str, Any]]]:
    """The ``ZooKeeperUnavailable`` Event objects of ``namespace``, by object name."""
    items = kube.request("GET", resource_path("", "v1", "events", namespace))["items"]
    found: dict[str, list[dict[str, Any]]] = {}
    for event in items:
        if event["reason"] == "ZooKeeperUnavailable":
            found.setdefault(event["involvedObject"]["name"], []).append(event)
    return found


def test_an_outage_over_many_objects_is_aggregated_into_counts(
        zkop_kubeconfig: str, kube: KubeClient, namespace: str, zk_base: str, zk: KazooClient,
        proxy: TcpProxy) -> None:
    # A session timeout longer than the outage keeps the session SUSPENDED (a message that changes at
    # every retry); a short sync period retries every object often.
    args = ["--workers", "4", "--namespace", namespace, "--zk-session-timeout", "120s", "--sync-period", "2s"]
    with OperatorProcess(zkop_kubeconfig, f"{proxy.address}{zk_base}", args) as proc:
        for i in range(OBJECTS):
            kube.request("POST", resource_path(*ZKC, namespace), body=zkc(f"o{i}", f"/app/o{i}", b"1",
                                                                          namespace=namespace))
        wait_for(lambda: all(synced(kube, f"o{i}", namespace) for i in range(OBJECTS)), message="all Synced")

        proxy.cut()
        logged = re.compile(rf"event Warning {namespace}/(o\d+) ZooKeeperUnavailable: ")

        def warned() -> Counter[str]:
            return Counter(m.group(1) for m in logged.finditer(proc.log_tail(1_000_000)))

        wait_for(lambda: len(warned()) == OBJECTS and min(warned().values()) >= WARNINGS, timeout=240,
                 message=f"{WARNINGS} Warnings per object during the outage")
        proxy.restore()
        wait_for(lambda: all(synced(kube, f"o{i}", namespace) for i in range(OBJECTS)), timeout=120,
                 message="all Synced again")
        sent = warned()
        assert max(sent.values()) <= SPAM_BURST, sent  # within every object's budget: nothing was skipped

        # Every Warning sent reached the API server, as a new Event object or a count.
        def delivered() -> dict[str, list[dict[str, Any]]] | None:
            found = unavailable_events(kube, namespace)
            counts = {name: sum(e.get("count", 1) for e in items) for name, items in found.items()}
            return found if counts == dict(sent) else None

        found = wait_for(delivered, message="every Warning counted on the API server")
    for name, items in found.items():
        assert len(items) <= AGGREGATE_MAX_EVENTS, (name, [(e["count"], e["message"]) for e in items])
        (aggregate,) = [e for e in items if e["message"].startswith(AGGREGATE_PREFIX)]
        assert aggregate["count"] > 1
        assert aggregate["lastTimestamp"] >= aggregate["firstTimestamp"]
    assert all(read(zk, f"{zk_base}/app/o{i}") == b"1" for i in range(OBJECTS))
