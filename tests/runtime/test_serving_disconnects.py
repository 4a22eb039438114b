"""zkop's HTTP servers (``/metrics`` plain and HTTPS, the probes) and a client that goes away.

A client that resets its connection mid-request or while the server is still working on the answer,
or a TLS client that never sends its request, is logged at debug: nothing reaches stderr (where
``socketserver`` would print "Exception occurred during processing of request" and a traceback), nothing
counts as a handler error (:mod:`zkop_testing.server_errors`), and the server goes on serving. An
exception of the application itself is logged at error with its traceback, and the client gets a 500.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import struct
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from prometheus_client import REGISTRY
from prometheus_client.metrics_core import Metric
from zkop_testing import server_errors
from zkop_testing.apiserver import ApiServer
from zkop_testing.waiting import EVENTUALLY, wait_for

from zkop.kube.client import KubeClient
from zkop.runtime import serving
from zkop.runtime.metrics_auth import DelegatingAuth, UserInfo
from zkop.runtime.serving import HealthServer, SecureServing, start_metrics_server

#: A bearer token the API server does not know: HTTPS ``/metrics`` asks a TokenReview (after the
#: :class:`_Blocking`) and answers 401; the plain servers ignore it.
TOKEN = "unknown-token"


def reset(sock: socket.socket) -> None:
    """Close ``sock`` with an RST instead of a FIN (``SO_LINGER`` 0): what a killed or timed-out client does."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def insecure() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def request_threads(port: int) -> list[threading.Thread]:
    """The live threads running a request of the server on ``port``: ``socketserver.ThreadingMixIn`` starts each
    with its ``process_request_thread`` as target (until the thread ends, error handling included)."""
    found = []
    for thread in threading.enumerate():
        run = getattr(thread, "_target", None)
        address = getattr(getattr(run, "__self__", None), "server_address", ("", -1))
        if getattr(run, "__name__", "") == "process_request_thread" and address[1] == port:
            found.append(thread)
    return found


def reading_request(port: int) -> bool:
    """A request thread of the server on ``port`` is inside the request handler (past a TLS handshake, which runs on
    the same thread first): a reset now ends a request, not a handshake."""
    frames = sys._current_frames()
    for thread in request_threads(port):
        frame = frames.get(thread.ident or -1)
        while frame is not None:
            if frame.f_code is serving._QuietHandler.handle.__code__:
                return True
            frame = frame.f_back
    return False


class _Blocking:
    """Holds a request inside the server until :meth:`release` (a check, a collector, a review waits on it)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self._released = threading.Event()

    def wait(self) -> None:
        self.entered.set()
        self._released.wait(EVENTUALLY)

    def release(self) -> None:
        self._released.set()


class _BlockingCollector:
    def __init__(self, blocking: _Blocking) -> None:
        self.blocking = blocking

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> list[Metric]:
        self.blocking.wait()
        return []


class _BlockingAuth(DelegatingAuth):
    """Asks the API server only after :class:`_Blocking` lets it."""

    def __init__(self, client: KubeClient, blocking: _Blocking) -> None:
        super().__init__(client)
        self.blocking = blocking

    def authenticate(self, token: str) -> UserInfo | None:
        self.blocking.wait()
        return super().authenticate(token)


@dataclass
class Target:
    """A running zkop server, how to reach it, and a :class:`_Blocking` its next request waits on."""

    port: int
    path: str
    tls: bool
    blocking: _Blocking

    def connect(self) -> socket.socket:
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=EVENTUALLY)
        return insecure().wrap_socket(raw, server_hostname="localhost") if self.tls else raw

    def status(self) -> int:
        """The status of a complete, well-behaved request (the server still serves)."""
        self.blocking.release()
        url = f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}{self.path}"
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {TOKEN}"})
        context = insecure() if self.tls else None
        try:
            with urllib.request.urlopen(request, timeout=EVENTUALLY, context=context) as response:
                return int(response.status)
        except urllib.error.HTTPError as err:
            return int(err.code)


@contextlib.contextmanager
def _health(blocking: _Blocking) -> Iterator[Target]:
    health = HealthServer("127.0.0.1", 0)
    health.readiness["blocking"] = lambda: blocking.wait()
    health.start()
    try:
        yield Target(health.port, "/readyz", False, blocking)
    finally:
        health.shutdown()


@contextlib.contextmanager
def _metrics(blocking: _Blocking) -> Iterator[Target]:
    collector = _BlockingCollector(blocking)
    REGISTRY.register(collector)
    server = start_metrics_server("127.0.0.1:0")
    assert server is not None
    try:
        yield Target(server.port, "/metrics", False, blocking)
    finally:
        server.shutdown()
        REGISTRY.unregister(collector)


@contextlib.contextmanager
def _secure_metrics(blocking: _Blocking) -> Iterator[Target]:
    with ApiServer() as apiserver:
        kube = KubeClient(apiserver.api_client())
        server = start_metrics_server("127.0.0.1:0", SecureServing(_BlockingAuth(kube, blocking)))
        assert server is not None
        try:
            yield Target(server.port, "/metrics", True, blocking)
        finally:
            server.shutdown()
            kube.close()


SERVERS: dict[str, Callable[[_Blocking], contextlib.AbstractContextManager[Target]]] = {
    "probes": _health, "metrics": _metrics, "metrics-https": _secure_metrics}


@pytest.fixture(params=sorted(SERVERS))
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    blocking = _Blocking()
    with SERVERS[str(request.param)](blocking) as running:
        yield running
        blocking.release()


@pytest.fixture
def debug_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger="zkop.runtime.serving")
    return caplog


def assert_quiet(port: int, capfd: pytest.CaptureFixture[str],
                 debug_log: pytest.LogCaptureFixture) -> None:
    """Once the request's thread has ended: nothing on stderr, no handler error, one debug line."""
    wait_for(lambda: not request_threads(port), message="the request's thread ended")
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception occurred" not in err, err
    assert server_errors.take() == []
    went_away = [r for r in debug_log.records if r.name == "zkop.runtime.serving" and "went away" in r.getMessage()]
    assert [r.levelno for r in went_away] == [logging.DEBUG], debug_log.text


