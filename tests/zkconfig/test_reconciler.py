"""The ZooKeeperConfig reconciler against a real ZooKeeper and a real API server, with a hand-filled cache.

Modelled on ``tests/services/bridge/test_bridge_reconciler.py``: the test puts the objects into the
informer's :class:`~zkop.runtime.cache.Indexer` itself and calls ``reconcile(key)``, so the passes
that end-to-end tests only reach by chance (an ephemeral znode, a replan after a concurrent change,
the finalizer written while the reads are in flight, a dry run) are pinned one by one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient
from zkop_testing.controlplane import ControlPlane
from zkop_testing.waiting import wait_for

from zkop.kube.client import JSON, KubeClient, resource_path
from zkop.kube.events import EventRecorder
from zkop.runtime.cache import Indexer
from zkop.zkconfig.reconciler import (
    PATH_INDEX,
    REF_INDEX,
    ReconcilerOptions,
    ZooKeeperConfigReconciler,
    index_by_path,
    index_by_ref,
)
from zkop.zkconfig.spec import FINALIZER, GROUP, KIND, PLURAL, VERSION
from zkop.zookeeper.adapter import ZooKeeperAdapter

REGISTRY = "/zkop/owners"


class Reconciler:
    """A ZooKeeperConfig reconciler over an Indexer the test fills from the API server's answers."""

    def __init__(self, kube: KubeClient, zookeeper: ZooKeeperAdapter, namespace: str, **options: Any) -> None:
        self.kube, self.namespace = kube, namespace
        self.cache = Indexer({PATH_INDEX: index_by_path, REF_INDEX: index_by_ref})
        self.recorder = EventRecorder(None)
        self.options = ReconcilerOptions(cluster_id="test", registry_root=REGISTRY, **options)
        self.reconciler = ZooKeeperConfigReconciler(self.cache, kube, zookeeper, self.recorder, self.options)

    def create(self, name: str, spec: dict[str, Any]) -> str:
        """Create the object in the API server and put it into the cache; its key."""
        obj = self.kube.request("POST", resource_path(GROUP, VERSION, PLURAL, self.namespace), body={
            "apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "metadata": {"name": name}, "spec": spec})
        self.cache.upsert(obj)
        return f"{self.namespace}/{name}"

    def get(self, key: str) -> JSON:
        """The object as the API server has it now."""
        namespace, name = key.split("/")
        return self.kube.request("GET", resource_path(GROUP, VERSION, PLURAL, namespace, name))

    def refresh(self, key: str) -> JSON:
        """Put the API server's current object into the cache (what the informer would do); return it."""
        obj = self.get(key)
        self.cache.upsert(obj)
        return obj

    def reconcile(self, key: str) -> None:
        self.reconciler.reconcile(key)

    def events(self, key: str) -> list[tuple[str, str]]:
        """``(type, reason)`` of every Event recorded about ``key``."""
        return [(type_, reason) for k, type_, reason, _ in self.recorder.recorded if k == key]


@pytest.fixture
def kube(control_plane: ControlPlane) -> Iterator[KubeClient]:
    with control_plane.admin() as client:
        yield client


def record_of(zk: KazooClient, base: str, path: str) -> bytes | None:
    with contextlib.suppress(Exception):
        return bytes(zk.get(f"{base}{REGISTRY}{path}")[0])
    return None


def test_an_ephemeral_znode_is_neither_claimed_nor_adopted_and_a_warning_says_why(
        kube: KubeClient, namespace: str, adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    """docs/operations.md, ``EphemeralNode``: Stalled, a Warning Event; zkop claims nothing it does not manage."""
    zk.create(f"{zk_base}/app/session-lock", b"held", ephemeral=True, makepath=True)
    r = Reconciler(kube, adapter, namespace)
    key = r.create("lock", {"path": "/app/session-lock", "stringData": "mine"})
    r.reconcile(key)
    status = r.get(key)["status"]
    ready = {c["type"]: c for c in status["conditions"]}
    assert status["state"] == "Error"
    assert (ready["Ready"]["status"], ready["Ready"]["reason"]) == ("False", "EphemeralNode")
    assert ready["Stalled"]["status"] == "True"
    assert r.events(key) == [("Warning", "EphemeralNode")]
    assert zk.exists(f"{zk_base}{REGISTRY}/app/session-lock") is None
    assert zk.get(f"{zk_base}/app/session-lock")[0] == b"held"
    # Once the session that held it is gone, the path is zkop's like any other.
    zk.delete(f"{zk_base}/app/session-lock")
    wait_for(lambda: "/app/session-lock" not in adapter.cache, timeout=30, message="the data watch fires")
    r.refresh(key)
    r.reconcile(key)
    assert zk.get(f"{zk_base}/app/session-lock")[0] == b"mine"
    assert record_of(zk, zk_base, "/app/session-lock") is not None
    assert r.events(key)[1:] == [("Normal", "Created")]
    assert FINALIZER in r.get(key)["metadata"]["finalizers"]
