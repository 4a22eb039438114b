"""Events against the in-memory API server: aggregation of repeats and the Normal-event budget."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from zkop_testing.apiserver import ApiServer
from zkop_testing.waiting import EVENTUALLY, wait_for

from zkop.kube.client import JSON, KubeClient, resource_path
from zkop.kube.events import EventRecorder, EventType


@pytest.fixture
def kube() -> Iterator[KubeClient]:
    with ApiServer() as server:
        client = KubeClient(server.api_client(), default_timeout=5)
        yield client
        client.close()


def events(kube: KubeClient) -> list[JSON]:
    items: list[JSON] = kube.request("GET", resource_path("", "v1", "events", "default"))["items"]
    return items


def subject(name: str) -> JSON:
    return {"apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperConfig",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "1"}}


def test_repeats_are_aggregated_and_normal_events_have_a_budget(kube: KubeClient) -> None:
    recorder = EventRecorder(kube, normal_qps=0.001, normal_burst=3)
    recorder.start()
    try:
        for i in range(6):
            recorder.event(subject(f"o{i}"), "Normal", "Created", f"znode /o{i} created")
        for _ in range(3):
            recorder.event(subject("bad"), "Warning", "InvalidSpec", "spec.path: must be absolute")
        wait_for(lambda: len(events(kube)) == 4 and any(e.get("count") == 3 for e in events(kube)),
                 message="3 Normal events and one aggregated Warning")
    finally:
        recorder.stop()
    by_reason = {e["reason"]: e for e in events(kube)}
    assert by_reason["InvalidSpec"]["count"] == 3 and by_reason["InvalidSpec"]["type"] == "Warning"
    assert sorted(e["involvedObject"]["name"] for e in events(kube) if e["reason"] == "Created") == ["o0", "o1", "o2"]


class _BlockedWriter(EventRecorder):
    """A recorder whose writes wait for the test: an API server that is slow to answer."""

    def __init__(self, kube: KubeClient) -> None:
        super().__init__(kube, max_pending=2)
        self.release = threading.Event()
        self.writes: list[str] = []

    def _write(self, obj: JSON, type_: EventType, reason: str, message: str) -> None:
        self.release.wait(EVENTUALLY)
        self.writes.append(reason)


def test_stop_with_a_full_queue_ends_the_writer_after_the_write_in_hand(kube: KubeClient) -> None:
    recorder = _BlockedWriter(kube)
    recorder.start()
    for reason in ("InHand", "Queued1", "Queued2"):
        recorder.event(subject("a"), "Warning", reason, "m")
    wait_for(lambda: recorder._queue.qsize() == 2, message="one write in hand, the queue full")
    recorder.stop(0.05)  # the queue is full: no room for the flush marker
    assert recorder._thread is not None and recorder._thread.is_alive()  # still in its write
    recorder.release.set()
    recorder._thread.join(EVENTUALLY)
    assert not recorder._thread.is_alive()
    assert recorder.writes == ["InHand"]  # what was still queued at stop is not written afterwards
