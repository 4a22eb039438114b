"""The walking skeleton end to end: CRs in the real kube-apiserver, ``zkop run`` as a process (as its ServiceAccount,
watching the test's namespace), real ZooKeeper."""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient
from zkop_testing.audit import WRITES, requests, settled
from zkop_testing.controlplane import ControlPlane
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import ZKC, create, get, read, zkc
from zkop_testing.resources import synced as synced_at_generation
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import MERGE_PATCH, ApiException, KubeClient, resource_path

FLAG = "/app/features/new-recommendation-engine/enabled"


@pytest.fixture
def operator(kubeconfig: str, kube: KubeClient, zk_server: ZooKeeperServer, zk_base: str,
             namespace: str) -> Iterator[OperatorProcess]:
    """``zkop run`` chrooted at this test's base path, so paths in CRs are the real ones."""
    args = ["--workers", "2", "--namespace", namespace]
    with OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", args) as proc:
        yield proc
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()


def test_feature_flag_lifecycle(operator: OperatorProcess, kube: KubeClient, zk: KazooClient, zk_base: str,
                                namespace: str) -> None:
    kube.request("POST", resource_path(*ZKC, namespace), body=zkc("new-reco", FLAG, b"true", namespace=namespace))
    assert wait_for(lambda: read(zk, zk_base + FLAG) == b"true", message="znode created")

    def synced() -> dict[str, Any] | None:
        return synced_at_generation(kube, "new-reco", namespace)

    obj = wait_for(synced, message="status Synced")
    assert "zookeeperconfigs.platform.example.com/finalizer" in obj["metadata"]["finalizers"]
    ready = {c["type"]: c for c in obj["status"]["conditions"]}["Ready"]
    assert ready["status"] == "True"

    # Changing spec.data updates the znode and observedGeneration follows the new generation.
    kube.request("PATCH", resource_path(*ZKC, namespace, "new-reco"),
                 body={"spec": {"data": base64.b64encode(b"false").decode()}}, content_type=MERGE_PATCH)
    assert wait_for(lambda: read(zk, zk_base + FLAG) == b"false", message="znode updated")
    obj = wait_for(synced, message="status follows generation 2")
    assert obj["metadata"]["generation"] == 2

    # Deleting the CR removes the znode and releases the finalizer.
    kube.request("DELETE", resource_path(*ZKC, namespace, "new-reco"))
    wait_for(lambda: read(zk, zk_base + FLAG) is None, message="znode deleted")
    wait_for(lambda: get(kube, "new-reco", namespace) is None, message="CR gone")
    # Parents zkop created are left in place.
    assert zk.exists(zk_base + "/app/features") is not None


def test_create_only_leaves_existing_znode_untouched(operator: OperatorProcess, kube: KubeClient,
                                                     zk: KazooClient, zk_base: str, namespace: str) -> None:
    zk.create(zk_base + "/legacy/switch", b"hand-made", makepath=True)
    before = zk.get(zk_base + "/legacy/switch")[1]
    kube.request("POST", resource_path(*ZKC, namespace),
                 body=zkc("legacy", "/legacy/switch", b"declared", syncPolicy="createOnly", namespace=namespace))

    def state() -> str | None:
        return str(((get(kube, "legacy", namespace) or {}).get("status") or {}).get("state"))

    wait_for(lambda: state() == "OutOfSync", message="createOnly reports OutOfSync")
    data, stat = zk.get(zk_base + "/legacy/switch")
    assert data == b"hand-made"
    assert stat.mzxid == before.mzxid and stat.version == before.version

    # createOnly still creates an absent znode.
    kube.request("POST", resource_path(*ZKC, namespace),
                 body=zkc("fresh", "/legacy/fresh", b"declared", syncPolicy="createOnly", namespace=namespace))
    assert wait_for(lambda: read(zk, zk_base + "/legacy/fresh") == b"declared")


