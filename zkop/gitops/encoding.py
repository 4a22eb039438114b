"""How znode bytes are shown to people: as text, or as bytes.

One rule serves ``export`` (``stringData`` versus base64 ``data``) and ``diff``
(unified diff versus byte summary), so what is exported as text is exactly
what is diffed as text.
"""

from __future__ import annotations

import base64
import unicodedata
from typing import Any

__all__ = ["as_text", "data_fields"]

#: Unicode general categories that make bytes "not text": controls, format characters
#: (zero-width, bidi overrides, BOM), surrogates, private use, unassigned, and the
#: line/paragraph separators U+2028/U+2029 that YAML and terminals treat unpredictably.
_NOT_TEXT = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_ALLOWED_CONTROLS = frozenset("\t\n\r")


def as_text(data: bytes) -> str | None:
    """``data`` as a string if it is printable UTF-8 text, else ``None``.

    Printable: strict UTF-8, and no character of the categories in ``_NOT_TEXT``
    except tab, line feed and carriage return. Empty data is text (``""``).
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    for ch in text:
        if ch not in _ALLOWED_CONTROLS and unicodedata.category(ch) in _NOT_TEXT:
            return None
    return text


def data_fields(data: bytes, *, force_binary: bool = False) -> dict[str, Any]:
    """The ``spec`` fields that carry ``data``.

    Returns:
        ``{"stringData": text}`` for printable UTF-8 (see :func:`as_text`), else
        ``{"data": base64, "encoding": "binary"}`` (RFC 4648 standard alphabet, padded).
        ``force_binary`` always chooses the second form.
    """
    text = None if force_binary else as_text(data)
    if text is not None:
        return {"stringData": text}
    return {"data": base64.b64encode(data).decode("ascii"), "encoding": "binary"}
