"""Where a Service's records live, and who wins when two Services want the same place.

Layouts (``--service-bridge-layout``): ``flat``, ``<root>/<namespace>-<name>``, the original
script's key and the default, ambiguous (``team-a``/``web`` and ``team``/``a-web`` collide);
``nested``, ``<root>/<namespace>/<name>``, collision-free. The *key path* identifies the Service:
the JSON record itself, or the Curator service node above the instances.

Collision rule (:func:`winner`): among selected Services sharing a key path the oldest wins
(:func:`zkop.ownership.oldest.oldest`, as in the importer), from the informer cache alone, so every
replica computes the same winner.
"""

from __future__ import annotations

from collections.abc import Iterable

from zkop.kube.client import JSON
from zkop.ownership.oldest import object_age, oldest
from zkop.services.bridge.options import Layout

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


def winner(candidates: Iterable[JSON]) -> JSON | None:
    """The Service that keeps a contested key path: oldest creationTimestamp, then ``namespace/name``
    (:func:`~zkop.ownership.oldest.object_age`: a Service without a timestamp is the newest).

    Returns ``None`` for no candidates.
    """
    return oldest(candidates, object_age)
