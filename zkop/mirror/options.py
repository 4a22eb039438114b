"""The ZooKeeperMirror feature's own options (imported by the registry without loading the feature)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_ZNODES", "MirrorOptions"]


#: ``--mirror-max-znodes``' default: znodes one mirror may have zkop read.
DEFAULT_MAX_ZNODES = 10_000
#: ``--mirror-max-bytes``' default: bytes of znode data one mirror may have zkop read (8 MiB; a ConfigMap holds 1).
DEFAULT_MAX_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class MirrorOptions:
    """The ZooKeeperMirror feature's own options.

    Attributes:
        max_znodes: znodes one mirror may have zkop read (``--mirror-max-znodes``; 0: no limit).
        max_bytes: bytes of znode data one mirror may have zkop read (``--mirror-max-bytes``; 0: no limit).
    """

    max_znodes: int = DEFAULT_MAX_ZNODES
    max_bytes: int = DEFAULT_MAX_BYTES
