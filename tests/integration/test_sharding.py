"""Scaling past one leader: disjoint --namespace shards, each with its own Lease, share one ensemble (real Leases in
``zkop-system``, zkop as its ServiceAccount, three fresh namespaces)."""

from __future__ import annotations

import contextlib

from kazoo.client import KazooClient
from zkop_testing.controlplane import ControlPlane, fresh_namespace
from zkop_testing.metrics import Metrics
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import create, read, synced, zkc
from zkop_testing.waiting import wait_for
from zkop_testing.zkop_install import ZKOP_NAMESPACE, delete_leases
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import KubeClient, resource_path

MASTER = "leader_election_master_status{name=\"%s\"} 1.0"


def test_namespace_shards_lead_in_parallel_and_stay_in_their_lane(kubeconfig: str, kube: KubeClient,
                                                                  control_plane: ControlPlane,
                                                                  zk_server: ZooKeeperServer, zk_base: str,
                                                                  zk: KazooClient, lease: str) -> None:
    hosts = f"{zk_server.hosts}{zk_base}"
    shard_a, shard_b = f"{lease}-a", f"{lease}-b"  # Leases of this test's own, in zkop-system

    def shard(name: str, *namespaces: str) -> OperatorProcess:
        args = ["--leader-elect", "--leader-election-namespace", ZKOP_NAMESPACE, "--leader-election-id", name]
        for namespace in namespaces:
            args += ["--namespace", namespace]
        return OperatorProcess(kubeconfig, hosts, args)

    with contextlib.ExitStack() as stack:
        team_a, team_b, team_c = (stack.enter_context(contextlib.contextmanager(fresh_namespace)(control_plane))
                                  for _ in range(3))
        stack.callback(delete_leases, control_plane, shard_a, shard_b)
        with shard(shard_a, team_a) as a, shard(shard_b, team_b) as b:
            wait_for(lambda: MASTER % shard_a in a.metrics() and MASTER % shard_b in b.metrics(),
                     message="both shards lead their own Lease")
            create(kube, zkc("flag", "/a/flag", b"a", namespace=team_a))
            create(kube, zkc("flag", "/b/flag", b"b", namespace=team_b))
            create(kube, zkc("flag", "/c/flag", b"c", namespace=team_c))  # no shard serves team-c
            wait_for(lambda: synced(kube, "flag", team_a) and synced(kube, "flag", team_b))
            assert read(zk, zk_base + "/a/flag") == b"a" and read(zk, zk_base + "/b/flag") == b"b"
            # Each shard reconciled its one object successfully (the series exists at 0 from start-up).
            wait_for(lambda: all(Metrics(s.metrics()).reconciles("zookeeperconfig") >= 1 for s in (a, b)),
                     message="a successful reconcile counted by each shard")
        assert read(zk, zk_base + "/c/flag") is None
        leases = kube.request("GET", resource_path("coordination.k8s.io", "v1", "leases", ZKOP_NAMESPACE))["items"]
        assert {lease["metadata"]["name"] for lease in leases} >= {shard_a, shard_b}

