"""zkop in a real cluster: it never lists the cluster's Secrets and ConfigMaps, reads only those ZooKeeperConfigs
name, and an edit of one still reaches ZooKeeper within seconds.

The real kube-apiserver, zkop as its ServiceAccount in the test's namespace, which holds what a cluster's namespace
holds besides: ``kube-root-ca.crt`` (kube-controller-manager's root CA publisher), the ``default`` ServiceAccount,
Helm release Secrets of Helm's name, type, labels and size (made here), ``managedFields`` on everything. What zkop
asked for is read back from kube-apiserver's audit log (``zkop_testing.audit``).
"""

from __future__ import annotations

import base64
import os

from kazoo.client import KazooClient
from zkop_testing.audit import Request, requests, settled
from zkop_testing.controlplane import ControlPlane
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import OPEN_ACL, ZKC, create, read, synced, zkc
from zkop_testing.waiting import wait_for
from zkop_testing.zkop_install import ZKOP_NAMESPACE, ZKOP_SERVICE_ACCOUNT
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import MERGE_PATCH, KubeClient, resource_path
from zkop.kube.events import EventRecorder
from zkop.runtime.manager import Manager, ManagerOptions
from zkop.zkconfig import controller as zkconfig_controller
from zkop.zkconfig.reconciler import ReconcilerOptions
from zkop.zookeeper.adapter import ZooKeeperAdapter

ZKOP_USER = f"system:serviceaccount:{ZKOP_NAMESPACE}:{ZKOP_SERVICE_ACCOUNT}"



def secret_path(namespace: str, name: str | None = None) -> str:
    return resource_path("", "v1", "secrets", namespace, name)


