"""The pure rules of a ZooKeeperServiceImport: its spec, what it selects, whose objects it owns, its status.

Ownership. The Services and EndpointSlices an object creates carry the importer's marks
(:func:`zkop.services.importer.objects.is_owned`) with an owner identity of their own,
``<cluster id>/serviceimport/<name>`` (:func:`owner_id`), so the annotation reads
``platform.example.com/imported-by: zkop/<cluster id>/serviceimport/<name>``: the flags' importer never counts them
as its own (nor they its), two objects in one namespace never take each other's, and another namespace's objects are
out of reach (every write goes to the object's own namespace). The Service also carries an ``ownerReference`` to the
object (:func:`owner_reference`), so deleting it has the garbage collector delete the Service and, through theirs,
its EndpointSlices.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from zkop.kube.client import JSON
from zkop.runtime.conditions import condition
from zkop.services.importer.objects import CreateObject, PatchObject, metadata_of
from zkop.services.importer.options import DEFAULT_ROOTS, FORMATS, OWNER_ANNOTATION, ImportFormat, owner_value
from zkop.zookeeper.paths import validate_path

__all__ = [
    "API_VERSION",
    "GROUP",
    "KIND",
    "PLURAL",
    "VERSION",
    "ImportSpec",
    "Outcome",
    "SpecError",
    "desired_status",
    "key_of_owned",
    "owner_id",
    "owner_reference",
    "parse_spec",
    "with_owner",
]

GROUP, VERSION, PLURAL, KIND = "platform.example.com", "v1alpha1", "zookeeperserviceimports", "ZooKeeperServiceImport"
API_VERSION = f"{GROUP}/{VERSION}"
#: At most this many names are listed in ``status.services`` and ``status.conflicts``.
MAX_NAMES_IN_STATUS = 50
#: The CRD schema's bounds, held again here for a server that did not apply them (an older CRD, a test double):
#: ``spec.selection.names`` items, each name's and the pattern's length, the prefix's length, the root's length.
MAX_NAMES, MAX_NAME_LENGTH, MAX_PREFIX_LENGTH, MAX_ROOT_LENGTH = 256, 1024, 40, 4096


class SpecError(ValueError):
    """A spec the CRD schema let through that zkop cannot use (``InvalidSpec``)."""


@dataclass(frozen=True)
class ImportSpec:
    """A parsed spec.

    Attributes:
        root: the znode whose children are the services (default: the format's, as ``--import-root``'s).
        format: the layout read (``curator``, ``json``, ``dubbo``).
        names: service names selected exactly (the source's names: a Curator service, a Dubbo interface, a record key).
        pattern: a shell-style glob (:mod:`fnmatch`) the other selected names match; with neither, every service.
        prefix: prepended to every Service name.
    """

    root: str
    format: ImportFormat
    names: tuple[str, ...] = ()
    pattern: str | None = None
    prefix: str = ""

    def selects(self, source_name: str) -> bool:
        """Whether the service called ``source_name`` under the root is selected."""
        if not self.names and self.pattern is None:
            return True
        return source_name in self.names or (self.pattern is not None
                                             and fnmatch.fnmatchcase(source_name, self.pattern))


def parse_spec(obj: JSON) -> ImportSpec:
    """The object's spec, defaulted, held to the CRD schema's types and bounds (:data:`MAX_NAMES` …).

    Raises:
        SpecError: naming the field: a spec that is not an object, an unknown format, a root that is not a string or
            not a valid absolute znode path (nor ``/``, nor under ``/zookeeper``), a selection, names, pattern or
            prefix of the wrong type, empty or too long.
    """
    spec = obj.get("spec") or {}
    if not isinstance(spec, dict):
        raise SpecError("spec: an object with root, format, selection and prefix")
    fmt = spec.get("format") or "curator"
    if fmt not in FORMATS:
        raise SpecError(f"spec.format {str(fmt)[:80]!r}: one of {', '.join(FORMATS)}")
    fmt = cast(ImportFormat, fmt)
    root = spec.get("root") or DEFAULT_ROOTS[fmt]
    if not isinstance(root, str) or len(root) > MAX_ROOT_LENGTH:
        raise SpecError(f"spec.root: a znode path of at most {MAX_ROOT_LENGTH} characters")
    try:
        root = validate_path(root)
    except ValueError as err:
        raise SpecError(f"spec.root {root[:80]!r}: {err}") from None
    selection = spec.get("selection") or {}
    if not isinstance(selection, dict):
        raise SpecError("spec.selection: an object with names and/or pattern")
    names = selection.get("names") or []
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise SpecError("spec.selection.names: a list of service names")
    if len(names) > MAX_NAMES or any(len(n) > MAX_NAME_LENGTH for n in names):
        raise SpecError(f"spec.selection.names: at most {MAX_NAMES} names of at most {MAX_NAME_LENGTH} characters")
    pattern = selection.get("pattern")
    if pattern is not None and (not isinstance(pattern, str) or not pattern or len(pattern) > MAX_NAME_LENGTH):
        raise SpecError(f"spec.selection.pattern: a non-empty glob of at most {MAX_NAME_LENGTH} characters")
    prefix = spec.get("prefix") or ""
    if not isinstance(prefix, str) or len(prefix) > MAX_PREFIX_LENGTH:
        raise SpecError(f"spec.prefix: a string of at most {MAX_PREFIX_LENGTH} characters")
    return ImportSpec(root, fmt, tuple(names), pattern, prefix)


def owner_id(cluster_id: str, name: str) -> str:
    """The owner identity of ZooKeeperServiceImport ``name``'s objects (its namespace is theirs): what
    :func:`~zkop.services.importer.objects.is_owned` and the planners take as the cluster id."""
    return f"{cluster_id}/serviceimport/{name}"


def key_of_owned(obj: JSON, cluster_id: str) -> str | None:
    """The ``namespace/name`` key of the ZooKeeperServiceImport whose owner annotation ``obj`` carries, or ``None``."""
    meta = metadata_of(obj)
    value = str((meta.get("annotations") or {}).get(OWNER_ANNOTATION) or "")
    prefix = owner_value(owner_id(cluster_id, ""))
    if not value.startswith(prefix) or not value[len(prefix):]:
        return None
    return f"{meta.get('namespace')}/{value[len(prefix):]}"


def owner_reference(obj: JSON) -> JSON:
    """The ``ownerReference`` naming ZooKeeperServiceImport ``obj`` (``controller: true``; no ``blockOwnerDeletion``,
    which would need the finalizers subresource)."""
    meta = metadata_of(obj)
    return {"apiVersion": API_VERSION, "kind": KIND, "name": meta.get("name"), "uid": meta.get("uid"),
            "controller": True}


def with_owner(action: CreateObject | PatchObject | None, existing: JSON | None,
               owner: JSON) -> CreateObject | PatchObject | None:
    """The Service's action with ``owner`` as its one ``ownerReference``: added to a create's body or to a patch, or a
    patch of its own when the existing owned Service names another owner (an object deleted and made anew)."""
    refs = [owner]
    if isinstance(action, CreateObject):
        return CreateObject(action.resource, {**action.body, "metadata": {**action.body["metadata"],
                                                                           "ownerReferences": refs}})
    current = metadata_of(existing or {}).get("ownerReferences") or []
    if isinstance(action, PatchObject):
        return PatchObject(action.resource, action.name,
                           {**action.patch, "metadata": {**action.patch["metadata"], "ownerReferences": refs}})
    if existing is not None and [(r.get("uid"), r.get("kind")) for r in current] != [(owner["uid"], KIND)]:
        meta = metadata_of(existing)
        return PatchObject("services", str(meta.get("name")),
                           {"metadata": {"resourceVersion": meta.get("resourceVersion"), "ownerReferences": refs}})
    return None


@dataclass(frozen=True)
class Outcome:
    """What a pass found, for the status.

    Attributes:
        reason: the Ready condition's reason (``Imported``, ``Conflict``, ``InvalidSpec``, ``ReservedPath``,
            ``NamespaceNotAllowed``, ``PathNotAllowed``, ``LimitExceeded``, ``DryRun``).
        message: one sentence.
        ready: every selected service imported.
        stalled: only a change of the spec, the policy or a foreign object makes it progress.
        services: the Service names imported.
        conflicts: the names a Service zkop did not create (here) holds.
    """

    reason: str
    message: str
    ready: bool = False
    stalled: bool = False
    services: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()


def desired_status(old: JSON, outcome: Outcome, generation: int, now: str) -> JSON:
    """The status after ``outcome``: kstatus conditions ``Ready``, ``Reconciling`` (never: a pass finishes or is
    retried), ``Stalled`` when it is; ``observedGeneration``; the counts and names."""
    conditions: Sequence[object] = old.get("conditions") or []
    new_conditions = [condition(conditions, "Ready", "True" if outcome.ready else "False", outcome.reason,
                                outcome.message, generation, now)]
    if outcome.stalled:
        new_conditions.append(condition(conditions, "Stalled", "True", outcome.reason, outcome.message,
                                        generation, now))
    return {"observedGeneration": generation, "conditions": new_conditions,
            "importedServices": len(outcome.services), "services": list(outcome.services[:MAX_NAMES_IN_STATUS]),
            "conflicts": list(outcome.conflicts[:MAX_NAMES_IN_STATUS])}
