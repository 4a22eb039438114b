"""The Dubbo format's application-level registration (Dubbo 3's ``ZookeeperServiceDiscovery`` and
``ZookeeperMetadataReport``) and the shared interface → application mapping, against a real ZooKeeper.

The expected bytes and revision are what Dubbo 3.3.6's own provider wrote (``register-mode instance``,
``metadata-type remote``), captured from ZooKeeper. The attacker holds one namespace and may create and annotate
Services: it cannot take another namespace's application, overwrite an instance or a mapping entry it does not
own, remove another application's name from a mapping, or write into a mapping node another owner claims.
"""

from __future__ import annotations

import json
from typing import Any

from kazoo.client import KazooClient

from zkop.ownership.registry import DEFAULT_REGISTRY_ROOT, OwnerStamp
from zkop.runtime.cache import Indexer
from zkop.services.bridge import annotations as ann
from zkop.services.bridge.annotations import read_annotations
from zkop.services.bridge.formats import APPLICATION_ROLE, METADATA_ROLE, DubboFormat
from zkop.services.bridge.mapping import plan_mapping
from zkop.services.bridge.options import BridgeOptions
from zkop.services.bridge.reconciler import FULL_SYNC_KEY, SLICE_INDEX
from zkop.services.bridge.records import service_record
from zkop.services.codecs import dubbo
from zkop.zookeeper.actions import Observed, SetData
from zkop.zookeeper.adapter import ZooKeeperAdapter

from .test_bridge_dubbo import API, PROVIDERS, dubbo_service, rolling_slice
from .test_bridge_reconciler import Bridge

REGISTRY = DEFAULT_REGISTRY_ROOT
MAPPING = f"/dubbo/mapping/{API}"


def children(zk: KazooClient, path: str) -> dict[str, Any]:
    """name → JSON data of every child of ``path``."""
    return {name: json.loads(zk.get(f"{path}/{name}")[0]) for name in zk.get_children(path)}


# --- the codec: what Dubbo 3.3.6 writes ------------------------------------------------------------


def test_the_revision_is_computed_as_dubbo_computes_it() -> None:
    # The MetadataInfo Dubbo 3.3.6's provider "greeter-app" wrote, and the revision it named.
    params = {"side": "provider", "release": "3.3.6", "methods": "greet", "deprecated": "false", "dubbo": "2.0.2",
              "interface": "zkop.interop.dubbo.Greeter", "service-name-mapping": "true", "generic": "false",
              "metadata-type": "remote", "application": "greeter-app",
              "prefer.serialization": "hessian2,fastjson2", "dynamic": "true", "REGISTRY_CLUSTER": "default"}
    info = dubbo.ServiceInfo("zkop.interop.dubbo.Greeter", "dubbo", 43777, params)
    assert dubbo.revision("greeter-app", [info]) == "085aaf770da86e65457e24a15cc4dca8"
    body = dubbo.metadata_info("greeter-app", [info])
    assert list(body) == ["app", "revision", "services"]
    assert body["services"] == {"zkop.interop.dubbo.Greeter:dubbo": {
        "name": "zkop.interop.dubbo.Greeter", "params": dict(sorted(params.items())),
        "path": "zkop.interop.dubbo.Greeter", "port": 43777, "protocol": "dubbo"}}
    assert dubbo.revision("greeter-app", []) == "0"
    assert dubbo.match_key("a.B", "blue", "1.0.0", "tri") == "blue/a.B:1.0.0:tri"


def test_an_instance_is_the_json_dubbo_writes() -> None:
    body = dubbo.encode_instance(application="greeter-app", address="10.20.0.5", port=43777, protocol="dubbo",
                                 metadata={"dubbo.metadata.revision": "r1", "dubbo.metadata.storage-type": "remote"},
                                 registration_ms=5, service_type="DYNAMIC")
    assert json.dumps(body, separators=(",", ":")) == (
        '{"name":"greeter-app","id":"10.20.0.5:43777","address":"10.20.0.5","port":43777,"sslPort":null,'
        '"payload":{"@class":"org.apache.dubbo.registry.zookeeper.ZookeeperInstance","id":"10.20.0.5:43777",'
        '"name":"greeter-app","metadata":{"dubbo.endpoints":"[{\\"port\\":43777,\\"protocol\\":\\"dubbo\\"}]",'
        '"dubbo.metadata.revision":"r1","dubbo.metadata.storage-type":"remote"}},"registrationTimeUTC":5,'
        '"serviceType":"DYNAMIC","uriSpec":null}')


