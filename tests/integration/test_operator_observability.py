"""What operators of zkop see: probes, metrics, kstatus for Flux, and ZooKeeper outages."""

from __future__ import annotations

import urllib.request

from kazoo.client import KazooClient
from zkop_testing.kstatus import compute
from zkop_testing.metrics import Metrics
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import conditions, create, get, read, synced, zkc
from zkop_testing.waiting import EVENTUALLY, wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import KubeClient


def test_probes_and_metrics_use_controller_runtime_names(kubeconfig: str, kube: KubeClient,
                                                         zk_server: ZooKeeperServer, zk_base: str,
        namespace: str) -> None:
    args = ["--workers", "3", "--namespace", namespace]
    with OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", args) as proc:
        assert proc.probe("/healthz") == 200 and proc.probe("/readyz") == 200
        with urllib.request.urlopen(f"http://127.0.0.1:{proc.health_port}/readyz?verbose", timeout=5) as r:
            assert "[+]informers-and-zookeeper ok" in r.read().decode()
        create(kube, zkc("m", "/app/m", b"1", namespace=namespace))
        wait_for(lambda: synced(kube, "m", namespace))
        expected = (
            'controller_runtime_reconcile_total{controller="zookeeperconfig",result="success"}',
            'controller_runtime_reconcile_total{controller="zookeeperconfig",result="error"} 0.0',
            'controller_runtime_max_concurrent_reconciles{controller="zookeeperconfig"} 3.0',
            'controller_runtime_active_workers{controller="zookeeperconfig"}',
            'controller_runtime_reconcile_time_seconds_bucket{controller="zookeeperconfig",le="0.005"}',
            'workqueue_depth{controller="zookeeperconfig",name="zookeeperconfig",priority=""}',
            'workqueue_adds_total{controller="zookeeperconfig",name="zookeeperconfig"}',
            'workqueue_queue_duration_seconds_count{controller="zookeeperconfig",name="zookeeperconfig"}',
            'workqueue_longest_running_processor_seconds{controller="zookeeperconfig",name="zookeeperconfig"}',
            'leader_election_master_status',
            "zkop_zookeeper_connected 1.0",
            'zkop_zookeeper_request_duration_seconds_count{operation="create"}',
            'zkop_zookeeperconfigs{state="Synced"} 1.0',
        )
        # The status gauge is computed from the informer cache at scrape time, which may lag the
        # status write the test saw: wait for every series rather than read once.
        wait_for(lambda: all(series in proc.metrics() for series in expected),
                 message="every series exported")
        text = proc.metrics()
        assert "_created" not in text


def test_counters_known_up_front_are_exported_at_zero_from_the_start(kubeconfig: str, kube: KubeClient,
                                                                      zk_server: ZooKeeperServer, zk_base: str,
        namespace: str) -> None:
    """Prometheus' instrumentation advice: a labelled counter that first appears at 1 is missed by
    ``increase()``, so the first hand edit after a start would not fire ``ZkopDriftCorrected``."""
    with OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", ["--namespace", namespace]) as proc:
        text = proc.metrics()
    for series in ('zkop_drift_corrections_total{controller="zookeeperconfig"} 0.0',
                   'zkop_zookeeper_quiet_retries_total{controller="zookeeperconfig"} 0.0',
                   'zkop_events_dropped_total{type="Normal"} 0.0',
                   'zkop_events_dropped_total{type="Warning"} 0.0'):
        assert series in text, series


def test_fresh_object_is_in_progress_for_flux_until_synced(kubeconfig: str, kube: KubeClient,
                                                           zk_server: ZooKeeperServer, zk_base: str,
        namespace: str) -> None:
    obj = create(kube, zkc("fresh", "/app/fresh", b"1", namespace=namespace))
    # Before zkop has seen it: the schema default makes kstatus wait (observedGeneration -1 ≠ generation 1).
    assert compute(get(kube, "fresh", namespace) or obj) == "InProgress"
    # InvalidSpec (not UTF-8), which only zkop refuses
    bad = create(kube, zkc("bad", "/app/bad", b"\xff", namespace=namespace))
    assert compute(get(kube, "bad", namespace) or bad) == "InProgress"
    with OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", ["--namespace", namespace]):
        wait_for(lambda: compute(get(kube, "fresh", namespace) or {}) == "Current", message="Current once synced")
        wait_for(lambda: compute(get(kube, "bad", namespace) or {}) == "Failed", message="stalled fails fast")


