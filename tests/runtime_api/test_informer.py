"""The informer against the in-memory API server, with injected faults.

After a storm of creates, updates and deletes under dropped watches, expired
history (410 Gone), failing requests and stalled streams, the cache must equal
the server's state and every deletion must have been delivered.
"""

from __future__ import annotations

import random
import threading
from typing import Any

from zkop_testing.apiserver import ApiServer
from zkop_testing.waiting import EVENTUALLY, wait_for

from zkop.kube.client import JSON, ApiException, KubeClient, resource_path
from zkop.runtime.cache import Backoff, Informer, ResourceRef, meta_namespace_key

CONFIGMAPS = ResourceRef("", "v1", "configmaps")


class Recorder:
    """An event handler that records what it is told (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.added: list[str] = []
        self.updated: list[str] = []
        self.deleted: list[str] = []
        self.deleted_objects: dict[str, JSON] = {}

    def on_add(self, obj: JSON) -> None:
        with self.lock:
            self.added.append(meta_namespace_key(obj))

    def on_update(self, old: JSON, new: JSON) -> None:
        with self.lock:
            self.updated.append(meta_namespace_key(new))

    def on_delete(self, obj: JSON) -> None:
        with self.lock:
            self.deleted.append(meta_namespace_key(obj))
            self.deleted_objects[meta_namespace_key(obj)] = obj


def configmap(name: str, value: str, namespace: str = "default") -> JSON:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
            "data": {"v": value}}


def server_state(kube: KubeClient) -> dict[str, str]:
    items = kube.request("GET", resource_path("", "v1", "configmaps"))["items"]
    return {meta_namespace_key(i): i["metadata"]["resourceVersion"] for i in items}


def cache_state(informer: Informer) -> dict[str, str]:
    return {meta_namespace_key(o): o["metadata"]["resourceVersion"] for o in informer.indexer.list()}


def start_informer(kube: KubeClient, **kw: Any) -> tuple[Informer, Recorder]:
    informer = Informer(kube, CONFIGMAPS, resync_period=0, page_size=7, inactivity_timeout=kw.pop("inactivity", 30.0),
                        backoff=Backoff(initial=0.05, cap=0.2), **kw)
    recorder = Recorder()
    informer.add_event_handler(recorder)
    informer.start()
    assert informer.wait_for_sync(EVENTUALLY)
    return informer, recorder


def test_initial_paginated_list_then_watch(kube: KubeClient) -> None:
    for i in range(20):
        kube.request("POST", resource_path("", "v1", "configmaps", "default"), body=configmap(f"cm-{i}", "a"))
    informer, recorder = start_informer(kube)
    try:
        assert len(recorder.added) == 20
        kube.request("POST", resource_path("", "v1", "configmaps", "default"), body=configmap("late", "a"))
        wait_for(lambda: "default/late" in recorder.added, message="watch delivered ADDED")
        assert cache_state(informer) == server_state(kube)
    finally:
        informer.stop()


def test_relist_after_410_delivers_deletions_from_the_gap(apiserver: ApiServer, kube: KubeClient) -> None:
    for i in range(5):
        kube.request("POST", resource_path("", "v1", "configmaps", "default"), body=configmap(f"cm-{i}", "a"))
    informer, recorder = start_informer(kube)
    try:
        relists = informer.reflectors[0].relists
        apiserver.stall_watches(True)
        kube.request("DELETE", resource_path("", "v1", "configmaps", "default", "cm-1"))
        kube.request("PUT", resource_path("", "v1", "configmaps", "default", "cm-2"),
                     body={**kube.request("GET", resource_path("", "v1", "configmaps", "default", "cm-2")),
                           "data": {"v": "b"}})
        apiserver.expire_history()
        apiserver.stall_watches(False)
        apiserver.drop_watches()
        wait_for(lambda: informer.reflectors[0].relists > relists, message="relisted after 410")
        wait_for(lambda: cache_state(informer) == server_state(kube), message="cache converged")
        assert "default/cm-1" in recorder.deleted
        assert recorder.deleted_objects["default/cm-1"]["data"] == {"v": "a"}  # the last known object
        assert "default/cm-2" in recorder.updated
    finally:
        informer.stop()


def test_stalled_watch_is_abandoned_after_inactivity_timeout(apiserver: ApiServer, kube: KubeClient) -> None:
    informer, recorder = start_informer(kube, inactivity=1.0)
    try:
        # At least one: with a 1 s inactivity timeout and nothing happening, the informer reopens its
        # silent watch every second, so a test paused that long would wait for "exactly one" forever.
        wait_for(lambda: apiserver.count_requests("watch", "configmaps") >= 1, message="the watch opened")
        apiserver.stall_watches(True)
        kube.request("POST", resource_path("", "v1", "configmaps", "default"), body=configmap("during-stall", "a"))
        opened = apiserver.count_requests("watch", "configmaps")  # the newest of them is stalled too
        # While every stream is still silent, the informer must give up on the stalled one and open a
        # new watch by itself: unstalling alone would also deliver the buffered event on the old stream.
        wait_for(lambda: apiserver.count_requests("watch", "configmaps") > opened,
                 message="a new watch opened after the inactivity timeout")
        assert "default/during-stall" not in recorder.added
        apiserver.stall_watches(False)
        wait_for(lambda: "default/during-stall" in recorder.added,
                 message="event seen after the stalled stream was replaced")
    finally:
        informer.stop()


def test_storm_under_faults_converges(apiserver: ApiServer, kube: KubeClient) -> None:
    rng = random.Random(7)
    informer, recorder = start_informer(kube)
    names = [f"storm-{i}" for i in range(30)]
    live: set[str] = set()
    deleted_ever: set[str] = set()
    try:
        for step in range(300):
            if step % 50 == 10:
                apiserver.drop_watches()
            if step % 97 == 30:
                apiserver.expire_history()
                apiserver.drop_watches()
            if step == 120:
                apiserver.fail_requests(0.3, seed=3)
            if step == 200:
                apiserver.fail_requests(0)
            name = rng.choice(names)
            try:
                if name in live and rng.random() < 0.4:
                    kube.request("DELETE", resource_path("", "v1", "configmaps", "default", name))
                    live.discard(name)
                    deleted_ever.add(f"default/{name}")
                elif name in live:
                    obj = kube.request("GET", resource_path("", "v1", "configmaps", "default", name))
                    obj["data"] = {"v": str(step)}
                    kube.request("PUT", resource_path("", "v1", "configmaps", "default", name), body=obj)
                else:
                    kube.request("POST", resource_path("", "v1", "configmaps", "default"),
                                 body=configmap(name, str(step)))
                    live.add(name)
            except ApiException as err:
                assert err.status in (500, 429), err
        apiserver.fail_requests(0)
        apiserver.drop_watches()
        wait_for(lambda: cache_state(informer) == server_state(kube), message="cache converged")
        # Every object the informer ever knew and that is gone now got a delete (an object created and
        # deleted entirely inside a watch gap is never seen, as with client-go).
        seen = set(recorder.added) | set(recorder.updated)
        gone = deleted_ever - {f"default/{n}" for n in live}
        assert gone & seen <= set(recorder.deleted)
        assert gone & seen, "the storm deleted nothing the informer had seen"
    finally:
        informer.stop()


def test_namespaced_informers_only_see_their_namespaces(kube: KubeClient) -> None:
    kube.request("POST", resource_path("", "v1", "namespaces"),
                 body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    kube.request("POST", resource_path("", "v1", "configmaps", "team-a"), body=configmap("a", "1", "team-a"))
    kube.request("POST", resource_path("", "v1", "configmaps", "default"), body=configmap("d", "1"))
    informer, recorder = start_informer(kube, namespaces=["team-a"])
    try:
        assert recorder.added == ["team-a/a"]
    finally:
        informer.stop()


def test_resync_redelivers_from_cache_without_api_calls(apiserver: ApiServer, kube: KubeClient) -> None:
    kube.request("POST", resource_path("", "v1", "configmaps", "default"), body=configmap("r", "1"))
    informer, recorder = start_informer(kube)
    try:
        before = apiserver.request_log
        informer.resync()
        assert recorder.updated == ["default/r"]
        assert apiserver.request_log == before
    finally:
        informer.stop()
