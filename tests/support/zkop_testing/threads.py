"""Which threads zkop (or kazoo on its behalf) left running: for the shutdown tests."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Collection

import kazoo

import zkop

#: Source directories whose code runs on a thread zkop started (kazoo's threads run only kazoo's loops).
OWN_CODE = tuple(os.path.dirname(m.__file__ or "") + os.sep for m in (zkop, kazoo))


def running_code_of(thread: threading.Thread, roots: tuple[str, ...] = OWN_CODE) -> bool:
    """True if ``thread`` is alive and a frame of its stack is in one of ``roots``."""
    frame = sys._current_frames().get(thread.ident or -1)
    while frame is not None:
        if frame.f_code.co_filename.startswith(roots):
            return True
        frame = frame.f_back
    return False


def zkop_threads(before: Collection[threading.Thread]) -> list[str]:
    """Names of the live threads not in ``before`` that run zkop's or kazoo's code.

    Threads of the test's doubles (the API server's request threads, the ZooKeeper harness) run
    neither, so a test can compare with the threads before it started zkop without naming them.
    """
    return sorted(t.name for t in threading.enumerate()
                  if t not in before and t is not threading.current_thread() and running_code_of(t))
