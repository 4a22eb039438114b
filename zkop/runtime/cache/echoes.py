"""Own-write echoes an informer caches from the write's response instead of decoding their watch event.

The *echo* is the ``MODIFIED`` event that delivers an object this process just wrote (a finalizer,
its status) and already holds as the write's response; decoding it is the informer's largest
per-event cost. :class:`EchoRegistry` remembers, per key, the transformed response of the latest
write and the version it was computed from; the informer recognises an echo by its
``resourceVersion`` alone (:func:`modified_resource_version`) and caches the remembered object
instead of decoding the line when -- and only when -- the line provably is that version of that
object:

* it is a ``MODIFIED`` event in kube-apiserver's compact JSON (``{"type":"MODIFIED",...``);
* the bytes ``"resourceVersion":"`` occur exactly once in it, so they are ``metadata``'s (any
  other such key adds an occurrence; inside a JSON string the quotes are escaped), unescaped;
* that value is the version a write of ours returned (a ``resourceVersion`` names one write of one
  object: Kubernetes API conventions, "Concurrency Control and Consistency");
* the cached object is still at the version that write was computed from.

Anything else is decoded as before. Handlers see the same update either way.
"""

from __future__ import annotations

from zkop.kube.client import JSON

__all__ = ["EchoRegistry", "modified_resource_version"]

_MODIFIED = b'{"type":"MODIFIED",'
_RESOURCE_VERSION = b'"resourceVersion":"'


def modified_resource_version(line: bytes) -> str:
    """``metadata.resourceVersion`` of a raw ``MODIFIED`` watch event line, or ``""`` if it cannot be told exactly.

    ``line`` is one event as the API server sent it (``{"type":"MODIFIED","object":{...}}``, compact
    JSON, as kube-apiserver's JSON serializer writes it). See the module docstring for when a version
    is returned; otherwise the caller decodes the line.
    """
    if not line.startswith(_MODIFIED):
        return ""
    start = line.find(_RESOURCE_VERSION)
    if start < 0:
        return ""
    start += len(_RESOURCE_VERSION)
    if line.find(_RESOURCE_VERSION, start) >= 0:
        return ""
    end = line.find(b'"', start)
    if end <= start:
        return ""
    value = line[start:end]
    if b"\\" in value or not value.isascii():
        return ""
    return value.decode("ascii")


class EchoRegistry:
    """The latest write of each key whose echo has not arrived: written version → (key, base version, object).

    Not thread-safe: the informer calls it under its own lock. Memory: at most one entry per key.
    """

    def __init__(self) -> None:
        self._by_version: dict[str, tuple[str, str, JSON]] = {}
        self._version_of: dict[str, str] = {}

    def expect(self, key: str, base: str, written: str, obj: JSON) -> None:
        """Remember ``obj`` (already transformed), the object ``key`` became at ``written`` from ``base``.

        Replaces what was remembered for ``key`` (the echo of that older write is decoded when it comes).
        """
        self.drop(key)
        self._by_version[written] = (key, base, obj)
        self._version_of[key] = written

    def take(self, written: str) -> tuple[str, str, JSON] | None:
        """Forget and return ``(key, base, object)`` of the write that produced ``written``, if remembered."""
        entry = self._by_version.pop(written, None)
        if entry is not None:
            self._version_of.pop(entry[0], None)
        return entry

    def drop(self, key: str) -> None:
        """Forget ``key``'s write (another event of ``key`` arrived)."""
        written = self._version_of.pop(key, None)
        if written is not None:
            self._by_version.pop(written, None)

    def clear(self) -> None:
        """Forget everything (a relist)."""
        self._by_version.clear()
        self._version_of.clear()

    def __len__(self) -> int:
        return len(self._by_version)
