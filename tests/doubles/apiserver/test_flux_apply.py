"""Flux's path through the API double, with ``zkop run`` and a real ZooKeeper.

kustomize-controller (fluxcd/pkg ``ssa``: ``ResourceManager.ApplyAllStaged``) server-side applies
each object with ``fieldManager=kustomize-controller`` and ``force=true`` after a dry-run apply
(its diff), prunes with DELETE, and waits with kstatus. What the cluster must do for zkop
(kubernetes.io "Server-Side Apply"; ``k8s.io/apiserver/pkg/endpoints/handlers/patch.go``,
``sigs.k8s.io/structured-merge-diff`` ``merge/update.go``): the manifest carries no finalizers, so
zkop's finalizer (owned by its ``Update`` manager) survives every apply; ``status`` is a reset
field of the main resource, so applies never touch it.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kazoo.client import KazooClient
from zkop_testing import kstatus
from zkop_testing.apiserver import ApiServer
from zkop_testing.crds import install_crds
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import ZKC, get, read
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import KubeClient, resource_path

JSON = dict[str, Any]
APPLY = "application/apply-patch+yaml"
FLUX = "kustomize-controller"
FINALIZER = "zookeeperconfigs.platform.example.com/finalizer"
FLAG = "/app/features/flux-managed/enabled"
ZKOP = "zkop-operator"  # zkop sends no fieldManager: kube names the manager after its User-Agent


def manifest(value: bytes) -> str:
    """What ``kustomize build`` hands to kustomize-controller: YAML, no finalizers, no status."""
    return yaml.safe_dump({
        "apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperConfig",
        "metadata": {"name": "flux-flag", "namespace": "default",
                     "labels": {"kustomize.toolkit.fluxcd.io/name": "apps",
                                "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}},
        "spec": {"path": FLAG, "data": base64.b64encode(value).decode()},
    })


def flux_apply(kube: KubeClient, value: bytes) -> JSON:
    """A dry-run apply (Flux's diff), then the apply, both forced as kustomize-controller does."""
    path = resource_path(*ZKC, "default", "flux-flag")
    body = yaml.safe_load(manifest(value))
    query = {"fieldManager": FLUX, "force": True}
    kube.request("PATCH", path, query={**query, "dryRun": "All"}, body=body, content_type=APPLY)
    return kube.request("PATCH", path, query=query, body=body, content_type=APPLY)


def owners(obj: JSON) -> dict[tuple[str, str, str], JSON]:
    return {(e["manager"], e["operation"], e.get("subresource", "")): e["fieldsV1"]
            for e in obj["metadata"]["managedFields"]}


@pytest.fixture
def kubeconfig(server: ApiServer, tmp_path: Path) -> str:
    return str(server.write_kubeconfig(tmp_path / "kubeconfig"))


@pytest.fixture
def operator(kubeconfig: str, kube: KubeClient, zk_server: ZooKeeperServer, zk_base: str) -> Iterator[OperatorProcess]:
    install_crds(kube)  # the CRD zkop ships (manifests/crd), as Flux would have applied it
    with OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", ["--workers", "2"]) as proc:
        yield proc
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()


def test_flux_server_side_apply_lifecycle(operator: OperatorProcess, kube: KubeClient, zk: KazooClient,
                                          zk_base: str) -> None:
    seen: list[str] = []

    def record(status: str) -> str:
        if not seen or seen[-1] != status:
            seen.append(status)
        return status

    def health() -> str:
        obj = get(kube, "flux-flag")
        return record(kstatus.compute(obj) if obj is not None else "NotFound")

    # 1. Apply-create: kustomize-controller owns exactly what it applied.
    created = flux_apply(kube, b"on")
    assert created["metadata"]["generation"] == 1
    assert list(owners(created)) == [(FLUX, "Apply", "")]
    # what Flux's health check sees right after the apply: the status default (observedGeneration -1)
    assert record(kstatus.compute(created)) == "InProgress"
    assert wait_for(lambda: read(zk, zk_base + FLAG) == b"on", message="znode created")
    wait_for(lambda: health() == "Current", message="kstatus Current")
    obj = get(kube, "flux-flag")
    assert obj is not None and FINALIZER in obj["metadata"]["finalizers"]
    managers = owners(obj)
    assert (ZKOP, "Update", "") in managers and (ZKOP, "Update", "status") in managers
    assert f'v:"{FINALIZER}"' in managers[(ZKOP, "Update", "")]["f:metadata"]["f:finalizers"]
    assert "f:status" in managers[(ZKOP, "Update", "status")]

    # 2. The next apply changes spec.data: finalizer and status survive, the znode follows.
    assert seen == ["InProgress", "Current"]
    seen.clear()
    applied = flux_apply(kube, b"off")
    assert applied["metadata"]["generation"] == 2
    assert FINALIZER in applied["metadata"]["finalizers"]
    assert applied["status"]["state"] == "Synced" and applied["status"]["observedGeneration"] == 1
    assert record(kstatus.compute(applied)) == "InProgress"
    assert wait_for(lambda: read(zk, zk_base + FLAG) == b"off", message="znode updated")
    wait_for(lambda: health() == "Current", message="kstatus Current again")
    assert seen == ["InProgress", "Current"]

    # 3. Re-applying the same manifest writes nothing (no new generation, finalizer kept).
    obj = get(kube, "flux-flag")
    assert obj is not None
    again = flux_apply(kube, b"off")
    assert again["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]

    # 4. Flux prunes the object: the znode goes, then the object.
    kube.request("DELETE", resource_path(*ZKC, "default", "flux-flag"),
                 body={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"})
    wait_for(lambda: read(zk, zk_base + FLAG) is None, message="znode deleted")
    wait_for(lambda: get(kube, "flux-flag") is None, message="object gone")
