"""``python -m zkop_testing.faults run …``: ``zkop run`` that a test can make lose a thread from inside, or name its
threads.

The process is zkop's own command (:func:`zkop.cmd.main.main`, nothing of zkop replaced) plus two
signal handlers. On ``SIGUSR2`` it logs ``live threads listed for the test: <name>, <name>, ...``, the
names of its live threads (sorted, the listing thread left out): what ``py-spy dump`` would name, without
py-spy. On ``SIGUSR1`` it raises :class:`InjectedFault`, a ``BaseException`` as a
``KeyboardInterrupt``, a ``SystemExit`` or a dependency's bug would be, inside every live thread
whose name is listed (comma-separated) in ``ZKOP_TEST_FAULT_THREADS``, with CPython's
``PyThreadState_SetAsyncExc``. A thread blocked in a lock (a worker waiting for a key) gets it as
soon as it wakes: the exception is raised at its next Python instruction, so the thread dies with
whatever is on its stack, as it would from a real fault there. Each thread is armed only while it
is idle in ``Condition.wait`` (:func:`idle`): an exception raised asynchronously just as a thread
enters a ``with lock:`` can leave that lock held, which a fault raised by code cannot. The handler
logs ``injected InjectedFault into <names>`` once it has armed them.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import threading
import time
from types import FrameType

from zkop.cmd.main import main

__all__ = ["THREADS_ENV", "THREADS_LOGGED", "InjectedFault", "idle", "raise_in"]

#: The environment variable naming the threads that ``SIGUSR1`` kills.
THREADS_ENV = "ZKOP_TEST_FAULT_THREADS"
#: What starts the line ``SIGUSR2`` logs, followed by the live threads' names, ``", "``-joined.
THREADS_LOGGED = "live threads listed for the test: "

log = logging.getLogger("zkop_testing.faults")


class InjectedFault(BaseException):
    """Raised inside a thread by ``SIGUSR1``; not an ``Exception``, so no ``except Exception`` stops it."""


def idle(thread: threading.Thread, blocked_in: str = "wait", *, under: str | None = None) -> bool:
    """True if ``thread``'s innermost Python frame is a function called ``blocked_in`` (``Condition.wait``:
    blocked on a lock, holding none of the caller's), where a fault raised in it leaves no lock held;
    with ``under``, called (at any depth) from a function of that name."""
    frame = sys._current_frames().get(thread.ident or 0)
    if frame is None or frame.f_code.co_name != blocked_in:
        return False
    while under is not None and frame is not None and frame.f_code.co_name != under:
        frame = frame.f_back
    return frame is not None


def raise_in(thread: threading.Thread) -> bool:
    """Arm :class:`InjectedFault` in ``thread`` (raised at its next Python instruction); False if it is not running.

    Also for tests in one process: a thread blocked in a lock gets it once something wakes it.
    """
    if thread.ident is None or not thread.is_alive():
        return False
    count = ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(InjectedFault))
    return bool(count == 1)


def _inject(signum: int, frame: FrameType | None) -> None:
    """The ``SIGUSR1`` handler: arm the named threads from a thread of its own, each once it is :func:`idle`."""
    threading.Thread(target=_arm, name="test-fault-injector", daemon=True).start()


def _arm() -> None:
    wanted = set(filter(None, os.environ.get(THREADS_ENV, "").split(",")))
    targets = [thread for thread in threading.enumerate() if thread.name in wanted]
    while not all(idle(thread) or not thread.is_alive() for thread in targets):
        time.sleep(0.01)
    armed = [thread.name for thread in targets if raise_in(thread)]
    log.warning("injected InjectedFault into %s", ", ".join(sorted(armed)) or "no thread")


def _list(signum: int, frame: FrameType | None) -> None:
    """The ``SIGUSR2`` handler: log the live threads' names from a thread of its own (no lock taken in a handler)."""
    threading.Thread(target=_log_threads, name="test-thread-lister", daemon=True).start()


def _log_threads() -> None:
    names = sorted(t.name for t in threading.enumerate() if t is not threading.current_thread())
    log.warning("%s%s", THREADS_LOGGED, ", ".join(names))


if __name__ == "__main__":
    signal.signal(signal.SIGUSR2, _list)
    signal.signal(signal.SIGUSR1, _inject)
    raise SystemExit(main())