def test_invalid_spec_is_reported_and_writes_nothing(operator: OperatorProcess, kube: KubeClient,
                                                     zk: KazooClient, zk_base: str, namespace: str) -> None:
    # Passes the CRD (schema and CEL rules) but not zkop: the bytes are not UTF-8 (encoding: utf-8).
    bad = zkc("bad", "/app/bad", b"\xff", namespace=namespace)
    kube.request("POST", resource_path(*ZKC, namespace), body=bad)
    good = zkc("good", "/app/good", b"x", namespace=namespace)
    kube.request("POST", resource_path(*ZKC, namespace), body=good)

    def stalled() -> dict[str, Any] | None:
        found = (get(kube, "bad", namespace) or {}).get("status") or {}
        conditions = {c["type"]: c for c in found.get("conditions") or []}
        return conditions if conditions.get("Stalled", {}).get("status") == "True" else None

    conditions = wait_for(stalled, message="bad CR stalled")
    assert conditions["Ready"]["reason"] == "InvalidSpec"
    assert "is not valid UTF-8" in conditions["Ready"]["message"]
    assert wait_for(lambda: read(zk, zk_base + "/app/good") == b"x")
    assert zk.get_children(zk_base + "/app") == ["good"]

    # Deleting an invalid CR just releases its finalizer.
    kube.request("DELETE", resource_path(*ZKC, namespace, "bad"))
    wait_for(lambda: get(kube, "bad", namespace) is None, message="invalid CR deleted")


def test_schema_rejects_bad_manifests(kube: KubeClient, namespace: str) -> None:
    for spec in ({"path": "relative", "data": "eA=="}, {"path": "/a", "data": "eA==", "syncPolicy": "sometimes"},
                 {"path": "/a/", "data": "eA=="}, {"path": "/a"}, {"path": "/app/bad\u0001name", "data": "eA=="}):
        body = copy.deepcopy(zkc("bad", "/a", b"", namespace=namespace))
        body["spec"] = spec
        with pytest.raises(ApiException) as info:
            kube.request("POST", resource_path(*ZKC, namespace), body=body)
        assert info.value.status == 422, spec


def test_a_converged_object_costs_two_api_writes(operator: OperatorProcess, kube: KubeClient,
                                                 control_plane: ControlPlane, zk: KazooClient, zk_base: str,
                                                 namespace: str) -> None:
    success = 'controller_runtime_reconcile_total{controller="zookeeperconfig",result="success"}'
    echoes = 'zkop_own_write_echoes_dropped_total{controller="zookeeperconfig"}'
    create(kube, zkc("cheap", "/app/cheap", b"1", namespace=namespace))
    wait_for(lambda: synced_at_generation(kube, "cheap", namespace))
    # The watch events of zkop's own finalizer and status writes arrive and are recognised as echoes.
    wait_for(lambda: _sample(operator.metrics(), echoes) >= 2, message="both echoes dropped")
    assert _sample(operator.metrics(), success) == 1  # so one reconcile did it all

    settled(control_plane, namespace)  # kube-apiserver's audit log: every request, at Metadata level
    writes = sorted((r.verb, r.subresource)
                    for r in requests(control_plane, namespace=namespace, resource="zookeeperconfigs", verbs=WRITES))
    # The test's own create, then zkop: one finalizer patch, one status patch, nothing more.
    assert writes == [("create", ""), ("patch", ""), ("patch", "status")]
    # Someone else's status write is not an echo: it is reconciled and zkop's status comes back.
    kube.request("PATCH", resource_path(*ZKC, namespace, "cheap", "status"),
                 body={"status": {"state": "Error", "message": "hand edit"}}, content_type=MERGE_PATCH)
    wait_for(lambda: _sample(operator.metrics(), success) >= 2, message="foreign status reconciled")
    restored = wait_for(lambda: synced_at_generation(kube, "cheap", namespace), message="status restored")
    assert restored["status"]["message"] != "hand edit"


def _sample(text: str, series: str) -> float:
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return 0.0
