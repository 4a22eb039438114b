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
* the Service's ``zookeeper.platform.example.com/meta-<key>`` annotations from the registrations' metadata
  (:func:`service_metadata`, the rules in :mod:`zkop.services.metadata`: only keys every instance has with one value,
  valid annotation names, bounded). zkop manages every annotation of that prefix on a Service it owns: one the
  metadata no longer gives is removed; with no instance left the Service keeps the ones it has (as its ports).
  Nothing else of the Service comes from a registration: its labels and other annotations are zkop's.

The actions and ownership marks live in :mod:`zkop.services.importer.objects`, the EndpointSlice
planner in :mod:`zkop.services.importer.slices`; both are re-exported here.

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

from collections import Counter
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass
from typing import Any

from zkop.kube.types import JSON
from zkop.services.endpoints import SERVICE_NAME_LABEL
from zkop.services.fullsync import breaker_trips
from zkop.services.importer.objects import (
    CreateObject,
    DeleteObject,
    KubeAction,
    PatchObject,
    Resource,
    delete_action,
    describe,
    is_owned,
    metadata_of,
    owned_annotations,
    owned_labels,
    subset_differs,
)
from zkop.services.importer.slices import (
    MAX_ENDPOINTS_PER_SLICE,
    PENDING_SERVICE_UID,
    SlicePlan,
    desired_slices,
    plan_slices,
)
from zkop.services.importer.sources import ImportedInstance, ImportedService
from zkop.services.metadata import MetadataAnnotations, is_meta_annotation, metadata_annotations, shared_entries
from zkop.services.options import SYNC_ANNOTATION

__all__ = [
    "MAX_ENDPOINTS_PER_SLICE",
    "CreateObject",
    "DeleteObject",
    "GcPlan",
    "ImportPlan",
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
    "plan_import",
    "plan_service",
    "plan_slices",
    "service_metadata",
    "service_ports",
]


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


def service_metadata(imported: ImportedService) -> MetadataAnnotations:
    """The ``…/meta-<key>`` annotations ``imported``'s instances give (:mod:`zkop.services.metadata`), and what the
    rules dropped."""
    return metadata_annotations(shared_entries([i.metadata for i in imported.instances]))


def _meta_of(obj: JSON | None) -> dict[str, str]:
    annotations = metadata_of(obj or {}).get("annotations") or {}
    return {str(k): str(v) for k, v in annotations.items() if is_meta_annotation(str(k))}


