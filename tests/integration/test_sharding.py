"""Scaling past one leader: disjoint --namespace shards, each with its own Lease, share one ensemble."""

from __future__ import annotations

from kazoo.client import KazooClient
from zkop_testing.metrics import Metrics
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import create, read, synced, zkc
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import KubeClient, resource_path

MASTER = "leader_election_master_status{name=\"%s\"} 1.0"


def test_namespace_shards_lead_in_parallel_and_stay_in_their_lane(kubeconfig: str, kube: KubeClient,
                                                                  zk_server: ZooKeeperServer, zk_base: str,
                                                                  zk: KazooClient) -> None:
    for namespace in ("team-a", "team-b", "team-c"):
        kube.request("POST", resource_path("", "v1", "namespaces"),
                     body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    hosts = f"{zk_server.hosts}{zk_base}"

    def shard(name: str, *namespaces: str) -> OperatorProcess:
        args = ["--leader-elect", "--leader-election-namespace", "default", "--leader-election-id", name]
        for namespace in namespaces:
            args += ["--namespace", namespace]
        return OperatorProcess(kubeconfig, hosts, args)

    with shard("zkop-shard-a", "team-a") as a, shard("zkop-shard-b", "team-b") as b:
        wait_for(lambda: MASTER % "zkop-shard-a" in a.metrics() and MASTER % "zkop-shard-b" in b.metrics(),
                 message="both shards lead their own Lease")
        create(kube, zkc("flag", "/a/flag", b"a", namespace="team-a"))
        create(kube, zkc("flag", "/b/flag", b"b", namespace="team-b"))
        create(kube, zkc("flag", "/c/flag", b"c", namespace="team-c"))  # no shard serves team-c
        wait_for(lambda: synced(kube, "flag", "team-a") and synced(kube, "flag", "team-b"))
        assert read(zk, zk_base + "/a/flag") == b"a" and read(zk, zk_base + "/b/flag") == b"b"
        # Each shard reconciled its one object successfully (the series exists at 0 from start-up).
        wait_for(lambda: all(Metrics(s.metrics()).reconciles("zookeeperconfig") >= 1 for s in (a, b)),
                 message="a successful reconcile counted by each shard")
    assert read(zk, zk_base + "/c/flag") is None
    leases = kube.request("GET", resource_path("coordination.k8s.io", "v1", "leases", "default"))["items"]
    assert {lease["metadata"]["name"] for lease in leases} >= {"zkop-shard-a", "zkop-shard-b"}
