"""Pure planning for the service importer: imported services + existing objects → Kubernetes actions.

No I/O (the same source → plan → provider split as :mod:`zkop.services.bridge.plan`). The reconciler
reads ZooKeeper and the informer caches, calls these functions and sends the actions to the API
server; every update carries the ``resourceVersion`` it was planned from and every delete
``preconditions`` on uid and ``resourceVersion``, so a concurrent change turns into a 409 and a
re-plan instead of a lost update or the deletion of a re-created object.

What is built (Kubernetes "Services without selectors" and the EndpointSlice API reference):

* one selector-less ``ClusterIP`` Service per imported service (:func:`desired_service`). Its
  ports are the union of the instances' ports by ``(name, protocol)``; each Service port number
  is the number most instances use for that name (ties: the smallest), ``targetPort`` the same
  number (kube-proxy forwards to each endpoint's own port, found by port name, so instances
  using other numbers still work). Two names that would share a ``(port, protocol)``, or one
  name used with two protocols — both rejected by the API server — keep the first in name
  order. With no instance left the Service keeps its ports (it stays, without endpoints, while
  its node exists in ZooKeeper); a service that never had an instance gets no Service (there is
  no port to give it).
* EndpointSlices (:func:`desired_slices`) with one endpoint per distinct instance address, grouped
  as the EndpointSlice controller groups them: one slice per ``(addressType, port set)``, at
  most :data:`MAX_ENDPOINTS_PER_SLICE` endpoints each. Names are deterministic, so reconciling is
  idempotent: ``<service>-zkop-<ipv4|ipv6|fqdn>``; when one address type has several port sets,
  each gets ``-<8 hex digits of the port set's SHA-256>``; further chunks of a full slice get
  ``-2``, ``-3``, …. Endpoint conditions: ``ready`` and ``serving`` from the instance's
  readiness (an address listed twice is ready if any of its instances is), ``terminating: false``.
  Slices carry an ``ownerReference`` to the Service, so Kubernetes' garbage collector removes
  them with it.

Ownership (:func:`is_owned`): label ``platform.example.com/imported-from-zookeeper: "true"`` and
annotation ``platform.example.com/imported-by: zkop/<cluster id>``. Only owned objects are updated
or deleted; a Service of the wanted name that is not owned is left alone and reported
(:attr:`ServiceStep.foreign`), and the owned slices of that name are then deleted so that
endpoints zkop imported never attach to someone else's Service. Objects are only written when
the fields zkop manages differ (no write on a resync).

Garbage collection (:func:`plan_gc`): owned Services and slices whose Service name is not wanted
by any ZooKeeper service node. The delete circuit breaker counts the distinct Service names that
would lose objects; above ``max_deletes`` the sweep deletes nothing.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Sequence, Set
from dataclasses import dataclass
from typing import Any, Literal

from zkop.kube.client import JSON
from zkop.services.endpoints import SERVICE_NAME_LABEL
from zkop.services.fullsync import breaker_trips
from zkop.services.importer.options import (
    IMPORTED_LABEL,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    OWNER_ANNOTATION,
    PATH_ANNOTATION,
    SLICE_MANAGED_BY_LABEL,
    owner_value,
)
from zkop.services.importer.sources import ImportedInstance, ImportedService
from zkop.services.options import SYNC_ANNOTATION

__all__ = [
    "MAX_ENDPOINTS_PER_SLICE",
    "CreateObject",
    "DeleteObject",
    "GcPlan",
    "KubeAction",
    "PatchObject",
    "Resource",
    "ServiceStep",
    "SlicePlan",
    "describe",
    "desired_service",
    "desired_slices",
    "is_owned",
    "plan_gc",
    "plan_service",
    "plan_slices",
    "service_ports",
]

#: Endpoints per EndpointSlice: the EndpointSlice controller's default ``--max-endpoints-per-slice``
#: (the API allows 1000).
MAX_ENDPOINTS_PER_SLICE = 100

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


def _meta(obj: JSON) -> JSON:
    meta: JSON = obj.get("metadata") or {}
    return meta


def is_owned(obj: JSON, cluster_id: str) -> bool:
    """True if installation ``cluster_id`` created ``obj`` (label and owner annotation, see the module docstring)."""
    meta = _meta(obj)
    return ((meta.get("labels") or {}).get(IMPORTED_LABEL) == "true"
            and (meta.get("annotations") or {}).get(OWNER_ANNOTATION) == owner_value(cluster_id))


def _labels(extra: dict[str, str] | None = None) -> dict[str, str]:
    return {IMPORTED_LABEL: "true", MANAGED_BY_LABEL: MANAGED_BY, **(extra or {})}


def _annotations(path: str, cluster_id: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    return {OWNER_ANNOTATION: owner_value(cluster_id), PATH_ANNOTATION: path, **(extra or {})}


def _subset_differs(wanted: dict[str, str], actual: Any) -> bool:
    actual = actual if isinstance(actual, dict) else {}
    return any(actual.get(k) != v for k, v in wanted.items())


# --- the Service -------------------------------------------------------------------------------


def service_ports(instances: Iterable[ImportedInstance]) -> list[JSON]:
    """Service ports from instance ports (rules in the module docstring), sorted by name and protocol."""
    counts: dict[tuple[str, str], Counter[int]] = {}
    for instance in instances:
        for port in instance.ports:
            counts.setdefault((port.name, port.protocol), Counter())[port.port] += 1
    ports: list[JSON] = []
    used: set[tuple[int, str]] = set()
    names: set[str] = set()
    for (name, protocol), numbers in sorted(counts.items()):
        number = min(numbers, key=lambda n: (-numbers[n], n))
        if (number, protocol) in used or name in names:
            continue
        used.add((number, protocol))
        names.add(name)
        ports.append({"name": name, "port": number, "protocol": protocol, "targetPort": number})
    return ports


def _port_view(ports: Any) -> list[tuple[Any, Any, Any, Any]]:
    return [(p.get("name"), p.get("port"), p.get("protocol") or "TCP", p.get("targetPort", p.get("port")))
            for p in ports or [] if isinstance(p, dict)]


def desired_service(imported: ImportedService, name: str, namespace: str, cluster_id: str,
                    existing: JSON | None = None) -> JSON | None:
    """The Service for ``imported`` named ``name``, or ``None`` if it has no port to offer.

    Args:
        imported: the winning ZooKeeper service.
        name: the Service name (:func:`zkop.services.importer.naming.service_name`).
        namespace: ``--import-namespace``.
        cluster_id: this installation's ``--cluster-id``.
        existing: the cached Service of that name; when owned, its ports are kept if no instance is left.
    """
    ports = service_ports(imported.instances)
    if not ports and existing is not None and is_owned(existing, cluster_id):
        ports = [{"name": n, "port": p, "protocol": proto, "targetPort": t}
                 for n, p, proto, t in _port_view((existing.get("spec") or {}).get("ports"))]
    if not ports:
        return None
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name, "namespace": namespace, "labels": _labels(),
            "annotations": _annotations(imported.path, cluster_id, {SYNC_ANNOTATION: "false"}),
        },
        "spec": {"type": "ClusterIP", "ports": ports},
    }


@dataclass(frozen=True)
class ServiceStep:
    """The result of :func:`plan_service`.

    Attributes:
        action: what to send, ``None`` if nothing.
        foreign: a Service of that name exists and is not owned; left alone.
        terminating: the owned Service is being deleted; wait for it to go.
    """

    action: CreateObject | PatchObject | None = None
    foreign: bool = False
    terminating: bool = False


def plan_service(desired: JSON | None, existing: JSON | None, cluster_id: str) -> ServiceStep:
    """Plan the Service: create if absent, merge-patch the managed fields if they differ.

    Managed fields: zkop's labels and annotations (others are kept), ``spec.type``, ``spec.ports``
    and an empty ``spec.selector`` (a selector added by hand is removed: the Service must stay
    selector-less, or the EndpointSlice controller would add its own endpoints).
    """
    if existing is not None and not is_owned(existing, cluster_id):
        return ServiceStep(foreign=True)
    if desired is None:
        return ServiceStep()
    if existing is None:
        return ServiceStep(CreateObject("services", desired))
    meta = _meta(existing)
    if meta.get("deletionTimestamp"):
        return ServiceStep(terminating=True)
    spec = existing.get("spec") or {}
    wanted_meta, wanted_spec = desired["metadata"], desired["spec"]
    differs = (
        _subset_differs(wanted_meta["labels"], meta.get("labels"))
        or _subset_differs(wanted_meta["annotations"], meta.get("annotations"))
        or spec.get("type", "ClusterIP") != wanted_spec["type"]
        or _port_view(spec.get("ports")) != _port_view(wanted_spec["ports"])
        or bool(spec.get("selector"))
    )
    if not differs:
        return ServiceStep()
    patch_spec: JSON = {"type": wanted_spec["type"], "ports": wanted_spec["ports"]}
    if spec.get("selector"):
        patch_spec["selector"] = None
    patch: JSON = {
        "metadata": {"resourceVersion": meta.get("resourceVersion"), "labels": wanted_meta["labels"],
                     "annotations": wanted_meta["annotations"]},
        "spec": patch_spec,
    }
    return ServiceStep(PatchObject("services", str(meta.get("name")), patch))


# --- EndpointSlices ----------------------------------------------------------------------------


def _ports_key(ports: Sequence[tuple[str, int, str]]) -> str:
    text = ",".join(f"{name}:{port}/{protocol}" for name, port, protocol in ports)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def desired_slices(imported: ImportedService, name: str, namespace: str, cluster_id: str,
                   service_uid: str | None) -> list[JSON]:
    """The EndpointSlices of ``imported`` for Service ``name`` (rules in the module docstring), sorted by name.

    Args:
        service_uid: the Service's uid for the ``ownerReference``; ``None`` leaves it out.
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
                "labels": _labels({SERVICE_NAME_LABEL: name, SLICE_MANAGED_BY_LABEL: MANAGED_BY}),
                "annotations": _annotations(imported.path, cluster_id),
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
    want, have = desired["metadata"], _meta(existing)
    return (
        _subset_differs(want["labels"], have.get("labels"))
        or _subset_differs(want["annotations"], have.get("annotations"))
        or _owner_refs_view(want.get("ownerReferences")) != _owner_refs_view(have.get("ownerReferences"))
        or _endpoints_view(desired["endpoints"]) != _endpoints_view(existing.get("endpoints"))
        or _slice_ports_view(desired["ports"]) != _slice_ports_view(existing.get("ports"))
    )


