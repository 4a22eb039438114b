"""Apache Curator's service discovery (``curator-x-discovery`` 5.9.0, the real library) against ``zkop run``.

Both directions, with zkop in its own process as its ServiceAccount on the real control plane, and the Java side a
``zkop.interop.CuratorDiscovery`` program (``tests/interop/java``) built from Maven Central:

- ``--service-bridge-format curator``: a ``ServiceDiscovery`` built by ``ServiceDiscoveryBuilder`` with Curator's
  default ``JsonInstanceSerializer`` finds every Service the bridge publishes (``queryForNames``,
  ``queryForInstances``), with the addresses, ports, payload and URI (``buildUriSpec``) the Service implies, and a
  ``ServiceCache`` sees a Service's deletion. The reader has Spring Cloud Zookeeper's ``ZookeeperInstance`` class on
  its class path: Curator's serializer instantiates the payload's ``@class``, which zkop sets to that class.
- ``--import-services`` (``--import-format curator``, the default, root ``/services``): instances the program
  registers with ``registerService`` (``DYNAMIC``: ephemeral, as real services register) become a Service and its
  EndpointSlices, and leave with the program's session; the Service goes when ZooKeeper reaps the empty container
  node Curator created for the name.

Every expectation is a whole object (all fields the library exposes), so a field zkop wrote differently fails it.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient
from zkop_testing.java_interop import JavaProgram, JavaProgramError
from zkop_testing.operator import OperatorProcess
from zkop_testing.services import endpoints, get_service, slices_of, svc
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import DEFAULT_JVM_FLAGS, ZooKeeperServer

from zkop.kube.client import MERGE_PATCH, KubeClient, resource_path

ROOT = "/kubernetes/services"
#: ZooKeeper reaps empty container nodes every ``znode.container.checkIntervalMs`` (60 s by default).
CONTAINER_CHECK_MS = 500


@pytest.fixture(scope="module")
def zk_server() -> Iterator[ZooKeeperServer]:
    """A server of this module's own that reaps empty container nodes twice a second (Curator makes its service
    nodes containers: ``creatingParentContainersIfNeeded``)."""
    with ZooKeeperServer(jvm_flags=(*DEFAULT_JVM_FLAGS, f"-Dznode.container.checkIntervalMs={CONTAINER_CHECK_MS}")) \
            as server:
        yield server


@pytest.fixture
def curator(zk_server: ZooKeeperServer, zk_base: str) -> Iterator[JavaProgram]:
    """The Curator application, its session chrooted at the test's ``zk_base``."""
    with JavaProgram("CuratorDiscovery", [f"{zk_server.hosts}{zk_base}"]) as program:
        yield program


def create(kube: KubeClient, obj: dict[str, Any]) -> dict[str, Any]:
    """POST a Service; the object as kube-apiserver stored it."""
    created: dict[str, Any] = kube.request("POST", resource_path("", "v1", "services", obj["metadata"]["namespace"]),
                                           body=obj)
    return created


