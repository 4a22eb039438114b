"""A subtree's znodes as one document: ``properties``, ``json``, ``yaml`` or ``env`` (pure).

Each :class:`Entry` is a znode's path below the root, as its names (``("db", "url")``), and its data. Values
must be UTF-8 text: a znode whose data is not is a :class:`RenderError`, as is a key two znodes map to, so a
render either holds every znode or is not written at all.

- ``properties``: ``db.url=…`` (names joined by ``.``), escaped as ``java.util.Properties.store`` escapes with
  ``\\uXXXX``: the file is ASCII, and ``Properties.load(InputStream)`` (ISO-8859-1) and ``load(Reader)`` read
  the same entries. ``\\``, ``=``, ``:``, ``#``, ``!``, spaces of a key and a value's leading space, tab,
  newline, carriage return and form feed are backslash-escaped; every other character outside ``' '``–``'~'``
  is ``\\uXXXX`` (UTF-16 code units, so a character beyond the BMP is a surrogate pair, as Java holds it).
- ``json`` and ``yaml``: nested objects from the names (``{"db": {"url": …}}``), keys sorted; a znode that has
  data and children below it (a key both a value and an object) is a :class:`RenderError`.
- ``env``: ``DB_URL='…'`` (names joined by ``_``, every character outside ``[A-Za-z0-9_]`` written ``_``, upper
  case, ``_`` before a leading digit), the value single-quoted for a POSIX shell (``set -a; . FILE``): nothing in
  it is expanded. A value holding a NUL byte (no environment variable can) is a :class:`RenderError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

__all__ = ["FORMATS", "Entry", "RenderError", "nested", "render", "text_of"]


class RenderError(ValueError):
    """The subtree cannot be rendered (a value that is not UTF-8, a key collision): nothing is written."""


@dataclass(frozen=True)
class Entry:
    """A znode to render: its ``names`` below the root (never empty) and its ``data``."""

    names: tuple[str, ...]
    data: bytes

    @property
    def path(self) -> str:
        """The names joined by ``/`` (for messages)."""
        return "/".join(self.names)


def text_of(entry: Entry) -> str:
    """``entry``'s data as text.

    Raises:
        RenderError: the data is not UTF-8.
    """
    try:
        return entry.data.decode("utf-8")
    except UnicodeDecodeError:
        raise RenderError(f"znode {entry.path}: its data is not UTF-8 text; nothing is written "
                          "(use --dir, which writes such a value as bytes)") from None


def _flat(entries: Sequence[Entry], key_of: Callable[[Entry], str]) -> dict[str, str]:
    flat: dict[str, str] = {}
    sources: dict[str, str] = {}
    for entry in entries:
        key = key_of(entry)
        if key in flat:
            raise RenderError(f"znodes {sources[key]} and {entry.path} both map to key {key!r}; nothing is written")
        flat[key], sources[key] = text_of(entry), entry.path
    return flat


_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f",
            "=": "\\=", ":": "\\:", "#": "\\#", "!": "\\!"}


def _properties_escape(text: str, *, key: bool) -> str:
    out: list[str] = []
    for index, char in enumerate(text):
        if char == " ":
            out.append("\\ " if key or index == 0 else " ")
        elif char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif " " <= char <= "~":
            out.append(char)
        else:
            encoded = char.encode("utf-16-be")
            out.extend(f"\\u{int.from_bytes(encoded[i:i + 2], 'big'):04X}" for i in range(0, len(encoded), 2))
    return "".join(out)


def _properties(entries: Sequence[Entry]) -> bytes:
    flat = _flat(entries, lambda e: ".".join(e.names))
    lines = [f"{_properties_escape(k, key=True)}={_properties_escape(v, key=False)}\n" for k, v in sorted(flat.items())]
    return "".join(lines).encode("ascii")


def nested(entries: Sequence[Entry]) -> dict[str, Any]:
    """The entries as nested dictionaries of their names, values as text.

    Raises:
        RenderError: a value that is not UTF-8, or a znode with data that also has znodes below it.
    """
    tree: dict[str, Any] = {}
    for entry in sorted(entries, key=lambda e: e.names):
        node = tree
        for depth, name in enumerate(entry.names[:-1]):
            child = node.setdefault(name, {})
            if not isinstance(child, dict):
                where = "/".join(entry.names[:depth + 1])
                raise RenderError(f"znode {where} has data and znodes below it ({entry.path}): it cannot be both a "
                                  "value and an object; nothing is written")
            node = child
        last = entry.names[-1]
        if last in node:
            raise RenderError(f"znode {entry.path} has data and znodes below it: it cannot be both a value and an "
                              "object; nothing is written")
        node[last] = text_of(entry)
    return tree


def _json(entries: Sequence[Entry]) -> bytes:
    return (json.dumps(nested(entries), indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def _yaml(entries: Sequence[Entry]) -> bytes:
    document = yaml.safe_dump(nested(entries), sort_keys=True, allow_unicode=True, default_flow_style=False)
    return document.encode("utf-8")


_NOT_NAME = re.compile(r"[^A-Za-z0-9_]")


def env_name(names: Sequence[str]) -> str:
    """The environment variable name of a znode's names (``("db", "url")`` → ``DB_URL``)."""
    name = _NOT_NAME.sub("_", "_".join(names)).upper()
    return f"_{name}" if name[:1].isdigit() else name


def _env(entries: Sequence[Entry]) -> bytes:
    flat = _flat(entries, lambda e: env_name(e.names))
    lines: list[str] = []
    for key, value in sorted(flat.items()):
        if "\0" in value:
            raise RenderError(f"key {key}: a NUL character cannot be in an environment variable; nothing is written")
        quoted = value.replace("'", "'\"'\"'")
        lines.append(f"{key}='{quoted}'\n")
    return "".join(lines).encode("utf-8")


#: ``--format`` → renderer.
FORMATS: dict[str, Callable[[Sequence[Entry]], bytes]] = {
    "properties": _properties, "json": _json, "yaml": _yaml, "env": _env,
}


def render(form: str, entries: Sequence[Entry]) -> bytes:
    """``entries`` as one document of ``form`` (a key of :data:`FORMATS`), deterministic for equal input.

    Raises:
        RenderError: as the module docstring says; KeyError: an unknown ``form``.
    """
    return FORMATS[form](entries)
