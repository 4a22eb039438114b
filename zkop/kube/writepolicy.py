"""Which API writes a dry run may make: the :data:`~zkop.kube.client.WritePolicy` of ``zkop run --dry-run``.

docs/operations.md, "Dry run", is the rule; this is its net under the features' dry-run writers, asked by
:class:`~zkop.kube.client.KubeClient` before every mutating request. Allowed are only:

* the ``status`` subresource of the operator's own kinds (the API groups it is given);
* a patch of one of those objects that touches nothing but ``metadata.finalizers`` (and the
  ``resourceVersion`` precondition) and leaves none of the operator's finalizers on it: the removal of a
  finalizer an earlier real run added, so a deletion never blocks (a dry run adds none);
* Events (``v1`` and ``events.k8s.io``): the recorder's creates and its count patches;
* Leases (``coordination.k8s.io``): leader election;
* TokenReviews and SubjectAccessReviews: ``--metrics-secure`` authenticating a scrape.

Everything else (a ConfigMap, a Service, an EndpointSlice, a finalizer added, a delete) is refused.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

__all__ = ["ApiPath", "DryRunWrites", "parse_path"]

#: (group, resource) pairs the process itself writes, whatever the dry run: Events, the Lease, metrics auth.
_PROCESS_WRITES = frozenset({
    ("", "events"), ("events.k8s.io", "events"), ("coordination.k8s.io", "leases"),
    ("authentication.k8s.io", "tokenreviews"), ("authorization.k8s.io", "subjectaccessreviews"),
})


@dataclass(frozen=True)
class ApiPath:
    """What a REST path names: ``group`` (``""``: core), ``resource``, ``name`` and ``subresource`` (``""``: none)."""

    group: str
    resource: str
    name: str = ""
    subresource: str = ""


def parse_path(path: str) -> ApiPath | None:
    """The object ``path`` (as :func:`~zkop.kube.client.resource_path` builds it, query left out) names, or
    ``None`` for a path that names no resource (``/version``, discovery)."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, rest = parts[1], parts[3:]
    else:
        return None
    if rest[0] == "namespaces" and len(rest) >= 3:
        rest = rest[2:]
    return ApiPath(group, rest[0], rest[1] if len(rest) > 1 else "", rest[2] if len(rest) > 2 else "")


@dataclass(frozen=True)
class DryRunWrites:
    """The dry run's :data:`~zkop.kube.client.WritePolicy`: ``None`` for a write the rule allows (module
    docstring), else why it is refused.

    Args:
        own_groups: the API groups of the operator's own kinds (their status may be written).
        own_finalizers: the operator's finalizers (may be removed from its own objects, never added).
    """

    own_groups: Collection[str]
    own_finalizers: Collection[str]

    def __call__(self, method: str, path: str, body: Any) -> str | None:
        """``None`` if ``method`` on ``path`` with ``body`` is allowed in a dry run, else a sentence saying why not."""
        target = parse_path(path)
        if target is None:
            return "not a write a dry run makes"
        if (target.group, target.resource) in _PROCESS_WRITES and method in ("POST", "PUT", "PATCH"):
            return None
        if target.group in self.own_groups and target.name:
            if target.subresource == "status" and method in ("PUT", "PATCH"):
                return None
            if not target.subresource and method == "PATCH" and self._removes_finalizer_only(body):
                return None
        return "a dry run writes only its own objects' status, Events and the removal of its own finalizer"

    def _removes_finalizer_only(self, body: Any) -> bool:
        if not isinstance(body, dict) or set(body) != {"metadata"} or not isinstance(body["metadata"], dict):
            return False
        meta = body["metadata"]
        if "finalizers" not in meta or not set(meta) <= {"finalizers", "resourceVersion"}:
            return False
        return not set(meta["finalizers"] or ()) & set(self.own_finalizers)
