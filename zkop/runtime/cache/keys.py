"""An object's cache key (client-go ``MetaNamespaceKeyFunc``) and its inverse: pure functions over plain dicts.

Apart from :mod:`zkop.runtime.cache.indexer` (a store behind a lock) so that pure rules can name objects by their key
without importing a store (an import contract in ``pyproject.toml`` says so).
"""

from __future__ import annotations

from zkop.kube.types import JSON

__all__ = ["meta_namespace_key", "split_key"]


def meta_namespace_key(obj: JSON) -> str:
    """client-go's ``MetaNamespaceKeyFunc``: ``namespace/name``, or ``name`` for cluster-scoped objects."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    name = str(meta.get("name", ""))
    return f"{namespace}/{name}" if namespace else name


def split_key(key: str) -> tuple[str | None, str]:
    """Inverse of :func:`meta_namespace_key`: ``"ns/name"`` → ``("ns", "name")``, ``"name"`` → ``(None, "name")``."""
    if "/" in key:
        namespace, name = key.split("/", 1)
        return namespace, name
    return None, key
