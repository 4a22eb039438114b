"""The informer transform (client-go ``SetTransform``) and the cache of named objects, against the
in-memory API server seeded like a real cluster (``zkop_testing.apiserver_realistic``)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest
from zkop_testing.apiserver import ApiServer
from zkop_testing.apiserver_realistic import seed
from zkop_testing.waiting import EVENTUALLY, wait_for

from zkop.kube.client import JSON, MERGE_PATCH, KubeClient, resource_path
from zkop.runtime.cache import Informer, NamedObjectInformer, ResourceRef, meta_namespace_key
from zkop.runtime.cache.transform import LAST_APPLIED, compact, default_transform, strip_unused_fields

CONFIGMAPS = ResourceRef("", "v1", "configmaps")
SECRETS = ResourceRef("", "v1", "secrets")
#: No silent watch is reopened during these tests (an hour): with 5 s, a test paused that long on a busy
#: machine saw a third watch where it counts two, or a second where it asserts the one watch of no 410 loop.
NO_INACTIVITY = 3600.0


class Recorder:
    """Records ``(event, key, data)`` in order (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: list[tuple[str, str, object]] = []

    def on_add(self, obj: JSON) -> None:
        self._note("add", obj)

    def on_update(self, old: JSON, new: JSON) -> None:
        self._note("update", new)

    def on_delete(self, obj: JSON) -> None:
        self._note("delete", obj)

    def _note(self, event: str, obj: JSON) -> None:
        with self.lock:
            self.seen.append((event, meta_namespace_key(obj), (obj.get("data") or {}).get("v")))

    def events(self) -> list[tuple[str, str, object]]:
        with self.lock:
            return list(self.seen)


@pytest.fixture
def apiserver() -> Iterator[ApiServer]:
    """conftest's ``apiserver`` (and so its ``kube`` client), seeded like a real cluster."""
    with ApiServer() as s:
        seed(s, namespaces=["team-a"], helm_secrets=6, secret_kb=5)
        yield s


def configmap(name: str, value: str, namespace: str = "team-a") -> JSON:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": name, "namespace": namespace, "annotations": {LAST_APPLIED: '{"big": "copy"}', "keep": "me"}},
        "data": {"v": value}}


def cm_path(name: str | None = None, namespace: str = "team-a") -> str:
    return resource_path("", "v1", "configmaps", namespace, name)


def test_the_transform_strips_what_zkop_never_reads(apiserver: ApiServer, kube: KubeClient) -> None:
    kube.request("POST", cm_path(), body=configmap("app", "1"))
    informer = Informer(kube, CONFIGMAPS, namespaces=["team-a"], resync_period=0)
    informer.start()
    try:
        assert informer.wait_for_sync(EVENTUALLY)
        listed = informer.indexer.get("team-a/app")
        assert listed is not None and "managedFields" not in listed["metadata"]
        assert listed["metadata"]["annotations"] == {"keep": "me"}
        kube.request("PATCH", cm_path("app"), body={"data": {"v": "2"}}, content_type=MERGE_PATCH)
        wait_for(lambda: (informer.indexer.get("team-a/app") or {}).get("data") == {"v": "2"})
        watched = informer.indexer.get("team-a/app")
        assert watched is not None and "managedFields" not in watched["metadata"]
        # The server's object still has them: only the cache is trimmed.
        assert kube.request("GET", cm_path("app"))["metadata"]["managedFields"]
    finally:
        informer.stop()
    whole = Informer(kube, CONFIGMAPS, namespaces=["team-a"], resync_period=0, transform=None)
    whole.start()
    try:
        assert whole.wait_for_sync(EVENTUALLY)
        assert (whole.indexer.get("team-a/app") or {})["metadata"]["managedFields"]
    finally:
        whole.stop()


def test_compact_shares_keys_and_short_values_between_separately_decoded_objects() -> None:
    events = ['{"metadata": {"namespace": "team-a", "name": "a"}, "status": {"state": "Synced"}}',
              '{"metadata": {"namespace": "team-a", "name": "b"}, "status": {"state": "Synced"}}']
    a, b = (default_transform(json.loads(e)) for e in events)
    assert a == json.loads(events[0]) and b == json.loads(events[1])
    (key_a,), (key_b,) = a["status"].keys(), b["status"].keys()
    assert key_a is key_b and a["status"]["state"] is b["status"]["state"]
    assert a["metadata"]["namespace"] is b["metadata"]["namespace"]
    long_value = "x" * 100
    assert compact({"data": long_value})["data"] is long_value  # long values are kept as they are


def test_strip_unused_fields_leaves_other_annotations() -> None:
    obj: JSON = {"metadata": {"name": "x", "selfLink": "/x", "managedFields": [{}],
                              "annotations": {LAST_APPLIED: "{}"}}}
    assert strip_unused_fields(obj) == {"metadata": {"name": "x"}}


