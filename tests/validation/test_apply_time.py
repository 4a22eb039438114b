"""Rejection at apply time as a user and an old cluster meet it, on kube-apiserver of each tested minor.

* ``kubectl apply --dry-run=server`` (the venv's kubectl) prints the CRD's CEL message for a bad manifest,
  the way Flux's dry-run reports it;
* every ZooKeeperConfig in ``examples/`` is accepted as it is (the prototype's manifests keep working);
* an object stored before the CRD had its rules keeps working: zkop's ``/status`` writes and edits of
  other fields are accepted (validation ratcheting, ``CRDValidationRatcheting``, GA since 1.33), a new bad
  value is refused, and zkop's own check (:func:`zkop.zkconfig.spec.parse_spec`) still refuses the object.
  The in-memory double must answer the same (``zkop_testing.apiserver_cel``).
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from zkop_testing.apiserver import ApiServer
from zkop_testing.controlplane import ControlPlane, fresh_namespace
from zkop_testing.crds import load_crd
from zkop_testing.kustomize import REPO, load_documents
from zkop_testing.waiting import wait_for

from zkop.kube.client import MERGE_PATCH, ApiException, KubeClient, resource_path
from zkop.zkconfig.spec import InvalidSpec, parse_spec

KUBECTL = Path(sys.executable).parent / "kubectl"
#: The group of this module's copy of the CRD (zkop does not reconcile it).
OLD_GROUP = "validation.zkop.example.com"


def _examples() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted((REPO / "examples").rglob("*.yaml")):
        found += [(f"{path.relative_to(REPO)}:{doc['metadata']['name']}", doc) for doc in load_documents(path)
                  if doc.get("kind") == "ZooKeeperConfig"]
    return found


def _kubectl(plane: ControlPlane, tmp_path: Path, namespace: str, *args: str,
             stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    kubeconfig = plane.write_kubeconfig(tmp_path / "kubeconfig", namespace=namespace)
    return subprocess.run([str(KUBECTL), "--kubeconfig", str(kubeconfig), *args], input=stdin, capture_output=True,
                          text=True, timeout=120, check=False)


@pytest.fixture
def plane_namespace(control_plane_each: ControlPlane) -> Iterator[tuple[ControlPlane, str]]:
    """Each minor's control plane and a fresh namespace on it."""
    for namespace in fresh_namespace(control_plane_each):
        yield control_plane_each, namespace


def test_kubectl_apply_dry_run_server_prints_the_rule(plane_namespace: tuple[ControlPlane, str],
                                                      tmp_path: Path) -> None:
    plane, namespace = plane_namespace
    bad = {"apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperConfig", "metadata": {"name": "flag"},
           "spec": {"path": "app/features/x/", "stringData": "true",
                    "acl": [{"scheme": "digest", "id": "ops:x", "permissions": ["read"]}]}}
    done = _kubectl(plane, tmp_path, namespace, "apply", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(bad))
    assert done.returncode == 1, done.stdout
    # What the user sees: one line per cause under the object (in the server's map order, so sorted here).
    first, *causes = done.stderr.strip().splitlines()
    assert first.strip() == 'The ZooKeeperConfig "flag" is invalid:', done.stderr
    assert sorted(causes) == [
        "* spec.acl[0].id: Invalid value: digest id 'ops:x' is a redaction marker, not an id: ZooKeeper shows every "
        "digest as user:x to a client without ADMIN on the znode; export again with credentials that have ADMIN on "
        "it, or give user:base64(sha1(user:password))",
        "* spec.path: Invalid value: \"app/features/x/\": path must be absolute (start with '/')",
        "* spec.path: Invalid value: \"app/features/x/\": path must not end with '/'",
    ], done.stderr
    # Flux's dry-run is a server-side apply: the same words.
    done = _kubectl(plane, tmp_path, namespace, "apply", "--server-side", "--field-manager=flux", "--dry-run=server",
                    "-f", "-", stdin=yaml.safe_dump(bad))
    assert done.returncode == 1 and "path must be absolute (start with '/')" in done.stderr, done.stderr
    # Nothing was stored.
    assert _kubectl(plane, tmp_path, namespace, "get", "zkc", "-o", "name").stdout == ""


@pytest.mark.parametrize(("where", "doc"), _examples(), ids=[w for w, _ in _examples()])
def test_every_example_is_accepted_as_it_is(where: str, doc: dict[str, Any],
                                            plane_namespace: tuple[ControlPlane, str]) -> None:
    plane, namespace = plane_namespace
    obj = {**copy.deepcopy(doc), "metadata": {**doc["metadata"], "namespace": namespace}}
    with plane.admin() as kube:
        kube.request("POST", resource_path("platform.example.com", "v1alpha1", "zookeeperconfigs", namespace),
                     query={"dryRun": "All", "fieldValidation": "Strict"}, body=obj)


# ------------------------------------------------------------------------------------------ old objects

