"""Pure planning (``zkop.services.importer.plan``): the Service, the EndpointSlices, garbage collection."""

from __future__ import annotations

import copy
from typing import Any

from zkop.services.bridge.options import BridgeOptions
from zkop.services.bridge.records import is_selected
from zkop.services.importer.plan import (
    MAX_ENDPOINTS_PER_SLICE,
    CreateObject,
    DeleteObject,
    PatchObject,
    desired_service,
    desired_slices,
    is_owned,
    plan_gc,
    plan_import,
    plan_service,
    plan_slices,
    service_ports,
)
from zkop.services.importer.slices import PENDING_SERVICE_UID, bind_service_uid
from zkop.services.importer.sources import ImportedInstance, ImportedPort, ImportedService

JSON = dict[str, Any]
CLUSTER = "prod"


def inst(address: str, *ports: tuple[str, int], ready: bool = True, kind: str = "IPv4") -> ImportedInstance:
    return ImportedInstance(address, address, kind, tuple(sorted(ImportedPort(n, p) for n, p in ports)),  # type: ignore[arg-type]
                            ready, f"/services/orders/{address}")


def svc(*instances: ImportedInstance, path: str = "/services/orders") -> ImportedService:
    return ImportedService("orders", path, 1, instances)


def stored(obj: JSON, uid: str = "uid-1", rv: str = "10") -> JSON:
    """``obj`` as the API server would return it (defaults added, uid and resourceVersion set)."""
    out = copy.deepcopy(obj)
    out["metadata"].update(uid=uid, resourceVersion=rv, creationTimestamp="2024-01-01T00:00:00Z")
    if out["kind"] == "Service":
        out["spec"].update(clusterIP="10.96.1.1", clusterIPs=["10.96.1.1"], sessionAffinity="None")
    return out


def test_service_ports_take_the_most_common_number_per_name() -> None:
    ports = service_ports([inst("10.0.0.1", ("http", 8080)), inst("10.0.0.2", ("http", 8081)),
                           inst("10.0.0.3", ("http", 8081), ("https", 8443))])
    assert ports == [{"name": "http", "port": 8081, "protocol": "TCP", "targetPort": 8081},
                     {"name": "https", "port": 8443, "protocol": "TCP", "targetPort": 8443}]
    # A tie goes to the smallest number; a second name on a taken (port, protocol) is left out.
    assert [p["port"] for p in service_ports([inst("a", ("http", 90)), inst("b", ("http", 80))])] == [80]
    assert [p["name"] for p in service_ports([inst("a", ("a", 80)), inst("b", ("b", 80))])] == ["a"]


def test_desired_service_is_a_labelled_selectorless_cluster_ip_service() -> None:
    body = desired_service(svc(inst("10.0.0.1", ("http", 8080))), "orders", "legacy", CLUSTER)
    assert body == {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {
            "name": "orders", "namespace": "legacy",
            "labels": {"platform.example.com/imported-from-zookeeper": "true", "app.kubernetes.io/managed-by": "zkop"},
            "annotations": {"platform.example.com/imported-by": "zkop/prod",
                            "platform.example.com/zookeeper-path": "/services/orders",
                            "platform.example.com/zookeeper-sync": "false"},
        },
        "spec": {"type": "ClusterIP", "ports": [{"name": "http", "port": 8080, "protocol": "TCP", "targetPort": 8080}]},
    }
    assert is_owned(body, CLUSTER) and not is_owned(body, "other")
    # The forward bridge never publishes it (loop prevention), even with the opt-out annotation removed.
    del body["metadata"]["annotations"]["platform.example.com/zookeeper-sync"]
    assert not is_selected({**body, "metadata": {**body["metadata"], "namespace": "legacy"}}, BridgeOptions())


def test_a_service_without_instances_keeps_its_ports_or_is_not_created() -> None:
    assert desired_service(svc(), "orders", "legacy", CLUSTER) is None
    existing = stored(desired_service(svc(inst("10.0.0.1", ("http", 8080))), "orders", "legacy", CLUSTER) or {})
    kept = desired_service(svc(), "orders", "legacy", CLUSTER, existing) or {}
    assert kept["spec"]["ports"] == existing["spec"]["ports"]
    assert plan_service(kept, existing, CLUSTER).action is None