def still_serving(target: Target) -> bool:
    return target.status() == (401 if target.tls else 200)


def test_a_client_that_resets_mid_request_is_logged_at_debug(target: Target, capfd: pytest.CaptureFixture[str],
                                                             debug_log: pytest.LogCaptureFixture) -> None:
    sock = target.connect()
    sock.sendall(f"GET {target.path} HTTP/1.1\r\nHost: loc".encode())  # the headers never end
    wait_for(lambda: reading_request(target.port), message="the server reads the request")
    reset(sock)
    assert_quiet(target.port, capfd, debug_log)
    assert still_serving(target)


def test_a_client_that_resets_before_its_answer_is_logged_at_debug(target: Target,
                                                                   capfd: pytest.CaptureFixture[str],
                                                                   debug_log: pytest.LogCaptureFixture) -> None:
    sock = target.connect()
    sock.sendall(f"GET {target.path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
                 .encode())
    assert target.blocking.entered.wait(EVENTUALLY), "the server works on the answer"
    reset(sock)  # on loopback the RST has arrived when close returns: the server's write fails
    target.blocking.release()
    assert_quiet(target.port, capfd, debug_log)
    assert still_serving(target)


def test_a_tls_client_that_never_sends_its_request_is_logged_at_debug(capfd: pytest.CaptureFixture[str],
                                                                     debug_log: pytest.LogCaptureFixture,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    blocking = _Blocking()
    with _secure_metrics(blocking) as tls_target:
        monkeypatch.setattr(serving, "HANDSHAKE_TIMEOUT", 0.5)  # read when a connection is accepted

        def idle_after_the_handshake() -> bool:
            """One connection that completes its handshake and then says nothing; False if the handshake
            itself ran out of time (a busy machine), which the server logs differently: try again."""
            debug_log.clear()
            try:
                sock = tls_target.connect()
            except OSError:  # ssl.SSLError is one
                sock = None
            wait_for(lambda: not request_threads(tls_target.port), message="the request's thread ended")
            if sock is not None:
                sock.close()
            return any("went away" in r.getMessage() for r in debug_log.records)

        wait_for(idle_after_the_handshake, message="a TLS connection idle after its handshake")
        err = capfd.readouterr().err
        assert "Traceback" not in err and "Exception occurred" not in err, err
        assert server_errors.take() == []
        went_away = [r for r in debug_log.records if "went away" in r.getMessage()]
        assert [r.levelno for r in went_away] == [logging.DEBUG] and "timed out" in went_away[0].getMessage()
        monkeypatch.undo()
        assert still_serving(tls_target)


def test_an_application_error_is_logged_with_its_traceback_and_answers_500(
        capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def describe(self) -> list[Metric]:
            return []

        def collect(self) -> list[Metric]:
            raise ValueError("a broken collector")

    broken = Broken()
    REGISTRY.register(broken)
    server = start_metrics_server("127.0.0.1:0")
    assert server is not None
    try:
        with pytest.raises(urllib.error.HTTPError) as answered:
            urllib.request.urlopen(server.url, timeout=EVENTUALLY)
        assert answered.value.code == 500
    finally:
        server.shutdown()
        REGISTRY.unregister(broken)
    errors = [r for r in caplog.records if r.name == "zkop.runtime.serving" and r.levelno == logging.ERROR]
    assert [r.getMessage().split(" from ")[0] for r in errors] == ["unexpected error serving a request"]
    assert errors[0].exc_info is not None and isinstance(errors[0].exc_info[1], ValueError)
    assert "Traceback" not in capfd.readouterr().err
    # The test session's guard saw it too (and would fail this test if it were not taken here).
    recorded = server_errors.take()
    assert len(recorded) == 1 and "ValueError: a broken collector" in recorded[0].traceback
