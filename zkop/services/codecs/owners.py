"""Whose node is this, whatever its format: the owner stamp of any node zkop may have written."""

from __future__ import annotations

from zkop.services.codecs import curator, json_record
from zkop.services.codecs.base import Owner, loads
from zkop.services.options import MANAGED_BY

__all__ = ["parse_owner", "written_by_zkop"]


def parse_owner(path: str, data: bytes) -> Owner | None:
    """The owner stamp of ``data`` (the node at ``path``), or ``None`` if it has none.

    Tries the top-level ``owner`` object (JSON records and container nodes) first, then the Curator
    instance's ``payload.metadata``, so nodes written under an earlier ``--service-bridge-format``
    are still recognised (and collected).
    """
    owner = json_record.owner_of_value(loads(data))
    if owner is not None:
        return owner
    return curator.owner_of(data)


def written_by_zkop(path: str, data: bytes) -> bool:
    """True if ``data`` has a zkop owner stamp (:func:`parse_owner`), whatever its cluster id."""
    owner = parse_owner(path, data)
    return owner is not None and owner.managed_by == MANAGED_BY
