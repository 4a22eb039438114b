"""The threads a runnable starts and needs: which of them ended, and how, for the runnable's ``health_check``.

A Go controller's goroutine cannot end quietly: a panic nobody recovers ends the process, and a
runnable whose ``Start`` returns an error ends the manager [CR pkg/manager/runnable_group.go
``reconcile``, pkg/manager/internal.go ``Start``]. A Python thread can: an exception no handler
catches (a ``BaseException`` such as ``KeyboardInterrupt`` or ``SystemExit``, or a bug in a
dependency) ends that thread alone, printed by :func:`threading.excepthook` (``SystemExit`` not
even that), and the process lives on without it. :class:`OwnedThreads` remembers what ended each
thread so that the owner's ``health_check`` can say so, and the
:class:`~zkop.runtime.manager.Manager` ends the run (see there).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

__all__ = ["LoopThread", "OwnedThreads", "describe_end"]


def describe_end(err: BaseException) -> str:
    """``"KeyboardInterrupt"`` or ``"RuntimeError: boom"``: the exception's type, and its message if any."""
    text = str(err)
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


class OwnedThreads:
    """Daemon threads started for one owner, each remembered with what ended it.

    Thread-safe: threads may be started while :meth:`ended` is read (from ``/healthz`` or the Manager).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._ends: dict[threading.Thread, str] = {}
        self._finished: set[threading.Thread] = set()

    def start(self, target: Callable[[], object], name: str) -> threading.Thread:
        """Start ``target`` on a daemon thread called ``name``; an exception that ends it is remembered and re-raised
        (so :func:`threading.excepthook` still reports it)."""
        def run() -> None:
            try:
                target()
            except BaseException as err:
                with self._lock:
                    self._ends[threading.current_thread()] = describe_end(err)
                raise
            finally:
                with self._lock:
                    self._finished.add(threading.current_thread())

        thread = threading.Thread(target=run, name=name, daemon=True)
        with self._lock:
            self._threads.append(thread)
        thread.start()
        return thread

    def ended(self) -> list[str]:
        """The started threads whose target has returned or raised, each as ``name`` or ``name (ended by <exception>)``.

        Decided by the target having finished, not by ``is_alive()``: a thread being started has an ident before
        it is alive, and a health check in that moment would take it for dead. Takes no lock (copies made under
        the GIL), so that a thread ended while it held one never blocks it.
        """
        threads, ends, finished = list(self._threads), dict(self._ends), set(self._finished)
        return [f"{t.name} (ended by {ends[t]})" if t in ends else t.name for t in threads if t in finished]

    def forget(self, thread: threading.Thread) -> None:
        """Stop watching ``thread`` (its work is no longer wanted, e.g. an object no longer tracked)."""
        with self._lock:
            if thread in self._threads:
                self._threads.remove(thread)
            self._ends.pop(thread, None)
            self._finished.discard(thread)

    def __iter__(self) -> Iterator[threading.Thread]:
        with self._lock:
            return iter(list(self._threads))


class LoopThread:
    """The one daemon thread a runnable needs for its whole life (its loop): started by :meth:`start`, reported by
    :meth:`health_check` if it ends before :meth:`stop`, joined by :meth:`stop`.

    ``target`` should return once :attr:`stopping` is set (wait on it rather than sleep).
    """

    def __init__(self, name: str, target: Callable[[], object]) -> None:
        self.name = name
        #: Set by :meth:`request_stop`: the loop should return.
        self.stopping = threading.Event()
        self._target = target
        self._threads = OwnedThreads()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the loop on its thread."""
        self._thread = self._threads.start(self._target, self.name)

    def health_check(self) -> str | None:
        """``None``, or ``its thread <name> ended`` when the loop ended before a stop was asked for."""
        if self.stopping.is_set() or not self._threads.ended():
            return None
        return f"its thread {self.name} ended"

    def request_stop(self) -> None:
        """Ask the loop to return (:attr:`stopping`); does not wait."""
        self.stopping.set()

    def join(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the loop's thread to end (at once if it never started)."""
        if self._thread is not None:
            self._thread.join(timeout)

    def stop(self, timeout: float) -> None:
        """:meth:`request_stop`, then :meth:`join` for up to ``timeout`` seconds."""
        self.request_stop()
        self.join(timeout)
