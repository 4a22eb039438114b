"""The reconciler against a real ZooKeeper, with hand-filled caches and a recording API client.

These pin the rules that are awkward to provoke through an API server: never before sync, a
vanished service only schedules a full sync, answers the API server may give, the key mapping.
"""

from __future__ import annotations

from typing import Any

import pytest
from kazoo.client import KazooClient
from zkop_testing.services import IMPORT_NAMESPACE as NAMESPACE
from zkop_testing.services import register

from zkop.kube.client import ApiException
from zkop.kube.events import EventRecorder
from zkop.runtime.cache import Indexer
from zkop.runtime.controller import TerminalError
from zkop.services.endpoints import slice_service_key
from zkop.services.importer.guard import AddressGuard, parse_cidr
from zkop.services.importer.options import ImportOptions
from zkop.services.importer.reader import ZooKeeperReader
from zkop.services.importer.reconciler import FULL_SYNC_KEY, ROOT_KEY, SLICE_INDEX, ServiceImportReconciler, service_key
from zkop.zookeeper.adapter import ZooKeeperAdapter

JSON = dict[str, Any]


class RecordingClient:
    """Answers writes like the API server (uid, resourceVersion), or with ``fail`` for a resource."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, Any]] = []
        self.fail: dict[str, ApiException] = {}

    def request(self, method: str, path: str, *, query: Any = None, body: Any = None,
                content_type: str | None = None, timeout: Any = None) -> JSON:
        self.requests.append((method, path, body))
        for resource, error in self.fail.items():
            if f"/{resource}" in path:
                raise error
        if method == "POST":
            return {**body, "metadata": {**body["metadata"], "uid": f"uid-{len(self.requests)}",
                                         "resourceVersion": "1"}}
        return {}


class Importer:
    def __init__(self, adapter: ZooKeeperAdapter, options: ImportOptions | None = None) -> None:
        self.services = Indexer()
        self.slices = Indexer({SLICE_INDEX: slice_service_key})
        self.client = RecordingClient()
        self.queued: list[str] = []
        self.full_syncs: list[float] = []
        self.synced = True
        self.guard = AddressGuard()
        self.reconciler = ServiceImportReconciler(
            self.services, self.slices, ZooKeeperReader(adapter, lambda path: None), self.client,
            EventRecorder(None), options or ImportOptions(namespace=NAMESPACE, gc_delay=0.5), cluster_id="prod",
            enqueue=self.queued.append, synced=lambda: self.synced, request_full_sync=self.full_syncs.append,
            guard=lambda: self.guard,
        )


def test_watch_paths_map_to_keys(adapter: ZooKeeperAdapter) -> None:
    reconciler = Importer(adapter).reconciler
    assert reconciler.key_for_path("/services") == ROOT_KEY
    assert reconciler.key_for_path("/services/Orders") == service_key("orders")
    assert reconciler.key_for_path("/services/Orders/instance-1") == service_key("orders")
    assert reconciler.key_for_path("/services-old/x") is None
    assert reconciler.key_for_path("/zkop/owners/x") is None
    assert reconciler.key_for_path("/services/___") is None
    dubbo = Importer(adapter, ImportOptions(format="dubbo", root="/dubbo", prefix="rpc-")).reconciler
    assert dubbo.key_for_path("/dubbo/com.example.Api/providers/dubbo%3A%2F%2Fx") == service_key("rpc-com-example-api")
    top = Importer(adapter, ImportOptions(root="/")).reconciler
    assert top.key_for_path("/zookeeper/quota") is None and top.key_for_path("/orders/1") == service_key("orders")


def test_nothing_before_the_caches_have_synced(adapter: ZooKeeperAdapter, chrooted: KazooClient) -> None:
    importer = Importer(adapter)
    importer.synced = False
    register(chrooted, "orders", "i1", "10.1.0.1", ephemeral=False)
    assert importer.reconciler.reconcile(service_key("orders")).requeue_after == 1.0
    assert importer.reconciler.reconcile(FULL_SYNC_KEY).requeue_after == 1.0
    assert importer.client.requests == []


def test_a_vanished_service_only_schedules_a_full_sync(adapter: ZooKeeperAdapter, chrooted: KazooClient) -> None:
    importer = Importer(adapter)
    register(chrooted, "orders", "i1", "10.1.0.1", ephemeral=False)
    importer.reconciler.reconcile(ROOT_KEY)
    assert importer.queued == [service_key("orders")]
    importer.reconciler.reconcile(service_key("orders"))
    assert [m for m, _, _ in importer.client.requests] == ["POST", "POST"]  # Service, then its slice
    created = importer.client.requests[0][2]  # the cache is filled by hand: the Service as created
    importer.services.upsert({**created, "metadata": {**created["metadata"], "uid": "u1", "resourceVersion": "1"}})
    chrooted.delete("/services/orders", recursive=True)
    importer.reconciler.reconcile(ROOT_KEY)
    importer.client.requests.clear()
    importer.reconciler.reconcile(service_key("orders"))
    assert importer.client.requests == [] and importer.full_syncs == [0.5]
    # A name nobody owns anything of schedules nothing.
    importer.reconciler.reconcile(service_key("billing"))
    assert importer.full_syncs == [0.5]


def test_answers_of_the_api_server(adapter: ZooKeeperAdapter, chrooted: KazooClient) -> None:
    importer = Importer(adapter)
    register(chrooted, "orders", "i1", "10.1.0.1", ephemeral=False)
    importer.reconciler.reconcile(ROOT_KEY)
    # A slice of zkop's name that is not zkop's (invisible to the label-selected cache): left alone.
    importer.client.fail["endpointslices"] = ApiException(status=409, reason="AlreadyExists")
    importer.reconciler.reconcile(service_key("orders"))  # no exception: nothing to retry
    assert [(m, p.rsplit("/", 1)[-1]) for m, p, _ in importer.client.requests] == [
        ("POST", "services"), ("POST", "endpointslices")]
    # An invalid object is a terminal error (a later ZooKeeper change enqueues the name again) ...
    importer.client.fail = {"services": ApiException(status=422, reason="Invalid")}
    with pytest.raises(TerminalError):
        importer.reconciler.reconcile(service_key("orders"))
    # ... a conflict or an unavailable API server is retried with backoff.
    for status in (409, 503):
        importer.client.fail = {"services": ApiException(status=status, reason="x")}
        with pytest.raises(Exception, match="failed") as info:
            importer.reconciler.reconcile(service_key("orders"))
        assert getattr(info.value, "expected", False) is True


def test_the_address_guard_keeps_refused_addresses_out_of_every_slice(adapter: ZooKeeperAdapter,
                                                                      chrooted: KazooClient) -> None:
    importer = Importer(adapter)
    importer.guard = AddressGuard(service_ranges=(parse_cidr("10.96.0.0/12"),), apiserver=frozenset({"192.0.2.1"}))
    register(chrooted, "orders", "cluster-ip", "10.96.0.1", ephemeral=False)
    register(chrooted, "orders", "apiserver", "192.0.2.1", ephemeral=False)
    register(chrooted, "orders", "fine", "10.1.0.1", ephemeral=False)
    register(chrooted, "only-refused", "i1", "10.96.0.10", ephemeral=False)
    importer.reconciler.reconcile(ROOT_KEY)
    importer.reconciler.reconcile(service_key("orders"))
    importer.reconciler.reconcile(service_key("only-refused"))
    posted = [(p.rsplit("/", 1)[-1], body) for m, p, body in importer.client.requests if m == "POST"]
    assert [resource for resource, _ in posted] == ["services", "endpointslices"]  # nothing for only-refused
    addresses = [a for e in posted[1][1]["endpoints"] for a in e["addresses"]]
    assert addresses == ["10.1.0.1"]
