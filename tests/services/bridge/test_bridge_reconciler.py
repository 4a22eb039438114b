"""The reconciler against a real ZooKeeper, with a hand-filled Service cache (no API server).

These pin the rules that are hard to provoke through an API server: never before sync, the
uid/CAS guard against stale deletes, conflicts and collisions reported once.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from kazoo.client import KazooClient
from zkop_testing.services import sample

from zkop.kube.events import EventRecorder
from zkop.runtime.cache import Indexer
from zkop.runtime.controller import RetryableError
from zkop.services.bridge.options import BridgeOptions
from zkop.services.bridge.plan import desired_set
from zkop.services.bridge.reconciler import FULL_SYNC_KEY, KEY_INDEX, ServiceBridgeReconciler
from zkop.services.bridge.writer import DryRunWriter, ZooKeeperWriter
from zkop.zookeeper.actions import Action, CheckVersion, DeleteNode, Observed
from zkop.zookeeper.adapter import ZooKeeperAdapter, ZooKeeperUnavailable

from .factories import service

ROOT = "/kubernetes/services"


class Bridge:
    """A reconciler over an Indexer the test fills by hand."""

    def __init__(self, zookeeper: Any, options: BridgeOptions | None = None, cluster_id: str = "prod",
                 writer: ZooKeeperWriter | None = None) -> None:
        self.cache = Indexer()
        self.recorder = EventRecorder(None)
        self.synced = True
        self.full_syncs: list[float] = []
        self.reconciler = ServiceBridgeReconciler(
            self.cache, zookeeper, self.recorder, options or BridgeOptions(), cluster_id=cluster_id,
            synced=lambda: self.synced, request_full_sync=self.full_syncs.append, full_sync_period=60.0,
            writer=writer,
        )
        self.cache.add_indexer(KEY_INDEX, self.reconciler.key_index)

    def add(self, *objs: dict[str, Any]) -> None:
        for obj in objs:
            self.cache.upsert(obj)

    def events(self, reason: str) -> list[tuple[str, str, str, str]]:
        return [e for e in self.recorder.recorded if e[2] == reason]


def znode(zk: KazooClient, path: str) -> tuple[dict[str, Any], int] | None:
    if zk.exists(path) is None:
        return None
    data, stat = zk.get(path)
    return json.loads(data), stat.version


def test_publish_then_no_write_when_unchanged_then_update(adapter: ZooKeeperAdapter, zk: KazooClient,
                                                         zk_base: str) -> None:
    bridge = Bridge(adapter)
    bridge.add(service("web"))
    writes = sample("zkop_service_bridge_writes_total", {"operation": "create"})
    bridge.reconciler.reconcile("default/web")
    record, version = znode(zk, f"{zk_base}{ROOT}/default-web") or ({}, -1)
    assert record["clusterIP"] == "10.96.0.10" and record["owner"]["uid"] == "uid-default-web" and version == 0
    assert sample("zkop_service_bridge_writes_total", {"operation": "create"}) == writes + 1
    assert bridge.events("Published")
    bridge.reconciler.reconcile("default/web")  # a resync: identical bytes, no write
    assert (znode(zk, f"{zk_base}{ROOT}/default-web") or ({}, -1))[1] == 0
    bridge.add(service("web", ports=[{"name": "http", "port": 81, "protocol": "TCP", "targetPort": 8080}]))
    bridge.reconciler.reconcile("default/web")
    record, version = znode(zk, f"{zk_base}{ROOT}/default-web") or ({}, -1)
    assert record["ports"][0]["port"] == 81 and version == 1
    assert len(bridge.events("Published")) == 1


def test_gone_or_deselected_services_only_schedule_a_full_sync(adapter: ZooKeeperAdapter, zk: KazooClient,
                                                               zk_base: str) -> None:
    bridge = Bridge(adapter)
    bridge.add(service("web"), service("dns", "kube-system"))
    bridge.reconciler.reconcile("default/web")
    bridge.reconciler.reconcile("kube-system/dns")  # never selected: nothing to collect, no full sync
    assert bridge.full_syncs == []
    bridge.cache.delete("default/web")
    bridge.reconciler.reconcile("default/web")
    assert bridge.full_syncs == [1.0]
    assert zk.exists(f"{zk_base}{ROOT}/default-web") is not None  # deletion is the full sync's job
    bridge.reconciler.reconcile("default/web")  # once is enough
    assert bridge.full_syncs == [1.0]


def test_foreign_node_is_left_alone_and_reported_once(adapter: ZooKeeperAdapter, zk: KazooClient,
                                                      zk_base: str) -> None:
    original = b'{"clusterIP":"10.0.0.1","ports":[]}'
    zk.create(f"{zk_base}{ROOT}/default-web", original, makepath=True)
    bridge = Bridge(adapter)
    bridge.add(service("web"))
    skipped = sample("zkop_service_bridge_skipped_foreign_total")
    for _ in range(2):
        bridge.reconciler.reconcile("default/web")
    assert zk.get(f"{zk_base}{ROOT}/default-web")[0] == original
    assert len(bridge.events("RecordConflict")) == 1
    assert sample("zkop_service_bridge_skipped_foreign_total") == skipped + 1
    # Another installation's node (other cluster id) is just as foreign.
    other = Bridge(adapter, cluster_id="staging")
    other.add(service("api"))
    other.reconciler.reconcile("default/api")
    bridge.add(service("api"))
    bridge.reconciler.reconcile("default/api")
    assert (znode(zk, f"{zk_base}{ROOT}/default-api") or ({}, -1))[0]["owner"]["clusterId"] == "staging"


def test_collision_older_service_keeps_the_key_and_the_loser_takes_over_later(
        adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    bridge = Bridge(adapter)
    old = service("a-web", "team", created="2024-01-01T00:00:00Z")
    young = service("web", "team-a", created="2024-01-02T00:00:00Z")
    bridge.add(old, young)
    collisions = sample("zkop_service_bridge_collisions_total")
    for _ in range(2):
        for key in ("team-a/web", "team/a-web"):
            bridge.reconciler.reconcile(key)
    record, version = znode(zk, f"{zk_base}{ROOT}/team-a-web") or ({}, -1)
    assert (record["namespace"], record["name"], version) == ("team", "a-web", 0)
    assert [e[0] for e in bridge.events("RecordCollision")] == ["team-a/web"]
    assert sample("zkop_service_bridge_collisions_total") == collisions + 1
    # The event that removes the winner maps to both keys (keys_for), so the loser is reconciled.
    bridge.cache.delete("team/a-web")
    assert bridge.reconciler.keys_for(old) == ["team/a-web", "team-a/web"]
    bridge.reconciler.reconcile("team-a/web")
    record, _ = znode(zk, f"{zk_base}{ROOT}/team-a-web") or ({}, -1)
    assert (record["namespace"], record["name"]) == ("team-a", "web")


def test_full_sync_waits_for_the_informers(adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    bridge = Bridge(adapter)
    bridge.add(service("web"))
    bridge.reconciler.reconcile("default/web")
    bridge.cache.delete("default/web")
    bridge.synced = False
    assert bridge.reconciler.reconcile(FULL_SYNC_KEY).requeue_after == 1.0
    assert zk.exists(f"{zk_base}{ROOT}/default-web") is not None
    bridge.synced = True
    assert bridge.reconciler.reconcile(FULL_SYNC_KEY).requeue_after == 60.0
    assert zk.exists(f"{zk_base}{ROOT}/default-web") is None


def test_full_sync_collects_only_our_orphans(adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    bridge = Bridge(adapter, BridgeOptions(layout="nested", format="curator"))
    bridge.add(service("web"), service("gone"))
    for key in ("default/web", "default/gone"):
        bridge.reconciler.reconcile(key)
    assert zk.exists(f"{zk_base}{ROOT}/default/gone/10.96.0.10") is not None
    zk.create(f"{zk_base}{ROOT}/default/legacy", b"{}")
    zk.create(f"{zk_base}{ROOT}/default/web/vm-1", b'{"name":"default-web"}')
    bridge.cache.delete("default/gone")
    deletes = sample("zkop_service_bridge_deletes_total")
    bridge.reconciler.reconcile(FULL_SYNC_KEY)
    assert zk.exists(f"{zk_base}{ROOT}/default/gone") is None  # instance, then its service node
    assert sample("zkop_service_bridge_deletes_total") == deletes + 2
    assert sorted(zk.get_children(f"{zk_base}{ROOT}/default")) == ["legacy", "web"]
    assert sorted(zk.get_children(f"{zk_base}{ROOT}/default/web")) == ["10.96.0.10", "vm-1"]
    assert sample("zkop_service_bridge_records", {"state": "foreign"}) == 2
    assert sample("zkop_service_bridge_records", {"state": "published"}) == 1
    assert sample("zkop_service_bridge_last_full_sync_timestamp_seconds") > 0


def test_circuit_breaker_holds_then_closes(adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str,
                                           caplog: pytest.LogCaptureFixture) -> None:
    bridge = Bridge(adapter, BridgeOptions(max_deletes=2))
    names = ["a", "b", "c"]
    bridge.add(*(service(n) for n in names))
    for n in names:
        bridge.reconciler.reconcile(f"default/{n}")
    for n in names:
        bridge.cache.delete(f"default/{n}")
    last_full_sync = sample("zkop_service_bridge_last_full_sync_timestamp_seconds")
    with caplog.at_level(logging.ERROR, logger="zkop.services.bridge.reconciler"):
        result = bridge.reconciler.reconcile(FULL_SYNC_KEY)
    assert sample("zkop_service_bridge_last_full_sync_timestamp_seconds") == last_full_sync
    assert sorted(zk.get_children(f"{zk_base}{ROOT}")) == ["default-a", "default-b", "default-c"]
    assert sample("zkop_service_bridge_delete_circuit_breaker_open") == 1
    assert sample("zkop_service_bridge_records", {"state": "orphaned"}) == 3
    assert bridge.events("DeleteCircuitBreakerOpen")
    assert "delete circuit breaker open: the records of 3 Services" in caplog.text
    assert result.requeue_after == 30.0  # judged again soon, and the full-sync timestamp is not advanced
    bridge.reconciler.options = dataclasses.replace(bridge.reconciler.options, max_deletes=3)
    bridge.reconciler.reconcile(FULL_SYNC_KEY)
    assert zk.get_children(f"{zk_base}{ROOT}") == []
    assert sample("zkop_service_bridge_delete_circuit_breaker_open") == 0
    assert sample("zkop_service_bridge_last_full_sync_timestamp_seconds") > last_full_sync
    assert bridge.events("DeleteCircuitBreakerClosed")


class RacingZooKeeper:
    """Delegates to the adapter, but runs ``hook`` once: just before the first delete (``on="delete"``), or
    while the full sync scans, on the first read of ``path`` (``on="read"``)."""

    def __init__(self, adapter: ZooKeeperAdapter, hook: Callable[[], None], on: str = "delete",
                 path: str = "") -> None:
        self.adapter = adapter
        self.hook: Callable[[], None] | None = hook
        self.on = on
        self.path = path

    def _fire(self) -> None:
        hook, self.hook = self.hook, None
        if hook is not None:
            hook()

    def read(self, path: str) -> Observed | None:
        if self.on == "read" and path == self.path:
            self._fire()
        return self.adapter.read(path)

    def children(self, path: str) -> list[str] | None:
        return self.adapter.children(path)

    def execute(self, actions: Sequence[Action], *, atomic: bool = False,
                require: Sequence[CheckVersion] = ()) -> None:
        if self.on == "delete" and any(isinstance(a, DeleteNode) for a in actions):
            self._fire()
        self.adapter.execute(actions, atomic=atomic, require=require)


def test_stale_delete_never_removes_the_record_of_a_recreated_service(
        adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    """The Service is deleted, the full sync plans the delete, then the Service is re-created (new uid) and
    its record written before the delete executes: the version check makes the stale delete fail."""
    path = f"{ROOT}/default-web"
    writer = Bridge(adapter)
    writer.add(service("web", uid="uid-1"))
    writer.reconciler.reconcile("default/web")

    def recreate() -> None:
        writer.add(service("web", uid="uid-2"))
        writer.reconciler.reconcile("default/web")  # another worker writes the new record

    sweeper = Bridge(RacingZooKeeper(adapter, recreate))  # its cache never sees the new Service
    result = sweeper.reconciler.reconcile(FULL_SYNC_KEY)
    record, version = znode(zk, zk_base + path) or ({}, -1)
    assert record["owner"]["uid"] == "uid-2" and version == 1
    assert result.requeue_after == 5.0  # incomplete: a fresh full sync re-plans soon
    # The retry plans from scratch against the cache, which by then holds the re-created Service:
    sweeper.add(service("web", uid="uid-2"))
    sweeper.reconciler.reconcile(FULL_SYNC_KEY)
    assert (znode(zk, zk_base + path) or ({}, -1))[0]["owner"]["uid"] == "uid-2"


def test_a_service_that_reappears_in_the_cache_before_the_delete_is_kept(
        adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    bridge = Bridge(adapter)
    bridge.add(service("web"))
    bridge.reconciler.reconcile("default/web")
    bridge.cache.delete("default/web")
    # The Service comes back while the full sync scans: the desired set it started from is stale.
    bridge.reconciler.zookeeper = RacingZooKeeper(adapter, lambda: bridge.add(service("web", uid="uid-new")),
                                                  on="read", path=f"{ROOT}/default-web")
    result = bridge.reconciler.reconcile(FULL_SYNC_KEY)
    assert zk.exists(f"{zk_base}{ROOT}/default-web") is not None
    assert result.requeue_after == 5.0


def test_the_wanted_again_guard_recomputes_the_desired_set_only_when_the_cache_changed(
        adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each delete of a full sync is checked against the cache as it is then, but the desired set of the
    whole cache is not computed again for every delete (O(Services x deletes): 15 minutes for 5,000
    deletes among 20,000 Services) — only when the cache changed since the last check."""
    bridge = Bridge(adapter)
    names = [f"svc-{i}" for i in range(12)]
    bridge.add(*(service(n) for n in names))
    for n in names:
        bridge.reconciler.reconcile(f"default/{n}")
    gone = names[:10]
    for n in gone:
        bridge.cache.delete(f"default/{n}")
    computed: list[int] = []

    def counting(services: Any, options: Any, fmt: Any) -> Any:
        computed.append(1)
        return desired_set(services, options, fmt)

    monkeypatch.setattr("zkop.services.bridge.reconciler.desired_set", counting)
    back = "svc-5"  # comes back (new uid) right after the first delete: the guard must see it

    class ComesBack(RacingZooKeeper):
        def execute(self, actions: Sequence[Action], *, atomic: bool = False,
                    require: Sequence[CheckVersion] = ()) -> None:
            self.adapter.execute(actions, atomic=atomic, require=require)
            self._fire()

    comes_back = ComesBack(adapter, lambda: bridge.add(service(back, uid="uid-back")))
    bridge.reconciler.zookeeper = bridge.reconciler.writer.zookeeper = comes_back  # its reads and its writes
    result = bridge.reconciler.reconcile(FULL_SYNC_KEY)
    children = set(zk.get_children(f"{zk_base}{ROOT}"))
    assert children == {f"default-{n}" for n in [*names[10:], back]}
    assert result.requeue_after == 5.0  # incomplete: one delete held back
    # the plan's own, the first guard's, and one more after the cache changed — not one per delete
    assert len(computed) == 3


