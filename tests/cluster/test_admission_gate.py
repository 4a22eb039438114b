"""One gate for every znode (``zkop.feature.gate``), tried as an attacker with one namespace would try it.

zkop runs as its own ServiceAccount under the shipped RBAC on a real kube-apiserver; ZooKeeper is a real server.
Each test is one of the ways through that main had (docs/security.md names them): a ZooKeeperMirror reading
another team's subtree, a ZooKeeperConfig rewriting zkop's ownership registry, a ZooKeeperConfig rewriting the
service bridge's record. Each is refused with a clear status and a Warning Event, and nothing of the victim's
changes, asserted on ZooKeeper itself (bytes and version) and on the API server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from cluster_support import kubectl
from kazoo.client import KazooClient
from kazoo.security import make_digest_acl
from zkop_testing.controlplane import REPO, ControlPlane
from zkop_testing.kustomize import Obj
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import ZKC, conditions, create, create_service_with_endpoints, events, get, synced, zkc
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import KubeClient, resource_path

ZKM = ("platform.example.com", "v1alpha1", "zookeepermirrors")


@pytest.fixture(scope="module")
def namespace_rbac(plane: ControlPlane, installed: list[Obj]) -> None:
    """The tenancy-namespace-selector component's ClusterRole and binding (a policy with a namespaceSelector makes
    zkop watch Namespaces), applied as a user would add it."""
    kubectl(plane, "apply", "--server-side", "--field-manager=zkop-tests", "-f",
            str(REPO / "manifests/components/tenancy-namespace-selector/rbac.yaml"))


def mirror(name: str, path: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperMirror",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"path": path, **spec}}


def mirror_conditions(kube: KubeClient, name: str, namespace: str) -> dict[str, dict[str, Any]]:
    return conditions(kube.request("GET", resource_path(*ZKM, namespace, name)))


def stalled(found: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]] | None:
    return found if found.get("Stalled", {}).get("status") == "True" else None


def config_map(kube: KubeClient, name: str, namespace: str) -> dict[str, Any] | None:
    found: dict[str, Any] = kube.request("GET", resource_path("", "v1", "configmaps", namespace))
    return next((cm for cm in found["items"] if cm["metadata"]["name"] == name), None)


def warned(kube: KubeClient, name: str, namespace: str, reason: str) -> bool:
    return any(e["type"] == "Warning" and e["reason"] == reason for e in events(kube, name, namespace))


def test_a_mirror_cannot_read_another_teams_subtree_nor_zkops_records(
        zkop_kubeconfig: str, kube: KubeClient, namespace: str, new_namespace: Any, zk_server: ZooKeeperServer,
        zk_base: str, zk: KazooClient, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Tenancy binds mirrors as it binds ZooKeeperConfigs: team-b, allowed only ``/team-b``, mirrors team-a's
    subtree (with a znode only zkop's credential may read) and gets nothing; a mirror of a subtree holding zkop's
    ownership registry leaves the registry out; one of the registry itself is refused."""
    team_a, team_b = namespace, new_namespace()
    secret_acl = make_digest_acl("zkop", "zkop-secret", all=True)
    zk.create(f"{zk_base}/team-a/db/password", b"hunter2", makepath=True)
    zk.create(f"{zk_base}/team-a/db/private", b"only-zkop", acl=[secret_acl])
    request.addfinalizer(lambda: zk.delete(f"{zk_base}/team-a/db/private"))  # zk_base's clean-up cannot list it
    zk.create(f"{zk_base}/team-b/flag", b"on", makepath=True)
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({"tenancy": {"rules": [
        {"namespaces": [team_a], "pathPrefixes": ["/"]},
        {"namespaces": [team_b], "pathPrefixes": ["/team-b"]}]}}))
    credentials = tmp_path / "digest"
    credentials.write_text("zkop:zkop-secret")
    args = ["--zookeeper-mirrors", "--tenancy-policy-file", str(policy), "--namespace", team_a, "--namespace", team_b,
            "--zk-auth-file", str(credentials)]
    with OperatorProcess(zkop_kubeconfig, f"{zk_server.hosts}{zk_base}", args) as proc:
        # team-a's own object gives the registry a record to protect.
        create(kube, zkc("flag", "/team-a/flag", b"1", namespace=team_a))
        wait_for(lambda: synced(kube, "flag", team_a), message="team-a's object synced")
        record = zk.get(f"{zk_base}/zkop/owners/team-a/flag")

        kube.request("POST", resource_path(*ZKM, team_b), body=mirror("steal", "/team-a", team_b, recursive=True))
        found = wait_for(lambda: stalled(mirror_conditions(kube, "steal", team_b)), message="the theft stalled")
        assert found["Ready"]["reason"] == found["Stalled"]["reason"] == "PathNotAllowed", found
        assert "nothing is read" in found["Ready"]["message"]
        wait_for(lambda: warned(kube, "steal", team_b, found["Ready"]["reason"]), message="a Warning Event")
        kube.request("POST", resource_path(*ZKM, team_b), body=mirror("own", "/team-b", team_b, recursive=True))
        wait_for(lambda: (config_map(kube, "own", team_b) or {}).get("data") == {"flag": "on"},
                 message="team-b's own subtree mirrored")
        assert config_map(kube, "steal", team_b) is None  # nothing of team-a's reached team-b

        # team-a may read "/", but never zkop's ownership records below it, and never the registry itself.
        kube.request("POST", resource_path(*ZKM, team_a), body=mirror("all", "/", team_a, recursive=True))
        wait_for(lambda: "team-a.flag" in ((config_map(kube, "all", team_a) or {}).get("data") or {}),
                 message="team-a's znode in the whole-tree mirror")
        cm = config_map(kube, "all", team_a)
        assert cm is not None and cm["data"]["team-a.db.private"] == "only-zkop"  # team-a may read its own
        assert not [k for k in cm.get("data") or {} if k.startswith("zkop.owners")], cm["data"]
        kube.request("POST", resource_path(*ZKM, team_a), body=mirror("records", "/zkop/owners", team_a,
                                                                       recursive=True))
        found = wait_for(lambda: stalled(mirror_conditions(kube, "records", team_a)), message="registry refused")
        assert found["Ready"]["reason"] == "ReservedPath", found
        assert "reserved for zkop's ownership registry" in found["Ready"]["message"]
        assert config_map(kube, "records", team_a) is None
        assert zk.get(f"{zk_base}/zkop/owners/team-a/flag") == record
        kube.request("DELETE", resource_path(*ZKC, team_a, "flag"))
        wait_for(lambda: get(kube, "flag", team_a) is None, message="team-a's object deleted")
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()


