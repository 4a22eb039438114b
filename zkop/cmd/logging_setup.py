"""Logging for zkop: ``text`` for people, ``json`` (one object a line) for log pipelines."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime

__all__ = ["TextFormatter", "configure_logging"]

#: The ``text`` format.
TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


class TextFormatter(logging.Formatter):
    """:class:`logging.Formatter` whose default ``asctime`` is converted once per second.

    The stock ``formatTime`` calls ``time.localtime`` and ``time.strftime`` for every record;
    the text is the same (``2006-01-02 15:04:05,000``). A ``datefmt`` is formatted the stock way.
    """

    def __init__(self, fmt: str | None = TEXT_FORMAT, datefmt: str | None = None) -> None:
        super().__init__(fmt, datefmt)
        self._second: tuple[int, str] = (-1, "")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        """``asctime`` of ``record``: the local second (converted once per second) and its milliseconds."""
        if datefmt:
            return super().formatTime(record, datefmt)
        second = int(record.created)
        cached = self._second
        if cached[0] != second:
            cached = self._second = (second, time.strftime(self.default_time_format, self.converter(second)))
        if not self.default_msec_format:
            return cached[1]
        return self.default_msec_format % (cached[1], record.msecs)


class JsonFormatter(logging.Formatter):
    """Formats a record as ``{"ts", "level", "logger", "msg", "thread"[, "exc"]}``."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            "thread": record.threadName,
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(level: str = "info", fmt: str = "text") -> Callable[[], None]:
    """Configure the root logger on stderr, for the rest of the command.

    Besides the root logger's handler and level and the ``kazoo`` and ``urllib3`` levels, this
    switches off, process-wide, what no format of zkop prints: the caller's file, line and
    function and the process id and name, otherwise looked up for every record (the logging
    HOWTO's "Optimization").

    Args:
        level: ``debug``, ``info``, ``warning`` or ``error`` (case-insensitive).
        fmt: ``text`` or ``json``.

    Returns:
        ``restore()``: puts every one of those settings back as it was, so a caller that is not the
        whole process (:func:`zkop.cmd.main.main` called from tests or another program) leaves
        logging as it found it, e.g. records that still show their caller's file and line.

    Raises:
        ValueError: unknown level or format (nothing changed).
    """
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    elif fmt == "text":
        handler.setFormatter(TextFormatter())
    else:
        raise ValueError(f"unknown log format {fmt!r}")
    root, kazoo, urllib3 = logging.getLogger(), logging.getLogger("kazoo"), logging.getLogger("urllib3")
    saved_handlers, saved_levels = list(root.handlers), (root.level, kazoo.level, urllib3.level)
    saved_lookups = (logging._srcfile, logging.logProcesses, logging.logMultiprocessing)

    def restore() -> None:
        root.handlers[:] = saved_handlers
        for logger, saved in zip((root, kazoo, urllib3), saved_levels, strict=True):
            logger.setLevel(saved)
        logging._srcfile, logging.logProcesses, logging.logMultiprocessing = saved_lookups

    logging._srcfile = None
    logging.logProcesses = False
    logging.logMultiprocessing = False
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    # kazoo reports every dropped connection at WARNING; zkop logs session state changes itself.
    kazoo.setLevel(numeric if numeric <= logging.DEBUG else logging.ERROR)
    urllib3.setLevel(max(numeric, logging.WARNING))
    return restore