def test_dry_run_and_upsert_only_write_or_delete_nothing(adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    dry = Bridge(adapter, writer=DryRunWriter(adapter))
    dry.add(service("web"))
    with caplog.at_level(logging.INFO, logger="zkop.services.bridge.reconciler"):
        dry.reconciler.reconcile("default/web")
    assert "would create /kubernetes/services/default-web" in caplog.text
    assert zk.exists(f"{zk_base}{ROOT}/default-web") is None

    keep = Bridge(adapter, BridgeOptions(policy="upsert-only"))
    keep.add(service("web"))
    keep.reconciler.reconcile("default/web")
    keep.cache.delete("default/web")
    keep.reconciler.reconcile(FULL_SYNC_KEY)
    assert zk.exists(f"{zk_base}{ROOT}/default-web") is not None
    dry.cache.delete("default/web")
    with caplog.at_level(logging.INFO, logger="zkop.services.bridge.reconciler"):
        dry.reconciler.reconcile(FULL_SYNC_KEY)  # dry run of the delete: logged, not done
    assert "would delete /kubernetes/services/default-web" in caplog.text
    assert zk.exists(f"{zk_base}{ROOT}/default-web") is not None


def test_curator_instances_follow_address_changes(adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    bridge = Bridge(adapter, BridgeOptions(format="curator"))
    lb = {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}]}}
    bridge.add(service("web", type="LoadBalancer", status=lb))
    bridge.reconciler.reconcile("default/web")
    assert zk.get_children(f"{zk_base}{ROOT}/default-web") == ["203.0.113.7"]
    bridge.add(service("web", type="LoadBalancer", status={"loadBalancer": {"ingress": [{"ip": "203.0.113.8"}]}}))
    bridge.reconciler.reconcile("default/web")
    assert zk.get_children(f"{zk_base}{ROOT}/default-web") == ["203.0.113.8"]


class DownZooKeeper:
    """Every call fails as the adapter does while the session is lost."""

    def read(self, path: str) -> Observed | None:
        raise ZooKeeperUnavailable("ZooKeeper get failed: ConnectionLoss")

    def children(self, path: str) -> list[str] | None:
        raise ZooKeeperUnavailable("ZooKeeper get_children failed: ConnectionLoss")

    def execute(self, actions: Sequence[Action], *, atomic: bool = False,
                require: Sequence[CheckVersion] = ()) -> None:
        raise ZooKeeperUnavailable("writes are paused")


def test_zookeeper_outages_are_retryable_and_touch_nothing() -> None:
    bridge = Bridge(DownZooKeeper())
    bridge.add(service("web"))
    for key in ("default/web", FULL_SYNC_KEY):
        with pytest.raises(RetryableError, match="ConnectionLoss") as info:
            bridge.reconciler.reconcile(key)
        assert info.value.expected is True  # the controller logs it without a traceback
