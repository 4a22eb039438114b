"""The bridge at the depth real registries need, read by the real Java clients, on the real control plane.

``zkop run`` (its ServiceAccount, the manifests' RBAC) publishes Services and the EndpointSlices a test writes on
kube-apiserver (selector-less Services: the test plays the EndpointSlice controller, conditions and all):

- Dubbo 3.3.6's own ``ZookeeperRegistry`` (``zkop.interop.DubboConsumer``, subscribing as a ``ReferenceConfig``
  does) discovers the providers of an interface zkop publishes from annotations: one provider URL per ready
  endpoint, a serving-but-terminating endpoint with ``weight=0``, the version and the metadata as URL parameters; a
  consumer of another version sees none (Dubbo matches version and group); an endpoint that stops serving leaves.
- Dubbo 2.7.23's own ``ZookeeperRegistry`` (``zkop.interop.dubbo27.Dubbo27Consumer``, the newest Dubbo 2.7 on Maven
  Central with the Curator 4.2 and ZooKeeper 3.4 client it names) reads the same interface-level URLs: the
  providers, version matched, draining at ``weight=0``, and the change when an endpoint goes.
- Dubbo 3.3.6's consumer with application-level discovery only (``zkop.interop.DubboReference``: a
  ``DubboBootstrap`` reference, ``registry-type=service``, migration ``FORCE_APPLICATION``) finds the addresses zkop
  published as application instances, through the interface → application mapping zkop merged and the metadata
  revision it wrote, and follows an EndpointSlice change.
- A Dubbo 3.3.6 consumer *calls* a real Dubbo 3.3.6 provider (``zkop.interop.DubboProvider``) that registered
  nowhere, found only through what zkop published for a Service whose EndpointSlice names the provider's address:
  with interface-level discovery (``FORCE_INTERFACE``) and with application-level discovery (``FORCE_APPLICATION``).
  kube-apiserver refuses loopback addresses in an EndpointSlice, so the provider serves on this machine's other
  IPv4 address (:func:`zkop_testing.services.endpoint_address`); on a machine with loopback only these tests skip.
- Curator 5.9.0's ``ServiceProvider`` with ``additionalFilter(ServiceInstance::isEnabled)``
  (``zkop.interop.CuratorDiscovery``) sees the metadata annotations and drops a terminating endpoint, through a
  rolling update (new endpoints ready, old ones serving and terminating, then gone) during which a kazoo watcher on
  the Service's node never counts zero instances.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient
from zkop_testing.java_interop import JavaProgram
from zkop_testing.operator import OperatorProcess
from zkop_testing.services import endpoint_address, svc
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer, connected_client, free_port

from zkop.kube.client import ApiException, KubeClient, resource_path

INTERFACE = "zkop.interop.dubbo.Greeter"
PREFIX = "zookeeper.platform.example.com/"
READY = {"ready": True, "serving": True, "terminating": False}
DRAINING = {"ready": False, "serving": True, "terminating": True}
GONE = {"ready": False, "serving": False, "terminating": True}


@pytest.fixture(scope="module")
def zk_server() -> Iterator[ZooKeeperServer]:
    """This module's own server: Dubbo's registry URL takes no chroot, so zkop publishes at the root."""
    with ZooKeeperServer() as server:
        yield server


@pytest.fixture
def root_zk(zk_server: ZooKeeperServer) -> Iterator[KazooClient]:
    """A client at the root; everything but ``/zookeeper`` is deleted after the test."""
    with connected_client(zk_server.hosts) as client:
        yield client
        for child in client.get_children("/"):
            if child != "zookeeper":
                client.delete(f"/{child}", recursive=True)


def run_zkop(kubeconfig: str, zk_server: ZooKeeperServer, ns: str, *more: str) -> OperatorProcess:
    """``zkop run --service-bridge --service-bridge-endpoints`` for ``ns``, endpoint changes published at once."""
    return OperatorProcess(kubeconfig, zk_server.hosts, [
        "--namespace", ns, "--service-bridge", "--service-bridge-namespace", ns, "--cluster-id", "prod",
        "--service-bridge-endpoints", "--service-bridge-endpoints-debounce", "0s", *more])


def put_slice(kube: KubeClient, ns: str, service: str, port_name: str, port: int,
              endpoints: dict[str, dict[str, bool]]) -> None:
    """Create or replace the Service's one EndpointSlice with ``endpoints`` (address → conditions)."""
    body: dict[str, Any] = {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": f"{service}-1", "namespace": ns,
                     "labels": {"kubernetes.io/service-name": service,
                                "endpointslice.kubernetes.io/managed-by": "zkop-tests"}},
        "addressType": "IPv4", "ports": [{"name": port_name, "port": port, "protocol": "TCP"}],
        "endpoints": [{"addresses": [a], "conditions": c} for a, c in endpoints.items()],
    }
    path = resource_path("discovery.k8s.io", "v1", "endpointslices", ns)
    try:
        current = kube.request("GET", f"{path}/{service}-1")
    except ApiException as err:
        if err.status != 404:
            raise
        kube.request("POST", path, body=body)
        return
    body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    kube.request("PUT", f"{path}/{service}-1", body=body)


