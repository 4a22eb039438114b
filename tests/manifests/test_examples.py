"""The examples: ZooKeeperConfigs valid for the CRD, the Flux objects, the ZooKeeper StatefulSet, the client script.

An example ZooKeeperConfig that uses a ``spec`` field the CRD does not declare yet is skipped,
with the field named (decided from the schema, never by file name).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonpatch
import jsonschema
import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml
from kazoo.client import KazooClient
from kazoo.security import make_digest_acl_credential
from zkop_testing.apiserver_cel import CelRules
from zkop_testing.kustomize import REPO, Obj, containers, find, load_documents, render
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.schema import crd_version_schema, declares, to_json_schema

EXAMPLES = REPO / "examples"
FLUX = EXAMPLES / "flux"
CRD_FILE = REPO / "manifests" / "crd" / "zookeeperconfigs.yaml"
KIND = "ZooKeeperConfig"


def _example_documents() -> list[tuple[Path, Obj]]:
    docs = []
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        docs += [(path, doc) for doc in load_documents(path)]
    return docs


def _zookeeperconfigs() -> list[tuple[Path, Obj]]:
    return [(p, d) for p, d in _example_documents() if d["kind"] == KIND]


@pytest.fixture(scope="module")
def schema() -> Obj:
    """The CRD's v1alpha1 openAPIV3Schema as plain JSON Schema."""
    (crd,) = load_documents(CRD_FILE)
    result: Obj = to_json_schema(crd_version_schema(crd, "v1alpha1"))
    return result


def test_examples_exist() -> None:
    names = {p.name for p, _ in _zookeeperconfigs()}
    assert {"feature-flag.yaml", "create-only.yaml", "string-data.yaml", "acl.yaml", "data-from.yaml"} <= names


@pytest.mark.parametrize(("path", "doc"), _zookeeperconfigs(),
                         ids=[f"{p.name}:{d['metadata']['name']}" for p, d in _zookeeperconfigs()])
def test_example_matches_crd_schema(path: Path, doc: Obj, schema: Obj) -> None:
    assert doc["apiVersion"] == "platform.example.com/v1alpha1"
    undeclared = sorted(k for k in doc["spec"] if not declares(schema, ("spec", k)))
    if undeclared:
        pytest.skip(f"the CRD does not declare spec.{', spec.'.join(undeclared)} yet")
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(doc), key=str)
    assert not errors, [f"{'.'.join(map(str, e.path))}: {e.message}" for e in errors]


def test_schema_check_catches_bad_examples(schema: Obj) -> None:
    bad = {"apiVersion": "platform.example.com/v1alpha1", "kind": KIND, "metadata": {"name": "x"},
           "spec": {"path": "relative/path", "data": "dHJ1ZQ=!", "stringData": "true"}}
    messages = [e.message for e in jsonschema.Draft7Validator(schema).iter_errors(bad)]
    assert any("does not match" in m for m in messages)
    # The path and exactly-one rules are the CRD's CEL rules (tests/validation runs them on kube-apiserver).
    (crd,) = load_documents(CRD_FILE)
    rules = [str(e) for e in CelRules(crd_version_schema(crd, "v1alpha1")).validate(bad)]
    assert any("path must be absolute" in r for r in rules), rules
    assert any("exactly one of spec.data, spec.stringData and spec.dataFrom must be set" in r for r in rules), rules


def test_examples_built_in_objects_are_valid_kubernetes() -> None:
    built_in = [(p, d) for p, d in _example_documents() if p.parent == EXAMPLES and d["kind"] != KIND]
    assert [d["kind"] for _, d in built_in] == ["ConfigMap"]
    for _, doc in built_in:
        kubernetes_validate.validate(doc, "1.29", strict=True)


def test_acl_example_digest_is_ops_password() -> None:
    (doc,) = [d for p, d in _zookeeperconfigs() if p.name == "acl.yaml"]
    acl = doc["spec"]["acl"]
    assert acl[0] == {"scheme": "digest", "id": make_digest_acl_credential("ops", "ops-password"),
                      "permissions": ["read", "write", "create", "delete", "admin"]}
    assert acl[1] == {"scheme": "world", "id": "anyone", "permissions": ["read"]}


def test_data_from_example_refers_to_its_configmap() -> None:
    docs = load_documents(EXAMPLES / "data-from.yaml")
    (config,) = [d for d in docs if d["kind"] == "ConfigMap"]
    (zkc,) = [d for d in docs if d["kind"] == KIND]
    ref = zkc["spec"]["dataFrom"]["configMapKeyRef"]
    assert ref["name"] == config["metadata"]["name"]
    assert ref["key"] in config["data"]
    assert zkc["metadata"]["namespace"] == config["metadata"]["namespace"]
    assert not {"data", "stringData"} & set(zkc["spec"])


# --------------------------------------------------------------------------------------------
# Flux
# --------------------------------------------------------------------------------------------


def _flux_objects() -> dict[tuple[str, str], Obj]:
    return {(d["kind"], d["metadata"]["name"]): d for d in render(FLUX)}


