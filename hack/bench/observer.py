"""Timing ZooKeeper changes: watches on znodes, and when each reached an expected state."""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError


@dataclass
class Observation:
    """One expectation met: when the change was made and when ZooKeeper showed it."""

    path: str
    label: int
    sent_mono: float
    sent_wall: float
    observed_mono: float
    mtime_ms: int | None


@dataclass
class _Expectation:
    predicate: Callable[[bytes | None], bool]
    label: int
    sent_mono: float
    sent_wall: float
    skip_fires: int
    fired_at: float | None = None


class ZnodeObserver:
    """Watches znodes and timestamps when each reaches an expected state.

    Every watched path always has a ZooKeeper watch armed (a data watch, or an exists
    watch while absent); each event re-reads the node asynchronously and re-arms the
    watch. :meth:`expect` registers a predicate on the node's bytes (``None``: absent). The
    observed time is the arrival of the watch event that preceded the satisfying read (or
    that read's completion when no counted event preceded it), so the bench's own read
    round trip is not part of the latency.

    Callbacks run on kazoo's event thread and never block.
    """

    def __init__(self, client: KazooClient) -> None:
        self.client = client
        self._lock = threading.Condition()
        self._pending: dict[str, _Expectation] = {}
        self.observations: list[Observation] = []
        self.replaced = 0
        self.errors = 0

    def watch(self, paths: Sequence[str]) -> None:
        """Arm watches on ``paths`` (call before making changes)."""
        for path in paths:
            self._read(path)

    def expect(self, path: str, predicate: Callable[[bytes | None], bool], *, label: int,
               skip_fires: int = 0) -> None:
        """Expect ``path`` to satisfy ``predicate`` after a change made right after this call.

        Args:
            path: a watched path.
            predicate: called with the node's bytes (``None`` when absent).
            label: carried into the :class:`Observation`.
            skip_fires: watch events to ignore for timing (the bench's own edit of the node).
        """
        with self._lock:
            if path in self._pending:
                self.replaced += 1
            self._pending[path] = _Expectation(predicate, label, time.monotonic(), time.time(), skip_fires)

    def pending(self) -> int:
        """Expectations not met yet."""
        with self._lock:
            return len(self._pending)

    def wait(self, timeout: float) -> bool:
        """Wait until every expectation is met; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(min(left, 0.2))
        return True

    def _read(self, path: str) -> None:
        issued = time.monotonic()
        result = self.client.get_async(path, watch=self._on_event)
        result.rawlink(functools.partial(self._on_read, path, issued))

    def _on_event(self, event: Any) -> None:
        now = time.monotonic()
        path = str(event.path)
        with self._lock:
            exp = self._pending.get(path)
            if exp is not None:
                if exp.skip_fires > 0:
                    exp.skip_fires -= 1
                elif now >= exp.sent_mono:
                    exp.fired_at = now
        self._read(path)

    def _on_exists(self, path: str, result: Any) -> None:
        try:
            stat = result.get(block=False)
        except Exception:
            self.errors += 1
            return
        if stat is not None:  # created between our get and exists: read it
            self._read(path)

    def _on_read(self, path: str, issued: float, result: Any) -> None:
        now = time.monotonic()
        data: bytes | None
        mtime: int | None
        try:
            data, stat = result.get(block=False)
            mtime = int(stat.mtime)
        except NoNodeError:
            data, mtime = None, None
            self.client.exists_async(path, watch=self._on_event).rawlink(functools.partial(self._on_exists, path))
        except Exception:
            self.errors += 1
            return
        reread = False
        with self._lock:
            exp = self._pending.get(path)
            if exp is None or not exp.predicate(data):
                return
            if issued < exp.sent_mono:
                # A read sent before the change was announced: its answer may predate the change. Read again.
                reread = True
            else:
                del self._pending[path]
                observed = exp.fired_at if exp.fired_at is not None else now
                self.observations.append(Observation(path, exp.label, exp.sent_mono, exp.sent_wall, observed, mtime))
                self._lock.notify_all()
        if reread:
            self._read(path)


def equals(expected: bytes) -> Callable[[bytes | None], bool]:
    def predicate(data: bytes | None) -> bool:
        return data == expected

    return predicate


def has_port_81(data: bytes | None) -> bool:
    if data is None:
        return False
    try:
        record = json.loads(data)
    except ValueError:
        return False
    ports = record.get("ports") if isinstance(record, dict) else None
    return bool(ports) and isinstance(ports, list) and ports[0].get("port") == 81


def absent(data: bytes | None) -> bool:
    return data is None
