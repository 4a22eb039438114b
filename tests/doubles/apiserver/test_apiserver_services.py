"""Service defaults, ClusterIP/NodePort allocation, immutability and the status subresource."""

from __future__ import annotations

import ipaddress
from typing import Any

import kubernetes.client as k8s
from apiserver_helpers import api_error

from zkop.kube.client import MERGE_PATCH, KubeClient, resource_path

CIDR = ipaddress.ip_network("10.96.0.0/12")


def svc_path(ns: str, name: str | None = None, subresource: str | None = None) -> str:
    return resource_path("", "v1", "services", ns, name, subresource)


def svc(name: str, *ports: int, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"ports": [{"name": f"p{p}", "port": p} for p in ports], **spec}}


def test_defaults_and_cluster_ip_allocation(kube: KubeClient, ns: str) -> None:
    a = kube.request("POST", svc_path(ns), body=svc("a", 2181))
    spec = a["spec"]
    assert spec["type"] == "ClusterIP" and spec["sessionAffinity"] == "None"
    assert spec["ports"] == [{"name": "p2181", "port": 2181, "protocol": "TCP", "targetPort": 2181}]
    assert spec["clusterIPs"] == [spec["clusterIP"]]
    assert spec["ipFamilies"] == ["IPv4"] and spec["ipFamilyPolicy"] == "SingleStack"
    assert a["status"] == {"loadBalancer": {}}
    ips = {spec["clusterIP"]}
    for i in range(20):
        ips.add(kube.request("POST", svc_path(ns), body=svc(f"s{i}", 80))["spec"]["clusterIP"])
    assert len(ips) == 21
    for ip in ips:
        address = ipaddress.ip_address(ip)
        assert address in CIDR and ip not in ("10.96.0.0", "10.96.0.1")


def test_headless_and_external_name(kube: KubeClient, ns: str) -> None:
    headless = kube.request("POST", svc_path(ns), body=svc("h", 2181, clusterIP="None"))
    assert headless["spec"]["clusterIP"] == "None" and headless["spec"]["clusterIPs"] == ["None"]
    ext = kube.request("POST", svc_path(ns), body={"metadata": {"name": "e"},
                                                   "spec": {"type": "ExternalName", "externalName": "zk.example.com"}})
    assert "clusterIP" not in ext["spec"] and "clusterIPs" not in ext["spec"]
    status, body = api_error(lambda: kube.request("POST", svc_path(ns), body={
        "metadata": {"name": "e2"}, "spec": {"type": "ExternalName"}}))
    assert status == 422 and body["details"]["causes"][0]["field"] == "spec.externalName"


def test_requested_cluster_ip_is_honoured_once(kube: KubeClient, ns: str) -> None:
    a = kube.request("POST", svc_path(ns), body=svc("a", 80, clusterIP="10.96.0.50"))
    assert a["spec"]["clusterIP"] == "10.96.0.50"
    status, body = api_error(lambda: kube.request("POST", svc_path(ns), body=svc("b", 80, clusterIP="10.96.0.50")))
    assert status == 422 and "provided IP is already allocated" in body["message"]
    status, body = api_error(lambda: kube.request("POST", svc_path(ns), body=svc("c", 80, clusterIP="192.168.0.1")))
    assert status == 422 and "not in the valid range" in body["message"]
    # deleting releases the address
    kube.request("DELETE", svc_path(ns, "a"))
    assert kube.request("POST", svc_path(ns), body=svc("b", 80, clusterIP="10.96.0.50"))["spec"]["clusterIP"] == \
        "10.96.0.50"


def test_node_ports(kube: KubeClient, ns: str) -> None:
    np = kube.request("POST", svc_path(ns), body=svc("np", 80, 443, type="NodePort"))
    ports = [p["nodePort"] for p in np["spec"]["ports"]]
    assert len(set(ports)) == 2 and all(30000 <= p <= 32767 for p in ports)
    assert np["spec"]["externalTrafficPolicy"] == "Cluster"
    lb = kube.request("POST", svc_path(ns), body=svc("lb", 2181, type="LoadBalancer"))
    assert 30000 <= lb["spec"]["ports"][0]["nodePort"] <= 32767
    assert lb["spec"]["allocateLoadBalancerNodePorts"] is True
    fixed = kube.request("POST", svc_path(ns), body={"metadata": {"name": "fixed"}, "spec": {
        "type": "NodePort", "ports": [{"port": 80, "nodePort": 31000}]}})
    assert fixed["spec"]["ports"][0]["nodePort"] == 31000
    status, body = api_error(lambda: kube.request("POST", svc_path(ns), body={"metadata": {"name": "dup"}, "spec": {
        "type": "NodePort", "ports": [{"port": 80, "nodePort": 31000}]}}))
    assert status == 422 and "provided port is already allocated" in body["message"]
    status, _ = api_error(lambda: kube.request("POST", svc_path(ns), body={"metadata": {"name": "cip"}, "spec": {
        "ports": [{"port": 80, "nodePort": 31001}]}}))
    assert status == 422


