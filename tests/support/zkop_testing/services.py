"""Test support for both service directions: the bridge and the importer run in-process as ``zkop run`` wires them,
on any API server (the in-memory double or a real control plane), and the helpers their end-to-end tests share.

- :func:`running_bridge` / :func:`running_importer`: build the component with ``build_service_bridge`` /
  ``build_service_importer`` on a client from ``clients.api_client()`` and run it through the same Manager.
- Bridge side: :func:`svc` (a Service manifest), :func:`record` (a published record), :func:`children`,
  :func:`endpoint_address` (an address of this machine an EndpointSlice may name, for a server a test runs).
- Import side: :func:`register` (a Curator registration), :func:`get_service`, :func:`slices_of`,
  :func:`endpoints`, :func:`services_in`, and the progress waits :func:`settled`, :func:`idle`,
  :func:`full_sync_and_wait`; :func:`writes` and :func:`versions` tell whether a round wrote anything.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from prometheus_client import REGISTRY

from zkop.kube.client import ApiException, KubeClient, resource_path
from zkop.kube.events import EventRecorder
from zkop.services.bridge.builder import ServiceBridge, build_service_bridge
from zkop.services.bridge.options import BridgeOptions
from zkop.services.importer.builder import ServiceImporter, build_service_importer
from zkop.services.importer.options import ImportOptions
from zkop.zookeeper.adapter import ZooKeeperAdapter
from zkop_testing.controllers import running
from zkop_testing.waiting import wait_for

__all__ = [
    "BRIDGE_ROOT",
    "IMPORT_NAMESPACE",
    "ApiClients",
    "children",
    "curator_instance",
    "endpoint_address",
    "endpoints",
    "events",
    "full_sync_and_wait",
    "get_service",
    "idle",
    "record",
    "register",
    "running_bridge",
    "running_importer",
    "sample",
    "services_in",
    "settled",
    "slices_of",
    "svc",
    "versions",
    "writes",
]

JSON = dict[str, Any]
#: The bridge's default root (``--service-bridge-root``).
BRIDGE_ROOT = "/kubernetes/services"
#: The namespace the importer tests on the in-memory double import into.
IMPORT_NAMESPACE = "legacy"


class ApiClients(Protocol):
    """Makes API clients for the component under test: an ``ApiServer``, or a control plane's ServiceAccount."""

    def api_client(self) -> Any:
        """A new :class:`kubernetes.client.ApiClient`."""


def sample(name: str, labels: dict[str, str] | None = None) -> float:
    """The current value of a metric sample (0 if it was never set)."""
    return REGISTRY.get_sample_value(name, labels or {}) or 0.0


# ---------------------------------------------------------------------- running in-process

@contextlib.contextmanager
def running_bridge(clients: ApiClients, adapter: ZooKeeperAdapter, options: BridgeOptions, *,
                   cluster_id: str = "test", client: KubeClient | None = None,
                   clock: Callable[[], float] = time.monotonic) -> Iterator[ServiceBridge]:
    """Build the bridge as the manager would, start informers, wait for sync, start the controller.

    ``clock`` (monotonic seconds) drives the endpoint debounce; a test passes one it moves itself.
    """
    client = client or KubeClient(clients.api_client())
    recorder = EventRecorder(client, component="zkop")
    recorder.start()
    bridge = build_service_bridge(client, adapter, recorder, options, cluster_id=cluster_id, resync_period=30.0,
                                  inactivity_timeout=10.0, clock=clock)
    try:
        with running(bridge.informers, bridge.controllers):
            yield bridge
    finally:
        recorder.stop()
        client.close()


@contextlib.contextmanager
def running_importer(clients: ApiClients, adapter: ZooKeeperAdapter, options: ImportOptions, *,
                     cluster_id: str = "test", resync_period: float = 30.0) -> Iterator[ServiceImporter]:
    """Build the importer as ``zkop run`` does and run it through the same Manager.

    Like ``zkop run``, a ZooKeeper session back after LOST or SUSPENDED calls ``on_session_reconnected``.
    """
    client = KubeClient(clients.api_client())
    recorder = EventRecorder(client, component="zkop")
    recorder.start()
    importer = build_service_importer(client, adapter, recorder, options, cluster_id=cluster_id,
                                      resync_period=resync_period, inactivity_timeout=10.0)
    try:
        with running(importer.informers, importer.controllers, zookeeper=adapter,
                     on_new_session=[importer.on_session_reconnected]):
            yield importer
    finally:
        recorder.stop()
        client.close()


