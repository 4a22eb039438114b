"""Registration metadata → ``zookeeper.platform.example.com/meta-<key>`` annotations (``zkop.services.metadata``, the
importer's plan): which instances decide, which keys, the bounds, the round trip from the bridge, and what a
registration can never reach on a Service (other annotations, labels, zkop's ownership marks)."""

from __future__ import annotations

import copy
import json
from typing import Any
from urllib.parse import parse_qsl, quote_plus, unquote_plus, urlencode, urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st
from zkop_testing.apiserver_select import qualified_name_errors

from zkop.services.bridge import annotations as bridge_annotations
from zkop.services.bridge.formats import CuratorFormat, DubboFormat, JsonFormat
from zkop.services.bridge.options import BridgeOptions
from zkop.services.bridge.records import service_record
from zkop.services.codecs import curator, dubbo, json_record
from zkop.services.codecs.base import ImportedInstance
from zkop.services.importer.options import OWNER_ANNOTATION, PATH_ANNOTATION
from zkop.services.importer.plan import PatchObject, desired_service, is_owned, plan_import, plan_service
from zkop.services.importer.sources import ImportedPort, ImportedService, parse_curator_instance
from zkop.services.metadata import (
    MAX_BYTES,
    MAX_ENTRIES_READ,
    MAX_KEY_LENGTH,
    MAX_KEYS,
    MAX_VALUE_BYTES,
    META_PREFIX,
    RESERVED_KEYS,
    is_reserved,
    metadata_annotations,
    shared_entries,
    string_entries,
)
from zkop.services.options import IMPORTED_LABEL, SYNC_ANNOTATION

JSON = dict[str, Any]
CLUSTER = "prod"
ZKOP_ANNOTATIONS = {OWNER_ANNOTATION: "zkop/prod", PATH_ANNOTATION: "/services/orders", SYNC_ANNOTATION: "false"}
ZKOP_LABELS = {IMPORTED_LABEL: "true", "app.kubernetes.io/managed-by": "zkop"}


def instance(address: str, **metadata: str) -> ImportedInstance:
    """An instance as the Curator codec decodes a Spring Cloud Zookeeper registration with ``metadata``."""
    body = {"name": "orders", "id": address, "address": address, "port": 8080,
            "payload": {"@class": curator.SPRING_PAYLOAD_CLASS, "id": address, "name": "orders", "metadata": metadata}}
    decoded = parse_curator_instance(f"/services/orders/{address}", address, json.dumps(body).encode())
    assert isinstance(decoded, ImportedInstance), decoded
    return decoded


def orders(*instances: ImportedInstance) -> ImportedService:
    return ImportedService("orders", "/services/orders", 1, instances)


def annotations_of(imported: ImportedService, existing: JSON | None = None) -> dict[str, str]:
    body = desired_service(imported, "orders", "shop", CLUSTER, existing) or {}
    return dict(body["metadata"]["annotations"])


def stored(obj: JSON, rv: str = "10") -> JSON:
    out = copy.deepcopy(obj)
    out["metadata"].update(uid="uid-1", resourceVersion=rv)
    return out


# --- which instances decide ----------------------------------------------------------------------


def test_only_keys_every_instance_has_with_one_value_become_annotations() -> None:
    imported = orders(instance("10.0.0.1", team="payments", zone="a", tier="gold"),
                      instance("10.0.0.2", team="payments", zone="b"))
    assert annotations_of(imported) == {META_PREFIX + "team": "payments", **ZKOP_ANNOTATIONS}
    assert shared_entries([]) == () and annotations_of(orders(instance("10.0.0.1"))) == ZKOP_ANNOTATIONS


