"""zkop's CustomResourceDefinition for tests, the demo and the benchmark: ``manifests/crd/``, the one source."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from zkop.kube.client import ApiException, KubeClient, resource_path
from zkop_testing.waiting import wait_for

__all__ = ["CRD_FILE", "crd_established", "install_crds", "load_crd", "release_finalizers", "store_before_rules"]

#: The ZooKeeperConfig CRD as shipped in ``manifests/crd/`` (the package carries an identical copy,
#: ``zkop/crds/``, checked by ``tests/manifests/test_crd_copy.py``).
CRD_FILE = Path(__file__).resolve().parents[3] / "manifests" / "crd" / "zookeeperconfigs.yaml"


def load_crd(*, rules: bool = True) -> dict[str, Any]:
    """A fresh copy of the ZooKeeperConfig CRD (``manifests/crd/zookeeperconfigs.yaml``) as a dict.

    Args:
        rules: ``False``: without its CEL validation rules (``x-kubernetes-validations``), as a CRD from
            before them, to store objects that only zkop's own checks refuse (what a cluster upgraded
            from such a CRD holds).

    Raises:
        FileNotFoundError: not run from a source checkout.
    """
    crd: dict[str, Any] = yaml.safe_load(CRD_FILE.read_text(encoding="utf-8"))
    if not rules:
        _strip_rules(crd)
    return crd


def _strip_rules(node: Any) -> None:
    if isinstance(node, dict):
        node.pop("x-kubernetes-validations", None)
        for value in node.values():
            _strip_rules(value)
    elif isinstance(node, list):
        for value in node:
            _strip_rules(value)


def store_before_rules(kube: KubeClient, obj: dict[str, Any]) -> dict[str, Any]:
    """Create ``obj`` (a ZooKeeperConfig) while the installed CRD has no CEL rules, then put the CRD back.

    What an object stored before the CRD had its rules looks like to zkop: kube-apiserver (and the double)
    keep it as it is. The double applies a CRD change at once; kube-apiserver takes a moment (its CRD handler
    swaps the validators when it sees the change), so the create is retried while the old rules still refuse it,
    and after the CRD is put back this waits until they refuse a copy again (a server-side dry run): the next
    test finds the CRD as installed. Call before zkop starts: replacing the CRD ends the custom resources'
    watches. Returns the created object.

    Raises:
        TimeoutError: the CRD change did not take effect within :data:`~zkop_testing.waiting.EVENTUALLY`.
    """
    crds = resource_path("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    name = load_crd()["metadata"]["name"]
    path = resource_path("platform.example.com", "v1alpha1", "zookeeperconfigs", obj["metadata"]["namespace"])

    def replace(crd: dict[str, Any]) -> None:
        current = kube.request("GET", f"{crds}/{name}")
        crd["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        kube.request("PUT", f"{crds}/{name}", body=crd)

    def refused(body: dict[str, Any], query: dict[str, Any] | None = None) -> dict[str, Any] | None:
        try:
            created: dict[str, Any] = kube.request("POST", path, body=body, query=query)
        except ApiException as err:
            if err.status == 422:
                return None
            raise
        return created

    replace(load_crd(rules=False))
    try:
        created: dict[str, Any] = wait_for(lambda: refused(obj), interval=0.2,
                                           message="the CRD without its rules in effect")
    finally:
        replace(load_crd())
        probe = {**obj, "metadata": {**obj["metadata"], "name": obj["metadata"]["name"] + "-probe"}}
        wait_for(lambda: refused(probe, {"dryRun": "All"}) is None, interval=0.2,
                 message="the CRD's rules in effect again")
    return created


def install_crds(kube: KubeClient) -> None:
    """Create zkop's CRDs in an API server (``kubectl apply -f manifests/crd/`` for tests)."""
    kube.request("POST", resource_path("apiextensions.k8s.io", "v1", "customresourcedefinitions"), body=load_crd())


def crd_established(kube: KubeClient, name: str = "zookeeperconfigs.platform.example.com") -> bool:
    """True once the API server reports the CRD ``name`` ``Established`` (its resource is served)."""
    crd = kube.request("GET", f"{resource_path('apiextensions.k8s.io', 'v1', 'customresourcedefinitions')}/{name}")
    return any(c.get("type") == "Established" and c.get("status") == "True"
               for c in (crd.get("status") or {}).get("conditions") or [])


def release_finalizers(kube: KubeClient, namespace: str) -> int:
    """Clear the finalizers of every ZooKeeperConfig in ``namespace`` (a test's clean-up once zkop has stopped).

    Returns how many objects had finalizers. Objects deleted meanwhile are skipped.
    """
    from zkop.kube.client import MERGE_PATCH, ApiException

    path = resource_path("platform.example.com", "v1alpha1", "zookeeperconfigs", namespace)
    released = 0
    for item in kube.request("GET", path).get("items", []):
        if not item["metadata"].get("finalizers"):
            continue
        try:
            kube.request("PATCH", f"{path}/{item['metadata']['name']}", body={"metadata": {"finalizers": None}},
                         content_type=MERGE_PATCH)
        except ApiException as exc:
            if exc.status != 404:
                raise
        released += 1
    return released
