"""``zkop run --leader-elect`` processes whose work dies inside a live leader (the one-writer and failover story
runs on a real Lease: ``tests/cluster/test_leader_election.py``)."""

from __future__ import annotations

import signal

from zkop_testing.faults import THREADS_ENV
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import create, synced, zkc
from zkop_testing.waiting import EVENTUALLY, wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import KubeClient, resource_path

LEASE, RENEW, RETRY = 4.0, 3.0, 0.5
MASTER = 'leader_election_master_status{name="zkop-leader"}'


def is_leader(proc: OperatorProcess) -> bool:
    if proc.proc is None or proc.proc.poll() is not None:
        return False
    try:
        return any(line.startswith(MASTER + " 1") for line in proc.metrics().splitlines())
    except OSError:
        return False


def election_args(workers: int) -> list[str]:
    return ["--leader-elect", "--leader-election-namespace", "default",
            "--leader-election-lease-duration", str(LEASE), "--leader-election-renew-deadline", str(RENEW),
            "--leader-election-retry-period", str(RETRY), "--workers", str(workers)]


def identity(proc: OperatorProcess) -> str:
    """The Lease holder identity ``proc`` logged at start (``zkop … starting (identity <id>)``)."""
    line = next(line for line in proc.log_tail(400).splitlines() if "starting (identity " in line)
    return line.split("starting (identity ", 1)[1].rstrip(")")


def test_a_leader_whose_worker_dies_gives_up_the_lease_and_exits_1(kubeconfig: str, kube: KubeClient,
                                                                    zk_server: ZooKeeperServer, zk_base: str) -> None:
    """The work dies inside a live leader (a BaseException raised in its only worker thread, from inside
    that thread): it stops renewing, releases the Lease and exits 1 with one line saying why; the
    standby beside it takes over and reconciles, the key the dead worker never took included."""
    hosts = f"{zk_server.hosts}{zk_base}"
    leader = OperatorProcess(kubeconfig, hosts, election_args(1), module="zkop_testing.faults",
                             env={THREADS_ENV: "zookeeperconfig-worker-0"})
    standby = OperatorProcess(kubeconfig, hosts, election_args(1))
    lease = resource_path("coordination.k8s.io", "v1", "leases", "default", "zkop-leader")
    try:
        leader.start()
        wait_for(lambda: is_leader(leader), message="the first replica leads")
        standby.start()
        create(kube, zkc("before", "/app/before", b"1"))
        wait_for(lambda: synced(kube, "before"), message="the leader reconciles")
        transitions = kube.request("GET", lease)["spec"]["leaseTransitions"]
        leader.signal(signal.SIGUSR1)
        wait_for(lambda: "injected InjectedFault into zookeeperconfig-worker-0" in leader.log_tail(400),
                 message="the fault armed in the worker")
        create(kube, zkc("woken", "/app/woken", b"2"))  # wakes the worker, which dies instead of reconciling
        assert leader.wait(EVENTUALLY) == 1
        log = leader.log_tail(400)
        stopped = [line for line in log.splitlines() if "stopped working" in line]
        assert len(stopped) == 1, log
        assert ("zookeeperconfig stopped working (worker threads died: zookeeperconfig-worker-0 "
                "(ended by InjectedFault)); stopping and giving up the Lease, exit code 1") in stopped[0], log
        assert "released lease default/zkop-leader" in log, log
        wait_for(lambda: is_leader(standby), message="the standby takes over")
        spec = kube.request("GET", lease)["spec"]
        assert spec["holderIdentity"] == identity(standby)
        assert spec["leaseTransitions"] == transitions + 1
        create(kube, zkc("after", "/app/after", b"3"))
        wait_for(lambda: synced(kube, "woken") and synced(kube, "after"), message="the new leader reconciles")
        assert standby.proc is not None and standby.proc.poll() is None
    finally:
        leader.stop()
        standby.stop()