def test_plan_service_create_nothing_update_and_foreign() -> None:
    desired = desired_service(svc(inst("10.0.0.1", ("http", 8080))), "orders", "legacy", CLUSTER)
    step = plan_service(desired, None, CLUSTER)
    assert isinstance(step.action, CreateObject) and step.action.body == desired
    existing = stored(desired or {})
    assert plan_service(desired, existing, CLUSTER).action is None  # a resync writes nothing
    # Someone else's labels and annotations do not count as a difference.
    existing["metadata"]["labels"]["team"] = "payments"
    existing["metadata"]["annotations"]["note"] = "x"
    assert plan_service(desired, existing, CLUSTER).action is None
    moved = desired_service(svc(inst("10.0.0.1", ("http", 9090))), "orders", "legacy", CLUSTER)
    step = plan_service(moved, existing, CLUSTER)
    assert isinstance(step.action, PatchObject)
    assert step.action.patch["metadata"]["resourceVersion"] == "10"
    assert step.action.patch["spec"] == {"type": "ClusterIP", "ports": [
        {"name": "http", "port": 9090, "protocol": "TCP", "targetPort": 9090}]}
    # A selector added by hand is removed (merge patch null).
    existing["spec"]["selector"] = {"app": "orders"}
    step = plan_service(desired, existing, CLUSTER)
    assert isinstance(step.action, PatchObject) and step.action.patch["spec"]["selector"] is None
    # Not owned (no label, or another installation's owner annotation): left alone, reported.
    foreign = stored({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "orders", "namespace": "legacy"},
                      "spec": {"ports": [{"port": 80}], "selector": {"app": "orders"}}})
    assert plan_service(desired, foreign, CLUSTER).foreign
    assert plan_service(desired, existing, "other-cluster").foreign
    terminating = stored(desired or {})
    terminating["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    assert plan_service(desired, terminating, CLUSTER).terminating


def test_slices_group_by_address_type_and_port_set() -> None:
    imported = svc(inst("10.0.0.2", ("http", 8080)), inst("10.0.0.1", ("http", 8080), ready=False),
                   inst("10.0.0.1", ("http", 8080)),  # the same address twice: ready if any is
                   inst("2001:db8::1", ("http", 8080), kind="IPv6"),
                   inst("legacy-1.example.com", ("http", 8080), kind="FQDN"))
    slices = desired_slices(imported, "orders", "legacy", CLUSTER, "uid-1")
    assert [s["metadata"]["name"] for s in slices] == ["orders-zkop-fqdn", "orders-zkop-ipv4", "orders-zkop-ipv6"]
    ipv4 = slices[1]
    assert ipv4["addressType"] == "IPv4"
    assert ipv4["endpoints"] == [
        {"addresses": ["10.0.0.1"], "conditions": {"ready": True, "serving": True, "terminating": False}},
        {"addresses": ["10.0.0.2"], "conditions": {"ready": True, "serving": True, "terminating": False}}]
    assert ipv4["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    assert ipv4["metadata"]["labels"] == {
        "platform.example.com/imported-from-zookeeper": "true", "app.kubernetes.io/managed-by": "zkop",
        "kubernetes.io/service-name": "orders", "endpointslice.kubernetes.io/managed-by": "zkop"}
    assert ipv4["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Service", "name": "orders", "uid": "uid-1", "controller": True}]
    assert all(is_owned(s, CLUSTER) for s in slices)
    # Two port sets of one address type: one slice each, told apart by a hash of the ports.
    mixed = desired_slices(svc(inst("10.0.0.1", ("http", 8080)), inst("10.0.0.2", ("http", 9090), ready=False)),
                           "orders", "legacy", CLUSTER, None)
    names = [s["metadata"]["name"] for s in mixed]
    assert len(names) == 2 and all(n.startswith("orders-zkop-ipv4-") and len(n) == len("orders-zkop-ipv4-") + 8
                                   for n in names)
    assert all("ownerReferences" not in s["metadata"] for s in mixed)
    assert desired_slices(svc(), "orders", "legacy", CLUSTER, "uid-1") == []


