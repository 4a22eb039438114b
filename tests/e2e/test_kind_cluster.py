"""zkop in a real Kubernetes cluster (kind): examples to znodes, drift, deletion, bridge, failover, rollout.

The tests run in file order and build on each other (one cluster per session, see
``conftest.py``): the examples applied first are what later tests edit, delete and fail over.
Timeouts allow for the e2e overlay's ``--sync-period=10`` and the 15 s Lease.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.security import make_digest_acl_credential
from kind_support import REPO, ZKOP_NAMESPACE, Kubectl
from zkop_testing.waiting import wait_for

# pyproject's 300 s pytest-timeout covers a test's fixture set-up too (pytest-timeout's
# timeout_func_only is false), and the first test here pays for the session's: kind create,
# the image build (up to 1200 s), two rollouts (up to 320 s each); later tests wait up to
# 560 s in turn (test_rolling_update). Each wait has its own bound; this is the backstop.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(2400)]

EXAMPLES = REPO / "examples"
NAMESPACE = "default"
LEASE = "zkop-leader"
DEPLOYMENT = "zkop-controller-manager"


def example_documents() -> list[dict[str, Any]]:
    """Every object in ``examples/*.yaml`` (the Flux objects in ``examples/flux`` excluded)."""
    docs: list[dict[str, Any]] = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def expected_bytes(zkc: dict[str, Any], docs: list[dict[str, Any]]) -> bytes:
    """What the znode of ZooKeeperConfig ``zkc`` must hold."""
    spec = zkc["spec"]
    if "data" in spec:
        return base64.b64decode(spec["data"])
    if "stringData" in spec:
        return str(spec["stringData"]).encode()
    ref = spec["dataFrom"]["configMapKeyRef"]
    (config,) = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == ref["name"]]
    return str(config["data"][ref["key"]]).encode()


def znode(zk: KazooClient, path: str) -> bytes | None:
    """The znode's bytes, or ``None`` if it does not exist."""
    try:
        data, _ = zk.get(path)
    except NoNodeError:
        return None
    return bytes(data)


def get_json(kubectl: Kubectl, *args: str) -> dict[str, Any]:
    """``kubectl get ... -o json`` parsed."""
    result: dict[str, Any] = json.loads(kubectl("get", *args, "-o", "json"))
    return result


def leader_pod(kubectl: Kubectl) -> str:
    """The pod that holds the Lease (identity ``<hostname>_<uuid>``, hostname = pod name)."""
    lease = get_json(kubectl, "-n", ZKOP_NAMESPACE, "lease", LEASE)
    holder = str(lease["spec"].get("holderIdentity") or "")
    return holder.split("_", 1)[0]


def zkop_pods(kubectl: Kubectl) -> list[dict[str, Any]]:
    """zkop's pods that are not being deleted."""
    pods = get_json(kubectl, "-n", ZKOP_NAMESPACE, "pods", "-l", "app.kubernetes.io/name=zkop")["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def apply_zkc(kubectl: Kubectl, name: str, path: str, value: str) -> None:
    """Create or update a ZooKeeperConfig with ``stringData``."""
    doc = {"apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperConfig",
           "metadata": {"name": name, "namespace": NAMESPACE}, "spec": {"path": path, "stringData": value}}
    kubectl("apply", "-f", "-", input=json.dumps(doc))


def test_install_is_healthy(kubectl: Kubectl) -> None:
    dep = get_json(kubectl, "-n", ZKOP_NAMESPACE, "deployment", DEPLOYMENT)
    assert dep["status"].get("readyReplicas") == 2
    leader = wait_for(lambda: leader_pod(kubectl), timeout=60, interval=1, message="no leader")
    assert leader in {p["metadata"]["name"] for p in zkop_pods(kubectl)}
    # The disruption controller fills in the PDB's status after it sees the pods Ready: eventually.
    wait_for(lambda: get_json(kubectl, "-n", ZKOP_NAMESPACE, "pdb", DEPLOYMENT).get("status", {})
             .get("disruptionsAllowed") == 1, timeout=60, interval=1, message="PDB disruptionsAllowed 1")


def test_examples_become_znodes(kubectl: Kubectl, zk: KazooClient) -> None:
    docs = example_documents()
    for path in sorted(EXAMPLES.glob("*.yaml")):
        kubectl("apply", "-f", str(path))
    kubectl("-n", NAMESPACE, "wait", "--for=condition=Ready", "zookeeperconfig", "--all", "--timeout=120s",
            timeout=130)
    configs = [d for d in docs if d["kind"] == "ZooKeeperConfig"]
    assert len(configs) >= 5
    for zkc in configs:
        path = zkc["spec"]["path"]
        assert znode(zk, path) == expected_bytes(zkc, docs), path
        status = get_json(kubectl, "-n", NAMESPACE, "zookeeperconfig", zkc["metadata"]["name"])["status"]
        assert status["state"] in ("Synced", "OutOfSync"), status
    (acl_example,) = [d for d in configs if "acl" in d["spec"]]
    acls, _ = zk.get_acls(acl_example["spec"]["path"])
    ids = {(a.id.scheme, a.id.id) for a in acls}
    assert ids == {("digest", make_digest_acl_credential("ops", "ops-password")), ("world", "anyone")}


def test_hand_edit_is_restored(kubectl: Kubectl, zk: KazooClient) -> None:
    docs = example_documents()
    (flag,) = [d for d in docs if d["metadata"]["name"] == "new-recommendation-engine-enabled"]
    path = flag["spec"]["path"]
    zk.set(path, b"false")
    wait_for(lambda: znode(zk, path) == b"true", timeout=90, interval=1, message=f"{path} not restored")
    # zkop's EventRecorder posts from its own writer thread, after the reconcile that restored the znode.
    wait_for(lambda: get_json(kubectl, "-n", NAMESPACE, "events", "--field-selector",
                              f"involvedObject.name={flag['metadata']['name']},reason=DriftCorrected")["items"],
             timeout=30, interval=1, message="no DriftCorrected event")


def test_create_only_znode_is_left_to_humans(kubectl: Kubectl, zk: KazooClient) -> None:
    (switch,) = [d for d in example_documents()
                 if d["kind"] == "ZooKeeperConfig" and d["spec"].get("syncPolicy") == "createOnly"]
    path = switch["spec"]["path"]
    zk.set(path, b"true")
    kubectl("annotate", "--overwrite", "-n", NAMESPACE, "zookeeperconfig", switch["metadata"]["name"],
            "e2e/poke=1")  # an event for the resource: zkop reconciles it now
    with pytest.raises(TimeoutError):
        wait_for(lambda: znode(zk, path) != b"true", timeout=25, interval=1)


def test_data_from_follows_the_configmap(kubectl: Kubectl, zk: KazooClient) -> None:
    (zkc,) = [d for d in example_documents() if d["kind"] == "ZooKeeperConfig" and "dataFrom" in d["spec"]]
    ref = zkc["spec"]["dataFrom"]["configMapKeyRef"]
    patch = json.dumps({"data": {ref["key"]: '{"minScore": 0.5}'}})
    kubectl("-n", NAMESPACE, "patch", "configmap", ref["name"], "--type=merge", "-p", patch)
    wait_for(lambda: znode(zk, zkc["spec"]["path"]) == b'{"minScore": 0.5}', timeout=90, interval=1,
             message="znode did not follow the ConfigMap")


def test_service_is_bridged(kubectl: Kubectl, zk: KazooClient, zk_port: int) -> None:
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "e2e-web", "namespace": NAMESPACE},
               "spec": {"selector": {"app": "e2e-web"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}
    kubectl("apply", "-f", "-", input=json.dumps(service))
    cluster_ip = get_json(kubectl, "-n", NAMESPACE, "service", "e2e-web")["spec"]["clusterIP"]
    path = f"/kubernetes/services/{NAMESPACE}-e2e-web"
    data = wait_for(lambda: znode(zk, path), timeout=90, interval=1, message=f"{path} not published")
    assert data is not None
    record = json.loads(data)
    assert record["clusterIP"] == cluster_ip
    assert [(p["name"], p["port"]) for p in record["ports"]] == [("http", 80)]
    client = subprocess.run([sys.executable, str(EXAMPLES / "external-client.py"), "--zk-hosts",
                             f"127.0.0.1:{zk_port}", NAMESPACE, "e2e-web"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert client.returncode == 0, client.stderr
    assert client.stdout.split() == ["http", f"{cluster_ip}:80/TCP"]
    kubectl("-n", NAMESPACE, "delete", "service", "e2e-web")
    wait_for(lambda: znode(zk, path) is None, timeout=90, interval=1, message=f"{path} not deleted")


def test_deleting_resources(kubectl: Kubectl, zk: KazooClient) -> None:
    configs = [d for d in example_documents() if d["kind"] == "ZooKeeperConfig"]
    (flag,) = [d for d in configs if d["metadata"]["name"] == "new-recommendation-engine-enabled"]
    (orphan,) = [d for d in configs if d["spec"].get("deletionPolicy") == "Orphan"]
    for zkc in (flag, orphan):
        kubectl("-n", NAMESPACE, "delete", "zookeeperconfig", zkc["metadata"]["name"], "--timeout=90s", timeout=100)
    assert znode(zk, flag["spec"]["path"]) is None
    assert znode(zk, orphan["spec"]["path"]) is not None, "deletionPolicy: Orphan must keep the znode"


def test_leader_failover(kubectl: Kubectl, zk: KazooClient) -> None:
    old = leader_pod(kubectl)
    assert old
    # No graceful shutdown: the Lease is not released and must expire (15 s) first.
    kubectl("-n", ZKOP_NAMESPACE, "delete", "pod", old, "--grace-period=0", "--force", "--wait=false")
    new = wait_for(lambda: (pod := leader_pod(kubectl)) != old and pod, timeout=90, interval=1,
                   message="no new leader")
    assert new != old
    apply_zkc(kubectl, "e2e-failover", "/e2e/failover", "after-failover")
    wait_for(lambda: znode(zk, "/e2e/failover") == b"after-failover", timeout=90, interval=1,
             message="the new leader does not reconcile")
    kubectl("-n", ZKOP_NAMESPACE, "rollout", "status", f"deployment/{DEPLOYMENT}", "--timeout=180s", timeout=190)


def test_rolling_update(kubectl: Kubectl, zk: KazooClient) -> None:
    kubectl("-n", ZKOP_NAMESPACE, "rollout", "restart", f"deployment/{DEPLOYMENT}")
    kubectl("-n", ZKOP_NAMESPACE, "rollout", "status", f"deployment/{DEPLOYMENT}", "--timeout=300s", timeout=310)
    apply_zkc(kubectl, "e2e-failover", "/e2e/failover", "after-rollout")
    wait_for(lambda: znode(zk, "/e2e/failover") == b"after-rollout", timeout=90, interval=1,
             message="no reconcile after the rollout")
    pods = zkop_pods(kubectl)
    assert wait_for(lambda: leader_pod(kubectl) in {p["metadata"]["name"] for p in pods}, timeout=60, interval=1)
    for pod in pods:
        # A clean SIGTERM hand-over: no container of the new ReplicaSet restarted.
        assert all(c["restartCount"] == 0 for c in pod["status"]["containerStatuses"]), pod["metadata"]["name"]
    kubectl("-n", NAMESPACE, "delete", "zookeeperconfig", "e2e-failover", "--timeout=90s", timeout=100)
    assert znode(zk, "/e2e/failover") is None


def test_examples_dir_is_what_the_suite_applies() -> None:
    """Guard: the suite applies top-level examples only; Flux objects live in examples/flux."""
    assert all(d["kind"] in ("ZooKeeperConfig", "ConfigMap") for d in example_documents())
    assert Path(EXAMPLES / "flux").is_dir()