def test_named_objects_are_fetched_and_watched_one_by_one_never_listed(apiserver: ApiServer, kube: KubeClient) -> None:
    kube.request("POST", cm_path(), body=configmap("app", "1"))
    kube.request("POST", cm_path(), body=configmap("other", "1"))
    cache = NamedObjectInformer(kube, CONFIGMAPS, name="configmaps", inactivity_timeout=NO_INACTIVITY)
    recorder = Recorder()
    cache.add_event_handler(recorder)
    cache.track(["team-a/app", "team-a/later"])
    apiserver.clear_request_log()
    cache.start()
    try:
        assert cache.has_synced()
        wait_for(lambda: recorder.events() == [("add", "team-a/app", "1")], message="GET → add")
        wait_for(lambda: apiserver.count_requests("watch", "configmaps") == 2, message="two watches")
        kube.request("PATCH", cm_path("app"), body={"data": {"v": "2"}}, content_type=MERGE_PATCH)
        kube.request("PATCH", cm_path("other"), body={"data": {"v": "2"}}, content_type=MERGE_PATCH)
        kube.request("POST", cm_path(), body=configmap("later", "1"))  # absent at the GET
        wait_for(lambda: recorder.events()[1:] in ([("update", "team-a/app", "2"), ("add", "team-a/later", "1")],
                                                   [("add", "team-a/later", "1"), ("update", "team-a/app", "2")]),
                 message="update and late create delivered, nothing about 'other'")
        kube.request("DELETE", cm_path("app"))
        wait_for(lambda: recorder.events()[-1] == ("delete", "team-a/app", "2"))
        assert cache.get("team-a/app") is None and cache.indexer.get("team-a/other") is None
        cached = cache.get("team-a/later")
        assert cached is not None and "managedFields" not in cached["metadata"]
        # Untracked: the watch goes, the object leaves the cache.
        cache.untrack(["team-a/later"])
        assert cache.tracked() == ["team-a/app"] and cache.indexer.get("team-a/later") is None
    finally:
        cache.stop()
    reads = {(r.verb, r.namespace, r.name) for r in apiserver.request_log if r.resource == "configmaps"
             and r.verb in ("get", "list", "watch")}
    assert {verb for verb, _, _ in reads} == {"get", "watch"}  # never a LIST
    assert {name for _, _, name in reads} == {"app", "later"}  # and only the named ones


def test_get_on_demand_before_the_first_fetch_once_per_ttl(apiserver: ApiServer, kube: KubeClient) -> None:
    kube.request("POST", resource_path("", "v1", "secrets", "team-a"), body={
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "team-a"}, "data": {"k": "dg=="}})
    now = [100.0]
    cache = NamedObjectInformer(kube, SECRETS, name="secrets", get_ttl=5.0, clock=lambda: now[0])
    apiserver.clear_request_log()
    # Not started: every read is an on-demand GET, answered from the TTL cache for 5 s.
    for _ in range(3):
        found = cache.get("team-a/s")
        assert found is not None and found["data"] == {"k": "dg=="} and "managedFields" not in found["metadata"]
    assert cache.get("team-a/absent") is None and cache.get("team-a/absent") is None
    assert apiserver.count_requests("get", "secrets") == 2
    now[0] += 6
    cache.get("team-a/s")
    assert apiserver.count_requests("get", "secrets") == 3
    assert cache.tracked() == ["team-a/absent", "team-a/s"]  # read once, watched from then on
    cache.start()
    try:
        wait_for(lambda: all(r.synced.is_set() for r in cache.reflectors), message="reflectors synced")
        before = apiserver.count_requests("get", "secrets")
        assert cache.get("team-a/s") is not None and cache.get("team-a/absent") is None
        assert apiserver.count_requests("get", "secrets") == before  # from the cache now
    finally:
        cache.stop()


def test_an_object_unchanged_for_long_is_watched_without_a_410_loop(apiserver: ApiServer, kube: KubeClient) -> None:
    """The object's own resourceVersion is long compacted away on a real server (a Secret untouched
    for an hour): the watch must not start there, or every watch is 410 Gone and GET follows GET."""
    kube.request("POST", cm_path(), body=configmap("old", "1"))
    kube.request("POST", cm_path(), body=configmap("busy", "1"))
    for i in range(5):
        kube.request("PATCH", cm_path("busy"), body={"data": {"v": str(i)}}, content_type=MERGE_PATCH)
    apiserver.expire_history()  # the history no longer reaches back to "old"'s resourceVersion
    cache = NamedObjectInformer(kube, CONFIGMAPS, name="configmaps", inactivity_timeout=NO_INACTIVITY)
    recorder = Recorder()
    cache.add_event_handler(recorder)
    cache.track(["team-a/old"])
    apiserver.clear_request_log()
    cache.start()
    try:
        wait_for(lambda: apiserver.count_requests("watch", "configmaps") >= 1, message="watch open")
        kube.request("PATCH", cm_path("old"), body={"data": {"v": "2"}}, content_type=MERGE_PATCH)
        wait_for(lambda: recorder.events() == [("add", "team-a/old", "1"), ("update", "team-a/old", "2")],
                 message="the edit arrives through the watch")
        assert apiserver.count_requests("get", "configmaps") == 1
        assert apiserver.count_requests("watch", "configmaps") == 1
    finally:
        cache.stop()
