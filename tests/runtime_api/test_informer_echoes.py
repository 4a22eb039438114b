"""Own-write echoes cached from the write's response, not decoded (zkop.runtime.cache.echoes).

The watch streams of the in-memory API server are stalled around each write so that the echo
arrives after the response is in (or before, where that is the case under test); every test then
checks the cache against the server and the updates the handlers saw.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterator

import pytest
from zkop_testing.apiserver import ApiServer
from zkop_testing.waiting import EVENTUALLY, wait_for

from zkop.kube.client import JSON, MERGE_PATCH, KubeClient, resource_path
from zkop.runtime.cache import Informer, ResourceRef
from zkop.runtime.cache import informer as informer_module
from zkop.runtime.cache.echoes import EchoRegistry, modified_resource_version
from zkop.runtime.cache.transform import default_transform
from zkop.runtime.ownwrites import OwnWrites

CONFIGMAPS = ResourceRef("", "v1", "configmaps")
KEY = "default/a"


class Updates:
    """Records ``(old resourceVersion, new resourceVersion)`` of every update (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: list[tuple[str, str]] = []

    def on_add(self, obj: JSON) -> None:
        pass

    def on_update(self, old: JSON, new: JSON) -> None:
        with self.lock:
            self.seen.append((rv(old), rv(new)))

    def on_delete(self, obj: JSON) -> None:
        pass


def rv(obj: JSON | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("resourceVersion", ""))


def path(name: str = "a") -> str:
    return resource_path("", "v1", "configmaps", "default", name)


def patch(kube: KubeClient, value: str, annotations: dict[str, str] | None = None) -> JSON:
    body: JSON = {"data": {"v": value}}
    if annotations:
        body["metadata"] = {"annotations": annotations}
    return kube.request("PATCH", path(), body=body, content_type=MERGE_PATCH)


@pytest.fixture
def informer(kube: KubeClient) -> Iterator[tuple[Informer, Updates]]:
    kube.request("POST", resource_path("", "v1", "configmaps", "default"),
                 body={"metadata": {"name": "a", "namespace": "default"}, "data": {"v": "0"}})
    informer = Informer(kube, CONFIGMAPS, resync_period=0, inactivity_timeout=30.0)
    updates = Updates()
    informer.add_event_handler(updates)
    informer.start()
    assert informer.wait_for_sync(EVENTUALLY)
    yield informer, updates
    informer.stop()


def write_behind_a_stalled_watch(apiserver: ApiServer, inf: Informer,
                                 *writes: Callable[[], JSON]) -> tuple[str, list[JSON]]:
    """Make ``writes`` while the watch is stalled, announce the last one's echo as zkop's writer does,
    let the watch go on and wait until the cache reaches the last write; returns the base version
    the last write was computed from (the cached one) and the responses."""
    base = rv(inf.indexer.get(KEY))
    apiserver.stall_watches(True)
    responses = [write() for write in writes]
    inf.expect_echo(KEY, base, responses[-1])
    apiserver.stall_watches(False)
    wait_for(lambda: rv(inf.indexer.get(KEY)) == rv(responses[-1]), message="the last write's echo arrived")
    return base, responses


def cached_as_decoded(informer: Informer, kube: KubeClient) -> None:
    """The cache holds what decoding the server's current object would have cached."""
    assert informer.indexer.get(KEY) == default_transform(kube.request("GET", path()))


def test_an_echo_after_the_response_is_cached_from_it(
    apiserver: ApiServer, kube: KubeClient, informer: tuple[Informer, Updates],
) -> None:
    inf, updates = informer
    base = rv(inf.indexer.get(KEY))
    apiserver.stall_watches(True)
    response = patch(kube, "1")
    untouched = copy.deepcopy(response)
    inf.expect_echo(KEY, base, response)
    assert response == untouched  # the writer goes on with it: managedFields and all
    assert inf.pending_echoes() == 1
    apiserver.stall_watches(False)
    wait_for(lambda: rv(inf.indexer.get(KEY)) == rv(response), message="the echo arrived")
    assert inf.echoes_applied == 1 and inf.pending_echoes() == 0
    assert updates.seen == [(base, rv(response))]  # handlers see the same transition as when decoded
    cached_as_decoded(inf, kube)
    # The watch goes on from the echo's resourceVersion: the next change is decoded as usual.
    later = patch(kube, "2")
    wait_for(lambda: rv(inf.indexer.get(KEY)) == rv(later), message="the next change arrived")
    assert inf.echoes_applied == 1
    assert updates.seen == [(base, rv(response)), (rv(response), rv(later))]
    cached_as_decoded(inf, kube)


def test_an_object_with_another_resource_version_key_is_decoded(
    apiserver: ApiServer, kube: KubeClient, informer: tuple[Informer, Updates],
) -> None:
    inf, updates = informer
    # An annotation named resourceVersion: the raw event names two, so which is metadata's cannot be told.
    base, [response] = write_behind_a_stalled_watch(apiserver, inf, lambda: patch(kube, "1", {"resourceVersion": "1"}))
    assert inf.echoes_applied == 0 and inf.pending_echoes() == 0
    assert updates.seen == [(base, rv(response))]
    cached_as_decoded(inf, kube)


def test_a_foreign_write_before_ours_is_delivered_and_our_echo_decoded(
    apiserver: ApiServer, kube: KubeClient, informer: tuple[Informer, Updates],
) -> None:
    inf, updates = informer
    # Ours is computed from the cached version, but the server applies it after the foreign write.
    base, [foreign, ours] = write_behind_a_stalled_watch(
        apiserver, inf, lambda: patch(kube, "theirs"),
        lambda: kube.request("PATCH", path(), body={"metadata": {"labels": {"mine": "yes"}}}, content_type=MERGE_PATCH))
    assert inf.echoes_applied == 0 and inf.pending_echoes() == 0
    assert updates.seen == [(base, rv(foreign)), (rv(foreign), rv(ours))]
    cached_as_decoded(inf, kube)


def test_an_echo_that_arrived_before_the_response_is_not_awaited(
    kube: KubeClient, informer: tuple[Informer, Updates], monkeypatch: pytest.MonkeyPatch,
) -> None:
    inf, updates = informer
    base = rv(inf.indexer.get(KEY))
    response = patch(kube, "1")
    wait_for(lambda: rv(inf.indexer.get(KEY)) == rv(response), message="the echo arrived")
    copies: list[JSON] = []

    def copy_of(obj: JSON) -> JSON:
        copies.append(obj)
        return obj

    monkeypatch.setattr(informer_module, "default_transform_copy", copy_of)
    inf.expect_echo(KEY, base, response)
    assert inf.pending_echoes() == 0 and inf.echoes_applied == 0
    assert updates.seen == [(base, rv(response))]
    assert copies == []  # the response is not even transformed


def test_a_relist_forgets_awaited_echoes(
    apiserver: ApiServer, kube: KubeClient, informer: tuple[Informer, Updates],
) -> None:
    inf, _ = informer
    base = rv(inf.indexer.get(KEY))
    relists = inf.reflectors[0].relists
    apiserver.stall_watches(True)
    response = patch(kube, "1")
    inf.expect_echo(KEY, base, response)
    apiserver.expire_history()
    apiserver.stall_watches(False)
    apiserver.drop_watches()
    wait_for(lambda: inf.reflectors[0].relists > relists, message="relisted after 410")
    wait_for(lambda: rv(inf.indexer.get(KEY)) == rv(response), message="the relist brought the write")
    assert inf.pending_echoes() == 0 and inf.echoes_applied == 0
    cached_as_decoded(inf, kube)


def test_an_informer_with_its_own_transform_decodes_every_echo(kube: KubeClient) -> None:
    kube.request("POST", resource_path("", "v1", "configmaps", "default"),
                 body={"metadata": {"name": "a", "namespace": "default"}, "data": {"v": "0"}})
    inf = Informer(kube, CONFIGMAPS, resync_period=0, transform=None)
    inf.start()
    try:
        assert inf.wait_for_sync(EVENTUALLY)
        base = rv(inf.indexer.get(KEY))
        response = patch(kube, "1")
        inf.expect_echo(KEY, base, response)  # it cannot apply a transform it does not know to a copy
        assert inf.pending_echoes() == 0
        wait_for(lambda: rv(inf.indexer.get(KEY)) == rv(response), message="the echo arrived")
        assert inf.indexer.get(KEY) == kube.request("GET", path())
    finally:
        inf.stop()


@pytest.mark.parametrize(("line", "expected"), [
    (b'{"type":"MODIFIED","object":{"metadata":{"name":"a","resourceVersion":"42"}}}', "42"),
    (b'{"type":"ADDED","object":{"metadata":{"resourceVersion":"42"}}}', ""),  # only updates echo a write
    (b'{"type":"DELETED","object":{"metadata":{"resourceVersion":"42"}}}', ""),
    (b'{"type": "MODIFIED", "object": {"metadata": {"resourceVersion": "42"}}}', ""),  # not compact JSON
    (b'{"type":"MODIFIED","object":{"metadata":{"annotations":{"resourceVersion":"42"},'
     b'"resourceVersion":"43"}}}', ""),  # two: which is metadata's cannot be told
    (b'{"type":"MODIFIED","object":{"metadata":{"resourceVersion":"4\\"2"}}}', ""),  # an escape
    (b'{"type":"MODIFIED","object":{"metadata":{"name":"a"}}}', ""),  # none
    (b'{"type":"MODIFIED","object":{"metadata":{"annotations":{"x":"\\"resourceVersion\\":\\"1\\""},'
     b'"resourceVersion":"42"}}}', "42"),  # inside a string the quotes are escaped: still one
])
def test_modified_resource_version(line: bytes, expected: str) -> None:
    assert modified_resource_version(line) == expected


def test_echo_registry_keeps_the_latest_write_per_key() -> None:
    registry = EchoRegistry()
    registry.expect("ns/a", "1", "2", {"v": 2})
    registry.expect("ns/a", "2", "3", {"v": 3})  # a newer write replaces the older one
    registry.expect("ns/b", "5", "6", {"v": 6})
    assert len(registry) == 2
    assert registry.take("2") is None
    assert registry.take("3") == ("ns/a", "2", {"v": 3})
    assert registry.take("3") is None
    registry.drop("ns/b")
    assert len(registry) == 0 and registry.take("6") is None
    registry.expect("ns/c", "7", "8", {})
    registry.clear()
    assert len(registry) == 0



def test_wait_past_returns_once_the_cache_moved_past_a_version(
    apiserver: ApiServer, kube: KubeClient, informer: tuple[Informer, Updates],
) -> None:
    inf, _ = informer
    base = rv(inf.indexer.get(KEY))
    apiserver.stall_watches(True)
    response = patch(kube, "1")
    assert inf.wait_past(KEY, base, 0.05) is False  # the watch is stalled: the cache cannot have moved
    waited: list[bool] = []
    waiter = threading.Thread(target=lambda: waited.append(inf.wait_past(KEY, base, EVENTUALLY)))
    waiter.start()
    wait_for(lambda: KEY in inf._awaited, message="the waiter registered")
    apiserver.stall_watches(False)
    waiter.join(EVENTUALLY)
    assert waited == [True]
    assert rv(inf.indexer.get(KEY)) == rv(response)
    assert inf.wait_past(KEY, base, 0) is True  # past it already: no wait
    assert not inf._awaited


def test_own_writes_await_the_echo_of_their_last_write_only(
    apiserver: ApiServer, kube: KubeClient, informer: tuple[Informer, Updates],
) -> None:
    inf, _ = informer
    waits: list[tuple[str, str]] = []

    def wait_past(key: str, version: str, timeout: float) -> bool:
        waits.append((key, version))
        return inf.wait_past(key, version, timeout)

    own = OwnWrites(recorded=inf.expect_echo, wait_past=wait_past)
    cached = inf.indexer.get(KEY)
    assert cached is not None
    assert own.await_echo(KEY, cached, EVENTUALLY) is True and waits == []  # not a write of ours: nothing to wait
    apiserver.stall_watches(True)
    with own.writing(KEY, cached) as respond:
        response = patch(kube, "1")
        respond(response)
    assert own.await_echo(KEY, response, 0.05) is False  # the echo is held back
    assert waits == [(KEY, rv(cached))]
    apiserver.stall_watches(False)
    assert own.await_echo(KEY, response, EVENTUALLY) is True
    assert rv(inf.indexer.get(KEY)) == rv(response)
    assert OwnWrites().await_echo(KEY, response, EVENTUALLY) is True  # no cache to wait on: never blocks
