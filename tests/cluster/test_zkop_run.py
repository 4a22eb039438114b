"""``zkop run`` end to end on a real kube-apiserver, as its own ServiceAccount: a feature flag's whole life.

The same story as ``tests/integration/test_zookeeperconfig_e2e.py`` tells against the in-memory
double, here decided by kube-apiserver (structural schema, defaulting, generation, finalizers,
the ``/status`` subresource, server-side apply by ``kubectl``) and by kube-controller-manager
(the namespace deletion that ends each test).
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from cluster_support import kubectl
from kazoo.client import KazooClient
from zkop_testing.controlplane import ControlPlane
from zkop_testing.kustomize import Obj
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import ZKC, conditions, get, read, reasons, synced, zkc
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import ApiException, KubeClient, resource_path

FLAG = "/app/features/new-recommendation-engine/enabled"


@pytest.fixture
def operator(zkop_kubeconfig: str, namespace: str, zk_server: ZooKeeperServer,
             zk_base: str) -> Iterator[OperatorProcess]:
    """``zkop run`` as its ServiceAccount, watching this test's namespace, chrooted at this test's base path."""
    with OperatorProcess(zkop_kubeconfig, f"{zk_server.hosts}{zk_base}",
                         ["--workers", "2", "--namespace", namespace]) as proc:
        yield proc
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()


def test_feature_flag_lifecycle_applied_by_kubectl(operator: OperatorProcess, plane: ControlPlane,
                                                    kube: KubeClient, namespace: str, zk: KazooClient,
                                                    zk_base: str) -> None:
    manifest = zkc("new-reco", FLAG, b"true", namespace=namespace)
    kubectl(plane, "apply", "--server-side", "--field-manager=flux", "-f", "-", input=yaml.safe_dump(manifest))
    assert wait_for(lambda: read(zk, zk_base + FLAG) == b"true", message="znode created")
    obj: dict[str, Any] = wait_for(lambda: synced(kube, "new-reco", namespace), message="status Synced")
    assert "zookeeperconfigs.platform.example.com/finalizer" in obj["metadata"]["finalizers"]
    assert conditions(obj)["Ready"]["status"] == "True"
    # kube-apiserver defaulted the optional fields from the CRD's schema.
    assert obj["spec"]["syncPolicy"] == "createOrUpdate"
    wait_for(lambda: "Created" in reasons(kube, "new-reco", namespace), message="Created Event")  # written async
    # zkop's writes are its own field manager's; the applier keeps spec.
    managers = {entry["manager"]: entry for entry in obj["metadata"]["managedFields"]}
    assert managers["flux"]["operation"] == "Apply"
    assert any(entry.get("subresource") == "status" for entry in obj["metadata"]["managedFields"])

    # A new value applied: the znode follows, observedGeneration follows the new generation.
    manifest["spec"]["data"] = base64.b64encode(b"false").decode()
    kubectl(plane, "apply", "--server-side", "--field-manager=flux", "-f", "-", input=yaml.safe_dump(manifest))
    assert wait_for(lambda: read(zk, zk_base + FLAG) == b"false", message="znode updated")
    obj = wait_for(lambda: synced(kube, "new-reco", namespace), message="status follows generation 2")
    assert obj["metadata"]["generation"] == 2

    # A hand edit is put back.
    zk.set(zk_base + FLAG, b"hand edit")
    assert wait_for(lambda: read(zk, zk_base + FLAG) == b"false", message="drift corrected")
    wait_for(lambda: "DriftCorrected" in reasons(kube, "new-reco", namespace), message="DriftCorrected Event")

    # kubectl's printer columns come from the CRD.
    table = kubectl(plane, "-n", namespace, "get", "zkc", "new-reco")
    assert table.split()[:6] == ["NAME", "PATH", "POLICY", "STATE", "READY", "AGE"], table
    assert table.split()[6:10] == ["new-reco", FLAG, "createOrUpdate", "Synced"], table

    # Deleting the object removes the znode, then the finalizer; parents zkop created stay.
    kubectl(plane, "-n", namespace, "delete", "zkc", "new-reco", "--wait=false")
    wait_for(lambda: read(zk, zk_base + FLAG) is None, message="znode deleted")
    wait_for(lambda: get(kube, "new-reco", namespace) is None, message="object gone")
    assert zk.exists(zk_base + "/app/features") is not None


def test_invalid_spec_is_reported_and_writes_nothing(operator: OperatorProcess, kube: KubeClient, namespace: str,
                                                     zk: KazooClient, zk_base: str) -> None:
    # Passes the CRD (schema and CEL rules) but not zkop: the bytes are not UTF-8 (encoding: utf-8).
    kube.request("POST", resource_path(*ZKC, namespace), body=zkc("bad", "/app/bad", b"\xff", namespace=namespace))
    kube.request("POST", resource_path(*ZKC, namespace), body=zkc("good", "/app/good", b"x", namespace=namespace))

    def stalled() -> dict[str, dict[str, Any]] | None:
        found = conditions(get(kube, "bad", namespace))
        return found if found.get("Stalled", {}).get("status") == "True" else None

    found = wait_for(stalled, message="bad object stalled")
    assert found["Ready"]["reason"] == "InvalidSpec"
    assert "is not valid UTF-8" in found["Ready"]["message"]
    assert wait_for(lambda: read(zk, zk_base + "/app/good") == b"x")
    assert zk.get_children(zk_base + "/app") == ["good"]
    kube.request("DELETE", resource_path(*ZKC, namespace, "bad"))
    wait_for(lambda: get(kube, "bad", namespace) is None, message="invalid object deleted")


def test_a_deleted_namespace_takes_its_znodes(operator: OperatorProcess, plane: ControlPlane, kube: KubeClient,
                                             installed: list[Obj], zk: KazooClient, zk_base: str,
                                             namespace: str) -> None:
    """kube-controller-manager's namespace controller deletes the objects; zkop's finalizer removes each znode."""
    for i in range(3):
        kube.request("POST", resource_path(*ZKC, namespace), body=zkc(f"f{i}", f"/app/f{i}", b"1",
                                                                      namespace=namespace))
    wait_for(lambda: all(read(zk, f"{zk_base}/app/f{i}") == b"1" for i in range(3)), message="znodes created")
    kube.request("DELETE", f"/api/v1/namespaces/{namespace}")
    wait_for(lambda: zk.get_children(zk_base + "/app") == [], message="znodes removed with the namespace")

    def gone() -> bool:
        try:
            kube.request("GET", f"/api/v1/namespaces/{namespace}")
        except ApiException as exc:
            if exc.status == 404:
                return True
            raise
        return False

    wait_for(gone, message="namespace finalized by kube-controller-manager")