def post_greeter(kube: KubeClient, ns: str, target_port: int, extra: dict[str, str] | None = None) -> None:
    """Create Service ``greeter`` in ``ns`` published as Dubbo provider of :data:`INTERFACE` version 1.0.0 (application
    ``greeter-app``, port ``dubbo`` 20880 → ``target_port``), with ``extra`` annotations."""
    kube.request("POST", resource_path("", "v1", "services", ns), body=svc("greeter", ns, annotations={
        PREFIX + "format": "dubbo", PREFIX + "dubbo-interfaces": INTERFACE, PREFIX + "dubbo-version": "1.0.0",
        PREFIX + "dubbo-application": "greeter-app", **(extra or {})},
        ports=[{"name": "dubbo", "port": 20880, "targetPort": target_port}]))

def test_a_dubbo_33_consumer_discovers_the_providers_zkop_publishes(
        zkop_kubeconfig: str, kube: KubeClient, namespace: str, zk_server: ZooKeeperServer,
        root_zk: KazooClient) -> None:
    ns = namespace
    with run_zkop(zkop_kubeconfig, zk_server, ns) as proc:
        post_greeter(kube, ns, 20881, {PREFIX + "meta-zone": "eu-1"})
        put_slice(kube, ns, "greeter", "dubbo", 20881,
                  {"10.20.0.11": READY, "10.20.0.12": READY, "10.20.0.13": DRAINING})
        with JavaProgram("DubboConsumer", [zk_server.hosts, INTERFACE, "1.0.0", "-"]) as consumer, \
                JavaProgram("DubboConsumer", [zk_server.hosts, INTERFACE, "2.0.0", "-"]) as other_version:

            def providers(program: JavaProgram = consumer) -> dict[str, dict[str, str]]:
                found: list[dict[str, Any]] = program.call("providers")
                return {p["address"]: p["parameters"] for p in found if p["protocol"] == "dubbo"}

            wait_for(lambda: providers().keys() == {"10.20.0.11:20881", "10.20.0.12:20881", "10.20.0.13:20881"},
                     message="the Dubbo consumer sees three providers")
            found = providers()
            assert found["10.20.0.11:20881"]["application"] == "greeter-app"
            assert found["10.20.0.11:20881"]["version"] == "1.0.0" and found["10.20.0.11:20881"]["zone"] == "eu-1"
            assert "weight" not in found["10.20.0.11:20881"] and found["10.20.0.13:20881"]["weight"] == "0"
            assert providers(other_version) == {}  # Dubbo matches the version
            put_slice(kube, ns, "greeter", "dubbo", 20881, {"10.20.0.11": GONE, "10.20.0.12": READY})
            wait_for(lambda: providers().keys() == {"10.20.0.12:20881"}, message="the gone endpoints leave")
        assert root_zk.get_children(f"/dubbo/{INTERFACE}/providers")  # beside the consumer's nodes Dubbo made
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()


