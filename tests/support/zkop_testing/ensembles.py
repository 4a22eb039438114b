"""Test support for ZooKeeperEnsembles: the CRD from ``manifests/crd/``, manifests, Secrets and reads."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml

from zkop.kube.client import MERGE_PATCH, ApiException, KubeClient, resource_path

__all__ = [
    "ENSEMBLE_CRD_FILE",
    "ZKE",
    "delete_ensemble",
    "ensemble",
    "get_ensemble",
    "install_ensemble_crd",
    "put_secret",
    "ready_condition",
]

#: The ZooKeeperEnsemble CRD as shipped (``zkop/crds/`` holds an identical copy).
ENSEMBLE_CRD_FILE = Path(__file__).resolve().parents[3] / "manifests" / "crd" / "zookeeperensembles.yaml"
ZKE = ("platform.example.com", "v1alpha1", "zookeeperensembles")


def install_ensemble_crd(kube: KubeClient) -> None:
    """Create the ZooKeeperEnsemble CRD (``kubectl apply -f manifests/crd/zookeeperensembles.yaml``)."""
    crd = yaml.safe_load(ENSEMBLE_CRD_FILE.read_text(encoding="utf-8"))
    kube.request("POST", resource_path("apiextensions.k8s.io", "v1", "customresourcedefinitions"), body=crd)


def ensemble(name: str, connect: str, **spec: Any) -> dict[str, Any]:
    """A ZooKeeperEnsemble manifest."""
    return {"apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperEnsemble",
            "metadata": {"name": name}, "spec": {"connectString": connect, **spec}}


def get_ensemble(kube: KubeClient, name: str) -> dict[str, Any] | None:
    """GET a ZooKeeperEnsemble, ``None`` if absent."""
    try:
        return kube.request("GET", resource_path(*ZKE, None, name))
    except ApiException as err:
        if err.status == 404:
            return None
        raise


def delete_ensemble(kube: KubeClient, name: str) -> None:
    """DELETE a ZooKeeperEnsemble (absent is fine)."""
    try:
        kube.request("DELETE", resource_path(*ZKE, None, name))
    except ApiException as err:
        if err.status != 404:
            raise


def ready_condition(obj: dict[str, Any] | None) -> dict[str, Any]:
    """The ``Ready`` condition of ``status.conditions`` (``{}`` if none)."""
    for condition in ((obj or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return dict(condition)
    return {}


def put_secret(kube: KubeClient, namespace: str, name: str, data: dict[str, bytes]) -> None:
    """Create the Secret, or replace its data."""
    encoded = {k: base64.b64encode(v).decode() for k, v in data.items()}
    path = resource_path("", "v1", "secrets", namespace)
    try:
        kube.request("POST", path, body={"apiVersion": "v1", "kind": "Secret",
                                         "metadata": {"name": name, "namespace": namespace}, "data": encoded})
    except ApiException as err:
        if err.status != 409:
            raise
        kube.request("PATCH", f"{path}/{name}", body={"data": encoded}, content_type=MERGE_PATCH)
