"""Names and settings both service directions share: ownership marks, loop prevention, roots, flag checks.

The bridge (:mod:`zkop.services.bridge`, Services → ZooKeeper) and the importer
(:mod:`zkop.services.importer`, ZooKeeper → Services) must agree on these so that neither picks up
what the other wrote (loop prevention) and both recognise zkop's own objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from zkop.zookeeper.paths import InvalidPath, validate_path

__all__ = [
    "DEFAULT_ROOT",
    "IMPORTED_LABEL",
    "MANAGED_BY",
    "SYNC_ANNOTATION",
    "check_counts",
    "choose",
    "root_flag",
]

#: The bridge's opt-out (or, with ``--service-bridge-default-sync=false``, opt-in) annotation; the
#: importer sets it to ``"false"`` on every Service it creates.
SYNC_ANNOTATION = "platform.example.com/zookeeper-sync"
#: Label (value ``"true"``) on every Service and EndpointSlice the service importer creates from
#: ZooKeeper; the bridge never publishes such a Service, so an imported service is never exported
#: back (loop prevention).
IMPORTED_LABEL = "platform.example.com/imported-from-zookeeper"
#: The ``managedBy`` value of every node and object zkop writes (and the only one it ever changes or deletes).
MANAGED_BY = "zkop"
#: The bridge's default root, which is also where the importer's ``json`` format reads by default.
DEFAULT_ROOT = "/kubernetes/services"


T = TypeVar("T")


def choose(table: Mapping[str, T], name: str, what: str) -> T:
    """``table[name]``: the format (or layout, policy …) called ``name``.

    Raises:
        ValueError: ``unknown <what> '<name>' (known: …)``.
    """
    try:
        return table[name]
    except KeyError:
        raise ValueError(f"unknown {what} {name!r} (known: {', '.join(table)})") from None


def root_flag(flag: str, value: str) -> str:
    """``value`` of root flag ``flag`` without trailing ``/`` (``"/"`` stays), validated.

    Raises:
        SystemExit: not a valid absolute ZooKeeper path (``zkop.zookeeper.paths.validate_path``),
            with the flag named.
    """
    root = str(value).rstrip("/") or "/"
    try:
        validate_path(root)
    except InvalidPath as err:
        raise SystemExit(f"{flag}: {err}") from None
    return root


def check_counts(prefix: str, *, max_deletes: int, workers: int) -> None:
    """Check ``<prefix>-max-deletes`` (``>= 0``, 0: no limit) and ``<prefix>-workers`` (``>= 1``).

    Raises:
        SystemExit: a value out of range, with the flag named.
    """
    if max_deletes < 0:
        raise SystemExit(f"{prefix}-max-deletes must be 0 (no limit) or more")
    if workers < 1:
        raise SystemExit(f"{prefix}-workers must be at least 1")