def test_a_dubbo_27_consumer_discovers_the_providers_zkop_publishes(
        zkop_kubeconfig: str, kube: KubeClient, namespace: str, zk_server: ZooKeeperServer,
        root_zk: KazooClient) -> None:
    ns = namespace
    with run_zkop(zkop_kubeconfig, zk_server, ns) as proc:
        post_greeter(kube, ns, 20881, {PREFIX + "meta-zone": "eu-1"})
        put_slice(kube, ns, "greeter", "dubbo", 20881, {"10.20.0.21": READY, "10.20.0.22": DRAINING})
        with JavaProgram("dubbo27.Dubbo27Consumer", [zk_server.hosts, INTERFACE, "1.0.0", "-"],
                         project="java-dubbo27") as consumer, \
                JavaProgram("dubbo27.Dubbo27Consumer", [zk_server.hosts, INTERFACE, "2.0.0", "-"],
                            project="java-dubbo27") as other_version:

            def providers(program: JavaProgram = consumer) -> dict[str, dict[str, str]]:
                found: list[dict[str, Any]] = program.call("providers")
                return {p["address"]: p["parameters"] for p in found if p["protocol"] == "dubbo"}

            wait_for(lambda: providers().keys() == {"10.20.0.21:20881", "10.20.0.22:20881"},
                     message="the Dubbo 2.7 consumer sees both providers")
            found = providers()
            assert found["10.20.0.21:20881"]["application"] == "greeter-app"
            assert found["10.20.0.21:20881"]["version"] == "1.0.0" and found["10.20.0.21:20881"]["zone"] == "eu-1"
            assert "weight" not in found["10.20.0.21:20881"] and found["10.20.0.22:20881"]["weight"] == "0"
            assert providers(other_version) == {}  # Dubbo 2.7 matches the version too
            put_slice(kube, ns, "greeter", "dubbo", 20881, {"10.20.0.21": READY, "10.20.0.22": GONE})
            wait_for(lambda: providers().keys() == {"10.20.0.21:20881"}, message="the gone endpoint leaves")
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()


def test_a_dubbo_33_consumer_with_application_level_discovery_finds_the_addresses_zkop_publishes(
        zkop_kubeconfig: str, kube: KubeClient, namespace: str, zk_server: ZooKeeperServer,
        root_zk: KazooClient) -> None:
    ns = namespace
    with run_zkop(zkop_kubeconfig, zk_server, ns) as proc:
        # A real provider of another application registered the interface first: zkop merges, never overwrites.
        root_zk.create(f"/dubbo/mapping/{INTERFACE}", b"legacy-app", makepath=True)
        post_greeter(kube, ns, 20881, {PREFIX + "meta-zone": "eu-1"})
        put_slice(kube, ns, "greeter", "dubbo", 20881,
                  {"10.20.0.11": READY, "10.20.0.12": READY, "10.20.0.13": DRAINING})
        wait_for(lambda: root_zk.exists("/services/greeter-app") is not None
                 and len(root_zk.get_children("/services/greeter-app")) == 3, message="three instances published")
        with JavaProgram("DubboReference", [zk_server.hosts, "1.0.0"]) as consumer:

            def providers() -> dict[str, dict[str, str]]:
                found: list[dict[str, Any]] = consumer.call("providers")
                return {p["address"]: p["parameters"] for p in found if p["protocol"] == "dubbo"}

            wait_for(lambda: providers().keys() == {"10.20.0.11:20881", "10.20.0.12:20881", "10.20.0.13:20881"},
                     message="the application-level consumer finds three addresses")
            found = providers()
            assert found["10.20.0.11:20881"]["zone"] == "eu-1" and found["10.20.0.11:20881"]["version"] == "1.0.0"
            assert found["10.20.0.11:20881"]["dubbo.metadata.storage-type"] == "remote"
            assert "weight" not in found["10.20.0.11:20881"] and found["10.20.0.13:20881"]["weight"] == "0"
            assert root_zk.get(f"/dubbo/mapping/{INTERFACE}")[0] == b"legacy-app,greeter-app"
            put_slice(kube, ns, "greeter", "dubbo", 20881, {"10.20.0.11": GONE, "10.20.0.12": READY,
                                                           "10.20.0.14": READY})
            wait_for(lambda: providers().keys() == {"10.20.0.12:20881", "10.20.0.14:20881"},
                     message="the consumer follows the EndpointSlice change")
        kube.request("DELETE", resource_path("", "v1", "services", ns) + "/greeter")
        wait_for(lambda: root_zk.get(f"/dubbo/mapping/{INTERFACE}")[0] == b"legacy-app"
                 and not root_zk.exists("/services/greeter-app/10.20.0.12:20881"),
                 message="the Service gone: its instances and only its own mapping entry go")
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()