def test_what_is_read_from_each_format() -> None:
    # Curator: payload.metadata; another payload object: its own fields but @class; string values only.
    spring = {"address": "10.0.0.1", "port": 80, "payload": {"@class": "x.Details", "id": "i",
                                                             "metadata": {"zone": "a", "n": 1}}}
    details = {"address": "10.0.0.1", "port": 80, "payload": {"@class": "x.Details", "owner-team": "ops", "n": 1}}
    assert curator.payload_metadata(spring["payload"]) == (("zone", "a"),)
    assert curator.payload_metadata(details["payload"]) == (("owner-team", "ops"),)
    assert curator.payload_metadata("text") == () and curator.payload_metadata(None) == ()
    # The JSON record's metadata object, on every instance it gives.
    record = {"externalAddresses": ["198.51.100.1", "198.51.100.2"], "ports": [{"name": "http", "port": 80}],
              "metadata": {"zone": "a"}}
    found, _ = json_record.decode("/k/r", json.dumps(record).encode())
    assert [i.metadata for i in found] == [(("zone", "a"),)] * 2
    # Dubbo: the URL parameters, Dubbo's own left out.
    url = ("tri://10.0.0.5:50051/com.example.Api?" + urlencode(
        {"anyhost": "true", "application": "shop", "interface": "com.example.Api", "side": "provider",
         "methods": "get,put", "pid": "42", "timestamp": "1700000000000", "release": "3.3.6", "dubbo": "2.0.2",
         "prefer.serialization": "hessian2", "service-name-mapping": "true", "zone": "eu-1", "owner": "team-a",
         "dubbo.tag": "gray", "weight": "100"}))
    provider = dubbo.decode_provider("/dubbo/x/providers/p", quote_plus(url, safe=""))
    assert isinstance(provider, ImportedInstance) and provider.metadata == (("zone", "eu-1"),)


def test_what_one_instance_gives_is_bounded_when_read() -> None:
    many = {f"k{i:03}": "v" for i in range(500)}
    assert len(string_entries(many)) == MAX_ENTRIES_READ and string_entries(many)[0] == ("k000", "v")


# --- which keys, the bounds ---------------------------------------------------------------------


def test_keys_are_valid_annotation_names_and_not_reserved() -> None:
    longest = "k" * MAX_KEY_LENGTH
    result = metadata_annotations([(longest, "v"), (longest + "k", "v"), ("ends-", "v"), ("-starts", "v"),
                                   ("a/b", "v"), ("sp ace", "v"), ("", "v"), ("ok.key_1-x", "v"),
                                   ("managedBy", "x"), ("label.app", "x"), ("dubbo.endpoints", "[]")])
    assert result.annotations == {META_PREFIX + longest: "v", META_PREFIX + "ok.key_1-x": "v"}
    assert all(qualified_name_errors(name) == [] for name in result.annotations)
    assert qualified_name_errors(META_PREFIX + longest + "k") != []  # why the longer key is refused
    refused = [p.split("'")[1] for p in result.problems]
    assert refused == ["", "-starts", "a/b", "ends-", longest + "k", "sp ace"]
    assert all("not 1 to 58 letters" in p for p in result.problems)  # reserved keys are not problems


