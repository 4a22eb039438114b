"""ZooKeeperServiceImport with the real Apache Curator client: ``zkop run --service-imports`` as zkop's ServiceAccount
on a real control plane, the registrations made by a ``zkop.interop.CuratorDiscovery`` program (``tests/interop/java``,
``curator-x-discovery`` 5.9.0 from Maven Central) with ``ServiceDiscovery.registerService`` — DYNAMIC (ephemeral)
instances whose payload is Spring Cloud Zookeeper's ``ZookeeperInstance`` with metadata, as an application registers.

What kube-apiserver stores is what is asserted: the Service and EndpointSlices in each team's namespace, the
``zookeeper.platform.example.com/meta-<key>`` annotations from the metadata, and, listed cluster-wide by zkop's label,
nothing anywhere else. The kazoo-written registrations of ``test_service_imports_kind.py`` cover the tenancy gate,
the garbage collector and a team's own Service of the wanted name.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from zkop_testing.java_interop import JavaProgram
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import conditions
from zkop_testing.services import endpoints, get_service
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import KubeClient, resource_path

ZKSI = ("platform.example.com", "v1alpha1", "zookeeperserviceimports")
IMPORTED = "platform.example.com/imported-from-zookeeper"
META = "zookeeper.platform.example.com/meta-"
#: Metadata keys a registration writer might try to turn into a Service's annotations or labels.
HOSTILE = ("kubectl.kubernetes.io/last-applied-configuration", "platform.example.com/imported-by",
           "service.kubernetes.io/headless", "app.kubernetes.io/managed-by")


@pytest.fixture
def curator(zk_server: ZooKeeperServer, zk_base: str) -> Iterator[JavaProgram]:
    """The Curator application, its session chrooted at the test's ``zk_base`` (zkop's too)."""
    with JavaProgram("CuratorDiscovery", [f"{zk_server.hosts}{zk_base}"]) as program:
        yield program


def service_import(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperServiceImport",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def get_import(kube: KubeClient, name: str, namespace: str) -> dict[str, Any]:
    return kube.request("GET", resource_path(*ZKSI, namespace, name))


def imported_everywhere(kube: KubeClient, resource: tuple[str, str, str], cluster_id: str) -> set[tuple[str, str]]:
    """``(namespace, name)`` of every object of ``resource`` in the cluster carrying zkop's import label and this
    installation's owner annotation (``zkop/<cluster id>…``)."""
    items = kube.request("GET", resource_path(*resource), query={"labelSelector": f"{IMPORTED}=true"})["items"]
    return {(i["metadata"]["namespace"], i["metadata"]["name"]) for i in items
            if str((i["metadata"].get("annotations") or {}).get("platform.example.com/imported-by", "")).startswith(
                f"zkop/{cluster_id}/")}


def warning_messages(kube: KubeClient, namespace: str, name: str, reason: str) -> list[str]:
    items = kube.request("GET", resource_path("", "v1", "events", namespace))["items"]
    return [e["message"] for e in items if e["involvedObject"].get("name") == name and e["reason"] == reason
            and e["type"] == "Warning"]