def test_mapping_data_is_merged_as_dubbo_merges_it() -> None:
    assert dubbo.mapping_with(b"", "a") == b"a"
    assert dubbo.mapping_with(b"x, y", "a") == b"x, y,a"
    assert dubbo.mapping_with(b"x,a", "a") == b"x,a"
    assert dubbo.mapping_without(b"x,a,y", "a") == b"x,y"
    assert dubbo.mapping_without(b"x,y", "a") == b"x,y"
    assert dubbo.mapping_names(b" x ,, y") == ["x", "y"] and dubbo.mapping_names(b"\xff") == []


# --- annotations and rendering ---------------------------------------------------------------------


def test_the_registration_annotation_is_validated() -> None:
    assert read_annotations({}).dubbo.registration == "all"
    read = read_annotations({ann.DUBBO_REGISTRATION: "instance"})
    assert read.dubbo.registration == "all" and "dubbo-registration" in read.problems[0]
    assert read_annotations({ann.DUBBO_REGISTRATION: " application "}).dubbo.registration == "application"
    # An interface named like the nodes Dubbo keeps beside the interfaces would stand where they live.
    refused = read_annotations({ann.DUBBO_INTERFACES: "mapping,metadata,config,com.example.Api"})
    assert refused.dubbo.interfaces == (API,) and len(refused.problems) == 3


def test_each_registration_mode_renders_its_nodes() -> None:
    options, fmt = BridgeOptions(format="dubbo"), DubboFormat()

    def paths(mode: str) -> set[str]:
        obj = dubbo_service(dubbo_application="orders", dubbo_registration=mode)
        location = fmt.locate(obj, options)
        return {n.path.rsplit("/", 1)[0] for n in fmt.render(service_record(obj, options), location, "prod")}

    assert paths("interface") == {PROVIDERS}
    assert paths("application") == {"/services/orders", "/dubbo/metadata/orders"}
    assert paths("all") == {PROVIDERS, "/services/orders", "/dubbo/metadata/orders"}
    location = fmt.locate(dubbo_service(dubbo_registration="application"), options)
    assert location.keys == (PROVIDERS, "/services/default-api", "/dubbo/metadata/default-api")  # default name
    assert location.role("/services/default-api") == APPLICATION_ROLE
    assert location.role("/dubbo/metadata/default-api") == METADATA_ROLE
    assert PROVIDERS not in location.containers  # application alone: the interface is judged, not written


