"""A reconcile blocked in an API request that never gets an answer does not outlive its controller's stop.

The peer is a real TCP server on loopback that reads each request and, for a path containing
``/hang``, never answers (what a dead TCP path or a stuck server looks like to the client); other
paths get ``200 {}``. The client is zkop's :class:`~zkop.kube.client.KubeClient` with its default
30 s request timeout, as ``zkop run`` makes it. Before the fix a stopped controller left such a
worker blocked for the whole timeout while the Manager went on to release the Lease (CI: ``zkop run``
still draining 30 s after SIGTERM, killed).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from types import TracebackType

import kubernetes.client
import pytest
from zkop_testing.waiting import EVENTUALLY, wait_for

from zkop.kube.cancel import CancelToken, RequestCancelled, cancel_scope
from zkop.kube.client import KubeClient
from zkop.kube.events import EventRecorder
from zkop.runtime.controller import Controller, Result

#: What the test server answers a request it answers.
OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


class SilentServer:
    """Accepts connections; answers every request but those for ``/hang`` paths, which it reads and never answers.

    With ``close_idle`` it closes a keep-alive connection (a FIN) right after answering, as a server
    whose idle timeout passed does.
    """

    def __init__(self, *, close_idle: bool = False) -> None:
        self.close_idle = close_idle
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.connections = 0
        self.requests: list[bytes] = []
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._accepting = threading.Thread(target=self._accept, name="silent-server", daemon=True)

    def __enter__(self) -> SilentServer:
        self._accepting.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self._accepting.join(EVENTUALLY)
        with self._lock:
            socks, threads = list(self._socks), list(self._threads)
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in threads:
            thread.join(EVENTUALLY)

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(sock,), name="silent-server-conn", daemon=True)
            with self._lock:
                self.connections += 1
                self._socks.append(sock)
                self._threads.append(thread)
            thread.start()

    def _serve(self, sock: socket.socket) -> None:
        with contextlib.suppress(OSError), sock:
            self._answer(sock)

    def _answer(self, sock: socket.socket) -> None:
        buffer = b""
        while data := sock.recv(65536):
            buffer += data
            while b"\r\n\r\n" in buffer:
                head, _, rest = buffer.partition(b"\r\n\r\n")
                length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                if len(rest) < length:
                    break
                buffer = rest[length:]
                line = head.split(b"\r\n", 1)[0]
                with self._lock:
                    self.requests.append(line)
                if b"/hang" in line:
                    continue  # read, never answered
                sock.sendall(OK)
                if self.close_idle:
                    return

    def seen(self, needle: bytes) -> bool:
        """Whether a request line containing ``needle`` arrived."""
        with self._lock:
            return any(needle in line for line in self.requests)


@pytest.fixture
def server() -> Iterator[SilentServer]:
    with SilentServer() as running:
        yield running


def client_of(server: SilentServer) -> KubeClient:
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


def test_a_request_in_flight_when_the_drain_ends_is_aborted_and_the_next_is_never_sent(server: SilentServer) -> None:
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


def test_a_thread_outside_the_cancelled_scope_goes_on_calling(server: SilentServer) -> None:
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
    answer: urllib3 sees it dropped and opens a new one, so no request hangs on it until the read timeout."""
    with SilentServer(close_idle=True) as server:
        client = client_of(server)
        try:
            assert client.request("GET", "/api/v1/namespaces") == {}
            wait_for(lambda: server.connections == 1 and not server._threads[0].is_alive(),
                     message="the server closed the idle connection")
            started = time.monotonic()
            assert client.request("DELETE", "/api/v1/namespaces/ns/services/billing", body={}) == {}
            assert time.monotonic() - started < EVENTUALLY / 2
            assert server.connections == 2
        finally:
            client.close()


def test_an_event_write_that_never_gets_an_answer_is_cancelled_when_the_recorder_stops(server: SilentServer) -> None:
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
