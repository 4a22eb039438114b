"""A dependency-free progress bar on stderr for long runs.

Shown only when standard output is a terminal (a person is watching; in CI or a
pipe nothing is drawn) and only once a run has lasted :data:`DELAY` seconds, so
quick runs print nothing extra. Redrawn at most every :data:`INTERVAL` seconds
with ``\\r``; erased when done.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import Self, TextIO

__all__ = ["DELAY", "INTERVAL", "Progress", "terminal_attached"]

DELAY = 0.5
INTERVAL = 0.1
_WIDTH = 30


def terminal_attached(stdout: TextIO | None = None) -> bool:
    """True if standard output is a terminal (the rule for showing progress)."""
    stream = stdout if stdout is not None else sys.stdout
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class Progress:
    """Counts done items and draws ``label [####------] 40% 400/1000`` (or ``label 400`` without a total).

    Args:
        label: what is being counted, e.g. ``reading znodes``.
        total: number of items, if known.
        enabled: draw at all; default :func:`terminal_attached`.
        stream: where to draw; default ``sys.stderr``.
        clock: monotonic seconds (tests pass a fake).
    """

    def __init__(self, label: str, total: int | None = None, *, enabled: bool | None = None,
                 stream: TextIO | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self.enabled = terminal_attached() if enabled is None else enabled
        self.stream = stream if stream is not None else sys.stderr
        self._clock = clock
        self._started = clock()
        self._drawn_at: float | None = None

    def advance(self, count: int = 1) -> None:
        """Record ``count`` more items done; redraw if due."""
        self.done += count
        if not self.enabled:
            return
        now = self._clock()
        if now - self._started < DELAY:
            return
        if self._drawn_at is not None and now - self._drawn_at < INTERVAL:
            return
        self._drawn_at = now
        self.stream.write("\r" + self.render() + "\x1b[K")
        self.stream.flush()

    def render(self) -> str:
        """The bar as text, without control characters."""
        if not self.total:
            return f"{self.label} {self.done}"
        fraction = min(1.0, self.done / self.total)
        filled = round(fraction * _WIDTH)
        return (f"{self.label} [{'#' * filled}{'-' * (_WIDTH - filled)}] "
                f"{fraction * 100:3.0f}% {self.done}/{self.total}")

    def close(self) -> None:
        """Erase the bar if it was drawn."""
        if self._drawn_at is not None:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn_at = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
