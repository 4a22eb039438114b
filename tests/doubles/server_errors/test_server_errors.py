"""The guard of :mod:`zkop_testing.server_errors`, and the doubles' servers with a client that goes away.

An exception a request handler raises fails the test phase it happened in, with its traceback, instead
of socketserver's "Exception occurred during processing of request" on stderr (run here in a pytest
session of its own, :class:`pytest.Pytester`); a client that resets its connection is no error at all,
in the in-memory API server and the Git server as in a plain ``http.server``.
"""

from __future__ import annotations

import logging
import socket
import struct
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from zkop_testing import server_errors
from zkop_testing.apiserver import ApiServer
from zkop_testing.flux import GitServer
from zkop_testing.waiting import EVENTUALLY, wait_for

INNER = """
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

ERRORS = {"broken": ValueError("broken handler"), "pipe": BrokenPipeError(), "reset": ConnectionResetError()}


def serve_once(error):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            raise ERRORS[error]

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{server.server_address[1]}/", timeout=60)
    except Exception:
        pass  # socketserver has handled the error when it closes the connection: no response
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def served(request):
    phase, error = request.param
    if phase == "setup":
        serve_once(error)
    yield phase, error
    if phase == "teardown":
        serve_once(error)


@pytest.mark.parametrize("served", [("setup", "broken"), ("call", "broken"), ("teardown", "broken"),
                                    ("call", "pipe"), ("call", "reset")], indirect=True,
                         ids="-".join)
def test_it(served):
    phase, error = served
    if phase == "call":
        serve_once(error)
"""


def test_a_handler_exception_fails_the_phase_it_happened_in(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rA", plugins=[server_errors])
    result.assert_outcomes(passed=3, failed=1, errors=2)  # the teardown case passed, then errored
    output = result.stdout.str()
    for case, phase, during in [("setup-broken", "ERROR at setup", "setup"), ("call-broken", "FAILED", "the test"),
                                ("teardown-broken", "ERROR at teardown", "teardown")]:
        section = output.split(f"test_it[{case}]")[1]
        assert f"1 unexpected exception(s) in a server's request handler during {during}:" in section, output
        assert "Traceback (most recent call last):" in section and "ValueError: broken handler" in section
        assert phase in output
    result.stdout.fnmatch_lines(["PASSED test_inner.py::test_it?call-pipe?",
                                 "PASSED test_inner.py::test_it?call-reset?"])
    assert "Exception occurred during processing" not in output + result.stderr.str()
    assert "BrokenPipeError" not in output and "ConnectionResetError" not in output


def reset(sock: socket.socket) -> None:
    """Close with an RST (``SO_LINGER`` 0), as a killed client's kernel does."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def request_threads() -> set[threading.Thread]:
    """The live threads running a request (``socketserver.ThreadingMixIn.process_request_thread``)."""
    frames = sys._current_frames()
    found = set()
    for thread in threading.enumerate():
        frame = frames.get(thread.ident or -1)
        while frame is not None and frame.f_code.co_name != "process_request_thread":
            frame = frame.f_back
        if frame is not None:
            found.add(thread)
    return found


def whole_response(sock: socket.socket) -> bytes:
    """Read one HTTP/1.1 response with a ``Content-Length`` from ``sock``: its head and its whole body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"the connection closed after {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, f"the connection closed after {len(body)} of {length} body bytes"
        body += chunk
    return data


@pytest.fixture
def double(request: pytest.FixtureRequest) -> Iterator[tuple[int, str, int]]:
    """A double's HTTP server (``request.param``): its port, a path and the status it answers there."""
    if request.param == "apiserver":
        with ApiServer() as api:
            yield api.port, "/version", 200
    else:
        git = GitServer().start()
        try:
            yield git.port, "/nothing.git/info/refs", 404  # git http-backend's answer for a missing repository
        finally:
            git.stop()


def answer(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=EVENTUALLY) as response:
            return int(response.status)
    except urllib.error.HTTPError as err:
        return int(err.code)


@pytest.mark.parametrize(("double", "keep_alive"), [("apiserver", False), ("apiserver", True), ("git", False)],
                         ids=["apiserver-mid-request", "apiserver-idle-keep-alive", "git-mid-request"],
                         indirect=["double"])
def test_a_client_reset_is_logged_at_debug_by_the_doubles(double: tuple[int, str, int], keep_alive: bool,
                                                          capfd: pytest.CaptureFixture[str],
                                                          caplog: pytest.LogCaptureFixture) -> None:
    """The API double keeps connections (HTTP/1.1): a client may reset one while it waits for the next request;
    the Git server answers HTTP/1.0, one request a connection."""
    caplog.set_level(logging.DEBUG, logger="zkop_testing.server_errors")
    port, path, status = double
    before = request_threads()
    sock = socket.create_connection(("127.0.0.1", port), timeout=EVENTUALLY)
    if keep_alive:  # a whole request answered, the connection kept: the server waits for the next one
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
        # the whole response, body included: headers and body are separate writes, and a reset between them makes
        # the body's write fail instead (the double ends such a request quietly), not the wait for the next request
        assert whole_response(sock).startswith(b"HTTP/1.1 200")
    else:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: loc".encode())
    wait_for(lambda: bool(request_threads() - before), message="the server reads")
    reset(sock)
    wait_for(lambda: not (request_threads() - before), message="the request's thread ended")
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception occurred" not in err, err
    assert server_errors.take() == []
    went_away = [r for r in caplog.records if "went away" in r.getMessage()]
    assert [r.levelno for r in went_away] == [logging.DEBUG], caplog.text
    assert answer(port, path) == status
