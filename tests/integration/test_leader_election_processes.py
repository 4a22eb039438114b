"""Three ``zkop run --leader-elect`` processes: one writer at a time, fast failover, checked on ZooKeeper's side."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator

import pytest
from zkop_testing.faults import THREADS_ENV
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import create, synced, zkc
from zkop_testing.txnlog import read_txn_log
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


@pytest.fixture
def replicas(kubeconfig: str, kube: KubeClient, zk_server: ZooKeeperServer,
             zk_base: str) -> Iterator[list[OperatorProcess]]:
    procs = [OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", election_args(2)) for _ in range(3)]
    for proc in procs:
        proc.start()  # standbys are ready too (warm cache)
    yield procs
    for proc in procs:
        proc.stop()


def test_one_writer_and_failover(replicas: list[OperatorProcess], kube: KubeClient, zk_server: ZooKeeperServer,
                                 zk_base: str) -> None:
    leader = wait_for(lambda: [p for p in replicas if is_leader(p)], message="a leader")
    assert len(leader) == 1
    stop = threading.Event()
    created: list[str] = []

    def stream() -> None:
        i = 0
        while not stop.is_set():
            create(kube, zkc(f"c{i}", f"/app/c{i}", b"x"))
            created.append(f"c{i}")
            i += 1
            stop.wait(0.05)

    writer = threading.Thread(target=stream, daemon=True)
    writer.start()
    try:
        wait_for(lambda: len(created) > 10 and synced(kube, created[5]))
        # SIGKILL: no release; a standby takes over once the lease expires.
        first = leader[0]
        first.signal(signal.SIGKILL)
        second = wait_for(lambda: [p for p in replicas if p is not first and is_leader(p)], timeout=LEASE + 60,
                          interval=0.05, message="failover after SIGKILL")[0]
        # SIGTERM: drain and release the lease (the last one need not wait for it to expire).
        second.signal(signal.SIGTERM)
        third = wait_for(lambda: [p for p in replicas if p not in (first, second) and is_leader(p)], timeout=60,
                         interval=0.05, message="failover after SIGTERM")[0]
        assert second.wait(10) == 0
        released = second.log_tail(400)
        assert "released lease default/zkop-leader" in released and "could not release" not in released, released
    finally:
        stop.set()
        writer.join(EVENTUALLY)
    wait_for(lambda: all(synced(kube, name) for name in created), message="all converged")
    assert third.proc is not None and third.proc.poll() is None

    # ZooKeeper's own transaction log: writers of managed znodes never interleave.
    writes = [t for t in read_txn_log(zk_server.data_dir)
              if t.op in ("create", "setData", "delete", "setACL") and t.path.startswith(zk_base + "/app/")]
    sessions: list[int] = []
    for txn in writes:
        if not sessions or sessions[-1] != txn.session:
            sessions.append(txn.session)
    assert len(sessions) == len(set(sessions)), f"two writers interleaved: {[hex(s) for s in sessions]}"
    assert 2 <= len(sessions) <= 3


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