# ---------------------------------------------------------------------- bridge side

def svc(name: str, namespace: str = "default", *, annotations: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None, **spec: Any) -> JSON:
    """A Service manifest (one ``http`` port 80 → 8080 unless ``ports`` is given)."""
    spec.setdefault("ports", [{"name": "http", "port": 80, "targetPort": 8080}])
    meta: JSON = {"name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = dict(annotations)
    if labels:
        meta["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec}


def endpoint_address() -> str | None:
    """An IPv4 address of this machine that kube-apiserver accepts in an EndpointSlice and a test's server can bind,
    or ``None`` when there is none (a machine with loopback only).

    kube-apiserver refuses unspecified, loopback, link-local and link-local multicast addresses in an EndpointSlice
    (``ValidateNonSpecialIP`` in k8s.io/kubernetes ``pkg/apis/core/validation``, called by
    ``pkg/apis/discovery/validation``); multicast is left out too. The candidates are the source address of the
    default route (a UDP socket's ``connect`` sends nothing) and the host name's addresses.
    """
    candidates: list[str] = []
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("10.255.255.255", 9))  # any routed address: only the kernel's route lookup happens
        candidates.append(probe.getsockname()[0])
    with contextlib.suppress(OSError):
        candidates += [str(info[4][0]) for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)]
    for candidate in candidates:
        address = ipaddress.IPv4Address(candidate)
        if address.is_unspecified or address.is_loopback or address.is_link_local or address.is_multicast:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((candidate, 0))
            except OSError:
                continue
        return candidate
    return None


def record(zk: KazooClient, base: str, key: str, root: str = BRIDGE_ROOT) -> JSON | None:
    """The bridge's JSON record ``<base><root>/<key>``, ``None`` if absent."""
    try:
        return json.loads(zk.get(f"{base}{root}/{key}")[0])  # type: ignore[no-any-return]
    except NoNodeError:
        return None


def children(zk: KazooClient, path: str) -> set[str]:
    """Children of ``path``; empty while it does not exist yet."""
    try:
        return set(zk.get_children(path))
    except NoNodeError:
        return set()


def events(kube: KubeClient, reason: str, namespace: str | None = None) -> list[JSON]:
    """core/v1 Events with ``reason`` (in ``namespace``, else in every namespace)."""
    items: list[JSON] = kube.request("GET", resource_path("", "v1", "events", namespace))["items"]
    return [e for e in items if e.get("reason") == reason]


# ---------------------------------------------------------------------- import side

def curator_instance(name: str, instance_id: str, address: str, port: int | None = 8080, *,
                     ssl_port: int | None = None, enabled: bool | None = True,
                     status: str | None = None) -> bytes:
    """A Curator ``ServiceInstance`` as Spring Cloud Zookeeper writes it (fields in Curator's order)."""
    metadata: JSON = {} if status is None else {"instance_status": status}
    body: JSON = {
        "name": name, "id": instance_id, "address": address, "port": port, "sslPort": ssl_port,
        "payload": {"@class": "org.springframework.cloud.zookeeper.discovery.ZookeeperInstance",
                    "id": "application-1", "name": name, "metadata": metadata},
        "registrationTimeUTC": 1621155920122, "serviceType": "DYNAMIC",
        "uriSpec": {"parts": [{"value": "scheme", "variable": True}, {"value": "://", "variable": False},
                              {"value": "address", "variable": True}, {"value": ":", "variable": False},
                              {"value": "port", "variable": True}]},
    }
    if enabled is not None:
        body["enabled"] = enabled
    return json.dumps(body).encode()