def created_ms(obj: dict[str, Any]) -> int:
    """The Service's ``creationTimestamp`` in Unix milliseconds (zkop's ``registrationTimeUTC``)."""
    return calendar.timegm(time.strptime(obj["metadata"]["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ")) * 1000


def instance(obj: dict[str, Any], address: str, port: int | None, ssl_port: int | None,
             ports: dict[str, str], uri: str | None, https_uri: str | None = None) -> dict[str, Any]:
    """What ``CuratorDiscovery`` reports for one instance the bridge publishes for Service ``obj``."""
    meta = obj["metadata"]
    name = f"{meta['namespace']}-{meta['name']}"
    metadata = {"clusterId": "prod", "managedBy": "zkop", "namespace": meta["namespace"], "service": meta["name"],
                "type": obj["spec"]["type"], "uid": meta["uid"], **{f"port.{k}": v for k, v in ports.items()}}
    return {"name": name, "id": address, "address": address, "port": port, "sslPort": ssl_port,
            "serviceType": "PERMANENT", "enabled": True, "registrationTimeUTC": created_ms(obj),
            "payloadClass": "org.springframework.cloud.zookeeper.discovery.ZookeeperInstance",
            "payload": {"id": address, "name": name, "metadata": dict(sorted(metadata.items()))},
            "uri": uri, "httpsUri": https_uri}


def test_a_curator_service_discovery_finds_what_the_bridge_publishes(
        zkop_kubeconfig: str, kube: KubeClient, namespace: str, zk_server: ZooKeeperServer, zk: KazooClient,
        zk_base: str, curator: JavaProgram) -> None:
    ns = namespace
    args = ["--namespace", ns, "--service-bridge", "--service-bridge-namespace", ns, "--cluster-id", "prod",
            "--service-bridge-format", "curator"]
    with OperatorProcess(zkop_kubeconfig, f"{zk_server.hosts}{zk_base}", args) as proc:
        orders = create(kube, svc("orders", ns, ports=[{"name": "http", "port": 80, "targetPort": 8080},
                                                       {"name": "https", "port": 443, "targetPort": 8443}]))
        single = create(kube, svc("single", ns, ports=[{"port": 8080}]))
        web = create(kube, svc("web", ns, type="LoadBalancer", externalIPs=["198.51.100.7"],
                               ports=[{"name": "http", "port": 80, "targetPort": 8080}]))
        kube.request("PATCH", resource_path("", "v1", "services", ns, "web", "status"), content_type=MERGE_PATCH,
                     body={"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}]}}})
        ext = create(kube, svc("ext", ns, type="ExternalName", externalName="db.example.com",
                               ports=[{"name": "pg", "port": 5432}]))
        names = {f"{ns}-{n}" for n in ("orders", "single", "web", "ext")}

        def discovered() -> dict[str, Any] | None:
            try:
                found: dict[str, Any] = curator.call("query", ROOT)
            except JavaProgramError as err:
                if "NoNodeException" in str(err):  # the bridge has not made its root yet
                    return None
                raise
            complete = set(found) == names and all(found.values()) and len(found[f"{ns}-web"]) == 2
            return found if complete else None

        found = wait_for(discovered, message="every Service found by ServiceDiscovery.queryForInstances") or {}
        ip = orders["spec"]["clusterIP"]
        # Curator's UriSpec makes {scheme} https whenever sslPort is set: the URI names the TLS port.
        assert found[f"{ns}-orders"] == [instance(orders, ip, 80, 443, {"http": "80/TCP", "https": "443/TCP"},
                                                  f"https://{ip}:443", f"https://{ip}:443")]
        ip = single["spec"]["clusterIP"]
        assert found[f"{ns}-single"] == [instance(single, ip, 8080, None, {}, f"http://{ip}:8080")]
        port = {"http": "80/TCP"}
        # queryForInstances lists in getChildren order, which ZooKeeper does not define.
        assert sorted(found[f"{ns}-web"], key=lambda i: str(i["id"])) == [instance(web, "198.51.100.7", 80, None, port, "http://198.51.100.7:80"),
                                      instance(web, "203.0.113.7", 80, None, port, "http://203.0.113.7:80")]
        assert found[f"{ns}-ext"] == [instance(ext, "db.example.com", 5432, None, {"pg": "5432/TCP"},
                                               "http://db.example.com:5432")]

        # A ServiceCache (Curator's watching reader) sees the deletion of a Service.
        curator.call("watch", ROOT, f"{ns}-orders")
        wait_for(lambda: curator.call("cached", ROOT, f"{ns}-orders") == found[f"{ns}-orders"],
                 message="the ServiceCache loaded the instance")
        kube.request("DELETE", resource_path("", "v1", "services", ns, "orders"))
        wait_for(lambda: curator.call("cached", ROOT, f"{ns}-orders") == [], message="the ServiceCache saw the delete")
        wait_for(lambda: set(curator.call("query", ROOT)) == names - {f"{ns}-orders"},
                 message="queryForNames no longer lists the Service")
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()


def test_instances_curator_registers_are_imported_and_leave_with_its_session(
        zkop_kubeconfig: str, kube: KubeClient, namespace: str, zk_server: ZooKeeperServer, zk_base: str,
        curator: JavaProgram) -> None:
    ns = namespace
    args = ["--namespace", ns, "--import-services", "--import-namespace", ns, "--import-format", "curator",
            "--cluster-id", "prod"]
    with OperatorProcess(zkop_kubeconfig, f"{zk_server.hosts}{zk_base}", args) as proc:
        # ServiceInstance.builder()…serviceType(DYNAMIC) and registerService, as an application registers itself.
        curator.call("register", "/services", "payments", "p1", "10.3.0.1", "8080", "8443", "zone=a", "team=payments")
        curator.call("register", "/services", "payments", "p2", "10.3.0.2", "8080", "8443", "zone=b", "team=payments")
        curator.call("register", "/services", "ledger", "l1", "10.3.0.9", "9090", "-")
        wait_for(lambda: endpoints(kube, "payments", ns) == {"10.3.0.1": True, "10.3.0.2": True},
                 message="both payments instances imported")
        wait_for(lambda: endpoints(kube, "ledger", ns) == {"10.3.0.9": True}, message="ledger imported")

        payments = get_service(kube, "payments", ns) or {}
        assert payments["metadata"]["annotations"]["platform.example.com/zookeeper-path"] == "/services/payments"
        assert payments["metadata"]["annotations"]["platform.example.com/imported-by"] == "zkop/prod"
        # The payload metadata both instances share is an annotation; zone, on which they differ, is not.
        assert {k: v for k, v in payments["metadata"]["annotations"].items()
                if k.startswith("zookeeper.platform.example.com/")} == {
            "zookeeper.platform.example.com/meta-team": "payments"}
        assert payments["spec"]["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP", "targetPort": 8080},
                                             {"name": "https", "port": 8443, "protocol": "TCP", "targetPort": 8443}]
        (item,) = slices_of(kube, "payments", ns)
        assert item["addressType"] == "IPv4"
        assert item["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"},
                                 {"name": "https", "port": 8443, "protocol": "TCP"}]
        assert sorted(e["addresses"][0] for e in item["endpoints"]) == ["10.3.0.1", "10.3.0.2"]
        ledger = get_service(kube, "ledger", ns) or {}
        assert ledger["spec"]["ports"] == [{"name": "http", "port": 9090, "protocol": "TCP", "targetPort": 9090}]

        # The application stops: its session closes, ZooKeeper deletes the ephemeral instances, then reaps the
        # empty container nodes Curator made for each name; zkop follows both.
        curator.close()
        wait_for(lambda: endpoints(kube, "payments", ns) == {} and endpoints(kube, "ledger", ns) == {},
                 message="the instances left with the session")
        wait_for(lambda: get_service(kube, "payments", ns) is None and get_service(kube, "ledger", ns) is None,
                 message="the Services collected once ZooKeeper reaped the container nodes")
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()
