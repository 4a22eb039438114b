"""Watch semantics: initial events, resume from a version, selectors, bookmarks, 410, timeouts and hooks."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import kubernetes.client as k8s
import kubernetes.watch
import pytest
import urllib3
from apiserver_helpers import WatchCollector, api_error, cm, zkc, zkc_path
from zkop_testing import apiserver as apiserver_module
from zkop_testing.apiserver import ApiServer
from zkop_testing.apiserver_fixtures import wait_for
from zkop_testing.waiting import EVENTUALLY

from zkop.kube.client import MERGE_PATCH, KubeClient, resource_path

JSON = dict[str, Any]


def cms(ns: str, name: str | None = None) -> str:
    return resource_path("", "v1", "configmaps", ns, name)


def test_watch_from_a_list_version_sees_every_later_change(kube: KubeClient, server: ApiServer, ns: str) -> None:
    kube.request("POST", cms(ns), body=cm("before"))
    rv = kube.request("GET", cms(ns))["metadata"]["resourceVersion"]
    # changes between the list and the watch request must not be missed
    kube.request("POST", cms(ns), body=cm("a"))
    kube.request("PATCH", cms(ns, "a"), body={"data": {"k": "2"}}, content_type=MERGE_PATCH)
    watch = WatchCollector(kube, cms(ns), {"resourceVersion": rv})
    wait_for(lambda: len(watch.events) == 2, message="replayed events")
    kube.request("DELETE", cms(ns, "a"))
    wait_for(lambda: len(watch.events) == 3, message="live event")
    watch.stop(server)
    assert watch.names() == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in watch.events]
    assert versions == sorted(versions) and versions[0] > int(rv)
    assert watch.events[1]["object"]["data"] == {"k": "2"}
    assert watch.events[0]["object"]["kind"] == "ConfigMap" and watch.events[0]["object"]["apiVersion"] == "v1"


@pytest.mark.parametrize("rv", [None, "", "0"])
def test_watch_without_a_version_starts_with_synthetic_added_events(kube: KubeClient, server: ApiServer, ns: str,
                                                                    rv: str | None) -> None:
    for name in ("b", "a"):
        kube.request("POST", cms(ns), body=cm(name))
    query = {} if rv is None else {"resourceVersion": rv}
    watch = WatchCollector(kube, cms(ns), query)
    wait_for(lambda: len(watch.events) == 2, message="initial events")
    kube.request("POST", cms(ns), body=cm("c"))
    wait_for(lambda: len(watch.events) == 3, message="live event")
    watch.stop(server)
    assert watch.names() == [("ADDED", "a"), ("ADDED", "b"), ("ADDED", "c")]


def test_label_selector_transitions_become_added_and_deleted(kube: KubeClient, server: ApiServer, ns: str) -> None:
    rv = kube.request("GET", cms(ns))["metadata"]["resourceVersion"]
    watch = WatchCollector(kube, cms(ns), {"resourceVersion": rv, "labelSelector": "app=zk,tier in (a,b)"})
    wait_for(lambda: server.open_watch_count == 1, message="watch open")
    kube.request("POST", cms(ns), body=cm("x", labels={"app": "zk", "tier": "a"}))       # ADDED
    kube.request("POST", cms(ns), body=cm("other", labels={"app": "web", "tier": "a"}))  # not selected
    kube.request("PATCH", cms(ns, "x"), body={"data": {"k": "2"}}, content_type=MERGE_PATCH)  # MODIFIED
    kube.request("PATCH", cms(ns, "x"), body={"metadata": {"labels": {"tier": "c"}}},
                 content_type=MERGE_PATCH)  # leaves the selection -> DELETED
    kube.request("PATCH", cms(ns, "other"), body={"metadata": {"labels": {"app": "zk"}}},
                 content_type=MERGE_PATCH)  # enters the selection -> ADDED
    kube.request("DELETE", cms(ns, "x"))  # not selected anymore: nothing
    kube.request("DELETE", cms(ns, "other"))  # DELETED
    wait_for(lambda: len(watch.events) == 5, message="5 events")
    watch.stop(server)
    assert watch.names() == [("ADDED", "x"), ("MODIFIED", "x"), ("DELETED", "x"), ("ADDED", "other"),
                             ("DELETED", "other")]
    gone = watch.events[2]["object"]
    # the DELETED for a selector transition carries the previous content with the event's resourceVersion
    assert gone["metadata"]["labels"]["tier"] == "a"
    assert int(gone["metadata"]["resourceVersion"]) > int(watch.events[1]["object"]["metadata"]["resourceVersion"])


def test_field_selector_and_namespace_scoping(kube: KubeClient, server: ApiServer, ns: str) -> None:
    kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": f"{ns}-2"}})
    everywhere = WatchCollector(kube, "/api/v1/configmaps", {"fieldSelector": "metadata.name=target",
                                                               "resourceVersion": str(server.resource_version)})
    local = WatchCollector(kube, cms(ns), {"fieldSelector": "metadata.name!=target",
                                            "resourceVersion": str(server.resource_version)})
    wait_for(lambda: server.open_watch_count == 2, message="watches open")
    for namespace in (ns, f"{ns}-2"):
        kube.request("POST", cms(namespace), body=cm("target"))
        kube.request("POST", cms(namespace), body=cm("noise"))
    wait_for(lambda: len(everywhere.events) == 2 and len(local.events) == 1, message="events")
    everywhere.stop(server)
    local.stop(server)
    assert [e["object"]["metadata"]["namespace"] for e in everywhere.events] == [ns, f"{ns}-2"]
    assert local.names() == [("ADDED", "noise")]
    status, body = api_error(lambda: kube.request("GET", cms(ns), query={"watch": "true",
                                                                         "fieldSelector": "spec.foo=1"}))
    assert status == 400 and body["message"] == "field label not supported: spec.foo"


def test_bookmarks_carry_the_current_version(kube: KubeClient, server: ApiServer, ns: str) -> None:
    server.bookmark_interval = 0.05
    watch = WatchCollector(kube, cms(ns), {"allowWatchBookmarks": "true", "resourceVersion": "0"})
    kube.request("POST", cms(ns), body=cm("a"))
    # A bookmark comes only once the resource version moved past the watch's start (cache_watcher.go);
    # the watch may open after "a" was created, so a later write elsewhere is what moves it for sure.
    wait_for(lambda: "ADDED" in watch.types(), message="the watch is open")
    kube.request("POST", "/api/v1/namespaces/default/configmaps", body=cm("elsewhere"))
    current = server.resource_version
    wait_for(lambda: watch.events[-1]["type"] == "BOOKMARK"
             and watch.events[-1]["object"]["metadata"]["resourceVersion"] == str(current),
             message="bookmark at the current version")
    watch.stop(server)
    bookmark = watch.events[-1]["object"]
    assert bookmark == {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"resourceVersion": str(current)}}
    plain = WatchCollector(kube, cms(ns), {"timeoutSeconds": 1, "resourceVersion": str(current)})
    assert plain.finished.wait(EVENTUALLY)  # the checks below are about the ended watch
    assert plain.error is None and plain.events == []


def test_timeout_seconds_ends_the_stream_cleanly(kube: KubeClient, ns: str) -> None:
    events = list(kube.watch(cms(ns), query={"timeoutSeconds": 1}, timeout=(5, 10)))
    assert events == []


def test_too_old_resource_version_gets_410(kube: KubeClient, server: ApiServer, ns: str) -> None:
    created = kube.request("POST", cms(ns), body=cm("a"))
    old = created["metadata"]["resourceVersion"]
    kube.request("PATCH", cms(ns, "a"), body={"data": {"k": "2"}}, content_type=MERGE_PATCH)
    server.expire_history()
    events = list(kube.watch(cms(ns), query={"resourceVersion": old}, timeout=(5, 10)))
    current = server.resource_version
    assert events == [{"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f"too old resource version: {old} ({current})", "reason": "Expired", "code": 410}}]
    # from the current version the watch works
    watch = WatchCollector(kube, cms(ns), {"resourceVersion": str(current)})
    kube.request("DELETE", cms(ns, "a"))
    wait_for(lambda: watch.types() == ["DELETED"], message="DELETED")
    watch.stop(server)


def test_bootstrap_versions_are_not_replayable(kube: KubeClient) -> None:
    events = list(kube.watch("/api/v1/namespaces", query={"resourceVersion": "1"}, timeout=(5, 10)))
    assert events[0]["type"] == "ERROR" and events[0]["object"]["code"] == 410


def test_history_size_bounds_replay() -> None:
    with ApiServer(history_size=3) as server:
        kube = KubeClient(server.api_client())
        first = kube.request("POST", cms("default"), body=cm("a"))
        for i in range(4):
            kube.request("PATCH", cms("default", "a"), body={"data": {"k": str(i)}}, content_type=MERGE_PATCH)
        events = list(kube.watch(cms("default"), query={"resourceVersion": first["metadata"]["resourceVersion"]},
                                 timeout=(5, 10)))
        assert events[0]["object"]["reason"] == "Expired"
        recent = str(server.resource_version - 2)
        watch = WatchCollector(kube, cms("default"), {"resourceVersion": recent})
        wait_for(lambda: len(watch.events) == 2, message="2 retained events")
        watch.stop(server)
        kube.close()


def test_bookmark_cadence_is_kube_apiservers(kube: KubeClient, server: ApiServer, ns: str) -> None:
    # k8s.io/apiserver pkg/storage/cacher: cacher.go defaultBookmarkFrequency = 1 minute; cache_watcher.go
    # nextBookmarkTime (every minute and 2 s before the timeout) and processInterval (only events, bookmarks
    # included, newer than the watch's start resourceVersion are sent).
    assert server.bookmark_interval == 60
    rv = str(server.resource_version)
    quiet = WatchCollector(kube, cms(ns), {"allowWatchBookmarks": "true", "resourceVersion": rv,
                                           "timeoutSeconds": "3"})
    assert quiet.finished.wait(EVENTUALLY) and quiet.error is None
    assert quiet.events == []  # no bookmark: the version did not move
    moved = WatchCollector(kube, cms(ns), {"allowWatchBookmarks": "true", "resourceVersion": rv,
                                           "timeoutSeconds": "3"})
    kube.request("POST", "/api/v1/namespaces/default/configmaps", body=cm("elsewhere"))
    assert moved.finished.wait(EVENTUALLY) and moved.error is None
    assert moved.types() == ["BOOKMARK"]  # the pre-timeout one, 1 s after the start
    assert moved.events[0]["object"]["metadata"]["resourceVersion"] == str(server.resource_version)


def test_drop_watches_cuts_streams(kube: KubeClient, server: ApiServer, ns: str) -> None:
    watch = WatchCollector(kube, cms(ns), {})
    wait_for(lambda: server.open_watch_count == 1, message="watch open")
    assert server.drop_watches() == 1
    assert watch.finished.wait(EVENTUALLY)
    assert isinstance(watch.error, urllib3.exceptions.ProtocolError)
    wait_for(lambda: server.open_watch_count == 0, message="watch unregistered")


def test_a_watch_cut_before_its_headers_ends_as_a_truncated_stream(
        kube: KubeClient, server: ApiServer, ns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # drop_watches between a watch's registration and its response headers: the client must see the
    # stream cut (a ProtocolError), not a connection closed before any response, which urllib3 retries
    # (a GET), so the watch would silently reopen and never end (the cause of 4ccb63b, for every caller
    # of drop_watches, not only those that wait for open_watch_count first).
    registered = threading.Event()
    dropped = threading.Event()
    send_response = apiserver_module._Handler.send_response

    def held_send_response(handler: Any, code: int, message: str | None = None) -> None:
        if "watch=true" in handler.path and not dropped.is_set():
            registered.set()
            dropped.wait(EVENTUALLY)
        send_response(handler, code, message)

    monkeypatch.setattr(apiserver_module._Handler, "send_response", held_send_response)
    watch = WatchCollector(kube, cms(ns), {})
    assert registered.wait(EVENTUALLY)
    assert server.open_watch_count == 0 and len(server.store.open_watches()) == 1  # registered, no headers yet
    assert server.drop_watches() == 1
    dropped.set()
    assert watch.finished.wait(EVENTUALLY)
    assert isinstance(watch.error, urllib3.exceptions.ProtocolError)
    assert server.count_requests("watch", "configmaps") == 1  # not reopened behind the client's back
    wait_for(lambda: not server.store.open_watches(), message="watch unregistered")


def test_stalled_watches_send_nothing_until_resumed(kube: KubeClient, server: ApiServer, ns: str) -> None:
    server.bookmark_interval = 0.05
    rv = str(server.resource_version)
    server.stall_watches(True)
    stalled = WatchCollector(kube, cms(ns), {"resourceVersion": rv, "allowWatchBookmarks": "true"},
                             read_timeout=0.5)
    patient = WatchCollector(kube, cms(ns), {"resourceVersion": rv}, read_timeout=30)
    kube.request("POST", cms(ns), body=cm("a"))
    assert stalled.finished.wait(EVENTUALLY)
    assert isinstance(stalled.error, urllib3.exceptions.ReadTimeoutError)
    assert stalled.events == [] and patient.events == []
    server.stall_watches(False)
    wait_for(lambda: patient.names() == [("ADDED", "a")], message="event after resume")
    patient.stop(server)


class _WaitRecordingCondition(threading.Condition):
    """A Condition that tells when someone waits on it for a predicate (``stall_watches`` for the writers)."""

    def __init__(self) -> None:
        super().__init__()
        self.predicate_waited = threading.Event()

    def wait_for(self, predicate: Callable[[], Any], timeout: float | None = None) -> Any:
        self.predicate_waited.set()
        return super().wait_for(predicate, timeout)


def test_stall_returns_once_no_stream_can_write(kube: KubeClient, server: ApiServer, ns: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # A stream that has passed its stall check is held at its write until the stall has begun (and
    # either waits for that write or has already returned): stall_watches(True) must not return before
    # the write, or the caller would see an event arrive after it believed the watches silent.
    cond = _WaitRecordingCondition()
    monkeypatch.setattr(server, "_stall", cond)  # a fresh server: no stream uses the old one
    returned, holding = threading.Event(), threading.Event()
    written: list[str] = []
    write_event = server._write_event

    def held_write_event(handler: Any, event: Any) -> None:
        name = event["object"]["metadata"]["name"]
        if name == "a":
            holding.set()
            wait_for(lambda: server._stalled and (returned.is_set() or cond.predicate_waited.is_set()),
                     message="the stall began")
        write_event(handler, event)
        written.append(name)

    monkeypatch.setattr(server, "_write_event", held_write_event)
    rv = str(server.resource_version)
    watch = WatchCollector(kube, cms(ns), {"resourceVersion": rv})
    kube.request("POST", cms(ns), body=cm("a"))
    assert holding.wait(EVENTUALLY)  # the stream passed its stall check and is at its write
    try:
        server.stall_watches(True)
        written_by_then = list(written)
    finally:
        returned.set()
    assert written_by_then == ["a"]
    wait_for(lambda: watch.names() == [("ADDED", "a")], message="the event written before the stall")
    kube.request("POST", cms(ns), body=cm("b"))
    server.stall_watches(False)
    wait_for(lambda: watch.names() == [("ADDED", "a"), ("ADDED", "b")], message="the event after resume")
    watch.stop(server)


def test_watch_of_a_deleted_crd_ends(kube: KubeClient, server: ApiServer, crd: JSON, ns: str) -> None:
    kube.request("POST", zkc_path(ns), body=zkc("a"))
    watch = WatchCollector(kube, zkc_path(ns), {"resourceVersion": "0"})
    wait_for(lambda: watch.names() == [("ADDED", "a")], message="initial event")
    kube.request("DELETE", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}")
    assert watch.finished.wait(EVENTUALLY)
    assert watch.error is None
    assert watch.names() == [("ADDED", "a"), ("DELETED", "a")]


def test_send_initial_events_ends_with_an_annotated_bookmark(kube: KubeClient, server: ApiServer, ns: str) -> None:
    kube.request("POST", cms(ns), body=cm("a"))
    watch = WatchCollector(kube, cms(ns), {"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan",
                                           "allowWatchBookmarks": "true"})
    wait_for(lambda: len(watch.events) >= 2, message="initial events")
    watch.stop(server)
    assert watch.events[0]["type"] == "ADDED"
    assert watch.events[1]["type"] == "BOOKMARK"
    assert watch.events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    status, _ = api_error(lambda: kube.request("GET", cms(ns), query={"watch": "1", "sendInitialEvents": "true"}))
    assert status == 422


def test_typed_watch_stream(api: Any, server: ApiServer, ns: str) -> None:
    core = k8s.CoreV1Api(api)

    def writer() -> None:
        wait_for(lambda: server.open_watch_count == 1, message="watch open")
        core.create_namespaced_config_map(ns, k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name="typed")))

    thread = threading.Thread(target=writer)
    thread.start()
    seen = []
    watch = kubernetes.watch.Watch()  # type: ignore[no-untyped-call]
    for event in watch.stream(core.list_namespaced_config_map, ns, timeout_seconds=5):  # type: ignore[no-untyped-call]
        seen.append((event["type"], event["object"].metadata.name))
        watch.stop()  # type: ignore[no-untyped-call]
    thread.join()
    assert seen == [("ADDED", "typed")]


def test_concurrent_writers_and_list_then_watch(kube: KubeClient, server: ApiServer, ns: str) -> None:
    listing = kube.request("GET", cms(ns))
    watch = WatchCollector(kube, cms(ns), {"resourceVersion": listing["metadata"]["resourceVersion"]})

    def write(prefix: str) -> None:
        client = KubeClient(server.api_client())
        for i in range(15):
            client.request("POST", cms(ns), body=cm(f"{prefix}-{i}"))
            client.request("PATCH", cms(ns, f"{prefix}-{i}"), body={"data": {"n": str(i)}}, content_type=MERGE_PATCH)
        client.close()

    threads = [threading.Thread(target=write, args=(p,)) for p in ("a", "b", "c", "d")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wait_for(lambda: len(watch.events) == 120, message="120 events")
    watch.stop(server)
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in watch.events]
    assert versions == sorted(set(versions))  # strictly increasing: no duplicates, in order
    assert len(kube.request("GET", cms(ns))["items"]) == 60


def test_fault_injection_fails_new_watches_but_not_open_ones(kube: KubeClient, server: ApiServer, ns: str) -> None:
    open_watch = WatchCollector(kube, cms(ns), {"resourceVersion": str(server.resource_version)})
    wait_for(lambda: server.open_watch_count == 1, message="watch open")
    server.fail_requests(1.0, codes=(500,), methods=["watch"])
    status, body = api_error(lambda: list(kube.watch(cms(ns), query={}, timeout=(5, 10))))
    assert status == 500 and body["reason"] == "InternalError"
    kube.request("POST", cms(ns), body=cm("still-flows"))
    wait_for(lambda: open_watch.names() == [("ADDED", "still-flows")], message="event on the open watch")
    server.fail_requests(0)
    open_watch.stop(server)