def _crd(rules: bool) -> dict[str, Any]:
    """zkop's CRD under :data:`OLD_GROUP`; without its CEL rules when ``rules`` is false (the objects stored
    with it below are ones the CRD before the rules accepted too: its ``pattern`` took ``/a/./b``)."""
    crd = load_crd(rules=rules)
    crd["metadata"]["name"] = f"zookeeperconfigs.{OLD_GROUP}"
    crd["spec"]["group"] = OLD_GROUP
    return crd


class _Old:
    """One API server with the rule-less CRD of :data:`OLD_GROUP` installed, then replaced by the current one."""

    crds = resource_path("apiextensions.k8s.io", "v1", "customresourcedefinitions")

    def __init__(self, kube: KubeClient, namespace: str) -> None:
        self.kube, self.namespace = kube, namespace
        self.objects = resource_path(OLD_GROUP, "v1alpha1", "zookeeperconfigs", namespace)

    def install(self, rules: bool) -> None:
        name = f"zookeeperconfigs.{OLD_GROUP}"
        if not rules:
            self.kube.request("POST", self.crds, body=_crd(False))
            wait_for(lambda: self._serves(), message="the old CRD served", ignore=(ApiException,))
            return
        current = self.kube.request("GET", f"{self.crds}/{name}")
        self.kube.request("PUT", f"{self.crds}/{name}",
                          body={**_crd(True), "metadata": {**_crd(True)["metadata"],
                                                           "resourceVersion": current["metadata"]["resourceVersion"]}})
        probe = {"apiVersion": f"{OLD_GROUP}/v1alpha1", "kind": "ZooKeeperConfig", "metadata": {"name": "probe"},
                 "spec": {"path": "/probe/", "stringData": "x"}}
        wait_for(lambda: self._refused(probe), message="the CRD's rules in force")

    def remove(self) -> None:
        try:
            self.kube.request("DELETE", f"{self.crds}/zookeeperconfigs.{OLD_GROUP}")
        except ApiException as exc:
            if exc.status != 404:
                raise

    def _serves(self) -> bool:
        self.kube.request("GET", self.objects)
        return True

    def _refused(self, obj: dict[str, Any]) -> bool:
        try:
            self.kube.request("POST", self.objects, query={"dryRun": "All"}, body=obj)
        except ApiException as exc:
            return bool(exc.status == 422)
        return False

    def patch(self, name: str, body: dict[str, Any], subresource: str = "") -> tuple[int, str]:
        """A merge patch; ``(status, message)`` (200 and ``""`` if accepted)."""
        try:
            self.kube.request("PATCH", f"{self.objects}/{name}{'/' + subresource if subresource else ''}",
                              body=body, content_type=MERGE_PATCH)
        except ApiException as exc:
            return int(exc.status), str(json.loads(exc.body or "{}").get("message", ""))
        return 200, ""


def _old_object_story(old: _Old) -> None:
    bad = {"apiVersion": f"{OLD_GROUP}/v1alpha1", "kind": "ZooKeeperConfig", "metadata": {"name": "old"},
           "spec": {"path": "/app/./old", "data": "dHJ1ZQ", "acl": [{"scheme": "world", "id": "everyone",
                                                                     "permissions": ["read"]}]}}
    old.install(rules=False)
    try:
        old.kube.request("POST", old.objects, body=bad)
        old.install(rules=True)
        # zkop's status write for it (a Stalled/InvalidSpec condition) is accepted: its spec is unchanged.
        condition = {"type": "Ready", "status": "False", "reason": "InvalidSpec", "message": "spec.path: …",
                     "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1}
        assert old.patch("old", {"status": {"state": "Error", "conditions": [condition]}}, "status") == (200, "")
        # So are edits that leave the bad values as they were: metadata, and other spec fields.
        assert old.patch("old", {"metadata": {"labels": {"team": "a"}}}) == (200, "")
        assert old.patch("old", {"spec": {"syncPolicy": "createOnly"}}) == (200, "")
        # A new bad value is refused, with the rule's words.
        status, message = old.patch("old", {"spec": {"path": "/app/../new"}})
        assert status == 422 and "path contains a relative segment ('.' or '..')" in message, message
        # And zkop's own check still refuses what is stored.
        stored = old.kube.request("GET", f"{old.objects}/old")
        with pytest.raises(InvalidSpec, match="path contains a relative segment"):
            parse_spec(stored["spec"])
    finally:
        old.remove()


def test_objects_stored_before_the_rules_keep_working(plane_namespace: tuple[ControlPlane, str]) -> None:
    plane, namespace = plane_namespace
    with plane.admin() as kube:
        _old_object_story(_Old(kube, namespace))


def test_the_double_ratchets_old_objects_as_kube_apiserver_does() -> None:
    with ApiServer() as api:
        kube = KubeClient(api.api_client(), default_timeout=30)
        try:
            kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": "old"}})
            _old_object_story(_Old(kube, "old"))
        finally:
            kube.close()
