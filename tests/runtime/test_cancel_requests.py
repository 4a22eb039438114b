"""A reconcile blocked in an API request that never gets an answer does not outlive its controller's stop.

The peer is a real TCP server on loopback that reads each request and, for a path containing
``/hang``, never answers (what a dead TCP path or a stuck server looks like to the client); other
paths get ``200 {}``. The client is zkop's :class:`~zkop.kube.client.KubeClient` with its default
30 s request timeout, as ``zkop run`` makes it. Before the fix a stopped controller left such a
worker blocked for the whole timeout while the Manager went on to release the Lease (CI: ``zkop run``
still draining 30 s after SIGTERM, killed).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import kubernetes.client
import pytest
from zkop_testing.httpscript import ANSWER, ANSWER_AND_CLOSE, HANG, ScriptedServer
from zkop_testing.waiting import EVENTUALLY, wait_for

from zkop.kube.cancel import CancelToken, RequestCancelled, cancel_scope
from zkop.kube.client import KubeClient
from zkop.kube.events import EventRecorder
from zkop.runtime.controller import Controller, Result


def hang_on_hang(n: int, line: bytes) -> str:
    """The test server's script: a request for a ``/hang`` path is read and never answered, any other gets ``{}``."""
    return HANG if b"/hang" in line else ANSWER


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(hang_on_hang) as running:
        yield running


def client_of(server: ScriptedServer) -> KubeClient:
    """zkop's client (default 30 s request timeout, no rate limit) for the test server."""
    configuration = kubernetes.client.Configuration()
    configuration.host = f"http://127.0.0.1:{server.port}"
    return KubeClient(kubernetes.client.ApiClient(configuration))


class Deleter:
    """A reconciler that deletes ``/api/v1/namespaces/ns/services/<key>`` and then ``…/<key>-next``, as the importer's
    full sync deletes one object after another; it records how each request ended."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.outcomes: list[str] = []
        self.ended = threading.Event()

    def reconcile(self, key: str) -> Result:
        try:
            for name in (key, f"{key}-next"):
                try:
                    self.client.request("DELETE", f"/api/v1/namespaces/ns/services/{name}", body={})
                    self.outcomes.append(f"{name}: deleted")
                except RequestCancelled:
                    self.outcomes.append(f"{name}: cancelled")
            return Result()
        finally:
            self.ended.set()


def test_a_request_in_flight_when_the_drain_ends_is_aborted_and_the_next_is_never_sent(server: ScriptedServer) -> None:
    client = client_of(server)
    reconciler = Deleter(client)
    controller = Controller("cancel-test", reconciler, workers=1)
    controller.start()
    try:
        controller.queue.add("hang")
        wait_for(lambda: server.seen(b"/services/hang "), message="the DELETE reached the server")
        drained = controller.stop(0.2)
    finally:
        controller.stop(0.0)
        client.close()
    assert not drained  # the reconcile did not finish by itself
    # Stop returned with the worker gone (it joins them for WORKER_JOIN s), not blocked for the 30 s timeout.
    assert reconciler.ended.is_set()
    assert [t.name for t in controller._threads if t.is_alive()] == []
    # The second delete was refused before it was sent: no request and no connection for it.
    assert reconciler.outcomes == ["hang: cancelled", "hang-next: cancelled"]
    assert not server.seen(b"hang-next") and server.connections == 1


def test_a_thread_outside_the_cancelled_scope_goes_on_calling(server: ScriptedServer) -> None:
    """The Lease is released after the workers were cancelled, through the same client: that must still work."""
    client = client_of(server)
    token = CancelToken("test")
    outcome: list[BaseException] = []

    def blocked() -> None:
        with cancel_scope(token):
            try:
                client.request("GET", "/hang")
            except BaseException as err:
                outcome.append(err)

    worker = threading.Thread(target=blocked, name="cancel-test-worker", daemon=True)
    worker.start()
    try:
        wait_for(lambda: server.seen(b"/hang"), message="the request reached the server")
        assert token.cancel() == 1
        worker.join(EVENTUALLY)
        assert not worker.is_alive() and isinstance(outcome[0], RequestCancelled)
        assert client.request("GET", "/api/v1/namespaces/ns/leases/zkop", timeout=EVENTUALLY) == {}
    finally:
        client.close()


def test_a_pooled_connection_the_server_closed_while_idle_is_not_waited_on() -> None:
    """A keep-alive connection the server half-closed while idle (its FIN already here) is never read from for an
    answer: the client sees it dropped and opens a new one, so no request hangs on it until the read timeout."""
    with ScriptedServer(lambda n, line: ANSWER_AND_CLOSE) as server:
        client = client_of(server)
        try:
            assert client.request("GET", "/api/v1/namespaces") == {}
            assert server.closed.acquire(timeout=EVENTUALLY), "the server closed the idle connection"
            started = time.monotonic()
            assert client.request("DELETE", "/api/v1/namespaces/ns/services/billing", body={}) == {}
            assert time.monotonic() - started < EVENTUALLY / 2
            assert server.connections == 2
        finally:
            client.close()


def test_an_event_write_that_never_gets_an_answer_is_cancelled_when_the_recorder_stops(server: ScriptedServer) -> None:
    """The Manager stops the recorder after the leader runnables with what is left of the drain: its flush may use
    that much, then the write in hand is cancelled instead of holding the shutdown for the 30 s request timeout
    (CI: ``zkop run`` killed 30 s after SIGTERM while an Event POST went unanswered)."""
    client = client_of(server)
    recorder = EventRecorder(client)
    recorder.start()
    try:
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "hang", "uid": "u"}}
        recorder.event(pod, "Warning", "Stuck", "never written")
        wait_for(lambda: server.seen(b"/namespaces/hang/events"), message="the Event POST reached the server")
        recorder.stop(0.2)
        thread = recorder._thread
        assert thread is not None and not thread.is_alive()
    finally:
        client.close()
