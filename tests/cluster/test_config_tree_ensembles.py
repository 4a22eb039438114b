"""ZooKeeperConfigTrees naming a ZooKeeperEnsemble (``spec.ensembleRef``, docs/operations.md "Several ensembles"):
``zkop run --config-trees --zookeeper-ensembles`` as zkop's ServiceAccount under the install's roles and the
``manifests/components/zookeeper-ensembles`` RBAC on a real control plane, with a second real ZooKeeper server.
A tree is written on its ensemble (not on the flags' server), owned in that ensemble's registry, held to that
ensemble's tenancy rules, and its declarations meet only that ensemble's ZooKeeperConfigs; one naming an ensemble
that does not run writes nothing and says so until the ensemble appears. The audit log shows no request of zkop's
refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cluster_support import ZKOP_NAMESPACE
from kazoo.client import KazooClient
from test_config_tree import ZKC, ZKT, events, tree, tree_status
from test_ensembles_on_real_apiserver import refused_by_zkop
from test_mirror_ensembles import ensembles_component
from zkop_testing.controlplane import ControlPlane
from zkop_testing.ensembles import ZKE, delete_ensemble, ensemble, get_ensemble
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import conditions, create, zkc
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import ApiException, KubeClient, resource_path

__all__ = ["ensembles_component"]  # the fixture, shared with the mirror's tests


def run_zkop(kubeconfig: str, zk_server: ZooKeeperServer, zk_base: str, namespace: str,
             tmp_path: Path) -> OperatorProcess:
    # TMPDIR: each ensemble's private directory goes there, not to /tmp.
    return OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}",
                           ["--workers", "2", "--namespace", namespace, "--config-trees", "--zookeeper-ensembles",
                            "--ensemble-secret-namespace", ZKOP_NAMESPACE],
                           env={"TMPDIR": str(tmp_path)})


def ready(kube: KubeClient, name: str, namespace: str) -> dict[str, Any]:
    """The tree's ``Ready`` condition (``{}`` before its first status)."""
    return conditions({"status": tree_status(kube, name, namespace)}).get("Ready", {})


def gone(kube: KubeClient, path: str) -> bool:
    try:
        kube.request("GET", path)
    except ApiException as err:
        if err.status == 404:
            return True
        raise
    return False


def delete_all(kube: KubeClient, paths: list[str]) -> None:
    """DELETE each object and wait until each is gone (zkop still runs: its finalizers are released)."""
    for path in paths:
        try:
            kube.request("DELETE", path)
        except ApiException as err:
            if err.status != 404:
                raise
    wait_for(lambda: all(gone(kube, path) for path in paths), message=f"{paths} deleted")


def cleanup(kube: KubeClient, ensemble_name: str, objects: list[str]) -> None:
    """Delete ``objects``, then the ensemble (their children and records are on it), waiting for each."""
    delete_all(kube, objects)
    delete_ensemble(kube, ensemble_name)
    wait_for(lambda: get_ensemble(kube, ensemble_name) is None, message="the ensemble gone")


