"""Rolling restarts from a ZooKeeperMirror with Stakater Reloader, the tool platform teams run for this.

For an application that reads its configuration only at start: zkop's ZooKeeperMirror copies a subtree into a
ConfigMap; Reloader v1.4.22 (built from the Go module proxy by ``hack/build-reloader.sh``, run under its own RBAC:
:mod:`zkop_testing.reloader`) sees the ConfigMap's data change and patches the Deployment annotated
``configmap.reloader.stakater.com/reload: <the mirror's ConfigMap>`` (its ``env-vars`` strategy: a
``STAKATER_<NAME>_CONFIGMAP`` variable holding the data's SHA-1); kube-controller-manager's Deployment controller
makes a new ReplicaSet for the new pod template (no kubelet here: no Pod runs, the ReplicaSet is the rollout's
first step). A write of the same bytes, or a change outside the mirrored subtree, changes no ConfigMap and
restarts nothing. How long from the ZooKeeper write to the new ReplicaSet is printed, never asserted on.

Tenancy: Reloader looks for workloads in the changed ConfigMap's own namespace only, and a mirror's ConfigMap is
always in the mirror's namespace (``spec.configMap`` is a name, not a namespace), so a tenant who can create
mirrors restarts nothing in another namespace, even a workload there naming a ConfigMap of the same name.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from cluster_support import WORKLOAD_LATENCIES
from kazoo.client import KazooClient
from prometheus_client.parser import text_string_to_metric_families
from zkop_testing.controlplane import ControlPlane
from zkop_testing.operator import OperatorProcess
from zkop_testing.reloader import Reloader, ReloaderError
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import ApiException, KubeClient, resource_path

ZKM = ("platform.example.com", "v1alpha1", "zookeepermirrors")
RELOAD = "configmap.reloader.stakater.com/reload"


@pytest.fixture
def reloader(plane: ControlPlane) -> Iterator[Reloader]:
    """Reloader on the plane, watching every namespace, for this test."""
    running = Reloader(plane)
    failure = None
    try:
        running.start()
    except ReloaderError as err:
        running.stop()
        failure = str(err)
    if failure is not None:
        pytest.fail(failure, pytrace=False)
    yield running
    running.stop()


def mirror(name: str, path: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperMirror",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"path": path, "recursive": True}}


def deployment(name: str, namespace: str, config_map: str, annotations: dict[str, str]) -> dict[str, Any]:
    """A Deployment of one replica whose container takes ``config_map`` as its environment (read at start)."""
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "registry.example/app:1",
                                         "envFrom": [{"configMapRef": {"name": config_map}}]}]}}}}


def config_map(kube: KubeClient, name: str, namespace: str) -> dict[str, Any] | None:
    try:
        return kube.request("GET", resource_path("", "v1", "configmaps", namespace, name))
    except ApiException as err:
        if err.status == 404:
            return None
        raise


def replica_sets(kube: KubeClient, name: str, namespace: str) -> list[dict[str, Any]]:
    """The ReplicaSets Deployment ``name`` owns, oldest first."""
    items = kube.request("GET", resource_path("apps", "v1", "replicasets", namespace))["items"]
    mine = [rs for rs in items if any(ref["kind"] == "Deployment" and ref["name"] == name
                                      for ref in rs["metadata"].get("ownerReferences", []))]
    return sorted(mine, key=lambda rs: int(rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]))


def rolled(kube: KubeClient, name: str, namespace: str, count: int) -> list[dict[str, Any]] | None:
    """The ReplicaSets of ``name`` once there are ``count`` of them, else ``None`` (for ``wait_for``)."""
    found = replica_sets(kube, name, namespace)
    return found if len(found) == count else None


def env_names(rs: dict[str, Any]) -> set[str]:
    return {e["name"] for c in rs["spec"]["template"]["spec"]["containers"] for e in c.get("env", [])}


def mirror_reconciles(proc: OperatorProcess) -> float:
    """``controller_runtime_reconcile_total`` of zkop's ZooKeeperMirror controller, every result."""
    return sum(s.value for family in text_string_to_metric_families(proc.metrics()) for s in family.samples
               if s.name == "controller_runtime_reconcile_total" and s.labels.get("controller") == "zookeeper-mirror")


