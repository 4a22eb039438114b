"""``zkop run --dry-run`` with every feature enabled, as zkop's ServiceAccount on a real control plane: kube-apiserver's
audit log holds no write of zkop's but those docs/operations.md's dry-run rule allows, and ZooKeeper is unchanged.

One object of each kind — a ZooKeeperConfig, a ZooKeeperEnsemble (with a ZooKeeperConfig on it), a ZooKeeperMirror,
a ZooKeeperConfigTree, a ZooKeeperServiceImport,
a Service to publish (the bridge), a registration under the import root (the importer) — each with a change a real
run would make. The rule: the ``status`` of zkop's own objects, Events (Warnings only: no change was made to
announce), the Lease; nothing else (no finalizer, no ConfigMap, Service or EndpointSlice), and no request refused
by zkop's own net (``REFUSED``): a feature that missed its dry-run writer fails here either way.
"""

from __future__ import annotations

import json
from pathlib import Path

from cluster_support import kubectl
from kazoo.client import KazooClient
from zkop_testing import audit
from zkop_testing.controlplane import ControlPlane
from zkop_testing.ensembles import ENSEMBLE_CRD_FILE, ZKE, delete_ensemble, ensemble, get_ensemble, ready_condition
from zkop_testing.kustomize import Obj
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import conditions, create, get, zkc
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer, tree_state

from zkop.kube.client import KubeClient, resource_path

REPO = Path(__file__).resolve().parents[2]
ZKOP_USER = "system:serviceaccount:zkop-system:zkop"
ZKM = ("platform.example.com", "v1alpha1", "zookeepermirrors")
ZKT = ("platform.example.com", "v1alpha1", "zookeeperconfigtrees")
ZKSI = ("platform.example.com", "v1alpha1", "zookeeperserviceimports")
OWN_KINDS = {"zookeeperconfigs", "zookeeperensembles", "zookeepermirrors", "zookeeperconfigtrees",
             "zookeeperserviceimports"}




def allowed(event: dict[str, object]) -> bool:
    """Whether an audit event of zkop's is a write the dry-run rule allows."""
    ref: dict[str, str] = event.get("objectRef") or {}  # type: ignore[assignment]
    verb, resource, sub = event.get("verb"), ref.get("resource", ""), ref.get("subresource", "")
    if resource in OWN_KINDS:
        return verb in ("patch", "update") and sub == "status"
    if resource == "events":
        return verb in ("create", "patch")
    return resource == "leases" and verb in ("create", "update", "patch")