def test_a_tree_is_written_on_the_ensemble_it_names_owned_there_and_meets_only_its_zookeeperconfigs(
        plane: ControlPlane, ensembles_component: None, kube: KubeClient, zkop_kubeconfig: str, namespace: str,
        zk_server: ZooKeeperServer, zk_base: str, zk: KazooClient, second_ensemble: tuple[KazooClient, str],
        tmp_path: Path) -> None:
    second, hosts = second_ensemble
    ns = namespace
    name = f"{ns}-second"  # cluster-scoped and shared: one per test
    ref = {"ensembleRef": {"name": name}}
    objects = [resource_path(*ZKT, ns, t) for t in ("remote", "local")] + [resource_path(*ZKC, ns, "remote-flag")]
    with run_zkop(zkop_kubeconfig, zk_server, zk_base, ns, tmp_path) as proc:
        try:
            kube.request("POST", resource_path(*ZKE), body=ensemble(name, hosts, chroot="/team"))
            # The oldest declarer of /shared/flag on the second ensemble: a ZooKeeperConfig naming it.
            create(kube, zkc("remote-flag", "/shared/flag", b"from-config", namespace=ns, **ref))
            wait_for(lambda: second.exists("/team/shared/flag") is not None, message="the config wrote on the second")
            kube.request("POST", resource_path(*ZKT, ns), body=tree("remote", "/shared", ns, entries=[
                {"path": "flag", "stringData": "from-remote-tree"}, {"path": "other", "stringData": "remote"}], **ref))
            # A tree on the flags' ensemble declaring the same path: another znode, no conflict.
            kube.request("POST", resource_path(*ZKT, ns), body=tree("local", "/shared", ns, entries=[
                {"path": "flag", "stringData": "from-local-tree"}]))

            wait_for(lambda: tree_status(kube, "remote", ns).get("conflicted") == 1
                     and tree_status(kube, "remote", ns).get("synced") == 1, message="remote: 1 synced, 1 conflict")
            remote = tree_status(kube, "remote", ns)
            assert remote["problems"][0]["path"] == "/shared/flag"
            assert f"ZooKeeperConfig {ns}/remote-flag" in remote["problems"][0]["message"]
            wait_for(lambda: tree_status(kube, "local", ns).get("synced") == 1, message="local synced")
            assert tree_status(kube, "local", ns)["conflicted"] == 0
            assert ready(kube, "local", ns)["reason"] == "Synced"
            config = wait_for(lambda: conditions(kube.request("GET", resource_path(*ZKC, ns, "remote-flag")))
                              .get("Ready"), message="the config's status")
            assert config["reason"] == "Synced"

            # Written on the second server, below its chroot; the flags' server has only the local tree's child.
            assert second.get("/team/shared/other")[0] == b"remote"
            assert second.get("/team/shared/flag")[0] == b"from-config"
            assert zk.get(f"{zk_base}/shared/flag")[0] == b"from-local-tree"
            assert zk.exists(f"{zk_base}/shared/other") is None
            # Owned in the second ensemble's registry (its own chroot), naming the tree.
            record = json.loads(second.get("/team/zkop/owners/shared/other")[0])
            assert (record.get("kind"), record.get("namespace"), record.get("name")) == (
                "ZooKeeperConfigTree", ns, "remote")
            assert zk.exists(f"{zk_base}/zkop/owners/shared/other") is None

            # Its watch root is on that ensemble: a hand edit there is put back.
            second.set("/team/shared/other", b"hand-edit")
            wait_for(lambda: second.get("/team/shared/other")[0] == b"remote", message="drift on the second undone")
        finally:
            cleanup(kube, name, objects)
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()
    assert refused_by_zkop(plane) == []


