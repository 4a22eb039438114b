"""``spec.dataFrom``: the bytes a key of a ConfigMap or Secret holds (pure).

A ConfigMap keeps text in ``data`` and base64 in ``binaryData``; a Secret keeps base64
in ``data`` (core/v1 ``ConfigMap``, ``Secret``). The objects come from the informer
caches; this module only reads them.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from zkop.zkconfig.spec import DataRef

__all__ = ["ref_data"]


def ref_data(source: dict[str, Any] | None, ref: DataRef) -> bytes | None:
    """The bytes of ``ref.key`` in ``source`` (the ConfigMap or Secret ``ref`` names).

    Returns:
        The bytes, or ``None`` if ``source`` is ``None``, the key is missing, or its
        base64 is not strict (RFC 4648 §4).
    """
    if source is None:
        return None
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