def test_update_keeps_allocations_and_cluster_ip_is_immutable(kube: KubeClient, ns: str) -> None:
    created = kube.request("POST", svc_path(ns), body=svc("a", 80, type="NodePort"))
    ip, node_port = created["spec"]["clusterIP"], created["spec"]["ports"][0]["nodePort"]
    # a PUT that omits clusterIP and nodePort keeps them
    body = svc("a", 80, type="NodePort")
    body["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
    updated = kube.request("PUT", svc_path(ns, "a"), body=body)
    assert updated["spec"]["clusterIP"] == ip and updated["spec"]["ports"][0]["nodePort"] == node_port
    assert updated["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]  # nothing changed
    status, body_ = api_error(lambda: kube.request("PATCH", svc_path(ns, "a"), body={"spec": {
        "clusterIP": "10.96.7.7", "clusterIPs": ["10.96.7.7"]}}, content_type=MERGE_PATCH))
    assert status == 422 and body_["reason"] == "Invalid"
    assert body_["message"].startswith('Service "a" is invalid: spec.clusterIPs[0]')
    # back to ClusterIP: node ports are wiped
    back = kube.request("PATCH", svc_path(ns, "a"), body={"spec": {"type": "ClusterIP", "externalTrafficPolicy": None}},
                        content_type=MERGE_PATCH)
    assert "nodePort" not in back["spec"]["ports"][0] and back["spec"]["clusterIP"] == ip


def service_ports(service: k8s.V1Service) -> list[k8s.V1ServicePort]:
    """``spec.ports`` of a typed Service, asserting each level is present."""
    assert service.spec is not None
    assert service.spec.ports is not None
    return service.spec.ports


def load_balancer_ingress(service: k8s.V1Service) -> list[k8s.V1LoadBalancerIngress]:
    """``status.loadBalancer.ingress`` of a typed Service, asserting each level is present."""
    assert service.status is not None
    assert service.status.load_balancer is not None
    assert service.status.load_balancer.ingress is not None
    return service.status.load_balancer.ingress


def test_strategic_merge_patch_merges_ports_by_port(api: Any, ns: str) -> None:
    core = k8s.CoreV1Api(api)
    core.create_namespaced_service(ns, k8s.V1Service(metadata=k8s.V1ObjectMeta(name="a"), spec=k8s.V1ServiceSpec(
        ports=[k8s.V1ServicePort(name="client", port=2181)])))
    patched = core.patch_namespaced_service("a", ns, {"spec": {"ports": [{"name": "admin", "port": 8080}]}})
    assert [(p.name, p.port, p.target_port) for p in service_ports(patched)] == [("client", 2181, 2181),
                                                                               ("admin", 8080, 8080)]
    patched = core.patch_namespaced_service("a", ns, {"spec": {"ports": [{"port": 8080, "$patch": "delete"}]}})
    assert [p.name for p in service_ports(patched)] == ["client"]


def test_status_subresource(api: Any, kube: KubeClient, ns: str) -> None:
    core = k8s.CoreV1Api(api)
    created = kube.request("POST", svc_path(ns), body=svc("lb", 2181, type="LoadBalancer"))
    # status written through the main endpoint is ignored
    ignored = kube.request("PATCH", svc_path(ns, "lb"), body={"status": {"loadBalancer": {"ingress": [
        {"ip": "1.2.3.4"}]}}}, content_type=MERGE_PATCH)
    assert ignored["status"] == {"loadBalancer": {}}
    assert ignored["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    status = core.patch_namespaced_service_status("lb", ns, {"status": {"loadBalancer": {"ingress": [
        {"ip": "203.0.113.7"}]}}, "spec": {"type": "ClusterIP"}})
    assert load_balancer_ingress(status)[0].ip == "203.0.113.7"
    assert status.spec is not None
    assert status.spec.type == "LoadBalancer"  # spec changes through /status are ignored
    assert load_balancer_ingress(core.read_namespaced_service_status("lb", ns))[0].ip == "203.0.113.7"


def test_service_validation(kube: KubeClient, ns: str) -> None:
    status, body = api_error(lambda: kube.request("POST", svc_path(ns), body={"metadata": {"name": "x"},
                                                                              "spec": {}}))
    assert status == 422 and body["details"]["causes"][0] == {"reason": "FieldValueRequired", "field": "spec.ports",
                                                              "message": "Required value"}
    status, body = api_error(lambda: kube.request("POST", svc_path(ns), body={"metadata": {"name": "x"}, "spec": {
        "ports": [{"port": 80}, {"port": 81}]}}))
    assert status == 422 and "spec.ports[0].name: Required value" in body["message"]
    status, body = api_error(lambda: kube.request("POST", svc_path(ns), body={"metadata": {"name": "x"}, "spec": {
        "ports": [{"port": 70000}], "type": "Weird"}}))
    fields = {c["field"] for c in body["details"]["causes"]}
    assert status == 422 and {"spec.type", "spec.ports[0].port"} <= fields


def test_dual_stack_allocates_an_ipv6_secondary(kube: KubeClient, ns: str) -> None:
    single = kube.request("POST", svc_path(ns), body=svc("single", 80))
    assert single["spec"]["ipFamilies"] == ["IPv4"] and single["spec"]["ipFamilyPolicy"] == "SingleStack"
    dual = kube.request("POST", svc_path(ns), body=svc("dual", 80, ipFamilyPolicy="PreferDualStack"))
    ips = dual["spec"]["clusterIPs"]
    assert dual["spec"]["ipFamilies"] == ["IPv4", "IPv6"] and ips[0] == dual["spec"]["clusterIP"]
    assert ipaddress.ip_address(ips[0]).version == 4 and ipaddress.ip_address(ips[1]).version == 6
    other = kube.request("POST", svc_path(ns), body=svc("dual2", 80, ipFamilyPolicy="RequireDualStack"))
    assert other["spec"]["clusterIPs"][1] != ips[1]
