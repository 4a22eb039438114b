"""Tenancy rules and adoption of the default ensemble (``zkop run --tenancy-policy-file``) on a real kube-apiserver.

zkop runs as its own ServiceAccount under the shipped RBAC plus ``manifests/components/tenancy-namespace-selector``
(list and watch Namespaces); ZooKeeper is a real server. Prefixes are relative to the chroot of ``--zk-hosts``
(each test's base path), as ``spec.path`` is. What "nothing written" means is asserted on ZooKeeper itself: the
znode and its ownership record do not exist, or are byte for byte and version for version as they were.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cluster_support import kubectl
from kazoo.client import KazooClient
from zkop_testing.controlplane import REPO, ControlPlane
from zkop_testing.kustomize import Obj
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import ZKC, conditions, create, events, get, read, synced, zkc
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import MERGE_PATCH, KubeClient, resource_path
from zkop.zkconfig.spec import FINALIZER

RECORDS = "/zkop/owners"
TENANT_LABEL = "zkop-test.example.com/tenant"

RunZkop = Callable[[dict[str, Any], list[str]], "contextlib.AbstractContextManager[OperatorProcess]"]


@pytest.fixture(scope="module")
def namespace_rbac(plane: ControlPlane, installed: list[Obj]) -> None:
    """The tenancy-namespace-selector component's ClusterRole and binding, applied as a user would add it."""
    kubectl(plane, "apply", "--server-side", "--field-manager=zkop-tests", "-f",
            str(REPO / "manifests/components/tenancy-namespace-selector/rbac.yaml"))


@pytest.fixture
def run_zkop(zkop_kubeconfig: str, namespace_rbac: None, kube: KubeClient, zk_server: ZooKeeperServer, zk_base: str,
             tmp_path: Path) -> RunZkop:
    """Start ``zkop run --tenancy-policy-file`` with ``policy`` (the file's YAML), watching ``namespaces``; before
    it stops, the test's ZooKeeperConfigs are deleted through it (no finalizer is left for another test's zkop)."""
    @contextlib.contextmanager
    def run(policy: dict[str, Any], namespaces: list[str]) -> Iterator[OperatorProcess]:
        path = tmp_path / "policy.yaml"
        path.write_text(yaml.safe_dump(policy))
        args = ["--workers", "2", "--tenancy-policy-file", str(path)]
        for ns in namespaces:
            args += ["--namespace", ns]
        with OperatorProcess(zkop_kubeconfig, f"{zk_server.hosts}{zk_base}", args) as proc:
            yield proc
            for ns in namespaces:
                kube.request("DELETE", resource_path(*ZKC, ns))
            wait_for(lambda: not any(kube.request("GET", resource_path(*ZKC, ns))["items"] for ns in namespaces),
                     message="the test's objects deleted")
        assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()

    return run


def stalled(kube: KubeClient, name: str, namespace: str) -> dict[str, dict[str, Any]] | None:
    """The object's conditions once it is ``Stalled``, else ``None``."""
    found = conditions(get(kube, name, namespace))
    return found if found.get("Stalled", {}).get("status") == "True" else None


def warned(kube: KubeClient, name: str, namespace: str, reason: str) -> dict[str, Any] | None:
    """The Warning Event ``reason`` about the object, if sent."""
    return next((e for e in events(kube, name, namespace) if e["type"] == "Warning" and e["reason"] == reason), None)