def test_instances_name_the_revision_of_their_metadata_and_draining_ones_weight_0(
        adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    bridge = Bridge(adapter, BridgeOptions(endpoints=True, endpoints_debounce=0))
    slices = Indexer()
    slices.add_indexer(SLICE_INDEX, lambda o: [f"default/{o['metadata']['labels']['kubernetes.io/service-name']}"])
    bridge.reconciler.slices = slices
    bridge.add(dubbo_service(dubbo_application="orders", dubbo_version="1.0.0", meta_zone="eu-1"))
    slices.upsert(rolling_slice("api", {"10.0.0.1": {"ready": True}, "10.0.0.2": {"ready": True},
                                        "10.0.0.3": {"ready": False, "serving": True, "terminating": True}}))
    bridge.reconciler.reconcile("default/api")
    instances = children(zk, f"{zk_base}/services/orders")
    assert instances.keys() == {"10.0.0.1:20880", "10.0.0.2:20880", "10.0.0.3:20880"}
    metadata = children(zk, f"{zk_base}/dubbo/metadata/orders")
    assert len(metadata) == 2  # the serving revision and the draining one
    for name, instance in instances.items():
        meta = instance["payload"]["metadata"]
        assert meta["dubbo.metadata.storage-type"] == "remote" and meta["zone"] == "eu-1"
        assert meta["managedBy"] == "zkop" and meta["uid"] == "uid-default-api"
        assert json.loads(meta["dubbo.endpoints"]) == [{"port": 20880, "protocol": "dubbo"}]
        info = metadata[meta["dubbo.metadata.revision"]]
        assert info["app"] == "orders" and info["revision"] == meta["dubbo.metadata.revision"]
        (service,) = info["services"].values()
        assert service["version"] == "1.0.0" and service["port"] == 20880
        assert (service["params"].get("weight") == "0") == (name == "10.0.0.3:20880")
        infos = [dubbo.ServiceInfo(s["name"], s["protocol"], s["port"], s["params"], s.get("group"),
                                   s.get("version")) for s in info["services"].values()]
        assert dubbo.revision("orders", infos) == info["revision"]  # what a Dubbo provider would name
    assert zk.get(f"{zk_base}{MAPPING}")[0] == b"orders"
    claim = json.loads(zk.get(f"{zk_base}{REGISTRY}{MAPPING}/orders")[0])
    assert claim["kind"] == "Service" and claim["name"] == "api"
    assert zk.exists(f"{zk_base}{REGISTRY}/services/orders/10.0.0.1:20880")  # every instance claimed
    # The draining endpoint goes: its instance and its revision go with it, nothing else changes.
    slices.upsert(rolling_slice("api", {"10.0.0.1": {"ready": True}, "10.0.0.2": {"ready": True}}))
    bridge.reconciler.reconcile("default/api")
    assert children(zk, f"{zk_base}/services/orders").keys() == {"10.0.0.1:20880", "10.0.0.2:20880"}
    assert len(zk.get_children(f"{zk_base}/dubbo/metadata/orders")) == 1


def test_the_mapping_is_merged_and_only_our_name_removed(adapter: ZooKeeperAdapter, zk: KazooClient,
                                                        zk_base: str) -> None:
    bridge = Bridge(adapter)
    # A real Dubbo provider of the interface registered its application, and one instance (ephemeral, unstamped).
    zk.create(f"{zk_base}{MAPPING}", b"legacy-app", makepath=True)
    zk.create(f"{zk_base}/services/orders/10.9.9.9:20880", b"{}", makepath=True, ephemeral=True)
    bridge.add(dubbo_service(dubbo_application="orders"))
    bridge.reconciler.reconcile("default/api")
    assert zk.get(f"{zk_base}{MAPPING}")[0] == b"legacy-app,orders"
    assert set(zk.get_children(f"{zk_base}/services/orders")) == {"10.9.9.9:20880", "10.96.0.10:20880"}
    assert zk.get(f"{zk_base}/services/orders/10.9.9.9:20880")[0] == b"{}"
    # Another provider adds its name meanwhile; the Service goes; the full sync removes only "orders".
    zk.set(f"{zk_base}{MAPPING}", b"legacy-app,orders,late-app")
    bridge.cache.delete("default/api")
    bridge.reconciler.reconcile("default/api")
    bridge.reconciler.reconcile(FULL_SYNC_KEY)
    assert zk.get(f"{zk_base}{MAPPING}")[0] == b"legacy-app,late-app"
    assert not zk.exists(f"{zk_base}{REGISTRY}{MAPPING}/orders")
    assert zk.get_children(f"{zk_base}/services/orders") == ["10.9.9.9:20880"]
    assert not zk.exists(f"{zk_base}/dubbo/metadata/orders")
    assert not zk.exists(f"{zk_base}{REGISTRY}/services/orders/10.96.0.10:20880")


def test_a_name_another_provider_registered_is_never_claimed_nor_removed(adapter: ZooKeeperAdapter,
                                                                         zk: KazooClient, zk_base: str) -> None:
    bridge = Bridge(adapter)
    zk.create(f"{zk_base}{MAPPING}", b"orders", makepath=True)
    bridge.add(dubbo_service(dubbo_application="orders"))
    bridge.reconciler.reconcile("default/api")
    assert not zk.exists(f"{zk_base}{REGISTRY}{MAPPING}/orders")
    bridge.cache.delete("default/api")
    bridge.reconciler.reconcile(FULL_SYNC_KEY)
    assert zk.get(f"{zk_base}{MAPPING}")[0] == b"orders"


def test_switching_to_interface_registration_takes_the_application_out(adapter: ZooKeeperAdapter,
                                                                        zk: KazooClient, zk_base: str) -> None:
    bridge = Bridge(adapter)
    bridge.add(dubbo_service(dubbo_application="orders"))
    bridge.reconciler.reconcile("default/api")
    assert zk.get(f"{zk_base}{MAPPING}")[0] == b"orders"
    bridge.add(dubbo_service(dubbo_application="orders", dubbo_registration="interface"))
    bridge.reconciler.reconcile("default/api")
    assert zk.get(f"{zk_base}{MAPPING}")[0] == b""  # the name out at once; the node stays, as Dubbo leaves it
    bridge.reconciler.reconcile(FULL_SYNC_KEY)
    assert not zk.exists(f"{zk_base}/services/orders") and not zk.exists(f"{zk_base}/dubbo/metadata/orders")
    assert zk.get_children(f"{zk_base}{PROVIDERS}")


# --- the attacker -----------------------------------------------------------------------------------


def test_another_namespace_cannot_take_an_application(adapter: ZooKeeperAdapter, zk: KazooClient,
                                                      zk_base: str) -> None:
    bridge = Bridge(adapter)
    owner = dubbo_service("api", "team-a", dubbo_application="payments", created="2024-01-01T00:00:00Z")
    thief = dubbo_service("x", "team-b", dubbo_application="payments", dubbo_interfaces="com.example.Steal",
                          created="2024-06-01T00:00:00Z")
    thief["spec"]["clusterIP"] = "10.96.0.66"
    bridge.add(owner, thief)
    bridge.reconciler.reconcile("team-b/x")
    bridge.reconciler.reconcile("team-a/api")
    assert set(zk.get_children(f"{zk_base}/services/payments")) == {"10.96.0.10:20880"}
    (info,) = children(zk, f"{zk_base}/dubbo/metadata/payments").values()
    assert list(info["services"]) == [f"{API}:dubbo"]  # nothing of the thief's in the owner's metadata
    # The thief publishes its own interface at interface level, but maps no application onto it.
    assert zk.get_children(f"{zk_base}/dubbo/com.example.Steal/providers")
    assert not zk.exists(f"{zk_base}/dubbo/mapping/com.example.Steal")
    (collision,) = bridge.events("RecordCollision")
    assert "team-a/api" in collision[3] and "/services/payments" in collision[3]


def test_an_instance_or_entry_another_owner_claims_is_left_alone(adapter: ZooKeeperAdapter, zk: KazooClient,
                                                                 zk_base: str) -> None:
    bridge = Bridge(adapter)
    other = OwnerStamp("other-cluster", "team-z", "z", "uid-z", "Service").to_bytes()
    instance = "/services/orders/10.96.0.10:20880"
    zk.create(f"{zk_base}{instance}", b'{"mine": true}', makepath=True)
    zk.create(f"{zk_base}{REGISTRY}{instance}", other, makepath=True)
    zk.create(f"{zk_base}{MAPPING}", b"", makepath=True)
    zk.create(f"{zk_base}{REGISTRY}{MAPPING}/orders", other, makepath=True)
    bridge.add(dubbo_service(dubbo_application="orders"))
    bridge.reconciler.reconcile("default/api")
    assert zk.get(f"{zk_base}{instance}")[0] == b'{"mine": true}'
    assert zk.get(f"{zk_base}{MAPPING}")[0] == b""
    (conflict,) = bridge.events("RecordConflict")
    assert instance in conflict[3] and f"{MAPPING}/orders" in conflict[3]
    bridge.cache.delete("default/api")
    bridge.reconciler.reconcile(FULL_SYNC_KEY)
    assert zk.get(f"{zk_base}{REGISTRY}{MAPPING}/orders")[0] == other


def test_a_mapping_node_a_zookeeperconfig_owns_is_not_written(adapter: ZooKeeperAdapter, zk: KazooClient,
                                                              zk_base: str) -> None:
    bridge = Bridge(adapter)
    config = OwnerStamp("prod", "team-a", "mapping", "uid-c").to_bytes()  # a ZooKeeperConfig's stamp
    zk.create(f"{zk_base}{MAPPING}", b"pinned", makepath=True)
    zk.create(f"{zk_base}{REGISTRY}{MAPPING}", config, makepath=True)
    bridge.add(dubbo_service(dubbo_application="orders"))
    bridge.reconciler.reconcile("default/api")
    assert zk.get(f"{zk_base}{MAPPING}")[0] == b"pinned"
    assert zk.get_children(f"{zk_base}/services/orders")  # the instances are still published
    (conflict,) = bridge.events("RecordConflict")
    assert MAPPING in conflict[3] and "team-a/mapping" in conflict[3]


def test_plan_mapping_removes_only_its_own_entries() -> None:
    ours = OwnerStamp("prod", "default", "api", "u1", "Service")
    mine = Observed(ours.to_bytes(), 0)
    theirs = Observed(OwnerStamp("prod", "other", "svc", "u2", "Service").to_bytes(), 0)
    plan = plan_mapping(MAPPING, Observed(b"a,old,b", 4), None, {"old": mine, "b": theirs}, want="a",
                        stamp=ours, registry_root=REGISTRY, publishes=lambda s: True)
    (write,) = plan.writes
    assert write.node == SetData(MAPPING, b"a,b", 4)  # "a" already named by someone else: not claimed
    assert not plan.conflicts
    held = plan_mapping(MAPPING, Observed(b"a,old", 4), None, {"old": mine}, want=None, stamp=ours,
                        registry_root=REGISTRY, publishes=lambda s: True, remove=False)
    assert held.writes == ()  # upsert-only: nothing removed