def test_flux_objects() -> None:
    objs = _flux_objects()
    assert set(objs) == {("GitRepository", "zkop"), ("Kustomization", "zkop"), ("Kustomization", "zkop-configs")}
    repo = objs["GitRepository", "zkop"]
    assert repo["apiVersion"] == "source.toolkit.fluxcd.io/v1"
    install, configs = objs["Kustomization", "zkop"], objs["Kustomization", "zkop-configs"]
    for k in (install, configs):
        assert k["apiVersion"] == "kustomize.toolkit.fluxcd.io/v1"
        assert k["metadata"]["namespace"] == repo["metadata"]["namespace"] == "flux-system"
        assert k["spec"]["sourceRef"] == {"kind": "GitRepository", "name": "zkop"}
        assert k["spec"]["prune"] is True and k["spec"]["wait"] is True
        assert (REPO / k["spec"]["path"]).is_dir()
    assert install["spec"]["path"] == "./manifests/default"
    assert configs["spec"]["dependsOn"] == [{"name": "zkop"}]


def test_flux_install_components_and_patches_apply() -> None:
    install = _flux_objects()["Kustomization", "zkop"]
    base = REPO / install["spec"]["path"]
    for component in install["spec"]["components"]:
        assert (base / component / "kustomization.yaml").is_file(), component
    rendered = render(base)
    for patch in install["spec"]["patches"]:
        (target,) = find(rendered, patch["target"]["kind"], patch["target"]["name"])
        patched = jsonpatch.apply_patch(target, yaml.safe_load(patch["patch"]))
        assert patched["data"]["ZOOKEEPER_HOSTS"].count(":2181") == 3


def _ignored(path: str, patterns: list[str]) -> bool:
    """gitignore semantics for the anchored directory patterns the GitRepository uses."""
    ignored = False
    for raw in patterns:
        negate = raw.startswith("!")
        pattern = raw[1:] if negate else raw
        hit = pattern == "/*" or ("/" + path + "/").startswith(pattern.rstrip("/") + "/")
        if hit:
            ignored = not negate
    return ignored


def test_flux_configs_path_holds_only_configs() -> None:
    """What Flux would apply from ./examples: every YAML not ignored by the GitRepository."""
    repo = _flux_objects()["GitRepository", "zkop"]
    patterns = [ln.strip() for ln in repo["spec"]["ignore"].splitlines() if ln.strip() and not ln.startswith("#")]
    assert _ignored("examples/flux/zkop.yaml", patterns)
    assert not _ignored("manifests/default/kustomization.yaml", patterns)
    assert _ignored("tests/e2e/overlay/kustomization.yaml", patterns)
    applied = [d for p, d in _example_documents() if not _ignored(str(p.relative_to(REPO)), patterns)]
    assert {d["kind"] for d in applied} == {KIND, "ConfigMap", "ZooKeeperConfigTree"}
    assert not (EXAMPLES / "kustomization.yaml").exists()  # Flux generates one from the files


# --------------------------------------------------------------------------------------------
# hack/zookeeper-statefulset.yaml
# --------------------------------------------------------------------------------------------


def test_zookeeper_statefulset() -> None:
    docs = load_documents(REPO / "hack" / "zookeeper-statefulset.yaml")
    for doc in docs:
        kubernetes_validate.validate(doc, "1.29", strict=True)
    (sts,) = find(docs, "StatefulSet")
    images = [c["image"] for c in containers(sts)]
    assert images == ["zookeeper:3.8"]
    (headless,) = [d for d in find(docs, "Service") if d["spec"].get("clusterIP") == "None"]
    assert sts["spec"]["serviceName"] == headless["metadata"]["name"]
    assert 1 <= sts["spec"]["replicas"] <= 3
    env = {e["name"]: e.get("value") for e in sts["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["ZK_REPLICAS"] == str(sts["spec"]["replicas"])
    # zkop's default connect string points at this Service.
    (client,) = find(docs, "Service", "zookeeper")
    (config,) = find(render(REPO / "manifests" / "manager"), "ConfigMap", "zkop-config")
    host = f"{client['metadata']['name']}.{client['metadata']['namespace']}.svc.cluster.local:2181"
    assert config["data"]["ZOOKEEPER_HOSTS"] == host


# --------------------------------------------------------------------------------------------
# examples/external-client.py against a real ZooKeeper
# --------------------------------------------------------------------------------------------


def _client(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(EXAMPLES / "external-client.py"), *args],
                          capture_output=True, text=True, timeout=60, check=False)


def test_external_client_reads_a_bridged_service(zk_server: ZooKeeperServer, zk: KazooClient, zk_base: str) -> None:
    record = {"namespace": "default", "name": "web", "clusterIP": "10.96.12.7",
              "ports": [{"name": "http", "port": 80, "protocol": "TCP"}, {"name": "grpc", "port": 9090}]}
    zk.create(f"{zk_base}/kubernetes/services/default-web", json.dumps(record).encode(), makepath=True)
    hosts = f"{zk_server.hosts}{zk_base}"
    done = _client("--zk-hosts", hosts, "default", "web")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["http 10.96.12.7:80/TCP", "grpc 10.96.12.7:9090/TCP"]
    missing = _client("--zk-hosts", hosts, "default", "nope")
    assert missing.returncode == 1
    assert "/kubernetes/services/default-nope: not published" in missing.stderr