def test_full_slices_are_chunked() -> None:
    many = svc(*(inst(f"10.0.{i // 250}.{i % 250 + 1}", ("http", 80)) for i in range(MAX_ENDPOINTS_PER_SLICE * 2 + 1)))
    slices = desired_slices(many, "orders", "legacy", CLUSTER, "u")
    assert [s["metadata"]["name"] for s in slices] == ["orders-zkop-ipv4", "orders-zkop-ipv4-2", "orders-zkop-ipv4-3"]
    assert [len(s["endpoints"]) for s in slices] == [MAX_ENDPOINTS_PER_SLICE, MAX_ENDPOINTS_PER_SLICE, 1]


def test_plan_slices() -> None:
    v1 = desired_slices(svc(inst("10.0.0.1", ("http", 8080)), inst("2001:db8::1", ("http", 8080), kind="IPv6")),
                        "orders", "legacy", CLUSTER, "u")
    assert [type(a) for a in plan_slices(v1, [], CLUSTER).actions] == [CreateObject, CreateObject]
    cached = [stored(s, uid=f"s{i}", rv=str(20 + i)) for i, s in enumerate(v1)]
    assert plan_slices(v1, cached, CLUSTER).actions == ()  # unchanged: no write
    # The IPv6 instance goes and the IPv4 one is disabled: patch one slice (with its resourceVersion), delete the other.
    v2 = desired_slices(svc(inst("10.0.0.1", ("http", 8080), ready=False)), "orders", "legacy", CLUSTER, "u")
    plan = plan_slices(v2, cached, CLUSTER)
    patch, delete = plan.actions
    assert isinstance(patch, PatchObject) and patch.name == "orders-zkop-ipv4"
    assert patch.patch["metadata"]["resourceVersion"] == "20"
    assert patch.patch["endpoints"][0]["conditions"]["ready"] is False
    assert delete == DeleteObject("endpointslices", "orders-zkop-ipv6", "s1", "21")
    # Not owned: left alone and reported; owned slices are deleted only after creates and updates.
    foreign = copy.deepcopy(cached[0])
    foreign["metadata"]["annotations"]["platform.example.com/imported-by"] = "zkop/other"
    plan = plan_slices(v2, [foreign], CLUSTER)
    assert plan.actions == () and plan.foreign == ("orders-zkop-ipv4",)
    # An owned slice of the same name with another addressType is replaced (the field is immutable).
    odd = copy.deepcopy(cached[0])
    odd["addressType"] = "FQDN"
    assert [type(a) for a in plan_slices(v2, [odd], CLUSTER).actions] == [DeleteObject, CreateObject]
    # A new Service uid (the Service was re-created) updates the ownerReference.
    v3 = desired_slices(svc(inst("10.0.0.1", ("http", 8080)), inst("2001:db8::1", ("http", 8080), kind="IPv6")),
                        "orders", "legacy", CLUSTER, "u2")
    assert {a.name for a in plan_slices(v3, cached, CLUSTER).actions if isinstance(a, PatchObject)} == {
        "orders-zkop-ipv4", "orders-zkop-ipv6"}


def owned_service(name: str) -> JSON:
    return stored(desired_service(svc(inst("10.0.0.1", ("http", 80)), path=f"/services/{name}"), name, "legacy",
                                  CLUSTER) or {}, uid=f"uid-{name}")