def test_values_and_totals_are_bounded() -> None:
    result = metadata_annotations([("a", "x" * MAX_VALUE_BYTES), ("b", "x" * (MAX_VALUE_BYTES + 1)),
                                   ("c", "é" * (MAX_VALUE_BYTES // 2 + 1)), ("d", "line\nbreak"), ("e", "日本")])
    assert result.annotations == {META_PREFIX + "a": "x" * MAX_VALUE_BYTES, META_PREFIX + "e": "日本"}
    assert [p.split("'")[1] for p in result.problems] == ["b", "c", "d"]
    counted = metadata_annotations([(f"k{i:02}", "v") for i in range(MAX_KEYS + 3)])
    assert list(counted.annotations) == [f"{META_PREFIX}k{i:02}" for i in range(MAX_KEYS)]
    assert counted.problems == (f"metadata 'k{MAX_KEYS}': more than {MAX_KEYS} keys or {MAX_BYTES} bytes; this key "
                                "and later ones are not annotations",)
    sized = metadata_annotations([(f"k{i}", "x" * 250) for i in range(9)])  # 8 × 252 ≤ 2048 < 9 × 252
    assert len(sized.annotations) == 8 and len(sized.problems) == 1


def test_the_importer_refuses_every_key_the_bridge_refuses() -> None:
    assert bridge_annotations.META == META_PREFIX
    assert (bridge_annotations.MAX_META_KEYS, bridge_annotations.MAX_META_VALUE_BYTES,
            bridge_annotations.MAX_META_BYTES) == (MAX_KEYS, MAX_VALUE_BYTES, MAX_BYTES)
    assert all(is_reserved(key) for key in bridge_annotations.RESERVED_META)
    assert "zone" not in RESERVED_KEYS


# --- what a registration can never reach --------------------------------------------------------

HOSTILE = {
    "kubectl.kubernetes.io/last-applied-configuration": '{"metadata":{"annotations":{}}}',
    "platform.example.com/imported-by": "zkop/attacker",
    "platform.example.com/zookeeper-path": "/elsewhere",
    "platform.example.com/zookeeper-sync": "true",
    "platform.example.com/imported-from-zookeeper": "false",
    "service.kubernetes.io/headless": "",
    "service.kubernetes.io/topology-mode": "Auto",
    "app.kubernetes.io/managed-by": "attacker",
    "zookeeper.platform.example.com/format": "dubbo",
    "../meta-x": "y",
    "meta-/../../x": "y",
    "imported-by": "zkop/attacker",
    "zone": "a",
}


def test_a_registration_sets_no_annotation_or_label_but_meta_ones() -> None:
    body = desired_service(orders(instance("10.0.0.1", **HOSTILE)), "orders", "shop", CLUSTER) or {}
    # zone, and the key that is only a name part (no '/'), land under the meta- prefix; nothing else does.
    assert body["metadata"]["annotations"] == {META_PREFIX + "imported-by": "zkop/attacker", META_PREFIX + "zone": "a",
                                               **ZKOP_ANNOTATIONS}
    assert body["metadata"]["labels"] == ZKOP_LABELS and is_owned(body, CLUSTER)
    # Even metadata handed to the planner directly cannot name another annotation, nor override zkop's own.
    direct = desired_service(orders(instance("10.0.0.1")), "orders", "shop", CLUSTER,
                             metadata={OWNER_ANNOTATION: "zkop/attacker", META_PREFIX + "ok": "1"}) or {}
    assert direct["metadata"]["annotations"] == {META_PREFIX + "ok": "1", **ZKOP_ANNOTATIONS}


@given(st.dictionaries(st.text(max_size=70), st.text(max_size=300), max_size=40))
def test_any_metadata_gives_only_valid_meta_annotations_within_bounds(metadata: dict[str, str]) -> None:
    imported = orders(instance("10.0.0.1", **metadata))
    body = desired_service(imported, "orders", "shop", CLUSTER) or {}
    annotations = body["metadata"]["annotations"]
    extra = {k: v for k, v in annotations.items() if k not in ZKOP_ANNOTATIONS}
    assert {k: annotations[k] for k in ZKOP_ANNOTATIONS} == ZKOP_ANNOTATIONS
    assert body["metadata"]["labels"] == ZKOP_LABELS
    assert all(k.startswith(META_PREFIX) and qualified_name_errors(k) == [] for k in extra)
    assert all(extra[k] == metadata[k[len(META_PREFIX):]] for k in extra)
    assert len(extra) <= MAX_KEYS and sum(len(k) - len(META_PREFIX) + len(v.encode()) for k, v in extra.items()) \
        <= MAX_BYTES


# --- the plan: updates, removals, no instance ----------------------------------------------------


def test_changed_and_vanished_metadata_is_patched_and_nothing_else_of_the_service_is_touched() -> None:
    first = orders(instance("10.0.0.1", team="payments", zone="a"))
    existing = stored(desired_service(first, "orders", "shop", CLUSTER) or {})
    existing["metadata"]["annotations"]["example.com/by-hand"] = "kept"
    assert plan_import(first, "orders", "shop", CLUSTER, existing, []).service.action is None  # no write on a resync
    changed = orders(instance("10.0.0.1", team="ledger"))
    action = plan_service(desired_service(changed, "orders", "shop", CLUSTER, existing), existing, CLUSTER).action
    assert isinstance(action, PatchObject)
    assert action.patch["metadata"]["annotations"] == {META_PREFIX + "team": "ledger", META_PREFIX + "zone": None,
                                                       **ZKOP_ANNOTATIONS}
    assert action.patch["metadata"]["resourceVersion"] == "10"
    # A meta- annotation added by hand to zkop's Service is zkop's to manage: removed.
    existing["metadata"]["annotations"][META_PREFIX + "added"] = "by hand"
    again = plan_service(desired_service(first, "orders", "shop", CLUSTER, existing), existing, CLUSTER).action
    assert isinstance(again, PatchObject) and again.patch["metadata"]["annotations"][META_PREFIX + "added"] is None


def test_a_service_without_instances_keeps_its_metadata_as_its_ports() -> None:
    existing = stored(desired_service(orders(instance("10.0.0.1", zone="a")), "orders", "shop", CLUSTER) or {})
    empty = desired_service(orders(), "orders", "shop", CLUSTER, existing) or {}
    assert empty["metadata"]["annotations"][META_PREFIX + "zone"] == "a"
    assert plan_service(empty, existing, CLUSTER).action is None


def test_the_plan_reports_what_the_rules_dropped() -> None:
    plan = plan_import(orders(instance("10.0.0.1", **{"bad key": "v", "zone": "a"})), "orders", "shop", CLUSTER,
                       None, [])
    assert len(plan.metadata_problems) == 1 and "'bad key'" in plan.metadata_problems[0]
    assert plan_import(orders(instance("10.0.0.1", zone="a")), "orders", "shop", CLUSTER, None,
                       []).metadata_problems == ()


# --- the round trip: bridge → ZooKeeper bytes → importer ------------------------------------------

META = {META_PREFIX + "zone": "eu-1", META_PREFIX + "tier": "gold", META_PREFIX + "owner-team": "payments"}


def _unstamped(url: str) -> str:
    """A provider URL without zkop's stamp: what an unstamped registration of the same provider reads as."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k not in ("managedBy", "clusterId")]
    return parts._replace(query=urlencode(query)).geturl()


@pytest.mark.parametrize("fmt", ["json", "curator", "dubbo"])
def test_metadata_the_bridge_publishes_comes_back_as_the_same_annotations(fmt: str) -> None:
    annotations = {**META, bridge_annotations.DUBBO_INTERFACES: "com.example.Api"}
    obj = {"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": "orders", "namespace": "shop", "uid": "u-1",
                        "creationTimestamp": "2024-01-01T00:00:00Z", "annotations": annotations,
                        "labels": {"app": "orders"}},
           "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
                    "ipFamilies": ["IPv4"],
                    "ports": [{"name": "dubbo", "port": 20880, "protocol": "TCP", "targetPort": 20880}]}}
    options = BridgeOptions()
    record = service_record(obj, options)
    if fmt == "json":
        found, _ = json_record.decode("/kubernetes/services/shop-orders",
                                      JsonFormat().render(record, JsonFormat().locate(obj, options), CLUSTER)[0].data)
    elif fmt == "curator":
        node = CuratorFormat().render(record, CuratorFormat().locate(obj, options), CLUSTER)[0]
        decoded = curator.decode_instance(node.path, node.path.rsplit("/", 1)[1], node.data)
        found = (decoded,) if isinstance(decoded, ImportedInstance) else ()
    else:
        node = DubboFormat().render(record, DubboFormat().locate(obj, options), CLUSTER)[0]
        name = quote_plus(_unstamped(unquote_plus(node.path.rsplit("/", 1)[1])), safe="")
        decoded = dubbo.decode_provider(node.path, name)
        found = (decoded,) if isinstance(decoded, ImportedInstance) else ()
    assert found, fmt
    imported = ImportedService("orders", "/x/orders", 1, tuple(found))
    assert {k: v for k, v in annotations_of(imported).items() if k.startswith(META_PREFIX)} == META
    assert all(p.port == 20880 for i in found for p in i.ports if isinstance(p, ImportedPort))
