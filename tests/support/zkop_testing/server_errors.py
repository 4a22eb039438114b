"""A request handler's unexpected exception fails the test that caused it instead of scrolling by.

``socketserver.BaseServer.handle_error`` prints "Exception occurred during processing of request" and a
traceback to stderr and goes on serving, so a broken handler in a test double -- or in zkop's own HTTP
servers -- shows up as noise in a green run. Here every such exception is recorded instead:

* :class:`QuietDisconnects`, mixed into the doubles' servers (the in-memory API server, the Git server),
  logs a client that went away (``zkop.runtime.serving.DISCONNECTS``: reset, broken pipe, TLS EOF) at debug and records
  anything else;
* :func:`install` makes ``socketserver.BaseServer.handle_error`` itself record, for servers a test builds
  from the standard library, and attaches a handler to the ``zkop.runtime.serving`` logger, where zkop's
  own servers log a request's unexpected exception at error;
* as a pytest plugin (the root ``conftest.py`` registers it) this module installs that at
  configure time and fails each test phase (setup, the test, teardown) during which a traceback was
  recorded, with every one of them in the failure (:class:`ServerError`); one recorded after the last
  teardown fails the session.
"""

from __future__ import annotations

import logging
import socketserver
import sys
import threading
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from zkop.runtime.serving import DISCONNECTS

__all__ = ["QuietDisconnects", "ServerError", "install", "record", "take"]

log = logging.getLogger(__name__)

#: The logger zkop's own HTTP servers log a request's unexpected exception on.
ZKOP_SERVING_LOGGER = "zkop.runtime.serving"


@dataclass(frozen=True)
class ServerError:
    """One unexpected exception a server's request handler raised: which server, which client, the traceback."""

    server: str
    client: str
    traceback: str

    def __str__(self) -> str:
        return f"{self.server} serving {self.client}:\n{self.traceback}"


_lock = threading.Lock()
_recorded: list[ServerError] = []
_installed = False


def record(server: str, client_address: Any, error: BaseException) -> None:
    """Keep ``error`` (with its traceback) for :func:`take`, or log it at debug if it is a disconnect.

    Outside a test session (:func:`install` not called: a double run as its own process) the error is
    logged at error instead, with its traceback."""
    if isinstance(error, DISCONNECTS):
        log.debug("%s: client %s went away: %s", server, client_address, error)
        return
    if not _installed:
        log.error("%s: unexpected error serving %s", server, client_address,
                  exc_info=(type(error), error, error.__traceback__))
        return
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    with _lock:
        _recorded.append(ServerError(server, str(client_address), text))


def take() -> list[ServerError]:
    """Every error recorded since the last call, oldest first (the record is emptied)."""
    with _lock:
        taken = list(_recorded)
        _recorded.clear()
    return taken


class QuietDisconnects:
    """Mixin for a ``socketserver`` server: its ``handle_error`` goes through :func:`record`."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Record the handler's exception (a disconnect only at debug) instead of printing it."""
        error = sys.exc_info()[1]
        if error is not None:
            record(type(self).__name__, client_address, error)


class _ServingLogHandler(logging.Handler):
    """Records the error-level records (with a traceback) of zkop's own servers' logger."""

    def emit(self, logging_record: logging.LogRecord) -> None:
        if logging_record.levelno < logging.ERROR:
            return
        exc = logging_record.exc_info[1] if logging_record.exc_info else None
        if exc is not None:
            record(f"{logging_record.name} ({logging_record.getMessage()})", "-", exc)
        else:
            with _lock:
                _recorded.append(ServerError(logging_record.name, "-", logging_record.getMessage()))


def install() -> None:
    """Record what ``socketserver.BaseServer.handle_error`` would print, and what zkop's servers log at error.

    Idempotent; for the test session (called from the root ``conftest.py``'s ``pytest_configure``).
    """
    global _installed
    if _installed:
        return
    _installed = True
    socketserver.BaseServer.handle_error = QuietDisconnects.handle_error  # type: ignore[method-assign,assignment]
    logging.getLogger(ZKOP_SERVING_LOGGER).addHandler(_ServingLogHandler(logging.ERROR))


def _fail_if_recorded(phase: str) -> None:
    errors = take()
    if errors:
        pytest.fail(f"{len(errors)} unexpected exception(s) in a server's request handler during {phase}:\n"
                    + "\n".join(map(str, errors)), pytrace=False)


def pytest_configure(config: pytest.Config) -> None:
    """Record servers' handler exceptions from now on (:func:`install`)."""
    install()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    """Fail the setup during which a server's request handler raised."""
    result = yield
    _fail_if_recorded("setup")
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Fail the test during which a server's request handler raised."""
    result = yield
    _fail_if_recorded("the test")
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Fail the teardown during which a server's request handler raised."""
    result = yield
    _fail_if_recorded("teardown")
    return result


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the session with what a handler raised after the last teardown (printed in full)."""
    errors = take()
    if errors:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        for error in errors:
            if reporter is not None:
                reporter.write_line(f"unexpected exception in a server's request handler after the last test: {error}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
