"""A ZooKeeper connection lost for a moment is retried quietly; a real outage is still reported.

``docs/operations.md`` ("Troubleshooting by status reason", ``ZooKeeperUnavailable``): reported
once the same object has failed three times in a row over at least three seconds. Both cases run
``zkop run`` against the real server through a TCP proxy the test cuts.
"""

from __future__ import annotations

from kazoo.client import KazooClient
from zkop_testing.audit import requests, settled
from zkop_testing.controlplane import ControlPlane
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import conditions, create, events, get, read, reasons, synced, zkc
from zkop_testing.tcpproxy import TcpProxy
from zkop_testing.waiting import EVENTUALLY, wait_for
from zkop_testing.zkwire import reply_error, reply_to, write_request
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import KubeClient

QUIET = 'zkop_zookeeper_quiet_retries_total{controller="zookeeperconfig"}'


def metric(proc: OperatorProcess, series: str) -> float:
    """The value of one exported series, 0 if it is not exported yet."""
    for line in proc.metrics().splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return 0.0


def warnings(kube: KubeClient, name: str, namespace: str) -> list[tuple[str, str]]:
    return [(e["reason"], e["message"]) for e in events(kube, name, namespace) if e["type"] == "Warning"]


def proxied(zk_server: ZooKeeperServer) -> TcpProxy:
    host, port = zk_server.hosts.rsplit(":", 1)
    return TcpProxy((host, int(port)), framed=True)


def test_a_write_whose_reply_is_lost_is_retried_without_error_or_warning(
        kubeconfig: str, kube: KubeClient, control_plane: ControlPlane, zk_server: ZooKeeperServer, zk_base: str,
        zk: KazooClient, namespace: str) -> None:
    """The connection is cut after the server carried out zkop's first write and before zkop heard back:
    the pass fails with ConnectionLoss, the next ones find the session SUSPENDED, kazoo reconnects
    within the session, and the object goes from Pending to Synced with no Error in between."""
    with proxied(zk_server) as proxy, \
            OperatorProcess(kubeconfig, f"{proxy.address}{zk_base}",
                            ["--workers", "1", "--namespace", namespace]) as proc:
        cut = proxy.cut_after(write_request, reply_to)  # armed after the start-up probe's writes
        create(kube, zkc("blip", "/app/blip", b"1", namespace=namespace))
        assert cut.done.wait(EVENTUALLY), "no write reached ZooKeeper"
        assert reply_error(cut.withheld[-1]) == 0, "the write failed on the server"
        wait_for(lambda: synced(kube, "blip", namespace), message="synced after the blip")
        assert read(zk, f"{zk_base}/app/blip") == b"1"
        log = proc.log_tail(400)
        assert f"reconcile {namespace}/blip failed: ZooKeeper multi" in log and "ConnectionLoss" in log, log
        assert "session state: SUSPENDED" in log and "session state: LOST" not in log, log  # within the session
        # Events are written in order by one writer: once Created is in, a Warning before it would be too.
        wait_for(lambda: "Created" in reasons(kube, "blip", namespace), message="the Created Event")
        assert warnings(kube, "blip", namespace) == []
        # One status write, the Synced one: an Error reported in between would have been another.
        settled(control_plane, namespace)  # kube-apiserver's audit log
        status_writes = [r for r in requests(control_plane, namespace=namespace, resource="zookeeperconfigs",
                                             verbs=("patch", "update")) if r.subresource == "status"]
        assert [r.name for r in status_writes] == ["blip"], status_writes
        assert metric(proc, QUIET) >= 1
        assert metric(proc, "zkop_zookeeper_session_resets_total") == 0


def test_an_outage_is_still_reported_while_the_session_is_suspended(
        kubeconfig: str, kube: KubeClient, zk_server: ZooKeeperServer, zk_base: str, zk: KazooClient,
        namespace: str) -> None:
    """ZooKeeper unreachable for good: after the quiet retries the object says ``ZooKeeperUnavailable``,
    with a Warning Event, while zkop still holds on to the session (it has not been given up), and
    converges once the connection is back."""
    with proxied(zk_server) as proxy, \
            OperatorProcess(kubeconfig, f"{proxy.address}{zk_base}", ["--workers", "1", "--zk-session-timeout",
                                                                     "30s", "--namespace", namespace]) as proc:
        proxy.cut()
        wait_for(lambda: proc.probe("/readyz") == 500, message="not ready without a connection")
        create(kube, zkc("outage", "/app/outage", b"1", namespace=namespace))
        ready = wait_for(lambda: (c := conditions(get(kube, "outage", namespace)).get("Ready")) and
                         c["reason"] == "ZooKeeperUnavailable" and c, message="ZooKeeperUnavailable reported")
        assert ready["status"] == "False"
        assert "ZooKeeper session SUSPENDED for" in ready["message"], ready  # not given up: reported in time
        assert conditions(get(kube, "outage", namespace))["Reconciling"]["status"] == "True"
        wait_for(lambda: any(reason == "ZooKeeperUnavailable" for reason, _ in warnings(kube, "outage", namespace)),
                 message="a Warning Event (written after the status)")
        assert metric(proc, QUIET) >= 2  # the retries before it was reported
        proxy.restore()
        wait_for(lambda: synced(kube, "outage", namespace), message="converged once ZooKeeper is back")
        assert read(zk, f"{zk_base}/app/outage") == b"1"