@dataclass(frozen=True)
class SlicePlan:
    """The result of :func:`plan_slices`: ``actions`` in order, and ``foreign`` slice names left alone."""

    actions: tuple[KubeAction, ...] = ()
    foreign: tuple[str, ...] = ()


def _delete(resource: Resource, obj: JSON) -> DeleteObject:
    meta = _meta(obj)
    return DeleteObject(resource, str(meta.get("name")), str(meta.get("uid") or ""),
                        str(meta.get("resourceVersion") or ""))


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
    by_name = {str(_meta(s).get("name")): s for s in existing}
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
        if _meta(current).get("deletionTimestamp"):
            continue
        if current.get("addressType") != body["addressType"]:
            actions.extend([_delete("endpointslices", current), CreateObject("endpointslices", body)])
            continue
        if _slice_differs(body, current):
            patch: JSON = {
                "metadata": {"resourceVersion": _meta(current).get("resourceVersion"),
                             "labels": body["metadata"]["labels"], "annotations": body["metadata"]["annotations"]},
                "endpoints": body["endpoints"],
                "ports": body["ports"],
            }
            if "ownerReferences" in body["metadata"]:
                patch["metadata"]["ownerReferences"] = body["metadata"]["ownerReferences"]
            actions.append(PatchObject("endpointslices", name, patch))
    for name, current in sorted(by_name.items()):
        if name not in wanted and is_owned(current, cluster_id) and not _meta(current).get("deletionTimestamp"):
            actions.append(_delete("endpointslices", current))
    return SlicePlan(tuple(actions), tuple(foreign))