def test_gc_deletes_only_owned_orphans_and_holds_above_the_limit() -> None:
    services = [owned_service(n) for n in ("a", "b", "c")]
    slices = [stored(s, uid=f"slice-{s['metadata']['name']}") for s in desired_slices(
        svc(inst("10.0.0.1", ("http", 80))), "b", "legacy", CLUSTER, "uid-b")]
    foreign = stored({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "d", "namespace": "legacy"},
                      "spec": {"ports": [{"port": 80}]}}, uid="uid-d")
    other = owned_service("e")
    other["metadata"]["annotations"]["platform.example.com/imported-by"] = "zkop/other-cluster"
    plan = plan_gc([*services, foreign, other], slices, wanted={"a", "c"}, cluster_id=CLUSTER, max_deletes=10)
    assert plan.actions == (DeleteObject("endpointslices", "b-zkop-ipv4", "slice-b-zkop-ipv4", "10"),
                            DeleteObject("services", "b", "uid-b", "10"))
    assert (plan.orphaned, plan.breaker_open, plan.imported) == (("b",), False, 2)
    # Everything vanished from ZooKeeper (a wrong root, a restored snapshot…): more than max_deletes → nothing.
    plan = plan_gc(services, slices, wanted=set(), cluster_id=CLUSTER, max_deletes=2)
    assert plan.breaker_open and plan.actions == () and plan.orphaned == ("a", "b", "c")
    assert plan_gc(services, slices, wanted=set(), cluster_id=CLUSTER, max_deletes=0).actions  # 0: no limit
    # Objects already being deleted are left to finish.
    going = owned_service("x")
    going["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    assert plan_gc([going], [], wanted=set(), cluster_id=CLUSTER, max_deletes=10).actions == ()


def owner_uids(actions: Any) -> list[Any]:
    """The ownerReference uids each create or patch of ``actions`` carries (``None``: none)."""
    found = []
    for action in actions:
        meta = action.body["metadata"] if isinstance(action, CreateObject) else action.patch.get("metadata", {})
        found.append([ref["uid"] for ref in meta["ownerReferences"]] if "ownerReferences" in meta else None)
    return found


def test_plan_import_decides_the_service_and_its_slices_at_once() -> None:
    imported = svc(inst("10.0.0.1", ("http", 8080)), inst("10.0.0.2", ("http", 8080)))
    # A new Service: created first, its slice names it by the pending uid, bound once the create is applied.
    plan = plan_import(imported, "orders", "legacy", CLUSTER, None, [])
    assert isinstance(plan.service.action, CreateObject)
    assert [type(a) for a in plan.slices.actions] == [CreateObject]
    assert owner_uids(plan.slices.actions) == [[PENDING_SERVICE_UID]]
    assert owner_uids(bind_service_uid(plan.slices.actions, "uid-new")) == [["uid-new"]]
    assert owner_uids(bind_service_uid(plan.slices.actions, None)) == [None]  # a dry run's planned Service
    # An existing Service: its own uid, nothing pending; a resync of the same state plans nothing at all.
    desired = desired_service(imported, "orders", "legacy", CLUSTER)
    existing = stored(desired or {}, uid="uid-1")
    slices = [stored(s, uid=f"slice-{i}") for i, s in enumerate(desired_slices(imported, "orders", "legacy", CLUSTER,
                                                                             "uid-1"))]
    again = plan_import(imported, "orders", "legacy", CLUSTER, existing, slices)
    assert again.service.action is None and again.slices.actions == ()
    # A foreign Service: left alone, and zkop's own slices of that name deleted; a terminating one: nothing yet.
    foreign = stored({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "orders", "namespace": "legacy"},
                      "spec": {"ports": [{"port": 80}]}})
    taken = plan_import(imported, "orders", "legacy", CLUSTER, foreign, slices)
    assert taken.service.foreign and [type(a) for a in taken.slices.actions] == [DeleteObject]
    existing["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    going = plan_import(imported, "orders", "legacy", CLUSTER, existing, slices)
    assert going.service.terminating and going.slices.actions == ()


def test_binding_the_pending_uid_touches_only_pending_owner_references() -> None:
    imported = svc(inst("10.0.0.1", ("http", 8080)))
    old = stored(desired_slices(imported, "orders", "legacy", CLUSTER, "uid-gone")[0], uid="slice-1")
    # The Service was deleted and is created again: the owned slice left from before is patched to the new owner.
    plan = plan_import(imported, "orders", "legacy", CLUSTER, None, [old])
    assert [type(a) for a in plan.slices.actions] == [PatchObject]
    assert owner_uids(bind_service_uid(plan.slices.actions, "uid-new")) == [["uid-new"]]
    # A delete, or a create naming a known uid, is returned as it is.
    kept = plan_slices(desired_slices(imported, "orders", "legacy", CLUSTER, "uid-1"), [], CLUSTER).actions
    assert bind_service_uid(kept, "uid-other") == kept
