"""The ZooKeeperConfig reconciler against a real ZooKeeper and a real API server, with a hand-filled cache.

Modelled on ``tests/services/bridge/test_bridge_reconciler.py``: the test puts the objects into the
informer's :class:`~zkop.runtime.cache.Indexer` itself and calls ``reconcile(key)``, so the passes
that end-to-end tests only reach by chance (an ephemeral znode, a replan after a concurrent change,
the finalizer written while the reads are in flight, a dry run) are pinned one by one.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError, NoNodeError
from kazoo.security import make_acl, make_digest_acl
from zkop_testing.controlplane import ControlPlane
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer, connected_client

from zkop.feature.tenancy import TenancyPolicy
from zkop.kube.client import JSON, ApiException, KubeClient, resource_path
from zkop.kube.events import EventRecorder
from zkop.runtime.cache import Indexer
from zkop.runtime.controller import RetryableError
from zkop.zkconfig import reconciler as zkc
from zkop.zkconfig import spec as zkc_spec
from zkop.zkconfig.aclcheck import AclCheck
from zkop.zkconfig.spec import FINALIZER, GROUP, KIND, PLURAL, VERSION
from zkop.zookeeper.actions import OPEN_ACL
from zkop.zookeeper.adapter import ConnectionOptions, ZooKeeperAdapter

REGISTRY = "/zkop/owners"


class Reconciler:
    """A ZooKeeperConfig reconciler over an Indexer the test fills from the API server's answers."""

    def __init__(self, kube: KubeClient, zookeeper: ZooKeeperAdapter, namespace: str, **options: Any) -> None:
        self.kube, self.namespace = kube, namespace
        self.cache = Indexer({zkc.PATH_INDEX: zkc.index_by_path, zkc.REF_INDEX: zkc.index_by_ref})
        self.recorder = EventRecorder(None)
        policy = TenancyPolicy.from_spec(options.pop("policy")) if "policy" in options else None
        labels = options.pop("namespace_labels", None)
        secrets: dict[str, dict[str, bytes]] = options.pop("secrets", {})
        self.options = zkc.ReconcilerOptions(cluster_id="test", registry_root=REGISTRY, **options)
        self.secrets = Indexer()
        self.reconciler = zkc.ZooKeeperConfigReconciler(
            self.cache, kube, zookeeper, self.recorder, self.options, secrets=self.secrets,
            policy_for=(lambda obj: policy) if policy is not None else None, namespace_labels=labels)
        for name, data in secrets.items():
            self.secret(name, data)

    def secret(self, name: str, data: dict[str, bytes]) -> None:
        """Create a Secret in the API server and put it into the Secret cache (what the informer would do)."""
        obj = self.kube.request("POST", resource_path("", "v1", "secrets", self.namespace), body={
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
            "data": {key: base64.b64encode(value).decode() for key, value in data.items()}})
        self.secrets.upsert(obj)

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


def conditions(obj: JSON) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in (obj.get("status") or {}).get("conditions", [])}


