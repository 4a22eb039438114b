"""Shutdown on a signal, run outside the signal handler.

CPython runs a Python signal handler in the main thread between two bytecodes, wherever that thread is: also inside
``threading.Event.wait`` or ``Event.clear``, holding the event's condition lock, a plain ``threading.Lock`` that the
same thread cannot take twice. A handler that calls ``event.set()`` on that event then waits for itself forever: the
process ignores SIGTERM until the kubelet kills it. ``zkop fetch --watch`` hung so once in CI (its main thread waits
on the very event the handler set). :class:`SignalRelay` keeps the handler to one ``os.write`` of the signal's number
to a pipe, which takes no Python lock; its own thread reads the pipe and calls the callback, which may then take any
lock.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any

__all__ = ["SignalRelay"]

log = logging.getLogger(__name__)


class SignalRelay:
    """Calls ``on_signal(signum)`` on a thread of its own for each of ``signals`` the process receives.

    Use as a context manager from the main thread (``signal.signal`` may only be called there): entering installs
    the handlers and starts the thread, leaving restores the previous handlers and ends the thread.

    Args:
        on_signal: called with the signal's number; exceptions it raises are logged, not propagated.
        signals: the signals relayed (default SIGTERM and SIGINT).
    """

    def __init__(self, on_signal: Callable[[int], None],
                 signals: Sequence[signal.Signals] = (signal.SIGTERM, signal.SIGINT)) -> None:
        self.on_signal = on_signal
        self.signals = tuple(signals)
        self._previous: dict[signal.Signals, Any] = {}
        self._read_fd = self._write_fd = -1
        self._thread: threading.Thread | None = None

    def handler(self, signum: int, frame: FrameType | None) -> None:
        """The installed handler: one non-blocking write to the pipe (a full pipe drops the signal: one is
        already waiting to be relayed)."""
        with contextlib.suppress(OSError):  # BlockingIOError (a full pipe) among them
            os.write(self._write_fd, bytes([signum & 0xFF]))

    def __enter__(self) -> SignalRelay:
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._write_fd, False)
        self._thread = threading.Thread(target=self._relay, name="zkop-signals", daemon=True)
        self._thread.start()
        for signum in self.signals:
            self._previous[signum] = signal.signal(signum, self.handler)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()
        os.close(self._write_fd)  # the relay thread reads end-of-file and ends
        if self._thread is not None:
            self._thread.join()

    def _relay(self) -> None:
        try:
            while True:
                data = os.read(self._read_fd, 64)
                if not data:
                    return
                for signum in data:
                    try:
                        self.on_signal(signum)
                    except Exception:
                        log.exception("handling signal %d failed", signum)
        finally:
            os.close(self._read_fd)
