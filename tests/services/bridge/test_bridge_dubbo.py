"""The bridge's Dubbo format, its annotations (metadata, bounds) and health-aware endpoints, against a real ZooKeeper.

The attacker here holds one namespace and may create and annotate Services: nothing it writes in an annotation
leaves the Dubbo root, adds a URL parameter, takes an interface an older Service publishes, overwrites a provider
another writer registered, or grows a Service's records past the bounds.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl, unquote_plus, urlsplit

import pytest
from kazoo.client import KazooClient

from zkop.ownership.registry import DEFAULT_REGISTRY_ROOT
from zkop.runtime.cache import Indexer
from zkop.services.bridge import annotations as ann
from zkop.services.bridge.annotations import read_annotations
from zkop.services.bridge.formats import CuratorFormat, DubboFormat, JsonFormat, format_for
from zkop.services.bridge.options import BridgeOptions
from zkop.services.bridge.reconciler import FULL_SYNC_KEY, SLICE_INDEX
from zkop.services.bridge.records import service_record
from zkop.services.endpoints import endpoints_view, slice_service_key
from zkop.zookeeper.adapter import ZooKeeperAdapter

from .factories import endpoint_slice, service
from .test_bridge_reconciler import Bridge

API = "com.example.Api"
PROVIDERS = f"/dubbo/{API}/providers"


def dubbo_service(name: str = "api", namespace: str = "default", **annotations: str) -> dict[str, Any]:
    """A Service publishing ``com.example.Api`` as a Dubbo provider (extra annotations by their suffix)."""
    values = {ann.FORMAT: "dubbo", ann.DUBBO_INTERFACES: API}
    values.update({ann.PREFIX + key.replace("_", "-"): value for key, value in annotations.items()})
    created = annotations.pop("created", "2024-01-01T00:00:00Z")
    return service(name, namespace, annotations={k: v for k, v in values.items() if not k.endswith("created")},
                   created=created, ports=[{"name": "dubbo", "port": 20880, "protocol": "TCP", "targetPort": 20880}])


def urls(zk: KazooClient, path: str) -> dict[str, dict[str, str]]:
    """``host:port`` → URL parameters of every provider below ``path``."""
    found = {}
    for name in zk.get_children(path):
        url = urlsplit(unquote_plus(name))
        found[url.netloc] = {"scheme": url.scheme, "path": url.path, **dict(parse_qsl(url.query))}
    return found


# --- annotations ---------------------------------------------------------------------------


@pytest.mark.parametrize("interfaces", ["../../zkop/owners", "com/example/Api", "com.example.Api?weight=100",
                                        "com.example.Api&side=consumer", "com.example.%2e%2e", "..", "a..b",
                                        "com.example.Api x"])
def test_an_interface_that_could_leave_the_root_or_inject_parameters_is_refused(interfaces: str) -> None:
    read = read_annotations({ann.DUBBO_INTERFACES: interfaces})
    assert read.dubbo.interfaces == () and read.problems


def test_annotations_are_bounded_and_reserved_keys_refused() -> None:
    many = ",".join(f"com.example.Api{i}" for i in range(ann.MAX_INTERFACES + 3))
    metadata = {f"{ann.META}k{i:02}": "v" for i in range(ann.MAX_META_KEYS + 4)}
    read = read_annotations({ann.DUBBO_INTERFACES: many, **metadata, ann.META + "weight": "100",
                             ann.META + "managedBy": "me", ann.META + "big": "x" * 300,
                             ann.META + "nl": "a\nb", ann.DUBBO_VERSION: "1.0&x=y", ann.FORMAT: "etcd"})
    assert len(read.dubbo.interfaces) == ann.MAX_INTERFACES
    assert len(read.metadata) == ann.MAX_META_KEYS and dict(read.metadata)["k00"] == "v"
    assert not {"weight", "managedBy", "big", "nl"} & dict(read.metadata).keys()
    assert read.dubbo.version is None and read.format is None
    assert len(read.problems) == 8
    # bytes in all: 16 keys of 133 bytes are more than 2048
    fat = read_annotations({f"{ann.META}k{i:02}": "y" * 130 for i in range(16)})
    assert sum(len(k) + len(v) for k, v in fat.metadata) <= ann.MAX_META_BYTES and fat.problems


def test_the_format_annotation_chooses_the_format() -> None:
    assert format_for(dubbo_service(), JsonFormat()).name == "dubbo"
    assert format_for(service("web", annotations={ann.FORMAT: "bogus"}), JsonFormat()).name == "json"


# --- the Dubbo format --------------------------------------------------------------------------


def test_provider_urls_carry_what_dubbo_consumers_match_on() -> None:
    obj = dubbo_service(dubbo_application="orders", dubbo_version="1.0.0", dubbo_group="blue", meta_zone="eu-1",
                        meta_owner="team-a", dubbo_registration="interface")
    options = BridgeOptions(format="dubbo")
    fmt = DubboFormat()
    location = fmt.locate(obj, options)
    assert location.key_path == PROVIDERS and location.containers == (f"/dubbo/{API}", PROVIDERS)
    (node,) = fmt.render(service_record(obj, options), location, "prod")
    name = node.path.rsplit("/", 1)[1]
    assert "/" not in name and "%" in name  # one node: the URL-encoded URL
    url = urlsplit(unquote_plus(name))
    assert (url.scheme, url.netloc, url.path) == ("dubbo", "10.96.0.10:20880", f"/{API}")
    assert parse_qsl(url.query) == [
        ("interface", API), ("side", "provider"), ("application", "orders"), ("version", "1.0.0"),
        ("group", "blue"), ("dubbo", "2.0.2"), ("owner", "team-a"), ("zone", "eu-1"), ("managedBy", "zkop"),
        ("clusterId", "prod")]
    assert json.loads(node.data)["owner"] == {"managedBy": "zkop", "clusterId": "prod", "uid": "uid-default-api"}


def test_metadata_reaches_the_json_and_curator_formats() -> None:
    obj = service("web", annotations={ann.META + "zone": "eu-1", ann.META + "tier": "gold"})
    options = BridgeOptions()
    record = service_record(obj, options)
    body = JsonFormat().body(record, "prod")
    assert body["metadata"] == {"tier": "gold", "zone": "eu-1"}
    assert "metadata" not in JsonFormat().body(service_record(service("plain"), options), "prod")  # bytes unchanged
    curator = CuratorFormat()
    instance = curator.instance_body(record, curator.locate(obj, options), "prod", "10.96.0.10", 80, None)
    assert instance["payload"]["metadata"]["zone"] == "eu-1" and instance["payload"]["metadata"]["tier"] == "gold"


def test_a_dubbo_service_is_published_claimed_and_collected(adapter: ZooKeeperAdapter, zk: KazooClient,
                                                          zk_base: str) -> None:
    bridge = Bridge(adapter, BridgeOptions())  # json by default: the annotation chooses dubbo
    bridge.add(dubbo_service())
    # A provider Dubbo itself registered (ephemeral, no stamp): never changed, never deleted.
    zk.create(f"{zk_base}{PROVIDERS}/dubbo%3A%2F%2F10.1.1.1%3A20880%2Fcom.example.Api", b"", makepath=True,
              ephemeral=True)
    zk.create(f"{zk_base}/dubbo/{API}/consumers/c1", b"", makepath=True)
    bridge.reconciler.reconcile("default/api")
    assert urls(zk, f"{zk_base}{PROVIDERS}").keys() == {"10.96.0.10:20880", "10.1.1.1:20880"}
    (ours,) = [n for n in zk.get_children(f"{zk_base}{PROVIDERS}") if "managedBy" in unquote_plus(n)]
    claim, _ = zk.get(f"{zk_base}{DEFAULT_REGISTRY_ROOT}{PROVIDERS}/{ours}")
    assert json.loads(claim)["kind"] == "Service" and json.loads(claim)["name"] == "api"
    assert bridge.events("Published")
    assert not zk.exists(f"{zk_base}/kubernetes/services/default-api")  # not also as JSON
    bridge.cache.delete("default/api")
    bridge.reconciler.reconcile(FULL_SYNC_KEY)
    assert urls(zk, f"{zk_base}{PROVIDERS}").keys() == {"10.1.1.1:20880"}
    assert not zk.exists(f"{zk_base}{DEFAULT_REGISTRY_ROOT}{PROVIDERS}/{ours}")
    assert zk.exists(f"{zk_base}/dubbo/{API}/consumers/c1")


def test_two_namespaces_naming_one_interface_the_oldest_publishes_it(adapter: ZooKeeperAdapter, zk: KazooClient,
                                                                    zk_base: str) -> None:
    bridge = Bridge(adapter)
    owner = dubbo_service("api", "team-a", created="2024-01-01T00:00:00Z")
    thief = service("api", "team-b", created="2024-06-01T00:00:00Z", clusterIP="10.96.0.66", annotations={
        ann.FORMAT: "dubbo", ann.DUBBO_INTERFACES: f"{API},com.example.Own"})
    bridge.add(owner, thief)
    bridge.reconciler.reconcile("team-b/api")
    bridge.reconciler.reconcile("team-a/api")
    assert urls(zk, f"{zk_base}{PROVIDERS}").keys() == {"10.96.0.10:20880"}
    assert urls(zk, f"{zk_base}/dubbo/com.example.Own/providers").keys() == {"10.96.0.66:80"}  # its own interface
    (collision,) = bridge.events("RecordCollision")
    assert "team-a/api" in collision[3] and PROVIDERS in collision[3]
    # The owner goes: the next oldest takes the interface over.
    bridge.cache.delete("team-a/api")
    bridge.reconciler.reconcile("team-a/api")
    bridge.reconciler.reconcile(FULL_SYNC_KEY)
    bridge.reconciler.reconcile("team-b/api")
    assert urls(zk, f"{zk_base}{PROVIDERS}").keys() == {"10.96.0.66:80"}


def test_bad_annotations_are_a_warning_and_write_nothing_outside(adapter: ZooKeeperAdapter, zk: KazooClient,
                                                                zk_base: str) -> None:
    bridge = Bridge(adapter)
    bridge.add(service("evil", annotations={ann.FORMAT: "dubbo", ann.DUBBO_INTERFACES: "../../zkop/owners/x"}))
    bridge.reconciler.reconcile("default/evil")
    bridge.reconciler.reconcile("default/evil")
    (event,) = bridge.events("InvalidAnnotation")
    assert "not a Java interface name" in event[3] and "nothing is published" in event[3]
    assert not zk.exists(f"{zk_base}/dubbo") and not zk.exists(f"{zk_base}/zkop/owners/x")


# --- health ------------------------------------------------------------------------------------


def rolling_slice(service_name: str, endpoints: dict[str, dict[str, bool]]) -> dict[str, Any]:
    """An EndpointSlice whose endpoints carry the given conditions."""
    obj = endpoint_slice(service_name, {})
    obj["endpoints"] = [{"addresses": [a], "conditions": c} for a, c in endpoints.items()]
    obj["ports"] = [{"name": "dubbo", "port": 20880, "protocol": "TCP"}]
    return obj


def test_endpoint_conditions_decide_ready_draining_or_gone() -> None:
    obj = rolling_slice("api", {
        "10.0.0.1": {"ready": True}, "10.0.0.2": {"ready": False, "serving": True, "terminating": True},
        "10.0.0.3": {"ready": False, "serving": False, "terminating": True}, "10.0.0.4": {"ready": False},
        "10.0.0.5": {}})
    view = endpoints_view([obj])
    assert view.addresses == ("10.0.0.1", "10.0.0.5") and view.draining == ("10.0.0.2",)
    everything = endpoints_view([obj], publish_not_ready=True)
    assert everything.addresses == tuple(f"10.0.0.{i}" for i in range(1, 6)) and everything.draining == ()
    twice = endpoints_view([obj, rolling_slice("api", {"10.0.0.2": {"ready": True}})])
    assert "10.0.0.2" in twice.addresses and twice.draining == ()


def test_draining_endpoints_get_weight_0_in_dubbo_and_enabled_false_in_curator(
        adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    bridge = Bridge(adapter, BridgeOptions(endpoints=True, endpoints_debounce=0))
    slices = Indexer()
    slices.add_indexer(SLICE_INDEX, slice_service_key)
    bridge.reconciler.slices = slices
    headless: dict[str, Any] = dict(clusterIP="None", ports=[{"name": "dubbo", "port": 20880, "protocol": "TCP",
                                              "targetPort": 20880}])
    bridge.add(dubbo_service(), service("cur", annotations={ann.FORMAT: "curator"}, **headless))
    conditions = {"10.0.0.1": {"ready": True},
                  "10.0.0.2": {"ready": False, "serving": True, "terminating": True},
                  "10.0.0.3": {"ready": False, "serving": False, "terminating": False}}
    slices.upsert(rolling_slice("api", conditions))
    cur = rolling_slice("cur", conditions)
    cur["metadata"]["name"] = "cur-abc"
    slices.upsert(cur)
    bridge.reconciler.reconcile("default/api")
    bridge.reconciler.reconcile("default/cur")
    published = urls(zk, f"{zk_base}{PROVIDERS}")
    assert published.keys() == {"10.0.0.1:20880", "10.0.0.2:20880"}
    assert "weight" not in published["10.0.0.1:20880"] and published["10.0.0.2:20880"]["weight"] == "0"
    instances = {name: json.loads(zk.get(f"{zk_base}/kubernetes/services/default-cur/{name}")[0])
                 for name in zk.get_children(f"{zk_base}/kubernetes/services/default-cur")}
    assert {name: i["enabled"] for name, i in instances.items()} == {"10.0.0.1": True, "10.0.0.2": False}
    assert instances["10.0.0.2"]["payload"]["metadata"]["instance_status"] == "OUT_OF_SERVICE"


def test_metadata_keys_follow_the_importers_annotation_name_rule() -> None:
    """The bridge reads a metadata key only where the importer could write it back (``services.metadata.valid_key``):
    a key that ends in ``-`` or is longer than the annotation name allows is refused with a problem, both sides
    agreeing on every key."""
    from zkop.services.metadata import MAX_KEY_LENGTH, valid_key

    keys = ["ok.key", "trailing-", "x" * MAX_KEY_LENGTH, "y" * (MAX_KEY_LENGTH + 1), "_lead"]
    read = read_annotations({ann.META + k: "v" for k in keys})
    assert [k for k, _ in read.metadata] == sorted(k for k in keys if valid_key(k))
    assert [k for k, _ in read.metadata] == sorted(["ok.key", "x" * MAX_KEY_LENGTH])
    assert sum("is not 1 to" in p for p in read.problems) == 3