def test_the_first_pass_adds_the_finalizer_and_writes_the_claim_and_the_znode(
        kube: KubeClient, namespace: str, adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    r = Reconciler(kube, adapter, namespace)
    key = r.create("flag", {"path": "/app/flag", "stringData": "on"})
    r.reconcile(key)
    obj = r.get(key)
    assert obj["metadata"]["finalizers"] == [FINALIZER]
    assert obj["status"]["state"] == "Synced" and obj["status"]["znodeVersion"] == 0
    assert zk.get(f"{zk_base}/app/flag")[0] == b"on"
    assert record_of(zk, zk_base, "/app/flag") is not None
    assert r.events(key) == [("Normal", "Created")]
    reads = adapter.reads
    r.refresh(key)
    r.reconcile(key)  # a resync: answered from the watch-validated cache, nothing written
    assert adapter.reads == reads and r.get(key)["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]


def test_a_path_owned_by_an_older_object_is_decided_before_any_read(
        kube: KubeClient, namespace: str, adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    r = Reconciler(kube, adapter, namespace)
    first = r.create("a", {"path": "/app/shared", "stringData": "a"})
    second = r.create("b", {"path": "/app/shared", "stringData": "b"})  # same second: namespace/name decides
    reads = adapter.reads
    r.reconcile(second)
    assert adapter.reads == reads
    assert conditions(r.get(second))["Stalled"] == ("True", "PathConflict")
    assert r.events(second) == [("Warning", "PathConflict")]
    r.reconcile(first)
    assert zk.get(f"{zk_base}/app/shared")[0] == b"a"


def test_a_znode_created_behind_a_learned_absence_is_replanned_and_adopted(
        kube: KubeClient, namespace: str, adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str,
        caplog: pytest.LogCaptureFixture) -> None:
    """The create planned from the absence fails as a whole (NodeExists); the pass reads again and adopts."""
    r = Reconciler(kube, adapter, namespace)
    key = r.create("a", {"path": "/app/a", "stringData": "mine"})
    r.create("b", {"path": "/app/b", "stringData": "b"})
    zk.ensure_path(f"{zk_base}/app")
    zk.ensure_path(f"{zk_base}{REGISTRY}/app")
    assert r.reconciler.learn_absent() == 4
    zk.create(f"{zk_base}/app/a", b"by hand")
    with caplog.at_level("INFO", logger="zkop.zkconfig.reconciler"):
        r.reconcile(key)
    assert any("changed during reconcile (attempt 1)" in m for m in caplog.messages)
    assert zk.get(f"{zk_base}/app/a")[0] == b"mine"
    assert record_of(zk, zk_base, "/app/a") is not None
    assert r.events(key) == [("Normal", "Adopted"), ("Normal", "Updated")]
    assert r.get(key)["status"]["state"] == "Synced"


def test_a_deletion_waits_for_the_children_and_a_children_watch_wakes_it(
        kube: KubeClient, namespace: str, adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    r = Reconciler(kube, adapter, namespace)
    key = r.create("tree", {"path": "/app/tree", "stringData": "t"})
    r.reconcile(key)
    zk.create(f"{zk_base}/app/tree/leaf", b"")
    fired: list[str] = []
    adapter.add_watch_listener(fired.append)
    kube.request("DELETE", resource_path(GROUP, VERSION, PLURAL, namespace, "tree"))
    r.refresh(key)
    with pytest.raises(RetryableError, match="never deletes recursively"):
        r.reconcile(key)
    assert conditions(r.get(key))["Ready"] == ("False", "HasChildren")
    zk.delete(f"{zk_base}/app/tree/leaf")
    wait_for(lambda: "/app/tree" in fired, timeout=30, message="the children watch fires")
    r.refresh(key)
    r.reconcile(key)
    assert zk.exists(f"{zk_base}/app/tree") is None
    assert zk.exists(f"{zk_base}{REGISTRY}/app/tree") is None or record_of(zk, zk_base, "/app/tree") == b""
    assert ("Normal", "Deleted") in r.events(key)
    with pytest.raises(ApiException) as gone:
        r.get(key)
    assert gone.value.status == 404


def test_a_dry_run_plans_reads_and_writes_nothing_but_its_status(
        kube: KubeClient, namespace: str, adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    adapter.refuse_writes = "dry run"  # the safety net: a write that got through would raise
    r = Reconciler(kube, adapter, namespace, dry_run=True)
    key = r.create("flag", {"path": "/app/flag", "stringData": "on"})
    r.reconcile(key)
    obj = r.get(key)
    assert "finalizers" not in obj["metadata"]
    assert obj["status"]["state"] == "Pending" and conditions(obj)["Ready"] == ("False", "DryRun")
    assert "would create /app/flag" in obj["status"]["message"]
    assert zk.exists(f"{zk_base}/app/flag") is None and zk.exists(f"{zk_base}{REGISTRY}/app/flag") is None
    assert r.events(key) == []


def test_a_refused_object_reads_nothing_and_an_unseen_namespace_is_no_refusal_yet(
        kube: KubeClient, namespace: str, adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    """A namespace the Namespace cache has not seen yet (created with its objects) is waited for, not refused."""
    seen: dict[str, dict[str, str]] = {}
    policy = {"tenancy": {"rules": [{"namespaceSelector": {"matchLabels": {"team": "a"}}, "pathPrefixes": ["/app"]}]}}
    r = Reconciler(kube, adapter, namespace, policy=policy, namespace_labels=seen.get)
    key = r.create("flag", {"path": "/app/flag", "stringData": "on"})
    reads = adapter.reads
    r.reconcile(key)
    assert not (r.get(key).get("status") or {}).get("conditions") and r.events(key) == [] and adapter.reads == reads
    seen[namespace] = {"team": "b"}  # seen, and not selected: refused without a read, no finalizer
    r.reconcile(key)
    obj = r.get(key)
    assert conditions(obj)["Stalled"] == ("True", "NamespaceNotAllowed") and "finalizers" not in obj["metadata"]
    assert r.events(key) == [("Warning", "NamespaceNotAllowed")] and adapter.reads == reads
    seen[namespace] = {"team": "a"}
    r.refresh(key)
    r.reconcile(key)
    assert r.get(key)["status"]["state"] == "Synced" and zk.get(f"{zk_base}/app/flag")[0] == b"on"


def test_a_refused_object_makes_zkop_watch_and_read_nothing_of_its_path(
        kube: KubeClient, namespace: str, adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    """A tenant cannot make zkop watch or read outside what it may manage: the watched roots, the ACL check and
    ``learn_absent`` leave a refused object's path out, until a namespace label change admits it."""
    from zkop.zkconfig.aclcheck import AclCheck
    from zkop.zkconfig.watchroots import WatchRoots
    from zkop.zookeeper.watches import covered

    labels: dict[str, dict[str, str]] = {namespace: {"team": "b"}}
    policy = {"tenancy": {"rules": [{"namespaceSelector": {"matchLabels": {"team": "a"}}, "pathPrefixes": ["/"]}]}}
    r = Reconciler(kube, adapter, namespace, policy=policy, namespace_labels=labels.get)
    zk.create(f"{zk_base}/legacy/flags", b"theirs", makepath=True)  # world:anyone, not what the object declares
    key = r.create("wide", {"path": "/legacy/flags", "stringData": "on",
                            "acl": [{"scheme": "world", "id": "anyone", "permissions": ["read"]}]})
    for name in ("a", "b"):  # two new znodes under one absent parent: what learn_absent lists at once
        r.create(name, {"path": f"/legacy/new/{name}", "stringData": "on"})
    roots = WatchRoots(r.cache, adapter, r.reconciler.registry, wait=5, admits=r.reconciler.admits)
    check = AclCheck(r.cache, adapter, lambda k: None, 60, admits=r.reconciler.admits)

    assert roots.register() == 0 and not covered("/legacy/flags", adapter.watches.roots)
    assert check.check_once() == [] and r.reconciler.learn_absent() == 0

    labels[namespace] = {"team": "a"}  # the Namespace informer's update: admitted from now on
    roots.admission_changed({"metadata": {"name": namespace, "labels": labels[namespace]}})
    assert roots.register() == 6 and covered("/legacy/flags", adapter.watches.roots)  # 3 paths, 3 records
    assert check.check_once() == [key]
    assert r.reconciler.learn_absent() == 4  # /legacy/new/{a,b} and their records


def _documented_reasons() -> dict[str, tuple[str, str]]:
    """docs/operations.md, "Troubleshooting by status reason": reason → (state, retried?)."""
    from zkop_testing.kustomize import REPO

    text = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
    section = text.split("\n## Troubleshooting by status reason\n", 1)[1].split("\n## ", 1)[0]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in section.splitlines()
            if line.startswith("| `")]
    return {r[0].strip("`"): (r[1], r[2]) for r in rows}


def _locked(zk: KazooClient, path: str) -> None:
    zk.create(path, b"theirs", makepath=True)
    zk.set_acls(path, [make_digest_acl("other", "secret", all=True)])  # nobody but "other" may read it now


#: reason → (how the znode is prepared, the specs created in order — the last one is looked at —, options)
SCENARIOS: dict[str, tuple[Any, list[dict[str, Any]], dict[str, Any]]] = {
    "InvalidSpec": (None, [{"path": "/app/r", "data": "dHJ1ZQ"}], {}),  # base64 without its padding
    "PathConflict": (None, [{"path": "/app/r", "stringData": "a"}, {"path": "/app/r", "stringData": "b"}], {}),
    "RefNotFound": (None, [{"path": "/app/r", "dataFrom": {"configMapKeyRef": {"name": "absent", "key": "k"}}}], {}),
    "EphemeralNode": (lambda zk, path: zk.create(path, b"held", ephemeral=True, makepath=True),
                      [{"path": "/app/r", "stringData": "mine"}], {}),
    "CreateOnly": (lambda zk, path: zk.create(path, b"flipped", makepath=True),
                   [{"path": "/app/r", "stringData": "on", "syncPolicy": "createOnly"}], {}),
    "NoAuth": (_locked, [{"path": "/app/r", "stringData": "mine"}], {}),
    "DryRun": (None, [{"path": "/app/r", "stringData": "on"}], {"dry_run": True}),
    "ReservedPath": (None, [{"path": "/zkop/owners/app/r", "stringData": "forged"}], {}),
    "NamespaceNotAllowed": (None, [{"path": "/app/r", "stringData": "on"}],
                            {"policy": {"tenancy": {"rules": [{"namespaces": ["nobody"], "pathPrefixes": ["/"]}]}}}),
    "PathNotAllowed": (None, [{"path": "/app/r", "stringData": "on"}],
                       {"policy": {"tenancy": {"rules": [{"namespaceSelector": {}, "pathPrefixes": ["/app/q"]}]}}}),
    "AdoptionNotRequested": (lambda zk, path: zk.create(path, b"legacy", makepath=True),
                             [{"path": "/app/r", "stringData": "on"}], {"policy": {"adoption": "IfRequested"}}),
    "AdoptionRefused": (lambda zk, path: zk.create(path, b"legacy", makepath=True),
                        [{"path": "/app/r", "stringData": "on", "adoptExisting": True}],
                        {"policy": {"adoption": "Never"}}),
    # The adapter holds no identity but its address: a Secret's value would be readable by all.
    "SecretNeedsAcl": (None, [{"path": "/app/r", "dataFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}],
                       {"secrets": {"db": {"password": b"s3cr3t"}}}),
}
#: The documented reasons that need a deletion, an outage or a race, and the tests that produce them.
ELSEWHERE = {
    "HasChildren": "test_a_deletion_waits_for_the_children_and_a_children_watch_wakes_it (above)",
    "ZooKeeperUnavailable": "tests/integration/test_zookeeper_blips.py, tests/cluster/test_event_storm.py",
    "Conflict": "tests/zkconfig/test_decide.py (FAILURES)",
    "AclRedacted": "tests/zkconfig/test_decide.py (SYNC)",
    "EnsembleNotFound": "tests/integration/test_ensembles.py (test_an_object_whose_ensemble_is_missing_says_so)",
    "EnsembleNotUsable": "tests/integration/test_ensembles.py (test_an_object_whose_ensemble_is_missing_says_so)",
}


def test_every_documented_status_reason_is_produced_by_a_test() -> None:
    assert set(SCENARIOS) | set(ELSEWHERE) == set(_documented_reasons())


@pytest.mark.parametrize("reason", sorted(SCENARIOS))
def test_a_status_reason_gives_the_documented_state_conditions_and_event(
        reason: str, kube: KubeClient, namespace: str, adapter: ZooKeeperAdapter, zk: KazooClient,
        zk_base: str) -> None:
    """One row of docs/operations.md's reason table at a time: ``status.state``, ``Ready=False`` with the reason
    (``True`` for ``CreateOnly``), ``Stalled=True`` iff the row says "no (Stalled)", ``Reconciling=True`` iff it
    is retried, and a Warning Event of that reason iff the state is ``Error``."""
    state, retried = _documented_reasons()[reason]
    prepare, specs, options = SCENARIOS[reason]
    if prepare is not None:
        prepare(zk, f"{zk_base}/app/r")
    r = Reconciler(kube, adapter, namespace, **options)
    keys = [r.create(f"r{index}", spec) for index, spec in enumerate(specs)]
    for key in keys:
        with contextlib.suppress(RetryableError):  # a retried reason goes back to the queue
            r.reconcile(key)
    obj = r.get(keys[-1])
    got = conditions(obj)
    assert obj["status"]["state"] == state
    assert got["Ready"] == ("True" if reason == "CreateOnly" else "False", reason)
    assert (got.get("Stalled", ("False", ""))[0] == "True") == ("Stalled" in retried), got
    assert (got.get("Reconciling", ("False", ""))[0] == "True") == retried.startswith("yes"), got
    warnings = [e for e in r.events(keys[-1]) if e[0] == "Warning"]
    assert warnings == ([("Warning", reason)] if state == "Error" else []), r.events(keys[-1])
    # NoAuth's node cannot be listed, only deleted (DELETE is the parent's); not even exists() answers for it
    # from ZooKeeper 3.8.4 and 3.9.2 on (ZOOKEEPER-2590: READ is checked on a znode that exists).
    with contextlib.suppress(NoNodeError):
        zk.delete(f"{zk_base}/app/r")


# --- a Secret's value -----------------------------------------------------------------------------

ZKOP = ("zkop", "zkop-password")
SECRET_VALUE = b"s3cr3t-Value-9f2c"
SECRET_PATH = "/app/db-password"
FROM_SECRET: dict[str, Any] = {"path": SECRET_PATH, "dataFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}


@pytest.fixture
def zkop_adapter(zk_server: ZooKeeperServer, zk_base: str) -> Iterator[ZooKeeperAdapter]:
    """An adapter whose ``/`` is this test's ``zk_base``, authenticated with zkop's digest credential."""
    a = ZooKeeperAdapter(ConnectionOptions(hosts=f"{zk_server.hosts}{zk_base}", connect_timeout=10,
                                           auth=(("digest", ":".join(ZKOP)),)))
    a.start()
    yield a
    a.stop()


@pytest.fixture
def as_zkop(zk_server: ZooKeeperServer, zk_base: str) -> Iterator[KazooClient]:
    """A kazoo session holding zkop's credential; removes the znode the tests write (the shared teardown's
    session could not list it)."""
    with connected_client(zk_server.hosts, auth_data=[("digest", ":".join(ZKOP))]) as client:
        yield client
        with contextlib.suppress(NoNodeError):
            client.delete(f"{zk_base}{SECRET_PATH}")


def test_a_secrets_value_is_readable_by_zkops_identity_alone_and_never_logged_or_reported(
        kube: KubeClient, namespace: str, zkop_adapter: ZooKeeperAdapter, zk: KazooClient, as_zkop: KazooClient,
        zk_base: str, caplog: pytest.LogCaptureFixture) -> None:
    """docs/security.md, a Secret's value: without ``spec.acl`` the znode's ACL is zkop's own digest id with every
    permission (ZooKeeper's CREATOR_ALL_ACL as zkop's session resolves it): an unauthenticated client gets NoAuth,
    zkop's credential reads it. A hand ``setAcl`` opening it is found by the periodic ACL check and undone."""
    r = Reconciler(kube, zkop_adapter, namespace, secrets={"db": {"password": SECRET_VALUE}})
    key = r.create("db-password", FROM_SECRET)
    path = f"{zk_base}{SECRET_PATH}"
    with caplog.at_level("DEBUG", logger="zkop"):
        r.reconcile(key)
    assert r.get(key)["status"]["state"] == "Synced"
    with pytest.raises(NoAuthError):
        zk.get(path)
    assert as_zkop.get(path)[0] == SECRET_VALUE
    acl, _ = as_zkop.get_acls(path)
    assert [(a.perms, a.id.scheme, a.id.id) for a in acl] == [(31, "digest", make_digest_acl(*ZKOP).id.id)]

    # A hand setAcl makes it world-readable: no watch fires, the periodic ACL check finds it.
    as_zkop.set_acls(path, [make_digest_acl(*ZKOP, all=True), make_acl("world", "anyone", read=True)])
    assert zk.get(path)[0] == SECRET_VALUE
    enqueued: list[str] = []
    assert AclCheck(r.cache, zkop_adapter, enqueued.append, period=60).check_once() == [key]
    r.refresh(key)
    with caplog.at_level("DEBUG", logger="zkop"):
        r.reconcile(key)
    with pytest.raises(NoAuthError):
        zk.get(path)
    assert r.events(key) == [("Normal", "Created"), ("Normal", "DriftCorrected")]

    # The value is in no log line, Event, or status.
    said = [*caplog.messages, *(m for *_, m in r.recorder.recorded), str(r.get(key)["status"])]
    assert not [line for line in said if SECRET_VALUE.decode() in line]


def test_an_older_zkops_world_readable_secret_znode_gets_its_acl_tightened_at_the_next_pass(
        kube: KubeClient, namespace: str, zkop_adapter: ZooKeeperAdapter, zk: KazooClient, as_zkop: KazooClient,
        zk_base: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The upgrade: a znode an older zkop wrote from a Secret with the open ACL is tightened at the next pass (an
    ``Updated`` Event that says why, not a ``DriftCorrected``: nobody edited it), its value untouched."""
    r = Reconciler(kube, zkop_adapter, namespace, secrets={"db": {"password": SECRET_VALUE}})
    key = r.create("db-password", FROM_SECRET)
    path = f"{zk_base}{SECRET_PATH}"
    with monkeypatch.context() as older:  # what zkop did before: a Secret's value got the default, open ACL
        older.setattr(zkc_spec, "CREATOR_ALL_ACL", OPEN_ACL)
        r.reconcile(key)
    assert zk.get(path)[0] == SECRET_VALUE
    r.refresh(key)
    r.reconcile(key)
    with pytest.raises(NoAuthError):
        zk.get(path)
    value, stat = as_zkop.get(path)
    assert (value, stat.version) == (SECRET_VALUE, 0)
    assert r.events(key) == [("Normal", "Created"), ("Normal", "Updated")]
    assert "tightened" in r.recorder.recorded[-1][3]


def test_without_credentials_a_secrets_value_is_refused_until_spec_acl_says_who_reads_it(
        kube: KubeClient, namespace: str, adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    """zkop without an authenticated identity cannot keep a Secret's value to itself: ``SecretNeedsAcl``, Stalled,
    nothing written (no znode, no ownership record). An explicit ``spec.acl`` granting world read is honoured."""
    r = Reconciler(kube, adapter, namespace, secrets={"db": {"password": SECRET_VALUE}})
    key = r.create("db-password", FROM_SECRET)
    r.reconcile(key)
    status = r.get(key)["status"]
    assert conditions(r.get(key))["Stalled"] == ("True", "SecretNeedsAcl")
    assert "set spec.acl" in status["message"].lower() and "credentials" in status["message"]
    assert SECRET_VALUE.decode() not in status["message"]
    assert zk.exists(f"{zk_base}{SECRET_PATH}") is None
    assert record_of(zk, zk_base, SECRET_PATH) is None

    obj = r.get(key)
    obj["spec"]["acl"] = [{"scheme": "world", "id": "anyone", "permissions": ["read", "write", "admin"]}]
    r.cache.upsert(kube.request("PUT", resource_path(GROUP, VERSION, PLURAL, namespace, "db-password"), body=obj))
    r.reconcile(key)
    assert r.get(key)["status"]["state"] == "Synced"
    assert zk.get(f"{zk_base}{SECRET_PATH}")[0] == SECRET_VALUE
    acl, _ = zk.get_acls(f"{zk_base}{SECRET_PATH}")
    assert [(a.perms, a.id.scheme, a.id.id) for a in acl] == [(19, "world", "anyone")]
