"""The services' state gauges are right as soon as the first full sync after a start is done (issue 30, item 3).

``zkop_service_bridge_records`` and ``zkop_service_import_services`` are set by the full sync. Right after a
start the first full sync used to run before the per-Service passes had published (or imported) anything,
so both read 0 for every state until the second one, ``--sync-period`` (10 minutes by default) later.
Both tests run ``zkop run`` as its own process with the default sync period, so only the first full sync
can have set the gauges when they are read. zkop runs as its ServiceAccount on the real kube-apiserver, in the
test's namespace (its Services published, or imported into it).
"""

from __future__ import annotations

from kazoo.client import KazooClient
from zkop_testing.metrics import Metrics
from zkop_testing.operator import OperatorProcess
from zkop_testing.services import BRIDGE_ROOT, children, get_service, register, svc
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import KubeClient, resource_path

SERVICES = ("orders", "payments", "billing", "search", "users")


def _after_first_full_sync(proc: OperatorProcess, gauge: str, last_full_sync: str) -> dict[str, float]:
    """The ``state`` gauge ``gauge`` in the first scrape that shows a completed full sync."""
    scrape: list[Metrics] = []

    def synced() -> bool:
        scrape[:] = [Metrics(proc.metrics())]
        return scrape[0].total(last_full_sync) > 0

    wait_for(synced, message="the first full sync completed")
    return scrape[0].by_label(gauge, "state")


def test_bridge_records_gauge_is_right_after_the_first_full_sync(
        kubeconfig: str, kube: KubeClient, zk_server: ZooKeeperServer, chrooted: KazooClient, zk_base: str,
        namespace: str) -> None:
    for name in SERVICES:
        kube.request("POST", resource_path("", "v1", "services", namespace), body=svc(name, namespace))
    published = {f"{namespace}-{name}" for name in SERVICES}
    args = ["--service-bridge", "--service-bridge-namespace", namespace, "--namespace", namespace]
    with OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", args) as proc:
        records = _after_first_full_sync(proc, "zkop_service_bridge_records",
                                         "zkop_service_bridge_last_full_sync_timestamp_seconds")
        assert children(chrooted, BRIDGE_ROOT) == published
    assert records == {"published": len(published), "foreign": 0, "orphaned": 0, "collided": 0}


def test_import_services_gauge_is_right_after_the_first_full_sync(
        kubeconfig: str, kube: KubeClient, zk_server: ZooKeeperServer, chrooted: KazooClient, zk_base: str,
        namespace: str) -> None:
    for index, name in enumerate(SERVICES):
        register(chrooted, name, "i1", f"10.3.0.{index + 1}", ephemeral=False)
    # A Service of one of those names that zkop did not create: the importer leaves it alone (foreign).
    kube.request("POST", resource_path("", "v1", "services", namespace), body=svc("users", namespace))
    args = ["--import-services", "--import-namespace", namespace, "--namespace", namespace]
    with OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", args) as proc:
        services = _after_first_full_sync(proc, "zkop_service_import_services",
                                          "zkop_service_import_last_full_sync_timestamp_seconds")
        assert all(get_service(kube, name, namespace) is not None for name in SERVICES)
    assert services == {"imported": len(SERVICES) - 1, "foreign": 1, "collided": 0, "orphaned": 0}