def test_objects_outside_the_rules_are_stalled_and_write_nothing(
        run_zkop: RunZkop, kube: KubeClient, namespace: str, new_namespace: Callable[[], str], zk: KazooClient,
        zk_base: str) -> None:
    team_a, team_b = namespace, new_namespace()
    policy = {"tenancy": {"rules": [{"namespaces": [team_a], "pathPrefixes": ["/config/team-a/"]}]}}
    with run_zkop(policy, [team_a, team_b]):
        # team-b claims team-a's path first: refused; it cannot keep the path from team-a either.
        create(kube, zkc("squatter", "/config/team-a/payments", b"hijacked", namespace=team_b))
        found = wait_for(lambda: stalled(kube, "squatter", team_b), message="namespace outside the rules stalled")
        assert found["Ready"]["status"] == "False"
        assert found["Ready"]["reason"] == found["Stalled"]["reason"] == "NamespaceNotAllowed"
        assert found["Stalled"]["message"] == (
            f"namespace {team_b} is not admitted by any tenancy rule (tenancy.rules[0] (namespaces {team_a}; "
            "pathPrefixes /config/team-a)); nothing is written")
        event = wait_for(lambda: warned(kube, "squatter", team_b, "NamespaceNotAllowed"), message="Warning Event")
        assert "tenancy.rules[0]" in event["message"]
        squatter = get(kube, "squatter", team_b)
        assert squatter is not None and FINALIZER not in (squatter["metadata"].get("finalizers") or [])

        # team-a: a path outside its prefix (and one that only shares the prefix's characters) is refused.
        create(kube, zkc("elsewhere", "/config/team-b/flag", b"1", namespace=team_a))
        create(kube, zkc("lookalike", "/config/team-ab", b"1", namespace=team_a))
        for name in ("elsewhere", "lookalike"):
            found = wait_for(lambda: stalled(kube, name, team_a), message=f"{name} stalled")  # noqa: B023
            assert found["Ready"]["reason"] == "PathNotAllowed", found
            assert f"outside the path prefixes namespace {team_a} may manage" in found["Ready"]["message"]
        # team-a's own path: written, although an older object in the cluster declares it.
        create(kube, zkc("payments", "/config/team-a/payments", b"on", namespace=team_a))
        wait_for(lambda: synced(kube, "payments", team_a), message="admitted object synced")
        assert read(zk, zk_base + "/config/team-a/payments") == b"on"

        # Nothing of the refused objects reached ZooKeeper: no znode, no ownership record.
        for path in ("/config/team-b/flag", "/config/team-ab", "/config/team-b"):
            assert zk.exists(zk_base + path) is None, path
            assert zk.exists(zk_base + RECORDS + path) is None, path
        assert sorted(zk.get_children(zk_base + "/config")) == ["team-a"]

        # Deleting a refused object is immediate (no finalizer) and deletes no znode it never owned.
        kube.request("DELETE", resource_path(*ZKC, team_b, "squatter"))
        wait_for(lambda: get(kube, "squatter", team_b) is None, message="refused object deleted")
        assert read(zk, zk_base + "/config/team-a/payments") == b"on"
        assert synced(kube, "payments", team_a) is not None


def test_adoption_if_requested(run_zkop: RunZkop, kube: KubeClient, namespace: str, zk: KazooClient,
                               zk_base: str) -> None:
    """adoption IfRequested: a znode set by hand is left alone until the object sets spec.adoptExisting."""
    legacy = zk_base + "/legacy/timeout"
    zk.create(legacy, b"30s", makepath=True)
    zk.set(legacy, b"45s")  # version 1: any write by zkop would show
    before = zk.get(legacy)
    with run_zkop({"adoption": "IfRequested"}, [namespace]):
        create(kube, zkc("timeout", "/legacy/timeout", b"60s", namespace=namespace))
        create(kube, zkc("fresh", "/legacy/fresh", b"1", namespace=namespace))
        found = wait_for(lambda: stalled(kube, "timeout", namespace), message="adoption refused")
        assert found["Ready"]["reason"] == "AdoptionNotRequested"
        assert "set spec.adoptExisting: true" in found["Ready"]["message"]
        wait_for(lambda: warned(kube, "timeout", namespace, "AdoptionNotRequested"), message="Warning Event")
        # A znode nobody had is created as always: adoption is about existing znodes only.
        wait_for(lambda: synced(kube, "fresh", namespace), message="new znode created")
        assert read(zk, zk_base + "/legacy/fresh") == b"1"
        data, stat = zk.get(legacy)
        assert (data, stat.version, stat.mzxid) == (before[0], before[1].version, before[1].mzxid)
        assert zk.exists(zk_base + RECORDS + "/legacy/timeout") is None

        # The object asks: adopted, then written; the Adopted Event says so.
        kube.request("PATCH", resource_path(*ZKC, namespace, "timeout"), content_type=MERGE_PATCH,
                     body={"spec": {"adoptExisting": True}})
        wait_for(lambda: synced(kube, "timeout", namespace), message="adopted once requested")
        assert read(zk, legacy) == b"60s"
        assert zk.exists(zk_base + RECORDS + "/legacy/timeout") is not None
        wait_for(lambda: "Adopted" in [e["reason"] for e in events(kube, "timeout", namespace)],
                 message="Adopted Event")


