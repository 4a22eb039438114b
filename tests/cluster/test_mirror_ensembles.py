"""ZooKeeperMirrors naming a ZooKeeperEnsemble (``spec.ensembleRef``, docs/operations.md "Several ensembles"):
``zkop run --zookeeper-mirrors --zookeeper-ensembles`` as zkop's ServiceAccount under the install's roles and the
``manifests/components/zookeeper-ensembles`` RBAC on a real control plane, with a second real ZooKeeper server.
A mirror reads its ensemble (not the flags' server's same path), with that ensemble's tenancy rules; one naming an
ensemble that does not exist reads nothing and says so until the ensemble appears. The audit log shows no request
of zkop's refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cluster_support import ZKOP_NAMESPACE, kubectl
from kazoo.client import KazooClient
from test_ensembles_on_real_apiserver import refused_by_zkop
from test_zookeeper_mirror import ZKM, config_map, mirror, warnings
from zkop_testing.controlplane import ControlPlane
from zkop_testing.ensembles import ENSEMBLE_CRD_FILE, ZKE, delete_ensemble, ensemble, get_ensemble
from zkop_testing.kustomize import Obj
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import conditions
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import KubeClient, resource_path

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def ensembles_component(plane: ControlPlane, installed: list[Obj]) -> None:
    """The ZooKeeperEnsemble CRD and the component's RBAC applied (the real ``kubectl apply --server-side``)."""
    kubectl(plane, "apply", "--server-side", "--force-conflicts", "--field-manager=zkop-tests",
            "-f", str(ENSEMBLE_CRD_FILE), "-f", str(REPO / "manifests/components/zookeeper-ensembles/rbac.yaml"))
    kubectl(plane, "wait", "--for=condition=Established", "crd/zookeeperensembles.platform.example.com",
            "--timeout=60s")


def run_zkop(kubeconfig: str, zk_server: ZooKeeperServer, zk_base: str, namespace: str,
             tmp_path: Path) -> OperatorProcess:
    # TMPDIR: each ensemble's private directory goes there, not to /tmp.
    return OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}",
                           ["--workers", "2", "--namespace", namespace, "--zookeeper-mirrors", "--zookeeper-ensembles",
                            "--ensemble-secret-namespace", ZKOP_NAMESPACE],
                           env={"TMPDIR": str(tmp_path)})


def ready(kube: KubeClient, name: str, namespace: str) -> dict[str, Any]:
    """The mirror's ``Ready`` condition (``{}`` before its first status)."""
    return conditions(kube.request("GET", resource_path(*ZKM, namespace, name))).get("Ready", {})


def test_a_mirror_reads_the_ensemble_it_names_not_the_flags_one(
        plane: ControlPlane, ensembles_component: None, kube: KubeClient, zkop_kubeconfig: str, namespace: str,
        zk_server: ZooKeeperServer, zk_base: str, zk: KazooClient, second_ensemble: tuple[KazooClient, str],
        tmp_path: Path) -> None:
    second, hosts = second_ensemble
    zk.create(f"{zk_base}/legacy/app/url", b"flags-server", makepath=True)
    second.create("/team/legacy/app/url", b"second-server", makepath=True)
    name = f"{namespace}-second"  # cluster-scoped and shared: one per test
    with run_zkop(zkop_kubeconfig, zk_server, zk_base, namespace, tmp_path) as proc:
        try:
            kube.request("POST", resource_path(*ZKE), body=ensemble(name, hosts, chroot="/team"))
            mirrors = resource_path(*ZKM, namespace)
            kube.request("POST", mirrors, body=mirror("remote", "/legacy/app", namespace, recursive=True,
                                                      ensembleRef={"name": name}))
            kube.request("POST", mirrors, body=mirror("local", "/legacy/app", namespace, recursive=True))
            wait_for(lambda: (config_map(kube, "remote", namespace) or {}).get("data") == {"url": "second-server"}
                     and (config_map(kube, "local", namespace) or {}).get("data") == {"url": "flags-server"},
                     message="each mirror filled from its own ensemble")
            wait_for(lambda: ready(kube, "remote", namespace).get("reason") == "Mirrored", message="remote Mirrored")

            # A change on the second server reaches the mirror of it (its watch), not the flags' one.
            second.set("/team/legacy/app/url", b"second-changed")
            wait_for(lambda: (config_map(kube, "remote", namespace) or {}).get("data") == {"url": "second-changed"},
                     message="the second server's change mirrored")
            assert (config_map(kube, "local", namespace) or {}).get("data") == {"url": "flags-server"}
        finally:
            delete_ensemble(kube, name)
            wait_for(lambda: get_ensemble(kube, name) is None, message="the ensemble gone")
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()
    assert refused_by_zkop(plane) == []


