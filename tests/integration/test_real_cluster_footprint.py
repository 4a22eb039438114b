"""zkop in a cluster seeded like a real one: it never lists the cluster's Secrets and ConfigMaps,
reads only those ZooKeeperConfigs name, and an edit of one still reaches ZooKeeper within seconds.

The double holds ``kube-root-ca.crt`` in every namespace, Helm release Secrets and
``managedFields`` everywhere (``zkop_testing.apiserver_realistic``).
"""

from __future__ import annotations

import base64

from kazoo.client import KazooClient
from zkop_testing.apiserver import ApiServer
from zkop_testing.apiserver_realistic import seed
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import ZKC, create, read, synced, zkc
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import MERGE_PATCH, KubeClient, resource_path
from zkop.kube.events import EventRecorder
from zkop.runtime.manager import Manager, ManagerOptions
from zkop.zkconfig import controller as zkconfig_controller
from zkop.zkconfig.reconciler import ReconcilerOptions
from zkop.zookeeper.adapter import ZooKeeperAdapter


def secret_path(name: str | None = None) -> str:
    return resource_path("", "v1", "secrets", "default", name)


def test_only_referenced_secrets_are_read_and_edits_still_propagate(
        kubeconfig: str, kube: KubeClient, apiserver: ApiServer, zk_server: ZooKeeperServer, zk_base: str,
        zk: KazooClient) -> None:
    report = seed(apiserver, namespaces=["team-a", "team-b"], helm_secrets=12, secret_kb=20)
    for name in ("db-a", "db-b"):
        kube.request("POST", secret_path(), body={"apiVersion": "v1", "kind": "Secret", "metadata": {
            "name": name, "namespace": "default"}, "data": {"url": base64.b64encode(f"{name}:1".encode()).decode()}})
    apiserver.clear_request_log()
    with OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", ["--sync-period", "600"]):
        create(kube, zkc("db", "/app/db", dataFrom={"secretKeyRef": {"name": "db-a", "key": "url"}}))
        wait_for(lambda: synced(kube, "db"), message="synced from the Secret")
        assert read(zk, zk_base + "/app/db") == b"db-a:1"
        kube.request("PATCH", secret_path("db-a"), body={"data": {"url": base64.b64encode(b"db-a:2").decode()}},
                     content_type=MERGE_PATCH)
        wait_for(lambda: read(zk, zk_base + "/app/db") == b"db-a:2", message="Secret edit propagated")
        # The reference moves to another Secret: that one is read, and its edits propagate.
        kube.request("PATCH", resource_path(*ZKC, "default", "db"),
                     body={"spec": {"dataFrom": {"secretKeyRef": {"name": "db-b", "key": "url"}}}},
                     content_type=MERGE_PATCH)
        wait_for(lambda: read(zk, zk_base + "/app/db") == b"db-b:1", message="new reference")
        kube.request("PATCH", secret_path("db-b"), body={"data": {"url": base64.b64encode(b"db-b:2").decode()}},
                     content_type=MERGE_PATCH)
        wait_for(lambda: read(zk, zk_base + "/app/db") == b"db-b:2", message="new Secret's edit")
    zkop = [r for r in apiserver.request_log if r.user_agent.startswith("zkop-operator/")
            and r.resource in ("secrets", "configmaps")]
    assert zkop, "zkop read no Secret"
    assert {r.verb for r in zkop} <= {"get", "watch"}, "zkop listed Secrets or ConfigMaps"
    assert {(r.resource, r.namespace, r.name) for r in zkop} == {("secrets", "default", "db-a"),
                                                               ("secrets", "default", "db-b")}
    assert report.secrets == 12


def test_a_configmap_created_right_before_its_zookeeperconfig_is_found_at_once(
        kubeconfig: str, kube: KubeClient, apiserver: ApiServer, zk_server: ZooKeeperServer, zk_base: str,
        zk: KazooClient) -> None:
    with OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", ["--sync-period", "600"]):
        for i in range(10):
            kube.request("POST", resource_path("", "v1", "configmaps", "default"), body={
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{i}", "namespace": "default"},
                "data": {"k": f"v{i}"}})
            create(kube, zkc(f"z-{i}", f"/app/z{i}", dataFrom={"configMapKeyRef": {"name": f"cm-{i}", "key": "k"}}))
        for i in range(10):
            wait_for(lambda i=i: synced(kube, f"z-{i}"), message=f"z-{i}")  # type: ignore[misc]
    reasons = {e["reason"] for e in kube.request("GET", resource_path("", "v1", "events", "default"))["items"]}
    assert "RefNotFound" not in reasons


def test_the_reconciler_reads_a_referenced_object_before_its_cache_has_fetched_it(
        kube: KubeClient, adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    """The race behind a RefNotFound flicker: a ZooKeeperConfig reconciled before the cache of the
    ConfigMap it names has made its first GET. The reconciler reads through the named cache's
    on-demand GET, not its (still empty) indexer. The caches are never started here, so the
    window stays open."""
    kube.request("POST", resource_path("", "v1", "configmaps", "default"), body={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "early", "namespace": "default"},
        "data": {"k": "from-the-configmap"}})
    obj = create(kube, zkc("early", "/app/early", dataFrom={"configMapKeyRef": {"name": "early", "key": "k"}}))
    parts = zkconfig_controller.setup(
        Manager(ManagerOptions(metrics_bind_address="0", health_probe_bind_address="0")), kube, adapter,
        EventRecorder(kube), ReconcilerOptions(), namespaces=None, workers=1, sync_period=600,
        inactivity_timeout=90)
    parts.informer.indexer.upsert(obj)
    assert parts.configmaps.indexer.get("default/early") is None  # nothing fetched by the cache yet
    parts.reconciler.reconcile("default/early")
    parts.reconciler.reconcile("default/early")  # the first pass may only add the finalizer
    assert read(zk, zk_base + "/app/early") == b"from-the-configmap"
