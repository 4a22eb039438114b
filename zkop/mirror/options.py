"""The ZooKeeperMirror feature's own options (imported by the registry without loading the feature)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MirrorOptions"]


@dataclass(frozen=True)
class MirrorOptions:
    """The ZooKeeperMirror feature's own options (none yet beyond the shared
    :class:`~zkop.feature.context.FeatureSettings`)."""