def test_a_curator_registration_imported_by_two_teams_lands_in_their_namespaces_only_with_its_metadata(
        zkop_kubeconfig: str, kube: KubeClient, namespace: str, new_namespace: Any, zk_server: ZooKeeperServer,
        zk_base: str, curator: JavaProgram) -> None:
    team_a, team_b, bystander = namespace, new_namespace(), new_namespace()
    cluster_id = f"c-{team_a}"
    hostile = [f"{key}=zkop/attacker" for key in HOSTILE]
    # Two instances agreeing on team and tier, not on zone; both carry the hostile keys.
    curator.call("register", "/services", "payments", "p1", "10.4.0.1", "8080", "8443",
                 "team=payments", "tier=gold", "zone=a", *hostile)
    curator.call("register", "/services", "payments", "p2", "10.4.0.2", "8080", "8443",
                 "team=payments", "tier=gold", "zone=b", *hostile)
    curator.call("register", "/services", "ledger", "l1", "10.4.0.9", "9090", "-", "team=ledger")
    args = ["--service-imports", "--cluster-id", cluster_id, "--workers", "2"]
    for ns in (team_a, team_b, bystander):
        args += ["--namespace", ns]
    with OperatorProcess(zkop_kubeconfig, f"{zk_server.hosts}{zk_base}", args) as proc:
        for ns in (team_a, team_b):
            kube.request("POST", resource_path(*ZKSI, ns), body=service_import(
                "shop", ns, root="/services", format="curator", selection={"names": ["payments"]}))
        for ns in (team_a, team_b):
            wait_for(lambda ns=ns: endpoints(kube, "payments", ns) == {"10.4.0.1": True, "10.4.0.2": True},  # type: ignore[misc]
                     message=f"payments imported into {ns}")
            ready = wait_for(lambda ns=ns: conditions(get_import(kube, "shop", ns)).get("Ready", {}).get(  # type: ignore[misc]
                "status") == "True" and get_import(kube, "shop", ns), message=f"{ns}'s import Ready")
            assert ready["status"]["services"] == ["payments"]

        # Each team's own Service: the addresses, zkop's marks, and of the metadata only what both instances share.
        services = {ns: get_service(kube, "payments", ns) or {} for ns in (team_a, team_b)}
        assert services[team_a]["metadata"]["uid"] != services[team_b]["metadata"]["uid"]
        for ns, service in services.items():
            meta = service["metadata"]
            assert meta["labels"] == {IMPORTED: "true", "app.kubernetes.io/managed-by": "zkop"}
            assert meta["annotations"] == {
                "platform.example.com/imported-by": f"zkop/{cluster_id}/serviceimport/shop",
                "platform.example.com/zookeeper-path": "/services/payments",
                "platform.example.com/zookeeper-sync": "false",
                f"{META}team": "payments", f"{META}tier": "gold"}, ns
            assert [(r["kind"], r["name"]) for r in meta["ownerReferences"]] == [("ZooKeeperServiceImport", "shop")]
            assert service["spec"]["ports"] == [
                {"name": "http", "port": 8080, "protocol": "TCP", "targetPort": 8080},
                {"name": "https", "port": 8443, "protocol": "TCP", "targetPort": 8443}]
            # The hostile keys are no annotation names: one Warning on the Service says which were dropped.
            messages = wait_for(lambda ns=ns: warning_messages(kube, ns, "payments", "InvalidMetadata"),  # type: ignore[misc]
                                message=f"InvalidMetadata Event in {ns}")
            assert all(key in messages[0] for key in HOSTILE), messages

        # Nothing anywhere else: every imported Service and EndpointSlice of this zkop in the cluster is a team's.
        assert imported_everywhere(kube, ("", "v1", "services"), cluster_id) == {(team_a, "payments"),
                                                                                 (team_b, "payments")}
        slices = imported_everywhere(kube, ("discovery.k8s.io", "v1", "endpointslices"), cluster_id)
        assert {ns for ns, _ in slices} == {team_a, team_b} and len(slices) == 2
        assert get_service(kube, "ledger", team_a) is None  # not selected

        # A second object in team-a cannot take the Service team-a's first object owns: Conflict, the Service as is.
        before = get_service(kube, "payments", team_a) or {}
        kube.request("POST", resource_path(*ZKSI, team_a), body=service_import(
            "rival", team_a, selection={"pattern": "pay*"}))
        rival = wait_for(lambda: conditions(get_import(kube, "rival", team_a)).get("Stalled") and
                         get_import(kube, "rival", team_a), message="the rival's Conflict")
        assert conditions(rival)["Ready"]["reason"] == "Conflict" and rival["status"]["conflicts"] == ["payments"]
        wait_for(lambda: warning_messages(kube, team_a, "rival", "Conflict"), message="the rival's Warning")
        after = get_service(kube, "payments", team_a) or {}
        assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]

        # An instance disagreeing on team: the annotation goes from both teams' Services (removed, not left stale).
        curator.call("register", "/services", "payments", "p3", "10.4.0.3", "8080", "8443", "team=ledger",
                     "tier=gold", *hostile)
        for ns in (team_a, team_b):
            wait_for(lambda ns=ns: len(endpoints(kube, "payments", ns)) == 3 and f"{META}team" not in (  # type: ignore[misc]
                get_service(kube, "payments", ns) or {})["metadata"]["annotations"], message=f"team dropped in {ns}")
            assert (get_service(kube, "payments", ns) or {})["metadata"]["annotations"][f"{META}tier"] == "gold"
        assert imported_everywhere(kube, ("", "v1", "services"), cluster_id) == {(team_a, "payments"),
                                                                                 (team_b, "payments")}
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()