def test_a_change_in_zookeeper_rolls_out_the_deployment_and_an_unchanged_content_does_not(
        reloader: Reloader, zkop_kubeconfig: str, kube: KubeClient, namespace: str, zk_server: ZooKeeperServer,
        zk_base: str, zk: KazooClient, request: pytest.FixtureRequest) -> None:
    ns = namespace
    zk.create(f"{zk_base}/legacy/web/db/url", b"jdbc:postgresql://db-a/web", makepath=True)
    zk.create(f"{zk_base}/legacy/web/pool", b"10", makepath=True)
    zk.create(f"{zk_base}/legacy/other/key", b"1", makepath=True)
    with OperatorProcess(zkop_kubeconfig, f"{zk_server.hosts}{zk_base}",
                         ["--zookeeper-mirrors", "--namespace", ns]) as proc:
        kube.request("POST", resource_path(*ZKM, ns), body=mirror("web-config", "/legacy/web", ns))
        wait_for(lambda: (config_map(kube, "web-config", ns) or {}).get("data") == {
            "db.url": "jdbc:postgresql://db-a/web", "pool": "10"}, message="subtree mirrored")
        kube.request("POST", resource_path("apps", "v1", "deployments", ns),
                     body=deployment("web", ns, "web-config", {RELOAD: "web-config"}))
        first = wait_for(lambda: replica_sets(kube, "web", ns), message="the Deployment's first ReplicaSet")
        assert len(first) == 1 and not any(n.startswith("STAKATER_") for n in env_names(first[0]))
        reloads = reloader.metric("reloader_reload_executed_total", success="true")

        # 1. A change in ZooKeeper: ConfigMap, Reloader's patch, a new ReplicaSet.
        zk.set(f"{zk_base}/legacy/web/db/url", b"jdbc:postgresql://db-b/web")
        changed = time.monotonic()
        wait_for(lambda: (config_map(kube, "web-config", ns) or {}).get("data", {}).get("db.url")
                 == "jdbc:postgresql://db-b/web", interval=0.05, message="change mirrored")
        WORKLOAD_LATENCIES.append((request.node.name, "ZooKeeper write -> mirror's ConfigMap",
                                   time.monotonic() - changed))
        sets = wait_for(lambda: rolled(kube, "web", ns, 2), interval=0.05, message="a new ReplicaSet after the change")
        WORKLOAD_LATENCIES.append((request.node.name, "ZooKeeper write -> new ReplicaSet (Reloader)",
                                   time.monotonic() - changed))
        assert "STAKATER_WEB_CONFIG_CONFIGMAP" in env_names(sets[1]), sets[1]["spec"]["template"]
        wait_for(lambda: reloader.metric("reloader_reload_executed_total", success="true") == reloads + 1,
                 message="Reloader counted one reload")
        generation = kube.request("GET", resource_path("apps", "v1", "deployments", ns, "web"))["metadata"][
            "generation"]
        cm_version = (config_map(kube, "web-config", ns) or {})["metadata"]["resourceVersion"]

        # 2. The same bytes written again: zkop's mirror reconciles (the marker) and writes nothing; no restart.
        before = mirror_reconciles(proc)
        zk.set(f"{zk_base}/legacy/web/db/url", b"jdbc:postgresql://db-b/web")
        wait_for(lambda: mirror_reconciles(proc) > before, message="the mirror reconciled the rewrite")
        assert (config_map(kube, "web-config", ns) or {})["metadata"]["resourceVersion"] == cm_version
        assert len(replica_sets(kube, "web", ns)) == 2
        assert kube.request("GET", resource_path("apps", "v1", "deployments", ns, "web"))["metadata"][
            "generation"] == generation

        # 3. A change outside the mirrored subtree, then one inside (the marker: Reloader has processed both, in
        #    order): exactly one more reload and one more ReplicaSet, for the change inside.
        zk.set(f"{zk_base}/legacy/other/key", b"2")
        zk.set(f"{zk_base}/legacy/web/pool", b"20")
        wait_for(lambda: reloader.metric("reloader_reload_executed_total", success="true") == reloads + 2,
                 message="Reloader reloaded for the change inside")
        wait_for(lambda: rolled(kube, "web", ns, 3), message="one more ReplicaSet")
        assert (config_map(kube, "web-config", ns) or {})["data"] == {"db.url": "jdbc:postgresql://db-b/web",
                                                                      "pool": "20"}
        assert reloader.metric("reloader_reload_executed_total", success="true") == reloads + 2
        assert len(replica_sets(kube, "web", ns)) == 3
        assert proc.probe("/readyz") == 200


def test_a_tenants_mirror_restarts_nothing_in_another_namespace(
        reloader: Reloader, zkop_kubeconfig: str, kube: KubeClient, namespace: str,
        new_namespace: Any, zk_server: ZooKeeperServer, zk_base: str, zk: KazooClient) -> None:
    """Tenant A's mirror fills ``shared`` in A; B's Deployment reloads on its own ``shared`` (annotated by name, and
    one with ``reloader.stakater.com/auto``): A's change restarts A's workload (the marker) and nothing in B."""
    tenant, other = namespace, new_namespace()
    zk.create(f"{zk_base}/tenant/key", b"1", makepath=True)
    kube.request("POST", resource_path("", "v1", "configmaps", other), body={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}, "data": {"key": "1"}})
    kube.request("POST", resource_path("apps", "v1", "deployments", other),
                 body=deployment("victim", other, "shared", {RELOAD: "shared"}))
    kube.request("POST", resource_path("apps", "v1", "deployments", other),
                 body=deployment("auto", other, "shared", {"reloader.stakater.com/auto": "true"}))
    with OperatorProcess(zkop_kubeconfig, f"{zk_server.hosts}{zk_base}",
                         ["--zookeeper-mirrors", "--namespace", tenant]):
        kube.request("POST", resource_path(*ZKM, tenant), body=mirror("shared", "/tenant", tenant))
        wait_for(lambda: (config_map(kube, "shared", tenant) or {}).get("data") == {"key": "1"},
                 message="tenant's mirror filled")
        kube.request("POST", resource_path("apps", "v1", "deployments", tenant),
                     body=deployment("mine", tenant, "shared", {RELOAD: "shared"}))
        for name, ns in (("mine", tenant), ("victim", other), ("auto", other)):
            wait_for(lambda n=name, s=ns: len(replica_sets(kube, n, s)) == 1,  # type: ignore[misc]
                     message=f"{ns}/{name}'s first ReplicaSet")
        zk.set(f"{zk_base}/tenant/key", b"2")
        wait_for(lambda: len(replica_sets(kube, "mine", tenant)) == 2, message="the tenant's own workload rolled")
        for name in ("victim", "auto"):
            assert len(replica_sets(kube, name, other)) == 1, name
            assert kube.request("GET", resource_path("apps", "v1", "deployments", other, name))["metadata"][
                "generation"] == 1, name
        assert (config_map(kube, "shared", other) or {})["data"] == {"key": "1"}
