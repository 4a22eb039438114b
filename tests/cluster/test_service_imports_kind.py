"""ZooKeeperServiceImport end to end: ``zkop run --service-imports`` as zkop's ServiceAccount on a real control plane.

The registrations are real Curator instances written by a plain kazoo client (the layout
``ServiceDiscoveryImpl.registerService`` writes); kube-apiserver validates the Services and EndpointSlices, and
kube-controller-manager's garbage collector deletes them with their ZooKeeperServiceImport (``ownerReferences``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from kazoo.client import KazooClient
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import conditions
from zkop_testing.services import endpoints, get_service, register, services_in, slices_of
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import KubeClient, resource_path

ZKSI = ("platform.example.com", "v1alpha1", "zookeeperserviceimports")


def service_import(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperServiceImport",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def get_import(kube: KubeClient, name: str, namespace: str) -> dict[str, Any]:
    return kube.request("GET", resource_path(*ZKSI, namespace, name))


def warnings(kube: KubeClient, name: str, namespace: str) -> set[str]:
    items = kube.request("GET", resource_path("", "v1", "events", namespace))["items"]
    return {e["reason"] for e in items if e["involvedObject"].get("name") == name and e["type"] == "Warning"}


@contextmanager
def zkop(kubeconfig: str, zk_server: ZooKeeperServer, zk_base: str, namespaces: list[str],
         *more: str) -> Iterator[OperatorProcess]:
    args = ["--service-imports", "--cluster-id", "prod", "--workers", "2", *more]
    for ns in namespaces:
        args += ["--namespace", ns]
    with OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", args) as proc:
        yield proc
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()


def test_two_teams_import_one_registration_each_into_its_own_namespace_and_nothing_elsewhere(
        zkop_kubeconfig: str, kube: KubeClient, namespace: str, new_namespace: Any, zk_server: ZooKeeperServer,
        zk_base: str, chrooted: KazooClient) -> None:
    team_a, team_b, bystander = namespace, new_namespace(), new_namespace()
    register(chrooted, "orders", "i1", "10.1.0.1", ephemeral=False)
    register(chrooted, "orders", "i2", "10.1.0.2", ephemeral=False)
    register(chrooted, "billing", "i1", "10.1.0.9", ephemeral=False)
    register(chrooted, "other", "i1", "10.1.0.7", ephemeral=False)  # not selected by either
    # team-b has a Service of its own named billing: zkop must leave it alone.
    kube.request("POST", resource_path("", "v1", "services", team_b), body={
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "billing", "labels": {"team": "b"}},
        "spec": {"selector": {"app": "billing"}, "ports": [{"name": "web", "port": 80, "targetPort": 8080}]}})
    foreign = get_service(kube, "billing", team_b) or {}
    with zkop(zkop_kubeconfig, zk_server, zk_base, [team_a, team_b, bystander]):
        for ns in (team_a, team_b):
            kube.request("POST", resource_path(*ZKSI, ns), body=service_import(
                "shop", ns, root="/services", format="curator", selection={"names": ["orders"], "pattern": "bill*"}))
        for ns in (team_a, team_b):
            wait_for(lambda ns=ns: endpoints(kube, "orders", ns) == {"10.1.0.1": True, "10.1.0.2": True},  # type: ignore[misc]
                     message=f"orders imported into {ns}")
        wait_for(lambda: endpoints(kube, "billing", team_a) == {"10.1.0.9": True}, message="billing into team-a")
        ready = wait_for(lambda: conditions(get_import(kube, "shop", team_a)).get("Ready", {}).get("status") == "True"
                         and get_import(kube, "shop", team_a), message="team-a's import Ready")
        assert ready["status"]["importedServices"] == 2 and ready["status"]["services"] == ["billing", "orders"]
        assert ready["status"]["observedGeneration"] == ready["metadata"]["generation"]

        # Each team's Service is its own: owned by its own object, in its own namespace.
        uid_a = get_import(kube, "shop", team_a)["metadata"]["uid"]
        service_a = get_service(kube, "orders", team_a) or {}
        service_b = get_service(kube, "orders", team_b) or {}
        assert service_a["metadata"]["uid"] != service_b["metadata"]["uid"]
        assert service_a["metadata"]["ownerReferences"] == [{
            "apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperServiceImport", "name": "shop",
            "uid": uid_a, "controller": True}]
        owner_annotation = service_a["metadata"]["annotations"]["platform.example.com/imported-by"]
        assert owner_annotation == "zkop/prod/serviceimport/shop"
        assert service_a["metadata"]["labels"]["platform.example.com/imported-from-zookeeper"] == "true"
        assert "other" not in services_in(kube, team_a) and services_in(kube, bystander) == set()

        # team-b's own billing Service is left alone: Conflict, a Warning, no slice of zkop's attached.
        found = wait_for(lambda: conditions(get_import(kube, "shop", team_b)).get("Stalled") and
                         get_import(kube, "shop", team_b), message="team-b's conflict reported")
        assert conditions(found)["Ready"]["reason"] == "Conflict" and found["status"]["conflicts"] == ["billing"]
        wait_for(lambda: "Conflict" in warnings(kube, "shop", team_b), message="a Warning Event")
        after = get_service(kube, "billing", team_b) or {}
        assert after["metadata"]["resourceVersion"] == foreign["metadata"]["resourceVersion"]
        assert slices_of(kube, "billing", team_b) == []

        # A registration going away goes away in both; deleting team-a's object collects what it created, only.
        chrooted.delete("/services/orders/i2")
        for ns in (team_a, team_b):
            wait_for(lambda ns=ns: endpoints(kube, "orders", ns) == {"10.1.0.1": True},  # type: ignore[misc]
                     message=f"deregistration followed in {ns}")
        kube.request("DELETE", resource_path(*ZKSI, team_a, "shop"))
        wait_for(lambda: get_service(kube, "orders", team_a) is None and get_service(kube, "billing", team_a) is None
                 and not slices_of(kube, "orders", team_a), message="the garbage collector removed team-a's")
        assert endpoints(kube, "orders", team_b) == {"10.1.0.1": True}
        assert get_service(kube, "billing", team_b) is not None  # team-b's own, still there
        kube.request("DELETE", resource_path(*ZKSI, team_b, "shop"))
        wait_for(lambda: get_service(kube, "orders", team_b) is None, message="team-b's collected")


def test_a_namespace_the_tenancy_rules_do_not_admit_to_the_root_imports_nothing(
        zkop_kubeconfig: str, kube: KubeClient, namespace: str, new_namespace: Any, zk_server: ZooKeeperServer,
        zk_base: str, chrooted: KazooClient, tmp_path: Path) -> None:
    team_a, team_b = namespace, new_namespace()
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({"tenancy": {"rules": [
        {"namespaces": [team_a], "pathPrefixes": ["/services"]},
        {"namespaces": [team_b], "pathPrefixes": ["/team-b"]}]}}))
    register(chrooted, "orders", "i1", "10.1.0.1", ephemeral=False)
    register(chrooted, "orders", "i1", "10.1.0.2", ephemeral=False, root="/zkop/owners")  # the registry: never read
    with zkop(zkop_kubeconfig, zk_server, zk_base, [team_a, team_b], "--tenancy-policy-file", str(policy)):
        kube.request("POST", resource_path(*ZKSI, team_b), body=service_import("steal", team_b, root="/services"))
        kube.request("POST", resource_path(*ZKSI, team_b), body=service_import("registry", team_b,
                                                                                 root="/zkop/owners"))
        kube.request("POST", resource_path(*ZKSI, team_a), body=service_import("mine", team_a))
        wait_for(lambda: endpoints(kube, "orders", team_a) == {"10.1.0.1": True}, message="team-a admitted")
        for name, reason in (("steal", "PathNotAllowed"), ("registry", "ReservedPath")):
            found = wait_for(lambda name=name: conditions(get_import(kube, name, team_b)).get("Stalled"),  # type: ignore[misc]
                             message=f"{name} stalled")
            assert found["reason"] == reason, found
            wait_for(lambda name=name, reason=reason: reason in warnings(kube, name, team_b),  # type: ignore[misc]
                     message=f"{name}: a Warning Event")
        assert services_in(kube, team_b) == set()


def test_a_registration_naming_the_api_servers_address_creates_nothing(
        zkop_kubeconfig: str, kube: KubeClient, namespace: str, zk_server: ZooKeeperServer, zk_base: str,
        chrooted: KazooClient) -> None:
    ns = namespace
    cluster_ip = str((get_service(kube, "kubernetes", "default") or {})["spec"]["clusterIP"])
    register(chrooted, "apiserver", "i1", cluster_ip, port=443, ephemeral=False)
    register(chrooted, "fine", "i1", "10.1.0.1", ephemeral=False)
    with zkop(zkop_kubeconfig, zk_server, zk_base, [ns]):
        kube.request("POST", resource_path(*ZKSI, ns), body=service_import("all", ns))
        wait_for(lambda: endpoints(kube, "fine", ns) == {"10.1.0.1": True}, message="the allowed one imported")
        found = wait_for(lambda: conditions(get_import(kube, "all", ns)).get("Ready", {}).get("status") == "True"
                         and get_import(kube, "all", ns), message="Ready")
        assert found["status"]["services"] == ["fine"]
        assert get_service(kube, "apiserver", ns) is None and slices_of(kube, "apiserver", ns) == []
