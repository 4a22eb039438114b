"""Service and EndpointSlice objects for the bridge tests, shaped as the API server returns them."""

from __future__ import annotations

from typing import Any

JSON = dict[str, Any]


def service(name: str, namespace: str = "default", *, uid: str | None = None, created: str = "2024-01-01T00:00:00Z",
            annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None,
            status: JSON | None = None, **spec: Any) -> JSON:
    """A Service as the API server returns it (defaults applied: type, protocol, targetPort, clusterIP)."""
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("ports", [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}])
    if spec["type"] != "ExternalName":
        spec.setdefault("clusterIP", "10.96.0.10")
        if spec["clusterIP"] == "None":
            spec.setdefault("clusterIPs", ["None"])
        else:
            spec.setdefault("clusterIPs", [spec["clusterIP"]])
            spec.setdefault("ipFamilies", ["IPv4"])
    meta: JSON = {"name": name, "namespace": namespace, "uid": uid or f"uid-{namespace}-{name}",
                  "creationTimestamp": created, "resourceVersion": "1"}
    if annotations:
        meta["annotations"] = annotations
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec,
            "status": status or {"loadBalancer": {}}}


def endpoint_slice(service_name: str, addresses: dict[str, bool | None], namespace: str = "default", *,
                   name: str | None = None, ports: list[JSON] | None = None) -> JSON:
    """An EndpointSlice for ``service_name``; ``addresses`` maps address → ``conditions.ready``."""
    endpoints = []
    for address, ready in addresses.items():
        endpoint: JSON = {"addresses": [address]}
        if ready is not None:
            endpoint["conditions"] = {"ready": ready}
        endpoints.append(endpoint)
    return {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": name or f"{service_name}-abc", "namespace": namespace,
                     "labels": {"kubernetes.io/service-name": service_name}},
        "addressType": "IPv4", "endpoints": endpoints,
        "ports": ports if ports is not None else [{"name": "http", "port": 8080, "protocol": "TCP"}],
    }
