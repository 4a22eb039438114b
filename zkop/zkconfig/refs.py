"""``spec.dataFrom``: the bytes a key of a ConfigMap or Secret holds (pure).

A ConfigMap keeps text in ``data`` and base64 in ``binaryData``; a Secret keeps base64
in ``data`` (core/v1 ``ConfigMap``, ``Secret``). The objects come from the informer
caches; this module only reads them.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from zkop.zkconfig.spec import DataRef, InvalidSpec

__all__ = ["MIRRORED_FROM", "MIRRORED_RECURSIVE", "mirror_loop", "ref_data"]

#: The annotations a ZooKeeperMirror puts on the ConfigMap it fills (``zkop.mirror.decide`` writes them).
MIRRORED_FROM = "platform.example.com/mirrored-from"
MIRRORED_RECURSIVE = "platform.example.com/mirrored-recursive"


def mirror_loop(source: dict[str, Any] | None, ref: DataRef, path: str) -> str | None:
    """Why writing ``path`` from ``source`` would be a loop, or ``None``: a ConfigMap a ZooKeeperMirror fills
    from ``path`` (or from a subtree holding it) would get back, through the mirror, what it was written from."""
    if source is None or ref.kind != "ConfigMap":
        return None
    annotations = (source.get("metadata") or {}).get("annotations") or {}
    root = annotations.get(MIRRORED_FROM)
    if not isinstance(root, str):
        return None
    recursive = annotations.get(MIRRORED_RECURSIVE) == "true"
    if path == root or (recursive and path.startswith(root.rstrip("/") + "/")):
        scope = " (recursive)" if recursive else ""
        return (f"ConfigMap {ref.name} is filled by a ZooKeeperMirror from {root}{scope}, which holds {path}"
                f": writing {path} from it would write what it reads (a loop)")
    return None


def ref_data(source: dict[str, Any] | None, ref: DataRef, *, writes_to: str | None = None) -> bytes | None:
    """The bytes of ``ref.key`` in ``source`` (the ConfigMap or Secret ``ref`` names).

    Returns:
        The bytes, or ``None`` if ``source`` is ``None``, the key is missing, or its
        base64 is not strict (RFC 4648 §4).

    Raises:
        InvalidSpec: ``writes_to`` (the znode the bytes are for) is mirrored into ``source`` (:func:`mirror_loop`).
    """
    if source is None:
        return None
    loop = mirror_loop(source, ref, writes_to) if writes_to is not None else None
    if loop is not None:
        raise InvalidSpec("spec.dataFrom", loop)
    if ref.kind == "ConfigMap":
        text = (source.get("data") or {}).get(ref.key)
        if isinstance(text, str):
            return text.encode("utf-8")
        encoded = (source.get("binaryData") or {}).get(ref.key)
    else:
        encoded = (source.get("data") or {}).get(ref.key)
    if not isinstance(encoded, str):
        return None
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return None