def policy_args(with_policy: bool, tmp_path: Path) -> list[str]:
    """``--tenancy-policy-file`` with the most permissive policy there is (every namespace, every path), or none:
    the reserved roots hold either way."""
    if not with_policy:
        return []
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump({"tenancy": {"rules": [{"namespaceSelector": {}, "pathPrefixes": ["/"]}]}}))
    return ["--tenancy-policy-file", str(path)]


@pytest.mark.parametrize("with_policy", [False, True], ids=["no-policy", "admit-all-policy"])
def test_a_zookeeperconfig_cannot_rewrite_or_delete_another_namespaces_ownership_record(
        zkop_kubeconfig: str, kube: KubeClient, namespace: str, new_namespace: Any, zk_server: ZooKeeperServer,
        zk_base: str, zk: KazooClient, with_policy: bool, tmp_path: Path, namespace_rbac: None) -> None:
    """With no tenancy policy, or one that admits every namespace to every path: a ZooKeeperConfig declaring a path
    inside the ownership registry is refused (``ReservedPath``), the victim's record keeps its bytes and version,
    and deleting the attacker's object deletes nothing."""
    victim, attacker = namespace, new_namespace()
    with OperatorProcess(zkop_kubeconfig, f"{zk_server.hosts}{zk_base}",
                         ["--namespace", victim, "--namespace", attacker, *policy_args(with_policy, tmp_path)]) as proc:
        create(kube, zkc("payments", "/config/payments", b"on", namespace=victim))
        wait_for(lambda: synced(kube, "payments", victim), message="the victim's object synced")
        record_path = f"{zk_base}/zkop/owners/config/payments"
        before = zk.get(record_path)
        forged = b'{"cluster": "default", "namespace": "%s", "name": "forged", "uid": "x"}' % attacker.encode()
        create(kube, zkc("forge", "/zkop/owners/config/payments", forged, namespace=attacker))
        found = wait_for(lambda: stalled(conditions(get(kube, "forge", attacker))), message="the forgery stalled")
        assert found["Ready"]["reason"] == "ReservedPath", found
        assert found["Ready"]["message"].startswith(
            "path /zkop/owners/config/payments is under /zkop/owners, reserved for zkop's ownership registry")
        wait_for(lambda: warned(kube, "forge", attacker, "ReservedPath"), message="a Warning Event")
        assert zk.get(record_path) == before
        assert zk.exists(f"{zk_base}/zkop/owners/zkop/owners/config/payments") is None  # no record of its own
        kube.request("DELETE", resource_path(*ZKC, attacker, "forge"))
        wait_for(lambda: get(kube, "forge", attacker) is None, message="the attacker's object deleted")
        # Its deletion took nothing with it; the victim is still served.
        assert zk.get(record_path) == before
        create(kube, zkc("payments-2", "/config/payments", b"mine", namespace=attacker))
        wait_for(lambda: conditions(get(kube, "payments-2", attacker)).get("Ready", {}).get("reason") == "PathConflict",
                 message="the path stays the victim's")
        assert zk.get(f"{zk_base}/config/payments")[0] == b"on"
        for ns in (victim, attacker):
            kube.request("DELETE", resource_path(*ZKC, ns))
        wait_for(lambda: not any(kube.request("GET", resource_path(*ZKC, ns))["items"] for ns in (victim, attacker)),
                 message="the test's objects deleted")
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()