def test_adoption_never_leaves_the_znode_untouched(run_zkop: RunZkop, kube: KubeClient, namespace: str,
                                                 zk: KazooClient, zk_base: str) -> None:
    legacy = zk_base + "/legacy/switch"
    zk.create(legacy, b"off", makepath=True)
    before = zk.get(legacy)
    with run_zkop({"adoption": "Never"}, [namespace]):
        create(kube, zkc("switch", "/legacy/switch", b"on", namespace=namespace, adoptExisting=True))
        found = wait_for(lambda: stalled(kube, "switch", namespace), message="adoption refused")
        assert found["Ready"]["reason"] == "AdoptionRefused"
        # Deleting it deletes nothing: the object never owned the znode.
        kube.request("DELETE", resource_path(*ZKC, namespace, "switch"))
        wait_for(lambda: get(kube, "switch", namespace) is None, message="object deleted")
        data, stat = zk.get(legacy)
        assert (data, stat.version, stat.mzxid) == (before[0], before[1].version, before[1].mzxid)
        assert zk.exists(zk_base + RECORDS + "/legacy/switch") is None


def watched_under(server: ZooKeeperServer, base: str) -> list[str]:
    """The paths under ``base`` that some session watches (the server's ``wchp``)."""
    return [line.strip() for line in server.four_letter_word("wchp").splitlines() if line.startswith(base + "/")]


def test_a_label_change_admits_a_stalled_object_and_a_removed_one_freezes_it(
        run_zkop: RunZkop, kube: KubeClient, namespace: str, zk: KazooClient, zk_base: str,
        zk_server: ZooKeeperServer) -> None:
    policy = {"tenancy": {"rules": [{"namespaceSelector": {"matchLabels": {TENANT_LABEL: "payments"}},
                                     "pathPrefixes": ["/config/payments"]}]}}

    def label(value: str | None) -> None:
        kube.request("PATCH", f"/api/v1/namespaces/{namespace}", content_type=MERGE_PATCH,
                     body={"metadata": {"labels": {TENANT_LABEL: value}}})

    flag = zk_base + "/config/payments/3ds"
    with run_zkop(policy, [namespace]):
        create(kube, zkc("3ds", "/config/payments/3ds", b"required", namespace=namespace))
        found = wait_for(lambda: stalled(kube, "3ds", namespace), message="stalled without the label")
        assert found["Ready"]["reason"] == "NamespaceNotAllowed"
        assert f"namespaceSelector {TENANT_LABEL} in (payments)" in found["Ready"]["message"]
        assert zk.exists(flag) is None
        assert watched_under(zk_server, zk_base) == []  # a refused object makes zkop watch nothing for it

        label("payments")  # no change to the object: the Namespace's event re-reconciles it
        wait_for(lambda: synced(kube, "3ds", namespace), message="admitted once labelled")
        assert read(zk, flag) == b"required"
        assert watched_under(zk_server, zk_base), "the admitted object's path is watched"

        # The label goes: stalled again; a hand edit is no longer put back, and deletion leaves the znode.
        label(None)
        wait_for(lambda: stalled(kube, "3ds", namespace), message="stalled once the label is removed")
        zk.set(flag, b"hand edit")
        kube.request("DELETE", resource_path(*ZKC, namespace, "3ds"))
        wait_for(lambda: get(kube, "3ds", namespace) is None, message="deleted")

        def left_in_place() -> dict[str, Any] | None:
            return next((e for e in events(kube, "3ds", namespace) if e["type"] == "Warning"
                         and "left in place, not deleted" in e["message"]), None)

        wait_for(left_in_place, message="a Warning Event says the znode stays")
        assert read(zk, flag) == b"hand edit"
        assert zk.exists(zk_base + RECORDS + "/config/payments/3ds") is None  # the record is released