def register(zk: KazooClient, name: str, instance_id: str, address: str, port: int | None = 8080, *,
             root: str = "/services", ephemeral: bool = True, **fields: Any) -> str:
    """Register a Curator instance the way ``ServiceDiscoveryImpl.registerService`` does (parents as needed)."""
    path = f"{root}/{name}/{instance_id}"
    zk.create(path, curator_instance(name, instance_id, address, port, **fields), ephemeral=ephemeral,
              makepath=True)
    return path


def get_service(kube: KubeClient, name: str, namespace: str = IMPORT_NAMESPACE) -> JSON | None:
    """The Service, ``None`` if absent."""
    try:
        return kube.request("GET", resource_path("", "v1", "services", namespace, name))
    except ApiException as err:
        if err.status == 404:
            return None
        raise


def slices_of(kube: KubeClient, name: str, namespace: str = IMPORT_NAMESPACE) -> list[JSON]:
    """The EndpointSlices labelled ``kubernetes.io/service-name=<name>``, by name."""
    items: list[JSON] = kube.request(
        "GET", resource_path("discovery.k8s.io", "v1", "endpointslices", namespace),
        query={"labelSelector": f"kubernetes.io/service-name={name}"})["items"]
    return sorted(items, key=lambda s: str(s["metadata"]["name"]))


def endpoints(kube: KubeClient, name: str, namespace: str = IMPORT_NAMESPACE) -> dict[str, bool]:
    """Every endpoint address of Service ``name``'s slices → its ``ready`` condition."""
    found: dict[str, bool] = {}
    for item in slices_of(kube, name, namespace):
        for endpoint in item.get("endpoints") or []:
            for address in endpoint["addresses"]:
                found[address] = bool(endpoint.get("conditions", {}).get("ready"))
    return found


def services_in(kube: KubeClient, namespace: str = IMPORT_NAMESPACE) -> set[str]:
    """The names of the Services in ``namespace``."""
    items = kube.request("GET", resource_path("", "v1", "services", namespace))["items"]
    return {str(i["metadata"]["name"]) for i in items}


def settled(importer: ServiceImporter) -> None:
    """Wait for the first full sync (the initial listing and garbage collection) to have run."""
    wait_for(lambda: importer.reconciler.last_gc is not None, message="first full sync")


def idle(importer: ServiceImporter) -> None:
    """Wait until no key of the importer's queue waits for pickup and none is being reconciled.

    Reads the queue's own ``queue`` and ``processing`` sets under its lock (client-go's
    ``Type.queue``/``processing``): a key is in one of them from ``add`` to ``done``, so no moment
    between them looks idle (``controller_runtime_active_workers`` counts a key only after the
    worker took it, and not while its requeue is added). Keys waiting in ``add_after`` do not count.
    """
    queue = importer.controller.queue

    def quiet() -> bool:
        with queue._cond:
            return not queue._queue and not queue._processing

    wait_for(quiet, message="importer idle")


def full_sync_and_wait(importer: ServiceImporter) -> None:
    """Run a full sync now and wait until it and the reconciles it enqueued are done."""
    before = sample("zkop_service_import_last_full_sync_timestamp_seconds")
    importer.request_full_sync()
    wait_for(lambda: sample("zkop_service_import_last_full_sync_timestamp_seconds") > before,
             message="full sync completed")
    idle(importer)


def writes() -> float:
    """The importer's Service and EndpointSlice writes so far (creates, updates, deletes), in this process."""
    return sum(sample("zkop_service_import_writes_total", {"resource": r, "operation": o})
               for r in ("services", "endpointslices") for o in ("create", "update")) + sum(
        sample("zkop_service_import_deletes_total", {"resource": r}) for r in ("services", "endpointslices"))


def versions(kube: KubeClient, name: str, namespace: str = IMPORT_NAMESPACE) -> dict[str, str]:
    """``resourceVersion`` of Service ``name`` and of each of its EndpointSlices."""
    found = {f"svc/{name}": str((get_service(kube, name, namespace) or {}).get("metadata", {})
                                .get("resourceVersion"))}
    for item in slices_of(kube, name, namespace):
        found[str(item["metadata"]["name"])] = str(item["metadata"]["resourceVersion"])
    return found
