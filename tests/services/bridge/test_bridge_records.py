"""Selection rules and Service → record normalisation (pure)."""

from __future__ import annotations

import pytest

from zkop.services.bridge.options import SYNC_ANNOTATION, BridgeOptions
from zkop.services.bridge.records import PortRecord, creation_millis, is_selected, parse_bool, service_record
from zkop.services.endpoints import EndpointsView

from .factories import service


@pytest.mark.parametrize(("value", "expected"), [
    ("true", True), ("True", True), ("1", True), ("t", True), ("false", False), ("FALSE", False), ("0", False),
    ("yes", None), ("", None), ("tRuE", None),
])
def test_parse_bool_is_gos_strconv(value: str, expected: bool | None) -> None:
    assert parse_bool(value) is expected


def test_every_service_is_published_by_default_and_the_annotation_opts_out() -> None:
    options = BridgeOptions()
    assert is_selected(service("web"), options)
    assert not is_selected(service("web", annotations={SYNC_ANNOTATION: "false"}), options)
    assert is_selected(service("web", annotations={SYNC_ANNOTATION: "true"}), options)
    # consul-k8s: an unparsable value falls back to the default.
    assert is_selected(service("web", annotations={SYNC_ANNOTATION: "nope"}), options)


def test_default_sync_false_makes_it_opt_in() -> None:
    options = BridgeOptions(default_sync=False)
    assert not is_selected(service("web"), options)
    assert is_selected(service("web", annotations={SYNC_ANNOTATION: "true"}), options)
    assert not is_selected(service("web", annotations={SYNC_ANNOTATION: "maybe"}), options)


def test_namespace_filters_exclude_wins_and_system_namespaces_are_excluded_by_default() -> None:
    assert not is_selected(service("dns", "kube-system"), BridgeOptions())
    assert not is_selected(service("x", "kube-public"), BridgeOptions())
    only = BridgeOptions(namespaces=("team-a", "kube-system"))
    assert is_selected(service("web", "team-a"), only)
    assert not is_selected(service("web", "team-b"), only)
    assert not is_selected(service("dns", "kube-system"), only)  # exclude wins over include
    assert is_selected(service("dns", "kube-system"), BridgeOptions(exclude_namespaces=()))
    # The annotation cannot override a namespace exclusion.
    assert not is_selected(service("dns", "kube-system", annotations={SYNC_ANNOTATION: "true"}), BridgeOptions())


def test_type_filter_and_terminating_services() -> None:
    options = BridgeOptions(types=("LoadBalancer",))
    assert not is_selected(service("web"), options)
    assert is_selected(service("web", type="LoadBalancer"), options)
    terminating = service("web")
    terminating["metadata"]["deletionTimestamp"] = "2024-01-02T00:00:00Z"
    assert not is_selected(terminating, BridgeOptions())


def test_cluster_ip_service_with_mixed_protocols_keeps_every_port_distinct() -> None:
    obj = service("dns", ports=[
        {"name": "dns-udp", "port": 53, "protocol": "UDP", "targetPort": 5353},
        {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 5353},
        {"name": "metrics", "port": 9153, "protocol": "TCP", "targetPort": "metrics"},
    ], labels={"app": "dns", "tier": "infra"})
    record = service_record(obj, BridgeOptions(labels=("app", "missing")))
    assert record.cluster_ip == "10.96.0.10"
    assert record.cluster_ips == ("10.96.0.10",)
    assert not record.headless
    assert record.ports == (
        PortRecord("dns-udp", 53, "UDP", 5353, None),
        PortRecord("dns-tcp", 53, "TCP", 5353, None),
        PortRecord("metrics", 9153, "TCP", "metrics", None),
    )
    assert record.labels == (("app", "dns"),)
    assert record.created_ms == 1704067200000


def test_single_unnamed_port_defaults_protocol_and_target_port() -> None:
    record = service_record(service("one", ports=[{"port": 8080}]), BridgeOptions())
    assert record.ports == (PortRecord(None, 8080, "TCP", 8080, None),)


def test_headless_and_external_name_have_no_cluster_ip() -> None:
    headless = service_record(service("db", clusterIP="None"), BridgeOptions())
    assert headless.headless and headless.cluster_ip is None and headless.cluster_ips == ()
    external = service_record(service("ext", type="ExternalName", externalName="db.example.com", ports=[]),
                              BridgeOptions())
    assert external.cluster_ip is None and external.external_name == "db.example.com" and external.ports == ()


def test_node_port_load_balancer_and_external_addresses() -> None:
    obj = service(
        "lb", type="LoadBalancer", externalIPs=["198.51.100.7", "203.0.113.7"],
        ports=[{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080, "nodePort": 30080}],
        status={"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}, {"hostname": "lb.example.com"}, {}]}},
    )
    record = service_record(obj, BridgeOptions())
    assert record.ports[0].node_port == 30080
    assert record.load_balancer_ingress == (("203.0.113.7", None), (None, "lb.example.com"))
    assert record.external_addresses == ("203.0.113.7", "lb.example.com", "198.51.100.7")


def test_dual_stack_cluster_ips() -> None:
    obj = service("ds", clusterIP="10.96.0.20", clusterIPs=["10.96.0.20", "fd00:10:96::20"],
                  ipFamilies=["IPv4", "IPv6"])
    record = service_record(obj, BridgeOptions())
    assert record.cluster_ip == "10.96.0.20"
    assert record.cluster_ips == ("10.96.0.20", "fd00:10:96::20")
    assert record.ip_families == ("IPv4", "IPv6")


def test_endpoints_are_carried_through() -> None:
    view = EndpointsView(("10.244.0.5",))
    assert service_record(service("web"), BridgeOptions(), view).endpoints == view


def test_creation_millis_tolerates_missing_and_bad_timestamps() -> None:
    assert creation_millis({"metadata": {}}) == 0
    assert creation_millis({"metadata": {"creationTimestamp": "yesterday"}}) == 0
    assert creation_millis({"metadata": {"creationTimestamp": "2024-01-01T00:00:01Z"}}) == 1704067201000
