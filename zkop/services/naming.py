"""Naming rules both service directions share: DNS-label slugs.

When several candidates want one name, :func:`zkop.ownership.oldest.oldest` decides.

Slugs (:func:`squash`, :func:`port_name`) follow "Object Names and IDs"; the validators themselves
live in :mod:`zkop.kube.validation`.
"""

from __future__ import annotations

import re

from zkop.kube.validation import DNS1123_LABEL_MAX

__all__ = ["port_name", "squash"]

_INVALID = re.compile(r"[^a-z0-9-]+")
_DASHES = re.compile(r"-{2,}")


def squash(value: str) -> str:
    """``value`` lower-cased, every run of characters outside ``[a-z0-9-]`` and of ``-`` made one ``-``,
    ``-`` trimmed at both ends (may be empty)."""
    return _DASHES.sub("-", _INVALID.sub("-", value.lower())).strip("-")


def port_name(raw: str) -> str | None:
    """``raw`` as a DNS-1123 label port name (lower-cased, invalid characters to ``-``, at most 63).

    Returns:
        The name, or ``None`` when nothing usable is left.
    """
    name = squash(raw)[:DNS1123_LABEL_MAX].strip("-")
    return name or None
