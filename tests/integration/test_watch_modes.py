"""``zkop run`` in both watch modes against real ZooKeeper (the suite's default line): server-side watches,
drift, a foreign ownership record, and a hand edit made while zkop is disconnected."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import create, read, synced, zkc
from zkop_testing.tcpproxy import TcpProxy
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import KubeClient

PATHS = [f"/app/features/f{i}" for i in range(6)]


def watched_under(server: ZooKeeperServer, base: str) -> list[str]:
    """Every watched path below ``base`` (``wchp``: a path line, then the sessions watching it)."""
    return sorted(line for line in server.four_letter_word("wchp").splitlines() if line.startswith(base + "/"))


@pytest.fixture
def proxy(zk_server: ZooKeeperServer) -> Iterator[TcpProxy]:
    host, port = zk_server.hosts.split(",")[0].rsplit(":", 1)
    with TcpProxy((host, int(port))) as p:
        yield p


@pytest.mark.parametrize("mode", ["auto", "per-node"])
def test_watch_mode_end_to_end(mode: str, kubeconfig: str, kube: KubeClient, zk: KazooClient,
                               zk_server: ZooKeeperServer, zk_base: str, proxy: TcpProxy, namespace: str) -> None:
    with OperatorProcess(kubeconfig, f"{proxy.address}{zk_base}",
                         ["--workers", "2", "--zk-watch-mode", mode, "--zk-session-timeout", "30s",
                          "--sync-period", "10m", "--namespace", namespace]) as operator:
        for i, path in enumerate(PATHS):
            create(kube, zkc(f"f{i}", path, b"on", namespace=namespace))
        for i in range(len(PATHS)):
            wait_for(lambda i=i: synced(kube, f"f{i}", namespace), message=f"f{i} Synced")  # type: ignore[misc]

        # Server-side watches: one per root, or two per object (znode + ownership record).
        if mode == "auto":
            expected = [zk_base + "/app/features", zk_base + "/zkop/owners/app/features"]
        else:
            expected = sorted([zk_base + p for p in PATHS] + [zk_base + "/zkop/owners" + p for p in PATHS])
        seen: list[list[str]] = [[]]

        def watched_as_expected() -> bool:
            seen[0] = watched_under(zk_server, zk_base)
            return seen[0] == expected

        try:
            wait_for(watched_as_expected, message=f"watched paths {expected}")
        except TimeoutError as err:
            raise AssertionError(f"{err}; the server watches {seen[0]}") from None

        # A hand edit is restored, by the watch: the only full resync is 10 minutes away.
        zk.set(zk_base + PATHS[0], b"hand edit")
        wait_for(lambda: read(zk, zk_base + PATHS[0]) == b"on", message="drift restored")

        # A foreign ownership record is never overwritten: another installation takes f1's path.
        record = zk_base + "/zkop/owners" + PATHS[1]
        foreign = json.dumps({"clusterId": "other", "managedBy": "zkop", "name": "x", "namespace": "y",
                              "uid": "u"}, sort_keys=True, separators=(",", ":")).encode()
        transaction = zk.transaction()
        transaction.delete(record)
        transaction.create(record, foreign)
        transaction.commit()
        zk.set(zk_base + PATHS[1], b"theirs")
        wait_for(lambda: (synced(kube, "f1", namespace) is None), message="f1 reports the conflict")
        time.sleep(0.5)  # give a wrong write the time to happen
        assert read(zk, zk_base + PATHS[1]) == b"theirs" and read(zk, record) == foreign

        # A hand edit while zkop is disconnected is restored once it is back (same session).
        proxy.cut()
        zk.set(zk_base + PATHS[2], b"edited while away")
        wait_for(lambda: "zkop_zookeeper_connected 0.0" in operator.metrics().splitlines(),
                 message="zkop saw the connection go")
        proxy.restore()
        wait_for(lambda: read(zk, zk_base + PATHS[2]) == b"on", message="edit made while away restored")
        expected = [p for p in expected if not p.endswith(PATHS[1])] if mode == "per-node" else expected
        wait_for(lambda: set(expected) <= set(watched_under(zk_server, zk_base)),
                 message="watches back after the reconnect")
        zk.set(zk_base + PATHS[3], b"after the reconnect")
        wait_for(lambda: read(zk, zk_base + PATHS[3]) == b"on", message="drift restored after reconnect")
    assert operator.proc is not None and operator.proc.returncode == 0, operator.log_tail()