def test_a_dry_run_of_every_feature_writes_only_what_the_rule_allows(
        plane: ControlPlane, installed: list[Obj], kube: KubeClient, zkop_kubeconfig: str, namespace: str,
        zk_server: ZooKeeperServer, zk_base: str, zk: KazooClient, tmp_path: Path) -> None:
    kubectl(plane, "apply", "--server-side", "--force-conflicts", "--field-manager=zkop-tests",
            "-f", str(ENSEMBLE_CRD_FILE), "-f", str(REPO / "manifests/components/zookeeper-ensembles/rbac.yaml"))
    kubectl(plane, "wait", "--for=condition=Established", "crd/zookeeperensembles.platform.example.com",
            "--timeout=60s")
    with ZooKeeperServer() as second_server:
        second = KazooClient(hosts=second_server.hosts)
        second.start()
        try:
            second.ensure_path("/team")
            zk.create(f"{zk_base}/legacy/app/k", b"v", makepath=True)  # the mirror's source
            zk.create(f"{zk_base}/services/payments/i1", json.dumps({  # a legacy registration (the importer's input)
                "name": "payments", "id": "i1", "address": "10.3.0.1", "port": 8080, "sslPort": None,
                "payload": None, "registrationTimeUTC": 1621155920122, "serviceType": "DYNAMIC", "uriSpec": None,
                "enabled": True}).encode(), makepath=True)
            before = (tree_state(zk, zk_base), tree_state(second, "/team"))
            audit.settled(plane, namespace)
            start = len(plane.audit_events())
            name = f"{namespace}-dry"  # cluster-scoped: one per test
            args = ["--dry-run", "--cluster-id", "prod", "--namespace", namespace, "--zookeeper-ensembles",
                    "--zookeeper-mirrors", "--config-trees", "--service-bridge", "--import-services",
                    "--service-imports", "--import-namespace", namespace]
            with OperatorProcess(zkop_kubeconfig, f"{zk_server.hosts}{zk_base}", args,
                                 env={"TMPDIR": str(tmp_path)}) as proc:
                kube.request("POST", resource_path(*ZKE), body=ensemble(name, second_server.hosts, chroot="/team"))
                create(kube, zkc("local", "/app/local", b"1", namespace))
                create(kube, zkc("remote", "/app/remote", b"1", namespace, ensembleRef={"name": name}))
                kube.request("POST", resource_path(*ZKM, namespace), body={
                    "apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperMirror",
                    "metadata": {"name": "legacy", "namespace": namespace}, "spec": {"path": "/legacy/app"}})
                kube.request("POST", resource_path(*ZKT, namespace), body={
                    "apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperConfigTree",
                    "metadata": {"name": "tree", "namespace": namespace},
                    "spec": {"path": "/app/tree", "entries": [{"path": "a", "stringData": "1"},
                                                              {"path": "b/c", "stringData": "2"}]}})
                kube.request("POST", resource_path(*ZKSI, namespace), body={
                    "apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperServiceImport",
                    "metadata": {"name": "team", "namespace": namespace},
                    "spec": {"root": "/services", "prefix": "team-"}})
                kube.request("POST", resource_path("", "v1", "services", namespace), body={
                    "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": namespace},
                    "spec": {"ports": [{"port": 80}]}})

                def dry_run(obj: dict[str, object] | None) -> bool:
                    return conditions(obj).get("Ready", {}).get("reason") == "DryRun"

                wait_for(lambda: dry_run(get(kube, "local", namespace)) and dry_run(get(kube, "remote", namespace)),
                         message="both ZooKeeperConfigs report DryRun")
                wait_for(lambda: dry_run(kube.request("GET", resource_path(*ZKM, namespace, "legacy"))),
                         message="the mirror reports DryRun")
                wait_for(lambda: dry_run(kube.request("GET", resource_path(*ZKT, namespace, "tree"))),
                         message="the tree reports DryRun")
                wait_for(lambda: dry_run(kube.request("GET", resource_path(*ZKSI, namespace, "team"))),
                         message="the ZooKeeperServiceImport reports DryRun")
                wait_for(lambda: ready_condition(get_ensemble(kube, name)).get("status") == "True",
                         message="the ensemble reports its status")
                wait_for(lambda: all(line in proc.log_tail(1_000_000) for line in (
                    f"dry-run service-bridge {namespace}/web: would create /kubernetes/services/{namespace}-web",
                    f"dry-run service-import {namespace}/payments: would create services/payments",
                    f"dry-run service-import {namespace}/team-payments: would create services/team-payments",
                    f"dry-run zookeeper-mirror {namespace}/legacy: would create ConfigMap",
                    f"dry-run zookeeper-config-tree {namespace}/tree: would create /app/tree/b/c")),
                    message="the bridge, the importer and the mirror planned their writes")
                assert "REFUSED" not in proc.log_tail(1_000_000)
                delete_ensemble(kube, name)
                wait_for(lambda: get_ensemble(kube, name) is None, message="the ensemble deleted at once")
            assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()
            assert "REFUSED" not in proc.log_tail(1_000_000)
            assert (tree_state(zk, zk_base), tree_state(second, "/team")) == before
        finally:
            second.stop()
            second.close()

    audit.settled(plane, namespace)
    writes = [e for e in plane.audit_events()[start:] if e.get("stage") == "ResponseComplete"
              and (e.get("user") or {}).get("username") == ZKOP_USER and e.get("verb") in audit.WRITES]
    assert [(e["verb"], e["objectRef"]) for e in writes if not allowed(e)] == []
    statuses = {(e["objectRef"]["resource"], e["objectRef"].get("name")) for e in writes
                if e["objectRef"].get("subresource") == "status"}
    assert {("zookeeperconfigs", "local"), ("zookeeperconfigs", "remote"), ("zookeepermirrors", "legacy"),
            ("zookeeperensembles", name), ("zookeeperconfigtrees", "tree"),
            ("zookeeperserviceimports", "team")} <= statuses
    events = kube.request("GET", resource_path("", "v1", "events", namespace))["items"]
    assert [(e["type"], e["reason"]) for e in events
            if e.get("source", {}).get("component", "").startswith("zkop") and e["type"] != "Warning"] == []
    for path in (resource_path("", "v1", "configmaps", namespace), resource_path("", "v1", "services", namespace),
                 resource_path("discovery.k8s.io", "v1", "endpointslices", namespace)):
        assert [o["metadata"]["name"] for o in kube.request("GET", path)["items"]
                if "zkop" in json.dumps(o["metadata"].get("labels") or {})
                or "ZooKeeperMirror" in json.dumps(o["metadata"].get("ownerReferences") or [])] == []
