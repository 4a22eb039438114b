"""Planning an imported service's EndpointSlices (pure, no I/O); the rules are in :mod:`zkop.services.importer.plan`."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from zkop.kube.client import JSON
from zkop.services.endpoints import SERVICE_NAME_LABEL
from zkop.services.importer.objects import (
    CreateObject,
    KubeAction,
    PatchObject,
    delete_action,
    is_owned,
    metadata_of,
    owned_annotations,
    owned_labels,
    subset_differs,
)
from zkop.services.importer.options import MANAGED_BY, SLICE_MANAGED_BY_LABEL
from zkop.services.importer.sources import ImportedService

__all__ = ["MAX_ENDPOINTS_PER_SLICE", "SlicePlan", "desired_slices", "plan_slices"]

#: Endpoints per EndpointSlice: the EndpointSlice controller's default ``--max-endpoints-per-slice``
#: (the API allows 1000).
MAX_ENDPOINTS_PER_SLICE = 100


def _ports_key(ports: Sequence[tuple[str, int, str]]) -> str:
    text = ",".join(f"{name}:{port}/{protocol}" for name, port, protocol in ports)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


#: The uid of the Service the same plan creates: assigned by the API server, so known only once that create is
#: applied (Terraform's "known after apply"). A slice planned for a new Service names it in its ownerReference;
#: :func:`bind_service_uid` puts the real uid in before the slice is written.
PENDING_SERVICE_UID = "(the uid of the Service this plan creates)"


def desired_slices(imported: ImportedService, name: str, namespace: str, cluster_id: str,
                   service_uid: str | None) -> list[JSON]:
    """The EndpointSlices of ``imported`` for Service ``name`` (rules in the module docstring), sorted by name.

    Args:
        service_uid: the Service's uid for the ``ownerReference`` (:data:`PENDING_SERVICE_UID`: the one the plan
            creates); ``None`` leaves it out.
    """
    groups: dict[tuple[str, tuple[tuple[str, int, str], ...]], dict[str, bool]] = {}
    for instance in imported.instances:
        ports = tuple((p.name, p.port, p.protocol) for p in instance.ports)
        ready = groups.setdefault((instance.address_type, ports), {})
        ready[instance.address] = ready.get(instance.address, False) or instance.ready
    per_type = Counter(address_type for address_type, _ in groups)
    slices: list[JSON] = []
    for (address_type, ports), addresses in sorted(groups.items()):
        base = f"{name}-zkop-{address_type.lower()}"
        if per_type[address_type] > 1:
            base = f"{base}-{_ports_key(ports)}"
        ordered = sorted(addresses)
        for index in range(0, len(ordered), MAX_ENDPOINTS_PER_SLICE):
            chunk = ordered[index:index + MAX_ENDPOINTS_PER_SLICE]
            number = index // MAX_ENDPOINTS_PER_SLICE + 1
            meta: JSON = {
                "name": base if number == 1 else f"{base}-{number}",
                "namespace": namespace,
                "labels": owned_labels({SERVICE_NAME_LABEL: name, SLICE_MANAGED_BY_LABEL: MANAGED_BY}),
                "annotations": owned_annotations(imported.path, cluster_id),
            }
            if service_uid:
                meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Service", "name": name,
                                            "uid": service_uid, "controller": True}]
            slices.append({
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": meta,
                "addressType": address_type,
                "endpoints": [{"addresses": [a], "conditions": {"ready": addresses[a], "serving": addresses[a],
                                                                 "terminating": False}} for a in chunk],
                "ports": [{"name": n, "port": p, "protocol": proto} for n, p, proto in ports],
            })
    return sorted(slices, key=lambda s: str(s["metadata"]["name"]))


def _endpoints_view(endpoints: Any) -> list[tuple[tuple[str, ...], Any, Any, Any]]:
    view = []
    for endpoint in endpoints or []:
        if not isinstance(endpoint, dict):
            continue
        conditions = endpoint.get("conditions") or {}
        view.append((tuple(str(a) for a in endpoint.get("addresses") or []), conditions.get("ready"),
                     conditions.get("serving"), conditions.get("terminating")))
    return view


def _slice_ports_view(ports: Any) -> list[tuple[Any, Any, Any]]:
    return [(p.get("name"), p.get("port"), p.get("protocol") or "TCP") for p in ports or [] if isinstance(p, dict)]


def _owner_refs_view(refs: Any) -> list[tuple[Any, ...]]:
    return [(r.get("apiVersion"), r.get("kind"), r.get("name"), r.get("uid"), bool(r.get("controller")))
            for r in refs or [] if isinstance(r, dict)]


def _slice_differs(desired: JSON, existing: JSON) -> bool:
    want, have = desired["metadata"], metadata_of(existing)
    return (
        subset_differs(want["labels"], have.get("labels"))
        or subset_differs(want["annotations"], have.get("annotations"))
        or _owner_refs_view(want.get("ownerReferences")) != _owner_refs_view(have.get("ownerReferences"))
        or _endpoints_view(desired["endpoints"]) != _endpoints_view(existing.get("endpoints"))
        or _slice_ports_view(desired["ports"]) != _slice_ports_view(existing.get("ports"))
    )


@dataclass(frozen=True)
class SlicePlan:
    """The result of :func:`plan_slices`: ``actions`` in order, and ``foreign`` slice names left alone."""

    actions: tuple[KubeAction, ...] = ()
    foreign: tuple[str, ...] = ()


def plan_slices(desired: Sequence[JSON], existing: Iterable[JSON], cluster_id: str) -> SlicePlan:
    """Plan one Service's EndpointSlices against the cached ones carrying its ``kubernetes.io/service-name``.

    ===================================  ==========================================
    cached slice of a desired name       action
    ===================================  ==========================================
    absent                               create
    owned, managed fields equal          nothing
    owned, managed fields differ         merge patch (labels, annotations,
                                         ownerReferences, endpoints, ports)
    owned, other ``addressType``         delete, then create (the field is immutable)
    not owned                            left alone, reported as foreign
    ===================================  ==========================================

    Owned slices that are not desired are deleted, after the creates and updates (so a renamed
    slice never leaves the Service without endpoints in between). Slices being deleted are skipped.
    """
    by_name = {str(metadata_of(s).get("name")): s for s in existing}
    wanted = {str(s["metadata"]["name"]) for s in desired}
    actions: list[KubeAction] = []
    foreign: list[str] = []
    for body in desired:
        name = str(body["metadata"]["name"])
        current = by_name.get(name)
        if current is None:
            actions.append(CreateObject("endpointslices", body))
            continue
        if not is_owned(current, cluster_id):
            foreign.append(name)
            continue
        if metadata_of(current).get("deletionTimestamp"):
            continue
        if current.get("addressType") != body["addressType"]:
            actions.extend([delete_action("endpointslices", current), CreateObject("endpointslices", body)])
            continue
        if _slice_differs(body, current):
            patch: JSON = {
                "metadata": {"resourceVersion": metadata_of(current).get("resourceVersion"),
                             "labels": body["metadata"]["labels"], "annotations": body["metadata"]["annotations"]},
                "endpoints": body["endpoints"],
                "ports": body["ports"],
            }
            if "ownerReferences" in body["metadata"]:
                patch["metadata"]["ownerReferences"] = body["metadata"]["ownerReferences"]
            actions.append(PatchObject("endpointslices", name, patch))
    for name, current in sorted(by_name.items()):
        if name not in wanted and is_owned(current, cluster_id) and not metadata_of(current).get("deletionTimestamp"):
            actions.append(delete_action("endpointslices", current))
    return SlicePlan(tuple(actions), tuple(foreign))


def _bind(meta: JSON, uid: str | None) -> JSON:
    refs = meta.get("ownerReferences")
    if not refs or not any(ref.get("uid") == PENDING_SERVICE_UID for ref in refs):
        return meta
    bound = {k: v for k, v in meta.items() if k != "ownerReferences"}
    if uid is not None:
        bound["ownerReferences"] = [{**ref, "uid": uid} if ref.get("uid") == PENDING_SERVICE_UID else ref
                                    for ref in refs]
    return bound


def bind_service_uid(actions: Sequence[KubeAction], uid: str | None) -> tuple[KubeAction, ...]:
    """``actions`` with :data:`PENDING_SERVICE_UID` replaced by ``uid``, the uid the API server gave the Service the
    plan created; with ``uid`` ``None`` (a dry run only planned that create) the pending ownerReference is left
    out. Pure; actions naming no pending uid are returned as they are."""
    bound: list[KubeAction] = []
    for action in actions:
        if isinstance(action, CreateObject):
            meta = _bind(action.body["metadata"], uid)
            action = action if meta is action.body["metadata"] else CreateObject(action.resource,
                                                                                  {**action.body, "metadata": meta})
        elif isinstance(action, PatchObject) and isinstance(action.patch.get("metadata"), dict):
            meta = _bind(action.patch["metadata"], uid)
            if meta is not action.patch["metadata"]:
                action = PatchObject(action.resource, action.name, {**action.patch, "metadata": meta})
        bound.append(action)
    return tuple(bound)