def _helm_release_secrets(kube: KubeClient, namespace: str, releases: int, revisions: int, kb: int) -> int:
    """Create Helm's release Secrets (``sh.helm.release.v1.<release>.v<revision>``, type ``helm.sh/release.v1``,
    Helm's labels, ``data.release`` of about ``kb`` KB: random bytes behind a gzip header, base64 twice, as Helm
    stores a compressed release); how many."""
    for release in range(releases):
        for revision in range(1, revisions + 1):
            gzipped = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + os.urandom(kb * 1024 * 9 // 16)
            kube.request("POST", secret_path(namespace), body={
                "apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
                "metadata": {"name": f"sh.helm.release.v1.release-{release}.v{revision}", "namespace": namespace,
                             "labels": {"name": f"release-{release}", "owner": "helm", "version": str(revision),
                                        "status": "deployed" if revision == revisions else "superseded"}},
                "data": {"release": base64.b64encode(base64.b64encode(gzipped)).decode()}})
    return releases * revisions


def test_only_referenced_secrets_are_read_and_edits_still_propagate(
        kubeconfig: str, kube: KubeClient, control_plane: ControlPlane, zk_server: ZooKeeperServer, zk_base: str,
        zk: KazooClient, namespace: str) -> None:
    assert _helm_release_secrets(kube, namespace, releases=4, revisions=3, kb=20) == 12
    settled(control_plane, namespace)
    cluster_wide = len(_cluster_wide_reads(control_plane))
    for name in ("db-a", "db-b"):
        kube.request("POST", secret_path(namespace), body={"apiVersion": "v1", "kind": "Secret", "metadata": {
            "name": name, "namespace": namespace},
            "data": {"url": base64.b64encode(f"{name}:1".encode()).decode()}})
    with OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", ["--sync-period", "600", "--namespace", namespace]):
        create(kube, zkc("db", "/app/db", dataFrom={"secretKeyRef": {"name": "db-a", "key": "url"}},
                         acl=OPEN_ACL, namespace=namespace))  # declared open: zkop holds no credential here
        wait_for(lambda: synced(kube, "db", namespace), message="synced from the Secret")
        assert read(zk, zk_base + "/app/db") == b"db-a:1"
        kube.request("PATCH", secret_path(namespace, "db-a"),
                     body={"data": {"url": base64.b64encode(b"db-a:2").decode()}}, content_type=MERGE_PATCH)
        wait_for(lambda: read(zk, zk_base + "/app/db") == b"db-a:2", message="Secret edit propagated")
        # The reference moves to another Secret: that one is read, and its edits propagate.
        kube.request("PATCH", resource_path(*ZKC, namespace, "db"),
                     body={"spec": {"dataFrom": {"secretKeyRef": {"name": "db-b", "key": "url"}}}},
                     content_type=MERGE_PATCH)
        wait_for(lambda: read(zk, zk_base + "/app/db") == b"db-b:1", message="new reference")
        kube.request("PATCH", secret_path(namespace, "db-b"),
                     body={"data": {"url": base64.b64encode(b"db-b:2").decode()}}, content_type=MERGE_PATCH)
        wait_for(lambda: read(zk, zk_base + "/app/db") == b"db-b:2", message="new Secret's edit")
    settled(control_plane, namespace)
    zkop = [r for r in requests(control_plane, namespace=namespace, user=ZKOP_USER)
            if r.resource in ("secrets", "configmaps")]
    assert zkop, "zkop read no Secret"
    assert {r.verb for r in zkop} <= {"get", "watch"}, f"zkop listed Secrets or ConfigMaps: {zkop}"
    assert {(r.resource, r.name) for r in zkop} == {("secrets", "db-a"), ("secrets", "db-b")}
    assert _cluster_wide_reads(control_plane)[cluster_wide:] == [], "zkop read Secrets or ConfigMaps of all namespaces"


def _cluster_wide_reads(plane: ControlPlane) -> list[Request]:
    """zkop's requests for Secrets or ConfigMaps of every namespace at once (none expected)."""
    return [r for r in requests(plane, namespace="", user=ZKOP_USER) if r.resource in ("secrets", "configmaps")]


def test_a_configmap_created_right_before_its_zookeeperconfig_is_found_at_once(
        kubeconfig: str, kube: KubeClient, zk_server: ZooKeeperServer, zk_base: str, zk: KazooClient,
        namespace: str) -> None:
    with OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", ["--sync-period", "600", "--namespace", namespace]):
        for i in range(10):
            kube.request("POST", resource_path("", "v1", "configmaps", namespace), body={
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{i}", "namespace": namespace},
                "data": {"k": f"v{i}"}})
            create(kube, zkc(f"z-{i}", f"/app/z{i}", dataFrom={"configMapKeyRef": {"name": f"cm-{i}", "key": "k"}},
                             namespace=namespace))
        for i in range(10):
            wait_for(lambda i=i: synced(kube, f"z-{i}", namespace), message=f"z-{i}")  # type: ignore[misc]
    reasons = {e["reason"] for e in kube.request("GET", resource_path("", "v1", "events", namespace))["items"]}
    assert "RefNotFound" not in reasons


def test_the_reconciler_reads_a_referenced_object_before_its_cache_has_fetched_it(
        kube: KubeClient, adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str, namespace: str) -> None:
    """The race behind a RefNotFound flicker: a ZooKeeperConfig reconciled before the cache of the
    ConfigMap it names has made its first GET. The reconciler reads through the named cache's
    on-demand GET, not its (still empty) indexer. The caches are never started here, so the
    window stays open."""
    kube.request("POST", resource_path("", "v1", "configmaps", namespace), body={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "early", "namespace": namespace},
        "data": {"k": "from-the-configmap"}})
    obj = create(kube, zkc("early", "/app/early", dataFrom={"configMapKeyRef": {"name": "early", "key": "k"}},
                           namespace=namespace))
    parts = zkconfig_controller.add_to_manager(
        Manager(ManagerOptions(metrics_bind_address="0", health_probe_bind_address="0")), kube, adapter,
        EventRecorder(kube), ReconcilerOptions(), namespaces=[namespace], workers=1, sync_period=600,
        inactivity_timeout=90)
    parts.informer.indexer.upsert(obj)
    assert parts.configmaps.indexer.get(f"{namespace}/early") is None  # nothing fetched by the cache yet
    parts.reconciler.reconcile(f"{namespace}/early")
    parts.reconciler.reconcile(f"{namespace}/early")  # the first pass may only add the finalizer
    assert read(zk, zk_base + "/app/early") == b"from-the-configmap"