# --- garbage collection ------------------------------------------------------------------------


@dataclass(frozen=True)
class GcPlan:
    """The result of :func:`plan_gc`.

    Attributes:
        actions: deletions (slices first, then Services); empty when the breaker is open.
        orphaned: the Service names whose objects garbage collection wants gone, sorted.
        breaker_open: more than ``max_deletes`` names would lose objects; nothing is deleted.
        imported: owned Services that are still wanted.
    """

    actions: tuple[DeleteObject, ...] = ()
    orphaned: tuple[str, ...] = ()
    breaker_open: bool = False
    imported: int = 0


def plan_gc(services: Iterable[JSON], slices: Iterable[JSON], *, wanted: Set[str], cluster_id: str,
            max_deletes: int) -> GcPlan:
    """Plan garbage collection over the cached objects of the import namespace.

    Args:
        services: every cached Service of the namespace (foreign ones are ignored).
        slices: every cached EndpointSlice labelled as imported.
        wanted: the Service names some ZooKeeper service node maps to (from a fresh listing).
        cluster_id: only this installation's objects are candidates.
        max_deletes: the circuit breaker's limit on Service names per sweep; ``0`` disables it.

    An owned slice is an orphan when its ``kubernetes.io/service-name`` is not wanted (or missing).
    Objects already being deleted are left to finish.
    """
    doomed_slices: list[DeleteObject] = []
    doomed_services: list[DeleteObject] = []
    names: set[str] = set()
    imported = 0
    for obj in slices:
        meta = _meta(obj)
        if not is_owned(obj, cluster_id) or meta.get("deletionTimestamp"):
            continue
        service = str((meta.get("labels") or {}).get(SERVICE_NAME_LABEL) or "")
        if service not in wanted or not service:
            doomed_slices.append(_delete("endpointslices", obj))
            names.add(service)
    for obj in services:
        meta = _meta(obj)
        if not is_owned(obj, cluster_id) or meta.get("deletionTimestamp"):
            continue
        name = str(meta.get("name"))
        if name in wanted:
            imported += 1
            continue
        doomed_services.append(_delete("services", obj))
        names.add(name)
    breaker = breaker_trips(len(names), max_deletes)
    actions = () if breaker else tuple(sorted(doomed_slices, key=lambda a: a.name)) + tuple(
        sorted(doomed_services, key=lambda a: a.name))
    return GcPlan(actions, tuple(sorted(names)), breaker, imported)
