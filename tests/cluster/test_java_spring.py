"""Spring Cloud Zookeeper discovery 5.0.2 (Spring Boot 4.0.7, Spring Cloud 2025.1.4; the real libraries) and zkop.

``zkop.interop.spring.SpringZookeeperApp`` (``tests/interop/java-spring``) is a Spring Boot web application with
``spring-cloud-starter-zookeeper-discovery``, configured only through Spring properties. Both directions work,
because Spring Cloud Zookeeper *is* Curator service discovery (``ServiceDiscovery<ZookeeperInstance>`` at
``spring.cloud.zookeeper.discovery.root``) and zkop's ``curator`` format writes Spring's payload class:

- its auto-registration (``ZookeeperAutoServiceRegistration`` when the web server has started: a ``DYNAMIC``
  instance named ``spring.application.name`` with ``metadata.instance_status``) is imported by
  ``--import-services`` (format ``curator``, root ``/services``, Spring's default root); an instance registered
  ``OUT_OF_SERVICE`` is an endpoint that is not ready; closing the application deregisters it;
- its ``DiscoveryClient``, with the root set to the bridge's (``/kubernetes/services``), lists the Services the
  bridge publishes with ``--service-bridge-format curator`` and their instances (host, port, ``secure``, URI,
  metadata), and stops listing a deleted one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from zkop_testing.java_interop import JavaProgram
from zkop_testing.operator import OperatorProcess
from zkop_testing.services import endpoints, get_service, svc
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import KubeClient, resource_path

#: The address the applications register (``spring.cloud.zookeeper.discovery.instance-host``); nothing connects.
REGISTERED = "10.30.0.5"


def spring_app(connect: str, *properties: str) -> JavaProgram:
    """The Spring Boot application with these ``--key=value`` properties (web server on a free loopback port)."""
    common: Sequence[str] = (f"--spring.cloud.zookeeper.connect-string={connect}", "--server.port=0",
                             "--server.address=127.0.0.1", "--spring.main.banner-mode=off",
                             "--logging.level.root=WARN")
    return JavaProgram("spring.SpringZookeeperApp", [*common, *properties], project="java-spring")


def test_an_instance_spring_cloud_zookeeper_registers_is_imported(
        zkop_kubeconfig: str, kube: KubeClient, namespace: str, zk_server: ZooKeeperServer, zk_base: str) -> None:
    ns, connect = namespace, f"{zk_server.hosts}{zk_base}"
    args = ["--namespace", ns, "--import-services", "--import-namespace", ns, "--cluster-id", "prod"]
    # Both register port 8080 (instance-port), as two replicas behind NAT would; each web server listens on a free
    # loopback port of its own.
    billing = ("--spring.application.name=billing", "--spring.cloud.zookeeper.discovery.instance-port=8080")
    with OperatorProcess(zkop_kubeconfig, connect, args) as proc:
        with spring_app(connect, *billing, f"--spring.cloud.zookeeper.discovery.instance-host={REGISTERED}",
                        "--spring.cloud.zookeeper.discovery.metadata.zone=a") as app, \
                spring_app(connect, *billing, "--spring.cloud.zookeeper.discovery.instance-host=10.30.0.6",
                           "--spring.cloud.zookeeper.discovery.initial-status=OUT_OF_SERVICE"):
            # The application finds itself (and its sibling) through its own DiscoveryClient.
            mine = wait_for(lambda: [i for i in app.call("instances", "billing") if i["host"] == REGISTERED],
                            message="registered") or []
            assert (mine[0]["port"], mine[0]["metadata"]) == (8080, {"instance_status": "UP", "zone": "a"})
            wait_for(lambda: endpoints(kube, "billing", ns) == {REGISTERED: True, "10.30.0.6": False},
                     message="both instances imported, the OUT_OF_SERVICE one not ready")
            service = get_service(kube, "billing", ns) or {}
            assert service["spec"]["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP", "targetPort": 8080}]
            assert service["metadata"]["annotations"]["platform.example.com/zookeeper-path"] == "/services/billing"
        # Closing the context deregisters (and the sessions end): no endpoint is left.
        wait_for(lambda: endpoints(kube, "billing", ns) == {}, message="deregistered")
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()


def test_the_spring_discovery_client_reads_what_the_bridge_publishes(
        zkop_kubeconfig: str, kube: KubeClient, namespace: str, zk_server: ZooKeeperServer, zk_base: str) -> None:
    ns, connect = namespace, f"{zk_server.hosts}{zk_base}"
    args = ["--namespace", ns, "--service-bridge", "--service-bridge-namespace", ns, "--cluster-id", "prod",
            "--service-bridge-format", "curator"]
    with OperatorProcess(zkop_kubeconfig, connect, args) as proc, \
            spring_app(connect, "--spring.cloud.zookeeper.discovery.register=false",
                       "--spring.cloud.zookeeper.discovery.root=/kubernetes/services") as app:
        tls = kube.request("POST", resource_path("", "v1", "services", ns), body=svc("pay", ns, ports=[
            {"name": "http", "port": 80, "targetPort": 8080}, {"name": "https", "port": 443, "targetPort": 8443}]))
        web = kube.request("POST", resource_path("", "v1", "services", ns), body=svc("web", ns))
        names = [f"{ns}-pay", f"{ns}-web"]
        wait_for(lambda: app.call("services") == names and all(app.call("instances", n) for n in names),
                 message="both Services listed by the DiscoveryClient")

        def expected(obj: dict[str, Any], port: int, secure: bool, ports: dict[str, str]) -> dict[str, Any]:
            meta, ip = obj["metadata"], obj["spec"]["clusterIP"]
            metadata = {"clusterId": "prod", "managedBy": "zkop", "namespace": ns, "service": meta["name"],
                        "type": "ClusterIP", "uid": meta["uid"], **{f"port.{k}": v for k, v in ports.items()}}
            return {"serviceId": f"{ns}-{meta['name']}", "instanceId": ip, "host": ip, "port": port,
                    "secure": secure, "uri": f"{'https' if secure else 'http'}://{ip}:{port}", "metadata": metadata}

        # Spring reports sslPort as the port of a secure instance, and its URI must name that port too.
        assert app.call("instances", f"{ns}-pay") == [expected(tls, 443, True, {"http": "80/TCP",
                                                                                "https": "443/TCP"})]
        assert app.call("instances", f"{ns}-web") == [expected(web, 80, False, {"http": "80/TCP"})]
        kube.request("DELETE", resource_path("", "v1", "services", ns, "pay"))
        wait_for(lambda: app.call("services") == [f"{ns}-web"], message="the deleted Service no longer listed")
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()
