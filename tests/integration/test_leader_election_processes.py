"""``zkop run --leader-elect`` processes whose work dies inside a live leader (the one-writer and failover story:
``tests/cluster/test_leader_election.py``), on a real Lease in ``zkop-system`` of the test's own name, as zkop's
ServiceAccount. The fault is injected into zkop's own worker thread (:mod:`zkop_testing.faults`), not the API server.
"""

from __future__ import annotations

import signal

from zkop_testing.faults import THREADS_ENV
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import create, synced, zkc
from zkop_testing.waiting import EVENTUALLY, wait_for
from zkop_testing.zkop_install import ZKOP_NAMESPACE
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import KubeClient, resource_path

LEASE, RENEW, RETRY = 4.0, 3.0, 0.5


def is_leader(proc: OperatorProcess, lease: str) -> bool:
    if proc.proc is None or proc.proc.poll() is not None:
        return False
    try:
        master = f'leader_election_master_status{{name="{lease}"}} 1'
        return any(line.startswith(master) for line in proc.metrics().splitlines())
    except OSError:
        return False


def election_args(workers: int, namespace: str, lease: str) -> list[str]:
    return ["--namespace", namespace, "--leader-elect", "--leader-election-namespace", ZKOP_NAMESPACE,
            "--leader-election-id", lease,
            "--leader-election-lease-duration", str(LEASE), "--leader-election-renew-deadline", str(RENEW),
            "--leader-election-retry-period", str(RETRY), "--workers", str(workers)]


def identity(proc: OperatorProcess) -> str:
    """The Lease holder identity ``proc`` logged at start (``zkop … starting (identity <id>)``)."""
    line = next(line for line in proc.log_tail(400).splitlines() if "starting (identity " in line)
    return line.split("starting (identity ", 1)[1].rstrip(")")


def test_a_leader_whose_worker_dies_gives_up_the_lease_and_exits_1(kubeconfig: str, kube: KubeClient,
                                                                    zk_server: ZooKeeperServer, zk_base: str,
                                                                    namespace: str, lease: str) -> None:
    """The work dies inside a live leader (a BaseException raised in its only worker thread, from inside
    that thread): it stops renewing, releases the Lease and exits 1 with one line saying why; the
    standby beside it takes over and reconciles, the key the dead worker never took included."""
    hosts = f"{zk_server.hosts}{zk_base}"
    leader = OperatorProcess(kubeconfig, hosts, election_args(1, namespace, lease), module="zkop_testing.faults",
                             env={THREADS_ENV: "zookeeperconfig-worker-0"})
    standby = OperatorProcess(kubeconfig, hosts, election_args(1, namespace, lease))
    lease_path = resource_path("coordination.k8s.io", "v1", "leases", ZKOP_NAMESPACE, lease)
    try:
        leader.start()
        wait_for(lambda: is_leader(leader, lease), message="the first replica leads")
        standby.start()
        create(kube, zkc("before", "/app/before", b"1", namespace=namespace))
        wait_for(lambda: synced(kube, "before", namespace), message="the leader reconciles")
        transitions = kube.request("GET", lease_path)["spec"]["leaseTransitions"]
        leader.signal(signal.SIGUSR1)
        wait_for(lambda: "injected InjectedFault into zookeeperconfig-worker-0" in leader.log_tail(400),
                 message="the fault armed in the worker")
        # Wakes the worker, which dies instead of reconciling.
        create(kube, zkc("woken", "/app/woken", b"2", namespace=namespace))
        assert leader.wait(EVENTUALLY) == 1
        log = leader.log_tail(400)
        stopped = [line for line in log.splitlines() if "stopped working" in line]
        assert len(stopped) == 1, log
        assert ("zookeeperconfig stopped working (worker threads died: zookeeperconfig-worker-0 "
                "(ended by InjectedFault)); stopping and giving up the Lease, exit code 1") in stopped[0], log
        assert f"released lease {ZKOP_NAMESPACE}/{lease}" in log, log
        wait_for(lambda: is_leader(standby, lease), message="the standby takes over")
        spec = kube.request("GET", lease_path)["spec"]
        assert spec["holderIdentity"] == identity(standby)
        assert spec["leaseTransitions"] == transitions + 1
        create(kube, zkc("after", "/app/after", b"3", namespace=namespace))
        wait_for(lambda: synced(kube, "woken", namespace) and synced(kube, "after", namespace),
                 message="the new leader reconciles")
        assert standby.proc is not None and standby.proc.poll() is None
    finally:
        leader.stop()
        standby.stop()
