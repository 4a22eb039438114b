"""The ZooKeeperConfigTree feature's own options (imported by the registry without loading the feature)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_MAX_ZNODES", "TreeOptions"]

#: ``--config-tree-max-znodes``' default: znodes below one tree's root zkop lists at most.
DEFAULT_MAX_ZNODES = 20_000


@dataclass(frozen=True)
class TreeOptions:
    """The ZooKeeperConfigTree feature's own options.

    Attributes:
        max_znodes: znodes below one tree's root zkop lists at most (``--config-tree-max-znodes``; 0: no limit).
        registry_root: where ownership records live (``--registry-root``).
    """

    max_znodes: int = DEFAULT_MAX_ZNODES
    registry_root: str = "/zkop/owners"
