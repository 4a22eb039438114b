"""Leader election between ``zkop run --leader-elect`` processes on a real Lease, as zkop's ServiceAccount.

Two replicas at a time, three terms: the first leader hands over on SIGTERM (it releases the Lease, so
the standby need not wait for it to expire), a new replica joins as the standby, and the second leader
is SIGKILLed (no release: the standby takes over once the Lease expires). kube-apiserver stores the
Lease (``coordination.k8s.io/v1``, optimistic concurrency on ``resourceVersion``) under the leader
election Role of ``manifests/rbac`` (get, create, update in ``zkop-system``); ZooKeeper's own
transaction log shows that the writers of managed znodes never interleave.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from cluster_support import ZKOP_NAMESPACE
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import create, synced, zkc
from zkop_testing.txnlog import read_txn_log
from zkop_testing.waiting import EVENTUALLY, wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import ApiException, KubeClient, resource_path

LEASE, RENEW, RETRY = 4.0, 3.0, 0.5


class Replicas:
    """``zkop run --leader-elect`` processes of one election (Lease ``zkop-system/<lease>``)."""

    def __init__(self, kubeconfig: str, zk_hosts: str, namespace: str, lease: str) -> None:
        self.lease = lease
        self.args = ["--namespace", namespace, "--leader-elect", "--leader-election-namespace", ZKOP_NAMESPACE,
                     "--leader-election-id", lease, "--leader-election-lease-duration", str(LEASE),
                     "--leader-election-renew-deadline", str(RENEW), "--leader-election-retry-period", str(RETRY),
                     "--workers", "2"]
        self.kubeconfig, self.zk_hosts = kubeconfig, zk_hosts
        self.procs: list[OperatorProcess] = []

    def start(self) -> OperatorProcess:
        """One more replica, ready (a standby is ready too: its caches are warm)."""
        proc = OperatorProcess(self.kubeconfig, self.zk_hosts, self.args)
        self.procs.append(proc)
        return proc.start()

    def is_leader(self, proc: OperatorProcess) -> bool:
        """Whether ``proc`` runs and reports itself the leader (``leader_election_master_status``)."""
        if proc.proc is None or proc.proc.poll() is not None:
            return False
        try:
            return any(line.startswith(f'leader_election_master_status{{name="{self.lease}"}} 1')
                       for line in proc.metrics().splitlines())
        except OSError:
            return False

    def leader(self, *, besides: tuple[OperatorProcess, ...] = ()) -> OperatorProcess:
        """Wait for exactly one running replica not in ``besides`` to lead; that one."""
        found = wait_for(lambda: [p for p in self.procs if p not in besides and self.is_leader(p)],
                         timeout=LEASE + EVENTUALLY, interval=0.05, message="a leader")
        assert len(found) == 1, "two leaders at once"
        return found[0]


def lease_spec(kube: KubeClient, name: str) -> dict[str, Any]:
    """The Lease's ``spec``."""
    lease = kube.request("GET", resource_path("coordination.k8s.io", "v1", "leases", ZKOP_NAMESPACE, name))
    spec: dict[str, Any] = lease["spec"]
    return spec


@pytest.fixture
def replicas(zkop_kubeconfig: str, kube: KubeClient, namespace: str, zk_server: ZooKeeperServer,
             zk_base: str) -> Iterator[Replicas]:
    """Two replicas started; every replica stopped and the Lease deleted afterwards."""
    group = Replicas(zkop_kubeconfig, f"{zk_server.hosts}{zk_base}", namespace, f"zkop-leader-{namespace}")
    try:
        group.start()
        group.start()
        yield group
    finally:
        for proc in group.procs:
            proc.stop()
        try:
            kube.request("DELETE", resource_path("coordination.k8s.io", "v1", "leases", ZKOP_NAMESPACE, group.lease))
        except ApiException as err:
            if err.status != 404:
                raise


def test_one_writer_hand_over_on_sigterm_and_failover_on_sigkill(
        replicas: Replicas, kube: KubeClient, namespace: str, zk_server: ZooKeeperServer, zk_base: str) -> None:
    first = replicas.leader()
    spec = lease_spec(kube, replicas.lease)
    assert spec["leaseDurationSeconds"] == LEASE and spec["leaseTransitions"] == 0 and spec["holderIdentity"]
    stop = threading.Event()
    created: list[str] = []

    def stream() -> None:
        i = 0
        while not stop.is_set():
            create(kube, zkc(f"c{i}", f"/app/c{i}", b"x", namespace=namespace))
            created.append(f"c{i}")
            i += 1
            stop.wait(0.05)

    writer = threading.Thread(target=stream, daemon=True)
    writer.start()
    try:
        wait_for(lambda: len(created) > 10 and synced(kube, created[5], namespace), message="the leader writes")
        # SIGTERM: drain and release the Lease; the standby takes over without waiting for it to expire.
        holder = spec["holderIdentity"]
        first.signal(signal.SIGTERM)
        second = replicas.leader(besides=(first,))
        assert first.wait(EVENTUALLY) == 0
        released = first.log_tail(400)
        assert f"released lease {ZKOP_NAMESPACE}/{replicas.lease}" in released, released
        assert "could not release" not in released, released
        spec = lease_spec(kube, replicas.lease)
        assert spec["holderIdentity"] != holder and spec["leaseTransitions"] == 1
        assert spec["leaseDurationSeconds"] == LEASE  # the new holder's, not the released record's 1 s

        # A new replica joins as the standby; SIGKILL the leader: no release, the Lease must expire.
        third = replicas.start()
        assert not replicas.is_leader(third)
        holder = spec["holderIdentity"]
        second.signal(signal.SIGKILL)
        assert replicas.leader(besides=(first, second)) is third
        spec = lease_spec(kube, replicas.lease)
        assert spec["holderIdentity"] != holder and spec["leaseTransitions"] == 2
    finally:
        stop.set()
        writer.join(EVENTUALLY)
    wait_for(lambda: all(synced(kube, name, namespace) for name in created), message="all converged")
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
