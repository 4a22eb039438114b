"""``ManagerOptions.gc_freeze_after_sync`` (issue #26): the heap is frozen once the caches synced, before the
leader runnables start, and again once the first reconciles are done; a cached object a watch event replaces is
still freed."""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterator

import pytest
from zkop_testing.apiserver import ApiServer
from zkop_testing.waiting import EVENTUALLY, wait_for

from zkop.kube.client import JSON, KubeClient, resource_path
from zkop.runtime.cache import Informer, ResourceRef
from zkop.runtime.cache.transform import default_transform
from zkop.runtime.controller import Controller, Result
from zkop.runtime.manager import Manager, ManagerOptions


class Leader:
    """A leader runnable that records whether the heap was frozen when it started."""

    frozen_at_start = -1

    def start(self) -> None:
        self.frozen_at_start = gc.get_freeze_count()

    def stop(self, timeout: float, /) -> None:
        pass


class Cached(dict):  # type: ignore[type-arg]
    """A cached object a weak reference can point to (a plain dict cannot be weakly referenced)."""


def weakly_referenced(obj: JSON) -> JSON:
    """The informer's default transform, into a :class:`Cached`."""
    return Cached(default_transform(obj))


@pytest.fixture
def kube() -> Iterator[KubeClient]:
    with ApiServer() as server:
        client = KubeClient(server.api_client())
        yield client
        client.close()


@pytest.fixture
def unfreeze_after() -> Iterator[None]:
    """The freeze is process-wide: give the test process's heap back to the collector afterwards."""
    try:
        yield
    finally:
        gc.unfreeze()


def is_frozen(obj: object) -> bool:
    """Tracked by the collector but in none of its generations: in the permanent generation."""
    return gc.is_tracked(obj) and not any(o is obj for o in gc.get_objects())


@pytest.mark.usefixtures("unfreeze_after")
@pytest.mark.parametrize("freeze", [True, False])
def test_the_synced_cache_is_frozen_and_a_replaced_object_is_still_freed(kube: KubeClient, freeze: bool) -> None:
    configmaps = resource_path("", "v1", "configmaps", "default")
    for i in range(20):
        kube.request("POST", configmaps, body={"apiVersion": "v1", "kind": "ConfigMap",
                                               "metadata": {"name": f"cm-{i}", "namespace": "default"},
                                               "data": {"k": str(i)}})
    gc.unfreeze()
    informer = Informer(kube, ResourceRef("", "v1", "configmaps"), namespaces=["default"], name="configmaps",
                        resync_period=0, transform=weakly_referenced)
    manager = Manager(ManagerOptions(metrics_bind_address="0", health_probe_bind_address="0", cache_sync_poll=0.01,
                                     gc_freeze_after_sync=freeze))
    manager.add(informer, needs_leader=False)
    leader = Leader()
    manager.add(leader, needs_leader=True)
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(manager.run()), daemon=True)
    thread.start()
    try:
        wait_for(manager.elected.is_set, message="leader runnables started")
        cached = informer.indexer.get("default/cm-7")
        assert isinstance(cached, Cached)
        # Frozen before the leader runnables started, with the rest of the heap (modules, classes: thousands).
        assert (leader.frozen_at_start > 1000) is freeze
        assert is_frozen(cached) is freeze
        gone = weakref.ref(cached)
        del cached
        kube.request("PATCH", f"{configmaps}/cm-7", body={"data": {"k": "changed"}},
                     content_type="application/merge-patch+json")
        wait_for(lambda: (informer.indexer.get("default/cm-7") or {}).get("data") == {"k": "changed"},
                 message="the watch event replaced the cached object")
        # Reference counting frees the replaced object, frozen or not: no collection is run here.
        wait_for(lambda: gone() is None, message="the replaced cached object was freed")
    finally:
        manager.stop()
        thread.join(EVENTUALLY)
    assert codes == [0]


class Keeping:
    """A reconciler that keeps what each reconcile allocated (as zkop's ZooKeeper caches keep a znode's state)."""

    def __init__(self, release: threading.Event) -> None:
        self.release = release
        self.kept: dict[str, Cached] = {}

    def reconcile(self, key: str) -> Result:
        self.release.wait(EVENTUALLY)  # held until the test looked at the heap once
        self.kept[key] = Cached(reconciled=key)
        return Result()


@pytest.mark.usefixtures("unfreeze_after")
def test_the_heap_is_frozen_again_once_the_first_reconciles_are_done(kube: KubeClient) -> None:
    """A cold start replaces every cached object and fills its caches after the first freeze: what the first
    reconciles left behind is frozen too, once the leader's controllers have nothing left to do."""
    configmaps = resource_path("", "v1", "configmaps", "default")
    for i in range(5):
        kube.request("POST", configmaps, body={"apiVersion": "v1", "kind": "ConfigMap",
                                               "metadata": {"name": f"cm-{i}", "namespace": "default"}})
    gc.unfreeze()
    informer = Informer(kube, ResourceRef("", "v1", "configmaps"), namespaces=["default"], name="configmaps",
                        resync_period=0)
    release = threading.Event()
    reconciler = Keeping(release)
    controller = Controller("keeping", reconciler, workers=2)
    controller.watch(informer)
    manager = Manager(ManagerOptions(metrics_bind_address="0", health_probe_bind_address="0", cache_sync_poll=0.01,
                                     liveness_period=0.05, gc_freeze_after_sync=True))
    manager.add(informer, needs_leader=False)
    manager.add(controller, needs_leader=True)
    thread = threading.Thread(target=manager.run, daemon=True)
    thread.start()
    try:
        wait_for(manager.elected.is_set, message="leader runnables started")
        first = gc.get_freeze_count()
        assert first > 1000 and not controller.settled()  # frozen once; the reconciles wait for the release
        release.set()
        wait_for(lambda: len(reconciler.kept) == 5, message="every object reconciled")
        wait_for(lambda: all(is_frozen(kept) for kept in reconciler.kept.values()),
                 message="what the first reconciles kept is frozen")
        assert controller.settled() and gc.get_freeze_count() > first
    finally:
        release.set()
        manager.stop()
        thread.join(EVENTUALLY)