def desired_service(imported: ImportedService, name: str, namespace: str, cluster_id: str,
                    existing: JSON | None = None, metadata: Mapping[str, str] | None = None) -> JSON | None:
    """The Service for ``imported`` named ``name``, or ``None`` if it has no port to offer.

    Args:
        imported: the winning ZooKeeper service.
        name: the Service name (:func:`zkop.services.importer.naming.service_name`).
        namespace: ``--import-namespace``.
        cluster_id: this installation's ``--cluster-id``.
        existing: the cached Service of that name; when owned, its ports and metadata annotations are kept if no
            instance is left.
        metadata: the metadata annotations (default: :func:`service_metadata`'s); only names with
            :data:`~zkop.services.metadata.META_PREFIX` are taken, and zkop's own annotations win over them.
    """
    ports = service_ports(imported.instances)
    kept = existing is not None and is_owned(existing, cluster_id) and not imported.instances
    if not ports and kept:
        ports = [{"name": n, "port": p, "protocol": proto, "targetPort": t}
                 for n, p, proto, t in _port_view(((existing or {}).get("spec") or {}).get("ports"))]
    if not ports:
        return None
    if kept:
        meta = _meta_of(existing)
    else:
        given = service_metadata(imported).annotations if metadata is None else metadata
        meta = {k: v for k, v in given.items() if is_meta_annotation(k)}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name, "namespace": namespace, "labels": owned_labels(),
            "annotations": {**meta, **owned_annotations(imported.path, cluster_id, {SYNC_ANNOTATION: "false"})},
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

    Managed fields: zkop's labels and annotations (others are kept), every ``…/meta-<key>`` annotation (one
    ``desired`` does not hold is removed), ``spec.type``, ``spec.ports`` and an empty ``spec.selector`` (a selector
    added by hand is removed: the Service must stay selector-less, or the EndpointSlice controller would add its own
    endpoints).
    """
    if existing is not None and not is_owned(existing, cluster_id):
        return ServiceStep(foreign=True)
    if desired is None:
        return ServiceStep()
    if existing is None:
        return ServiceStep(CreateObject("services", desired))
    meta = metadata_of(existing)
    if meta.get("deletionTimestamp"):
        return ServiceStep(terminating=True)
    spec = existing.get("spec") or {}
    wanted_meta, wanted_spec = desired["metadata"], desired["spec"]
    stale = {k: None for k in _meta_of(existing) if k not in wanted_meta["annotations"]}
    differs = (
        subset_differs(wanted_meta["labels"], meta.get("labels"))
        or subset_differs(wanted_meta["annotations"], meta.get("annotations"))
        or bool(stale)
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
                     "annotations": {**wanted_meta["annotations"], **stale}},
        "spec": patch_spec,
    }
    return ServiceStep(PatchObject("services", str(meta.get("name")), patch))


@dataclass(frozen=True)
class ImportPlan:
    """The result of :func:`plan_import`: one imported Service's whole change.

    Attributes:
        service: the Service's step (or why it is left alone).
        slices: its EndpointSlices' actions, applied after the Service's (nothing while it terminates); a slice of a
            Service the plan creates names it by :data:`~zkop.services.importer.slices.PENDING_SERVICE_UID`.
        metadata_problems: the metadata entries the annotation rules dropped, one sentence each (for a Warning
            Event; :func:`service_metadata`).
    """

    service: ServiceStep
    slices: SlicePlan
    metadata_problems: tuple[str, ...] = ()


def plan_import(imported: ImportedService, name: str, namespace: str, cluster_id: str, existing: JSON | None,
                slices: Iterable[JSON]) -> ImportPlan:
    """Decide once what one imported service needs: its Service (:func:`plan_service`) and its EndpointSlices
    (:func:`~zkop.services.importer.slices.plan_slices`) against the cached ``existing`` Service and ``slices``.

    A Service that is not zkop's keeps none of zkop's slices (endpoints zkop imported must never attach to someone
    else's Service); a terminating one gets none until it is gone; a Service the plan creates is named in its
    slices' ownerReference by the pending uid, bound when the create is applied.
    """
    metadata = service_metadata(imported)
    step = plan_service(desired_service(imported, name, namespace, cluster_id, existing, metadata.annotations),
                        existing, cluster_id)
    if step.foreign:
        return ImportPlan(step, plan_slices([], slices, cluster_id))
    if step.terminating:
        return ImportPlan(step, SlicePlan())
    uid = PENDING_SERVICE_UID if existing is None else str(metadata_of(existing).get("uid") or "") or None
    wanted = desired_slices(imported, name, namespace, cluster_id, uid)
    return ImportPlan(step, plan_slices(wanted, slices, cluster_id), metadata.problems)


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
        meta = metadata_of(obj)
        if not is_owned(obj, cluster_id) or meta.get("deletionTimestamp"):
            continue
        service = str((meta.get("labels") or {}).get(SERVICE_NAME_LABEL) or "")
        if service not in wanted or not service:
            doomed_slices.append(delete_action("endpointslices", obj))
            names.add(service)
    for obj in services:
        meta = metadata_of(obj)
        if not is_owned(obj, cluster_id) or meta.get("deletionTimestamp"):
            continue
        name = str(meta.get("name"))
        if name in wanted:
            imported += 1
            continue
        doomed_services.append(delete_action("services", obj))
        names.add(name)
    breaker = breaker_trips(len(names), max_deletes)
    actions = () if breaker else tuple(sorted(doomed_slices, key=lambda a: a.name)) + tuple(
        sorted(doomed_services, key=lambda a: a.name))
    return GcPlan(actions, tuple(sorted(names)), breaker, imported)
