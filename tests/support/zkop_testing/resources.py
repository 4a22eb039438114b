"""Test support: ZooKeeperConfig manifests, znode reads and status predicates for integration tests."""

from __future__ import annotations

import base64
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from zkop.kube.client import ApiException, KubeClient, resource_path

ZKC = ("platform.example.com", "v1alpha1", "zookeeperconfigs")


#: ``spec.acl`` declaring the open ACL (every permission to ``world:anyone``): what a value from a Secret needs when
#: zkop holds no ZooKeeper credential (otherwise it is refused: ``SecretNeedsAcl``).
OPEN_ACL = [{"scheme": "world", "id": "anyone", "permissions": ["read", "write", "create", "delete", "admin"]}]


def zkc(name: str, path: str, data: bytes | None = None, namespace: str = "default", **spec: Any) -> dict[str, Any]:
    """A ZooKeeperConfig manifest; ``data`` becomes base64 ``spec.data`` when given."""
    body: dict[str, Any] = {"path": path, **spec}
    if data is not None:
        body["data"] = base64.b64encode(data).decode()
    return {
        "apiVersion": "platform.example.com/v1alpha1",
        "kind": "ZooKeeperConfig",
        "metadata": {"name": name, "namespace": namespace},
        "spec": body,
    }


def create(kube: KubeClient, obj: dict[str, Any]) -> dict[str, Any]:
    """POST a ZooKeeperConfig."""
    return kube.request("POST", resource_path(*ZKC, obj["metadata"]["namespace"]), body=obj)


def get(kube: KubeClient, name: str, namespace: str = "default") -> dict[str, Any] | None:
    """GET a ZooKeeperConfig, ``None`` if absent."""
    try:
        return kube.request("GET", resource_path(*ZKC, namespace, name))
    except ApiException as err:
        if err.status == 404:
            return None
        raise


def read(zk: KazooClient, path: str) -> bytes | None:
    """A znode's bytes, ``None`` if absent."""
    try:
        return bytes(zk.get(path)[0])
    except NoNodeError:
        return None


def conditions(obj: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """``status.conditions`` by type."""
    return {c["type"]: c for c in ((obj or {}).get("status") or {}).get("conditions") or []}


def state(kube: KubeClient, name: str, namespace: str = "default") -> str | None:
    """``status.state`` of a ZooKeeperConfig."""
    return ((get(kube, name, namespace) or {}).get("status") or {}).get("state")


def synced(kube: KubeClient, name: str, namespace: str = "default") -> dict[str, Any] | None:
    """The object if Synced at its current generation, else ``None``."""
    obj = get(kube, name, namespace)
    status = (obj or {}).get("status") or {}
    if obj and status.get("state") == "Synced" and status.get("observedGeneration") == obj["metadata"]["generation"]:
        return obj
    return None


def events(kube: KubeClient, name: str, namespace: str = "default") -> list[dict[str, Any]]:
    """core/v1 Events about the named object."""
    items: list[dict[str, Any]] = kube.request("GET", resource_path("", "v1", "events", namespace))["items"]
    return [e for e in items if e.get("involvedObject", {}).get("name") == name]


def reasons(kube: KubeClient, name: str, namespace: str = "default") -> list[str]:
    """Event reasons about the named object, oldest first."""
    return [e["reason"] for e in events(kube, name, namespace)]


def create_service_with_endpoints(kube: KubeClient, name: str = "web", namespace: str = "default",
                                  address: str = "10.1.0.5") -> None:
    """POST a Service (port ``http`` 80, selector ``app=<name>``) and one ready EndpointSlice for it
    (``<name>-1``: ``address``, port ``http`` 8080/TCP): what the service bridge publishes."""
    kube.request("POST", resource_path("", "v1", "services", namespace), body={
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace},
        "spec": {"ports": [{"name": "http", "port": 80}], "selector": {"app": name}}})
    kube.request("POST", resource_path("discovery.k8s.io", "v1", "endpointslices", namespace), body={
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": f"{name}-1", "namespace": namespace, "labels": {"kubernetes.io/service-name": name}},
        "addressType": "IPv4", "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]})
