"""Logging for zkop: ``text`` for people, ``json`` (one object a line) for log pipelines."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

__all__ = ["configure_logging"]


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


def configure_logging(level: str = "info", fmt: str = "text") -> None:
    """Configure the root logger on stderr.

    Args:
        level: ``debug``, ``info``, ``warning`` or ``error`` (case-insensitive).
        fmt: ``text`` or ``json``.

    Raises:
        ValueError: unknown level or format.
    """
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    elif fmt == "text":
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    else:
        raise ValueError(f"unknown log format {fmt!r}")
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    # kazoo reports every dropped connection at WARNING; zkop logs session state changes itself.
    logging.getLogger("kazoo").setLevel(numeric if numeric <= logging.DEBUG else logging.ERROR)
    logging.getLogger("urllib3").setLevel(max(numeric, logging.WARNING))
