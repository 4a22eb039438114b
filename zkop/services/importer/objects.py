"""The importer's Kubernetes actions and ownership marks (pure, no I/O).

Actions are what the planners return and :class:`~zkop.services.importer.writer.ApiWriter` sends:
creates of complete objects, JSON merge patches carrying the ``resourceVersion`` they were planned
from, deletes with preconditions on uid and ``resourceVersion``. Ownership (:func:`is_owned`): label
``platform.example.com/imported-from-zookeeper: "true"`` and annotation
``platform.example.com/imported-by: zkop/<cluster id>``; only owned objects are updated or deleted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from zkop.kube.client import JSON
from zkop.services.importer.options import (
    IMPORTED_LABEL,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    OWNER_ANNOTATION,
    PATH_ANNOTATION,
    owner_value,
)

__all__ = [
    "CreateObject",
    "DeleteObject",
    "KubeAction",
    "PatchObject",
    "Resource",
    "delete_action",
    "describe",
    "is_owned",
    "metadata_of",
    "owned_annotations",
    "owned_labels",
    "subset_differs",
]

Resource = Literal["services", "endpointslices"]


# --- actions -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CreateObject:
    """``POST`` ``body`` (a complete object) to the ``resource`` collection of its namespace."""

    resource: Resource
    body: JSON

    @property
    def name(self) -> str:
        """The object's name."""
        return str(self.body["metadata"]["name"])


@dataclass(frozen=True)
class PatchObject:
    """JSON merge patch (RFC 7386) of object ``name``; ``patch.metadata.resourceVersion`` is the precondition."""

    resource: Resource
    name: str
    patch: JSON


@dataclass(frozen=True)
class DeleteObject:
    """``DELETE`` object ``name`` with preconditions on ``uid`` and ``resource_version``."""

    resource: Resource
    name: str
    uid: str
    resource_version: str


KubeAction = CreateObject | PatchObject | DeleteObject


def describe(action: KubeAction) -> str:
    """One line for logs, e.g. ``create services/orders``."""
    verb = {CreateObject: "create", PatchObject: "update", DeleteObject: "delete"}[type(action)]
    return f"{verb} {action.resource}/{action.name}"


# --- ownership ---------------------------------------------------------------------------------


def metadata_of(obj: JSON) -> JSON:
    """``obj["metadata"]`` (``{}`` if absent)."""
    meta: JSON = obj.get("metadata") or {}
    return meta


def is_owned(obj: JSON, cluster_id: str) -> bool:
    """True if installation ``cluster_id`` created ``obj`` (label and owner annotation, see the module docstring)."""
    meta = metadata_of(obj)
    return ((meta.get("labels") or {}).get(IMPORTED_LABEL) == "true"
            and (meta.get("annotations") or {}).get(OWNER_ANNOTATION) == owner_value(cluster_id))


def owned_labels(extra: dict[str, str] | None = None) -> dict[str, str]:
    """zkop's labels on an imported object, plus ``extra``."""
    return {IMPORTED_LABEL: "true", MANAGED_BY_LABEL: MANAGED_BY, **(extra or {})}


def owned_annotations(path: str, cluster_id: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """zkop's annotations (owner, ZooKeeper ``path``) on an imported object, plus ``extra``."""
    return {OWNER_ANNOTATION: owner_value(cluster_id), PATH_ANNOTATION: path, **(extra or {})}


def subset_differs(wanted: dict[str, str], actual: Any) -> bool:
    """True if some key of ``wanted`` has another value (or none) in ``actual``."""
    actual = actual if isinstance(actual, dict) else {}
    return any(actual.get(k) != v for k, v in wanted.items())


def delete_action(resource: Resource, obj: JSON) -> DeleteObject:
    """The precondition delete of cached ``obj``."""
    meta = metadata_of(obj)
    return DeleteObject(resource, str(meta.get("name")), str(meta.get("uid") or ""),
                        str(meta.get("resourceVersion") or ""))
