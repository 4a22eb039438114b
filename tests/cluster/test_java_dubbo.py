"""Apache Dubbo 3.3.6's own ZooKeeper registry (the real library) registering a provider that ``zkop run`` imports.

``zkop.interop.DubboProvider`` (``tests/interop/java``) is a provider as applications run one: ``DubboBootstrap``
exporting an interface over the ``dubbo`` protocol with a ``zookeeper://`` registry, the address it registers set
by Dubbo's ``DUBBO_IP_TO_REGISTRY`` (as behind NAT or in a container). zkop runs as its ServiceAccount on the real
control plane. Both of Dubbo 3's registration models are imported:

- interface-level (``register-mode`` ``all``, Dubbo's default, which writes both layouts):
  ``/dubbo/<interface>/providers/<URL-encoded provider URL>``, read by ``--import-format dubbo``; the other nodes
  Dubbo keeps under ``/dubbo`` (``config``, ``mapping``, ``metadata``) are not services and import nothing;
- application-level (``register-mode`` ``instance``): a Curator ``ServiceInstance`` at
  ``/services/<application>/<host>:<port>`` (``ZookeeperServiceDiscovery``), read by ``--import-format curator``,
  its port named after the protocol in the instance's ``dubbo.endpoints`` metadata.

Dubbo writes at the ZooKeeper root (its registry URL takes no chroot), so this module has a ZooKeeper server of its
own, emptied after each test.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient
from zkop_testing.java_interop import JavaProgram
from zkop_testing.operator import OperatorProcess
from zkop_testing.services import endpoints, get_service, services_in, slices_of
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer, connected_client, free_port

from zkop.kube.client import KubeClient

INTERFACE = "zkop.interop.dubbo.Greeter"
#: The address the provider registers (Dubbo's DUBBO_IP_TO_REGISTRY); nothing connects to it.
REGISTERED = "10.20.0.5"


@pytest.fixture(scope="module")
def zk_server() -> Iterator[ZooKeeperServer]:
    """This module's own server: Dubbo writes ``/dubbo`` and ``/services`` at the root."""
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


def provider(zk_server: ZooKeeperServer, mode: str, port: int) -> JavaProgram:
    """The Dubbo provider application ``greeter-app`` with ``register-mode`` ``mode``, protocol port ``port``."""
    return JavaProgram("DubboProvider", [zk_server.hosts, "greeter-app", mode, str(port)],
                       env={"DUBBO_IP_TO_REGISTRY": REGISTERED})


def meta_annotations(service: dict[str, Any]) -> dict[str, str]:
    """The Service's ``zookeeper.platform.example.com/meta-<key>`` annotations (from the registration's metadata)."""
    return {k: v for k, v in (service["metadata"].get("annotations") or {}).items()
            if k.startswith("zookeeper.platform.example.com/meta-")}


def run_zkop(zkop_kubeconfig: str, zk_server: ZooKeeperServer, ns: str, fmt: str) -> OperatorProcess:
    """``zkop run --import-services --import-format fmt`` into ``ns`` (the format's default root)."""
    return OperatorProcess(zkop_kubeconfig, zk_server.hosts, [
        "--namespace", ns, "--import-services", "--import-namespace", ns, "--import-format", fmt,
        "--cluster-id", "prod"])


def test_an_interface_level_provider_is_imported_with_the_dubbo_format(
        zkop_kubeconfig: str, kube: KubeClient, namespace: str, zk_server: ZooKeeperServer,
        root_zk: KazooClient) -> None:
    ns, port = namespace, free_port()
    name = "zkop-interop-dubbo-greeter"  # the interface, as a DNS label
    with run_zkop(zkop_kubeconfig, zk_server, ns, "dubbo") as proc:
        with provider(zk_server, "all", port):
            wait_for(lambda: endpoints(kube, name, ns) == {REGISTERED: True}, message="the provider imported")
            service = get_service(kube, name, ns) or {}
            assert service["metadata"]["annotations"]["platform.example.com/zookeeper-path"] == f"/dubbo/{INTERFACE}"
            # Dubbo's own URL parameters (application, methods, pid, release, timestamp…) are no metadata.
            assert meta_annotations(service) == {}
            assert service["spec"]["ports"] == [{"name": "dubbo", "port": port, "protocol": "TCP",
                                                 "targetPort": port}]
            (item,) = slices_of(kube, name, ns)
            assert item["ports"] == [{"name": "dubbo", "port": port, "protocol": "TCP"}]
            # Dubbo's other nodes under /dubbo (config centre, interface→application mapping, metadata) are not
            # services: only the interface is imported.
            assert {"config", "mapping", "metadata", INTERFACE} <= set(root_zk.get_children("/dubbo"))
            assert services_in(kube, ns) == {name}
        # DubboBootstrap.stop() unregisters (and the ephemeral node would go with the session anyway).
        wait_for(lambda: endpoints(kube, name, ns) == {}, message="the provider gone")
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()


def test_an_application_level_instance_is_imported_with_the_curator_format(
        zkop_kubeconfig: str, kube: KubeClient, namespace: str, zk_server: ZooKeeperServer,
        root_zk: KazooClient) -> None:
    ns, port = namespace, free_port()
    with run_zkop(zkop_kubeconfig, zk_server, ns, "curator") as proc:
        with provider(zk_server, "instance", port):
            wait_for(lambda: endpoints(kube, "greeter-app", ns) == {REGISTERED: True},
                     message="the application instance imported")
            assert root_zk.get_children("/services/greeter-app") == [f"{REGISTERED}:{port}"]
            assert not root_zk.exists(f"/dubbo/{INTERFACE}/providers")  # instance mode: no interface-level node
            service = get_service(kube, "greeter-app", ns) or {}
            assert service["metadata"]["annotations"]["platform.example.com/zookeeper-path"] == "/services/greeter-app"
            assert meta_annotations(service) == {}  # Dubbo's dubbo.* instance metadata is its own, not the service's
            assert service["spec"]["ports"] == [{"name": "dubbo", "port": port, "protocol": "TCP",
                                                 "targetPort": port}]
        wait_for(lambda: endpoints(kube, "greeter-app", ns) == {}, message="the instance gone")
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()