@pytest.mark.parametrize("step", ["FORCE_INTERFACE", "FORCE_APPLICATION"])
def test_a_dubbo_33_consumer_calls_a_provider_it_found_only_through_what_zkop_published(
        step: str, zkop_kubeconfig: str, kube: KubeClient, namespace: str, zk_server: ZooKeeperServer,
        root_zk: KazooClient) -> None:
    address = endpoint_address()
    if address is None:
        pytest.skip("this machine has no IPv4 address but loopback, and kube-apiserver refuses loopback in an "
                    "EndpointSlice: no provider served here can be published")
    ns, port = namespace, free_port(address)
    # A real provider that registers nowhere (Dubbo's N/A registry): it only serves, on address:port.
    with run_zkop(zkop_kubeconfig, zk_server, ns) as proc, \
            JavaProgram("DubboProvider", ["-", "greeter-app", "interface", str(port), "1.0.0"],
                        env={"DUBBO_IP_TO_BIND": address}) as provider:
        assert not root_zk.exists("/dubbo") and not root_zk.exists("/services")  # nothing in ZooKeeper yet
        post_greeter(kube, ns, port)
        put_slice(kube, ns, "greeter", "dubbo", port, {address: READY})
        with JavaProgram("DubboReference", [zk_server.hosts, "1.0.0", step]) as consumer:

            def providers() -> set[str]:
                found: list[dict[str, Any]] = consumer.call("providers")
                return {p["address"] for p in found if p["protocol"] == "dubbo"}

            wait_for(lambda: providers() == {f"{address}:{port}"},
                     message=f"the {step} consumer finds the provider zkop published")
            assert consumer.call("greet", "zkop") == {"reply": "hello zkop"}
            consumer.close()
            assert consumer.returncode() == 0, consumer.stderr()
        provider.close()
        assert provider.returncode() == 0, provider.stderr()
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()


def test_a_rolling_update_never_leaves_a_curator_consumer_without_an_instance(
        zkop_kubeconfig: str, kube: KubeClient, namespace: str, zk_server: ZooKeeperServer,
        root_zk: KazooClient) -> None:
    ns = namespace
    node = f"/kubernetes/services/{ns}-orders"
    with run_zkop(zkop_kubeconfig, zk_server, ns, "--service-bridge-format", "curator") as proc:
        kube.request("POST", resource_path("", "v1", "services", ns), body=svc(
            "orders", ns, clusterIP="None", annotations={PREFIX + "meta-zone": "eu-1", PREFIX + "meta-tier": "gold"},
            ports=[{"name": "http", "port": 80, "targetPort": 8080}]))
        put_slice(kube, ns, "orders", "http", 8080, {"10.30.0.1": READY, "10.30.0.2": READY})
        wait_for(lambda: root_zk.exists(node) is not None and len(root_zk.get_children(node)) == 2,
                 message="two instances published")
        counts: list[int] = []

        def count(children: list[str]) -> None:
            counts.append(len(children))

        root_zk.ChildrenWatch(node, count)
        with JavaProgram("CuratorDiscovery", [zk_server.hosts]) as curator:
            curator.call("provider", "/kubernetes/services", f"{ns}-orders")

            def usable() -> dict[str, dict[str, str]]:
                found: list[dict[str, Any]] = curator.call("usable", "/kubernetes/services", f"{ns}-orders")
                return {i["address"]: i["payload"]["metadata"] for i in found}

            wait_for(lambda: usable().keys() == {"10.30.0.1", "10.30.0.2"}, message="Curator sees both")
            assert usable()["10.30.0.1"]["zone"] == "eu-1" and usable()["10.30.0.1"]["tier"] == "gold"
            steps = [
                {"10.30.0.1": READY, "10.30.0.2": READY, "10.30.0.3": READY},      # a new pod is ready
                {"10.30.0.1": DRAINING, "10.30.0.2": READY, "10.30.0.3": READY},   # an old one terminates
                {"10.30.0.2": READY, "10.30.0.3": READY, "10.30.0.4": READY},      # it is gone, another is new
                {"10.30.0.2": DRAINING, "10.30.0.3": READY, "10.30.0.4": READY},
                {"10.30.0.3": READY, "10.30.0.4": READY},
            ]
            for step in steps:
                put_slice(kube, ns, "orders", "http", 8080, step)
                ready = {a for a, c in step.items() if c["ready"]}
                # A draining endpoint stays published (disabled) and Curator's provider drops it.
                wait_for(lambda ready=ready, step=step: usable().keys() == ready  # type: ignore[misc]
                         and set(root_zk.get_children(node)) == set(step),
                         message=f"published {sorted(step)}; Curator's provider offers exactly {sorted(ready)}")
        assert counts and min(counts) > 0, counts
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()
