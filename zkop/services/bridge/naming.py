"""Where a Service's records live, and who wins when two Services want the same place.

Layouts (``--service-bridge-layout``):

* ``flat`` — ``<root>/<namespace>-<name>``: the original bridge script's key, kept as the
  default so existing clients keep working. It is ambiguous: both parts may contain ``-``
  (namespaces are DNS-1123 labels, Service names DNS-1035 labels), so ``team-a``/``web`` and
  ``team``/``a-web`` map to the same znode.
* ``nested`` — ``<root>/<namespace>/<name>``: collision-free (``/`` can appear in neither part).

The *key path* is the znode that identifies the Service: the record itself for the JSON
format, the Curator service node (parent of the instances) for the Curator format.

Collision rule (:func:`winner`): among the selected Services that share a key path, the one
with the oldest ``metadata.creationTimestamp`` keeps it, ties broken by ``namespace/name``
(lexicographic). It depends only on the informer cache, so every reconcile and every replica
computes the same winner and ownership never flaps (:func:`zkop.ownership.oldest.oldest`, the rule
the importer applies too).
"""

from __future__ import annotations

from collections.abc import Iterable

from zkop.kube.client import JSON
from zkop.ownership.oldest import oldest
from zkop.services.bridge.options import Layout
from zkop.services.bridge.records import creation_millis

__all__ = ["key_path", "namespace_container", "service_node_name", "winner"]


def service_node_name(layout: Layout, namespace: str, name: str) -> str:
    """The last path segment of the key: ``<namespace>-<name>`` (flat) or ``<name>`` (nested)."""
    return f"{namespace}-{name}" if layout == "flat" else name


def key_path(root: str, layout: Layout, namespace: str, name: str) -> str:
    """The key path of Service ``namespace/name`` under ``root`` (see the module docstring)."""
    if layout == "flat":
        return f"{root}/{namespace}-{name}"
    return f"{root}/{namespace}/{name}"


def namespace_container(root: str, layout: Layout, namespace: str) -> str | None:
    """The per-namespace container node of the nested layout (``<root>/<namespace>``), else ``None``."""
    return f"{root}/{namespace}" if layout == "nested" else None


def _order(obj: JSON) -> tuple[int, str]:
    meta = obj.get("metadata") or {}
    created = creation_millis(obj) or 2**62  # no timestamp: youngest
    return created, f"{meta.get('namespace')}/{meta.get('name')}"


def winner(candidates: Iterable[JSON]) -> JSON | None:
    """The Service that keeps a contested key path: oldest creationTimestamp, then ``namespace/name``.

    Returns ``None`` for no candidates.
    """
    return oldest(candidates, _order)
