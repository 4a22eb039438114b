"""Fixtures and helpers for the importer tests: a ZooKeeper adapter chrooted at the test's base
path, the in-memory API server, the importer running in-process as the manager wires it, and
Curator-style registration helpers."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient
from service_testing import sample as sample
from zkop_testing.apiserver import ApiServer
from zkop_testing.controllers import running
from zkop_testing.waiting import EVENTUALLY
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import ApiException, KubeClient, resource_path
from zkop.kube.events import EventRecorder
from zkop.services.importer.builder import ServiceImporter, build_service_importer
from zkop.services.importer.options import ImportOptions
from zkop.zookeeper.adapter import ZooKeeperAdapter

JSON = dict[str, Any]
NAMESPACE = "legacy"
GC_DELAY = 0.2  # seconds from a service vanishing to the full sync that collects it


@pytest.fixture
def chrooted(zk_server: ZooKeeperServer, zk_base: str) -> Iterator[KazooClient]:
    """A kazoo client for the registering side (legacy services), chrooted at ``zk_base``."""
    client = KazooClient(hosts=f"{zk_server.hosts}{zk_base}")
    client.start(timeout=EVENTUALLY)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def kube(apiserver: ApiServer) -> Iterator[KubeClient]:
    """A client for the test's own reads and writes (the importer gets its own)."""
    client = KubeClient(apiserver.api_client())
    create_namespace(client, NAMESPACE)
    yield client
    client.close()


def create_namespace(kube: KubeClient, name: str) -> None:
    with contextlib.suppress(ApiException):
        kube.request("POST", resource_path("", "v1", "namespaces"),
                     body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


@contextlib.contextmanager
def running_importer(apiserver: ApiServer, adapter: ZooKeeperAdapter, options: ImportOptions, *,
                     cluster_id: str = "test", resync_period: float = 30.0) -> Iterator[ServiceImporter]:
    """Build the importer as ``zkop run`` does and run it through the same Manager.

    Like ``zkop run``, a ZooKeeper session back after LOST or SUSPENDED calls ``on_session_reconnected``.
    """
    client = KubeClient(apiserver.api_client())
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


def get_service(kube: KubeClient, name: str, namespace: str = NAMESPACE) -> JSON | None:
    try:
        return kube.request("GET", resource_path("", "v1", "services", namespace, name))
    except ApiException as err:
        if err.status == 404:
            return None
        raise


def slices_of(kube: KubeClient, name: str, namespace: str = NAMESPACE) -> list[JSON]:
    items: list[JSON] = kube.request(
        "GET", resource_path("discovery.k8s.io", "v1", "endpointslices", namespace),
        query={"labelSelector": f"kubernetes.io/service-name={name}"})["items"]
    return sorted(items, key=lambda s: str(s["metadata"]["name"]))


def endpoints(kube: KubeClient, name: str, namespace: str = NAMESPACE) -> dict[str, bool]:
    """Every endpoint address of Service ``name``'s slices → its ``ready`` condition."""
    found: dict[str, bool] = {}
    for item in slices_of(kube, name, namespace):
        for endpoint in item.get("endpoints") or []:
            for address in endpoint["addresses"]:
                found[address] = bool(endpoint.get("conditions", {}).get("ready"))
    return found


def services_in(kube: KubeClient, namespace: str = NAMESPACE) -> set[str]:
    items = kube.request("GET", resource_path("", "v1", "services", namespace))["items"]
    return {str(i["metadata"]["name"]) for i in items}


def events(kube: KubeClient, reason: str) -> list[JSON]:
    items: list[JSON] = kube.request("GET", resource_path("", "v1", "events"))["items"]
    return [e for e in items if e.get("reason") == reason]


def reconciles(result: str = "success") -> float:
    """``service-import`` reconciles so far with ``result``."""
    return sample("controller_runtime_reconcile_total", {"controller": "service-import", "result": result})
