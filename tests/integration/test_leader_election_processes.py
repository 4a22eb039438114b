"""Three ``zkop run --leader-elect`` processes: one writer at a time, fast failover, checked on ZooKeeper's side."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator

import pytest
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import create, synced, zkc
from zkop_testing.txnlog import read_txn_log
from zkop_testing.waiting import EVENTUALLY, wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import KubeClient

LEASE, RENEW, RETRY = 4.0, 3.0, 0.5
MASTER = 'leader_election_master_status{name="zkop-leader"}'


def is_leader(proc: OperatorProcess) -> bool:
    if proc.proc is None or proc.proc.poll() is not None:
        return False
    try:
        return any(line.startswith(MASTER + " 1") for line in proc.metrics().splitlines())
    except OSError:
        return False


@pytest.fixture
def replicas(kubeconfig: str, kube: KubeClient, zk_server: ZooKeeperServer,
             zk_base: str) -> Iterator[list[OperatorProcess]]:
    args = ["--leader-elect", "--leader-election-namespace", "default",
            "--leader-election-lease-duration", str(LEASE), "--leader-election-renew-deadline", str(RENEW),
            "--leader-election-retry-period", str(RETRY), "--workers", "2"]
    procs = [OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", args) for _ in range(3)]
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