def test_zookeeper_outage_is_reported_and_recovered(kubeconfig: str, kube: KubeClient, namespace: str) -> None:
    server = ZooKeeperServer()
    server.start()
    try:
        with OperatorProcess(kubeconfig, server.hosts, ["--zk-session-timeout", "4", "--namespace", namespace]) as proc:
            create(kube, zkc("before", "/app/before", b"1", namespace=namespace))
            wait_for(lambda: synced(kube, "before", namespace))
            server.kill()  # data kept; start() recovers it
            wait_for(lambda: proc.probe("/readyz") == 500, message="not ready without a session")
            assert proc.probe("/healthz") == 200  # alive: no restart storm
            create(kube, zkc("during", "/app/during", b"2", namespace=namespace))
            wait_for(lambda: conditions(get(kube, "during", namespace)).get("Ready", {}).get("reason")
                     == "ZooKeeperUnavailable",
                     message="ZooKeeperUnavailable after repeated failures")
            assert conditions(get(kube, "during", namespace))["Reconciling"]["status"] == "True"
            server.start()
            wait_for(lambda: proc.probe("/readyz") == 200, message="ready again")
            wait_for(lambda: synced(kube, "during", namespace), message="converged after the outage")
            zk = KazooClient(hosts=server.hosts)
            zk.start(timeout=EVENTUALLY)
            try:
                assert read(zk, "/app/during") == b"2" and read(zk, "/app/before") == b"1"
            finally:
                zk.stop()
                zk.close()
    finally:
        server.stop()


def test_start_while_zookeeper_is_down_waits_not_ready_then_converges(kubeconfig: str, kube: KubeClient,
                                                                     namespace: str) -> None:
    server = ZooKeeperServer()
    server.start()
    hosts = server.hosts
    server.kill()  # data kept; the port stays ours
    proc = OperatorProcess(kubeconfig, hosts, ["--zk-session-timeout", "4", "--namespace", namespace])
    try:
        proc.start(wait_ready=False)
        wait_for(lambda: proc.probe("/healthz") == 200, message="alive while ZooKeeper is down")
        assert proc.probe("/readyz") == 500  # not ready before the session and the start-up probe
        create(kube, zkc("early", "/app/early", b"1", namespace=namespace))
        server.start()
        wait_for(lambda: proc.probe("/readyz") == 200, message="ready once ZooKeeper is up")
        wait_for(lambda: synced(kube, "early", namespace), message="converged")
        assert proc.proc is not None and proc.proc.poll() is None
    finally:
        proc.stop()
        server.stop()


def test_stalled_objects_are_a_result_not_a_reconcile_error(kubeconfig: str, kube: KubeClient,
                                                            zk_server: ZooKeeperServer, chrooted: KazooClient,
                                                            zk_base: str, namespace: str) -> None:
    """docs/operations.md (metrics table): a ZooKeeperConfig zkop reports ``Stalled`` (``InvalidSpec``,
    ``EphemeralNode``, ``PathConflict``) is the reconcile's result, not its failure, as in Flux's
    ``ResultFinalizer`` (fluxcd/pkg runtime/reconcile): counted as ``success``, never in
    ``controller_runtime_terminal_reconcile_errors_total``; ``zkop_zookeeperconfig_condition`` shows it."""
    chrooted.create("/app/session", b"someone's", ephemeral=True, makepath=True)
    args = ["--max-data-bytes", "4", "--namespace", namespace]
    with OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", args) as proc:
        create(kube, zkc("too-big", "/app/too-big", b"12345678", namespace=namespace))
        create(kube, zkc("ephemeral", "/app/session", b"1", namespace=namespace))
        wait_for(lambda: [conditions(get(kube, n, namespace)).get("Stalled", {}).get("reason")
                          for n in ("too-big", "ephemeral")]
                 == ["InvalidSpec", "EphemeralNode"], message="both objects stalled")
        wait_for(lambda: Metrics(proc.metrics()).total("zkop_zookeeperconfig_condition", type="Stalled",
                                                        status="True") == 2, message="two stalled in the gauge")
        scrape = Metrics(proc.metrics())
    for series in ("controller_runtime_terminal_reconcile_errors_total", "controller_runtime_reconcile_errors_total"):
        assert scrape.by_label(series, "controller") == {"zookeeperconfig": 0.0}, series
    assert scrape.reconciles("zookeeperconfig") >= 2