def test_a_tree_naming_a_missing_ensemble_writes_nothing_until_it_appears_then_follows_its_tenancy(
        plane: ControlPlane, ensembles_component: None, kube: KubeClient, zkop_kubeconfig: str, namespace: str,
        zk_server: ZooKeeperServer, zk_base: str, zk: KazooClient, second_ensemble: tuple[KazooClient, str],
        tmp_path: Path) -> None:
    second, hosts = second_ensemble
    ns = namespace
    later, tenants = f"{ns}-later", f"{ns}-tenants"
    objects = [resource_path(*ZKT, ns, t) for t in ("absent", "refused")]
    with run_zkop(zkop_kubeconfig, zk_server, zk_base, ns, tmp_path) as proc:
        try:
            kube.request("POST", resource_path(*ZKT, ns), body=tree(
                "absent", "/app", ns, entries=[{"path": "url", "stringData": "u"}], ensembleRef={"name": later}))
            # It writes nothing (not even on the flags' server) and says so, not stalled ...
            wait_for(lambda: ready(kube, "absent", ns).get("reason") == "EnsembleNotFound", message="EnsembleNotFound")
            found = conditions({"status": tree_status(kube, "absent", ns)})
            assert found["Ready"]["status"] == "False" and later in found["Ready"]["message"]
            assert "Stalled" not in found
            wait_for(lambda: "EnsembleNotFound" in events(kube, "absent", ns), message="a Warning Event")
            assert zk.exists(f"{zk_base}/app") is None
            assert second.exists("/team/app") is None
            # ... until the ensemble appears: then it converges there.
            kube.request("POST", resource_path(*ZKE), body=ensemble(later, hosts, chroot="/team"))
            wait_for(lambda: ready(kube, "absent", ns).get("reason") == "Synced", message="absent Synced")
            assert second.get("/team/app/url")[0] == b"u"
            assert zk.exists(f"{zk_base}/app") is None

            # The tenancy is the named ensemble's (the flags' ensemble has none here): a namespace its rules do not
            # admit has the tree refused, nothing written on either server.
            tenancy = {"rules": [{"namespaces": [f"{ns}-other"], "pathPrefixes": ["/team-app"]}]}
            kube.request("POST", resource_path(*ZKE), body=ensemble(tenants, hosts, chroot="/team", tenancy=tenancy))
            kube.request("POST", resource_path(*ZKT, ns), body=tree(
                "refused", "/team-app", ns, entries=[{"path": "url", "stringData": "r"}],
                ensembleRef={"name": tenants}))
            wait_for(lambda: ready(kube, "refused", ns).get("reason") == "NamespaceNotAllowed",
                     message="refused by the ensemble's rules")
            found = conditions({"status": tree_status(kube, "refused", ns)})
            assert found["Stalled"]["reason"] == "NamespaceNotAllowed"
            wait_for(lambda: "NamespaceNotAllowed" in events(kube, "refused", ns), message="a Warning Event")
            assert second.exists("/team/team-app") is None
            assert zk.exists(f"{zk_base}/team-app") is None
        finally:
            delete_all(kube, objects)
            for name in (later, tenants):
                delete_ensemble(kube, name)
            wait_for(lambda: all(get_ensemble(kube, name) is None for name in (later, tenants)),
                     message="the ensembles gone")
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()
    assert refused_by_zkop(plane) == []


def test_an_ensemble_deleted_before_its_tree_waits_until_the_tree_has_deleted_its_children(
        plane: ControlPlane, ensembles_component: None, kube: KubeClient, zkop_kubeconfig: str, namespace: str,
        zk_server: ZooKeeperServer, zk_base: str, second_ensemble: tuple[KazooClient, str], tmp_path: Path) -> None:
    """Flux may prune an ensemble and its trees in any order: the ensemble stays ``Terminating``, naming the tree,
    until the tree (``deletionPolicy: Delete``) has deleted its children and records on it."""
    second, hosts = second_ensemble
    ns = namespace
    name = f"{ns}-order"
    tree_path = resource_path(*ZKT, ns, "ordered")
    with run_zkop(zkop_kubeconfig, zk_server, zk_base, ns, tmp_path) as proc:
        try:
            kube.request("POST", resource_path(*ZKE), body=ensemble(name, hosts, chroot="/team"))
            kube.request("POST", resource_path(*ZKT, ns), body=tree(
                "ordered", "/ordered", ns, entries=[{"path": "a", "stringData": "1"}, {"path": "b", "stringData": "2"}],
                ensembleRef={"name": name}))
            wait_for(lambda: ready(kube, "ordered", ns).get("reason") == "Synced", message="the tree Synced")
            assert second.get("/team/ordered/a")[0] == b"1"

            delete_ensemble(kube, name)  # first, while the tree still names it

            def terminating() -> dict[str, Any] | None:
                found = conditions(get_ensemble(kube, name) or {}).get("Ready")
                return found if found and found.get("reason") == "Terminating" else None

            message = wait_for(terminating, message="the ensemble Terminating")["message"]
            assert f"ZooKeeperConfigTree {ns}/ordered" in message
            assert get_ensemble(kube, name) is not None
            delete_all(kube, [tree_path])  # its children deleted through the ensemble's session, then it goes
            assert second.exists("/team/ordered/a") is None and second.exists("/team/ordered/b") is None
            assert second.exists("/team/zkop/owners/ordered/a") is None
            wait_for(lambda: get_ensemble(kube, name) is None, message="the ensemble gone once the tree is")
        finally:
            cleanup(kube, name, [tree_path])
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()
    assert refused_by_zkop(plane) == []