def test_a_mirror_naming_a_missing_ensemble_reads_nothing_until_it_appears(
        plane: ControlPlane, ensembles_component: None, kube: KubeClient, zkop_kubeconfig: str, namespace: str,
        zk_server: ZooKeeperServer, zk_base: str, zk: KazooClient, second_ensemble: tuple[KazooClient, str],
        tmp_path: Path) -> None:
    second, hosts = second_ensemble
    zk.create(f"{zk_base}/legacy/app/url", b"flags-server", makepath=True)
    second.create("/team/legacy/app/url", b"second-server", makepath=True)
    later = f"{namespace}-later"
    with run_zkop(zkop_kubeconfig, zk_server, zk_base, namespace, tmp_path) as proc:
        try:
            kube.request("POST", resource_path(*ZKM, namespace), body=mirror(
                "absent", "/legacy/app", namespace, recursive=True, ensembleRef={"name": later}))
            # It reads nothing (not even the flags' server's same path) and says so, not stalled ...
            wait_for(lambda: ready(kube, "absent", namespace).get("reason") == "EnsembleNotFound",
                     message="EnsembleNotFound")
            found = conditions(kube.request("GET", resource_path(*ZKM, namespace, "absent")))
            assert found["Ready"]["status"] == "False" and later in found["Ready"]["message"]
            assert "Stalled" not in found
            assert config_map(kube, "absent", namespace) is None
            wait_for(lambda: "EnsembleNotFound" in warnings(kube, "absent", namespace), message="a Warning Event")
            # ... until the ensemble appears: then it is read.
            kube.request("POST", resource_path(*ZKE), body=ensemble(later, hosts, chroot="/team"))
            wait_for(lambda: (config_map(kube, "absent", namespace) or {}).get("data") == {"url": "second-server"},
                     message="mirrored once its ensemble runs")
            wait_for(lambda: ready(kube, "absent", namespace).get("reason") == "Mirrored", message="absent Mirrored")
        finally:
            delete_ensemble(kube, later)
            wait_for(lambda: get_ensemble(kube, later) is None, message="the ensemble gone")
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()
    assert refused_by_zkop(plane) == []


def test_an_ensembles_tenancy_rules_hold_the_mirrors_naming_it(
        plane: ControlPlane, ensembles_component: None, kube: KubeClient, zkop_kubeconfig: str, namespace: str,
        zk_server: ZooKeeperServer, zk_base: str, zk: KazooClient, second_ensemble: tuple[KazooClient, str],
        tmp_path: Path) -> None:
    """The rules are the ensemble's ``spec.tenancy`` (the flags' ensemble has none here): a namespace they do not
    admit has the mirror refused, nothing read from either server."""
    second, hosts = second_ensemble
    zk.create(f"{zk_base}/legacy/app/url", b"flags-server", makepath=True)
    second.create("/team/legacy/app/url", b"second-server", makepath=True)
    name = f"{namespace}-tenants"
    tenancy = {"rules": [{"namespaces": [f"{namespace}-other"], "pathPrefixes": ["/legacy"]}]}
    with run_zkop(zkop_kubeconfig, zk_server, zk_base, namespace, tmp_path) as proc:
        try:
            kube.request("POST", resource_path(*ZKE), body=ensemble(name, hosts, chroot="/team", tenancy=tenancy))
            kube.request("POST", resource_path(*ZKM, namespace), body=mirror(
                "refused", "/legacy/app", namespace, recursive=True, ensembleRef={"name": name}))
            wait_for(lambda: ready(kube, "refused", namespace).get("reason") == "NamespaceNotAllowed",
                     message="refused by the ensemble's rules")
            found = conditions(kube.request("GET", resource_path(*ZKM, namespace, "refused")))
            assert found["Ready"]["status"] == "False" and found["Stalled"]["reason"] == "NamespaceNotAllowed"
            assert config_map(kube, "refused", namespace) is None
            wait_for(lambda: "NamespaceNotAllowed" in warnings(kube, "refused", namespace), message="a Warning Event")
        finally:
            delete_ensemble(kube, name)
            wait_for(lambda: get_ensemble(kube, name) is None, message="the ensemble gone")
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()
    assert refused_by_zkop(plane) == []