@pytest.mark.parametrize("with_policy", [False, True], ids=["no-policy", "admit-all-policy"])
def test_a_zookeeperconfig_cannot_rewrite_a_service_bridge_record(
        zkop_kubeconfig: str, kube: KubeClient, namespace: str, new_namespace: Any, zk_server: ZooKeeperServer,
        zk_base: str, zk: KazooClient, with_policy: bool, tmp_path: Path, namespace_rbac: None) -> None:
    """With the bridge on, with no tenancy policy or one that admits every namespace to every path: a ZooKeeperConfig
    in another namespace declaring the path of a published Service's record is refused (``ReservedPath``) and the
    record is unchanged."""
    victim, attacker = namespace, new_namespace()
    args = ["--service-bridge", "--service-bridge-namespace", victim, "--namespace", attacker,
            *policy_args(with_policy, tmp_path)]
    with OperatorProcess(zkop_kubeconfig, f"{zk_server.hosts}{zk_base}", args) as proc:
        create_service_with_endpoints(kube, "web", victim)
        record_path = f"{zk_base}/kubernetes/services/{victim}-web"
        wait_for(lambda: zk.exists(record_path), message="the Service published")
        before = zk.get(record_path)
        create(kube, zkc("redirect", f"/kubernetes/services/{victim}-web",
                         b'{"name": "web", "clusterIP": "203.0.113.66"}', namespace=attacker))
        found = wait_for(lambda: stalled(conditions(get(kube, "redirect", attacker))), message="the redirect stalled")
        assert found["Ready"]["reason"] == "ReservedPath", found
        assert "reserved for zkop's service bridge" in found["Ready"]["message"]
        assert zk.get(record_path) == before
        kube.request("DELETE", resource_path(*ZKC, attacker, "redirect"))
        wait_for(lambda: get(kube, "redirect", attacker) is None, message="the attacker's object deleted")
        assert zk.get(record_path) == before
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()


def test_one_mirror_cannot_make_zkop_read_more_than_the_operator_allows(
        zkop_kubeconfig: str, kube: KubeClient, namespace: str, zk_server: ZooKeeperServer, zk_base: str,
        zk: KazooClient) -> None:
    """Resource exhaustion through one object: a mirror of a subtree larger than ``--mirror-max-znodes`` (or
    ``--mirror-max-bytes``) stops being read at the limit and mirrors nothing (``LimitExceeded``, Stalled, a
    Warning Event); one within the limits is mirrored."""
    for i in range(30):
        zk.create(f"{zk_base}/big/n{i:02}", b"x", makepath=True)
    for i in range(3):
        zk.create(f"{zk_base}/heavy/n{i}", b"y" * 1000, makepath=True)
    zk.create(f"{zk_base}/small/a", b"1", makepath=True)
    args = ["--zookeeper-mirrors", "--namespace", namespace, "--mirror-max-znodes", "20", "--mirror-max-bytes", "2500"]
    with OperatorProcess(zkop_kubeconfig, f"{zk_server.hosts}{zk_base}", args) as proc:
        for name, path in (("big", "/big"), ("heavy", "/heavy"), ("small", "/small")):
            kube.request("POST", resource_path(*ZKM, namespace), body=mirror(name, path, namespace, recursive=True))
        for name, limit in (("big", "more than 20 znodes below /big (--mirror-max-znodes)"),
                            ("heavy", "more than 2500 bytes of data below /heavy (--mirror-max-bytes)")):
            found = wait_for(lambda: stalled(mirror_conditions(kube, name, namespace)),  # noqa: B023
                             message=f"{name} refused")
            assert found["Ready"]["reason"] == "LimitExceeded", found
            assert limit in found["Ready"]["message"]
            wait_for(lambda: warned(kube, name, namespace, "LimitExceeded"), message="a Warning Event")  # noqa: B023
            assert config_map(kube, name, namespace) is None
        wait_for(lambda: (config_map(kube, "small", namespace) or {}).get("data") == {"a": "1"},
                 message="the small mirror mirrored")
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()
