"""ZooKeeperEnsembles on a real kube-apiserver, ``zkop run --zookeeper-ensembles`` as its own ServiceAccount under
the RBAC of ``manifests/components/zookeeper-ensembles`` (the kind and its status and finalizer; the
Secrets of ``zkop-system`` only; Namespaces listed and watched): an object routed to its ensemble, a credential
rotated in the Secret (a new session, nothing rewritten), the ensemble deleted before its objects (it waits for
them, then goes), and the ensemble's own tenancy rules (a namespace admitted by its labels, a path outside the
prefixes ``Stalled`` with nothing written). The audit log shows no request of zkop's refused."""

from __future__ import annotations

import re
from pathlib import Path

from cluster_support import ZKOP_NAMESPACE, kubectl
from kazoo.client import KazooClient
from zkop_testing.controlplane import ControlPlane
from zkop_testing.ensembles import (
    ENSEMBLE_CRD_FILE,
    ZKE,
    delete_ensemble,
    ensemble,
    get_ensemble,
    put_secret,
    ready_condition,
)
from zkop_testing.kustomize import Obj
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import ZKC, conditions, create, get, read, synced, zkc
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer, four_letter_word

from zkop.kube.client import MERGE_PATCH, ApiException, KubeClient, resource_path

REPO = Path(__file__).resolve().parents[2]
ZKOP_USER = "system:serviceaccount:zkop-system:zkop"


def sessions_of(hosts: str) -> set[str]:
    """The session ids the server at ``hosts`` has clients for (its ``cons``)."""
    host, port = hosts.rsplit(":", 1)
    return set(re.findall(r"sid=(0x[0-9a-f]+)", four_letter_word(host, int(port), "cons")))


def test_an_ensemble_under_its_rbac_routes_rotates_and_waits_for_its_objects(
        plane: ControlPlane, installed: list[Obj], kube: KubeClient, zkop_kubeconfig: str, namespace: str,
        zk_server: ZooKeeperServer, zk_base: str, zk: KazooClient, second_ensemble: tuple[KazooClient, str],
        tmp_path: Path) -> None:
    second, hosts = second_ensemble
    kubectl(plane, "apply", "--server-side", "--force-conflicts", "--field-manager=zkop-tests",
            "-f", str(ENSEMBLE_CRD_FILE), "-f", str(REPO / "manifests/components/zookeeper-ensembles/rbac.yaml"))
    kubectl(plane, "wait", "--for=condition=Established", "crd/zookeeperensembles.platform.example.com",
            "--timeout=60s")
    name, secret = f"{namespace}-second", f"{namespace}-auth"  # cluster-scoped and shared: one per test
    put_secret(kube, ZKOP_NAMESPACE, secret, {"credentials": b"alice:one"})
    try:
        with OperatorProcess(zkop_kubeconfig, f"{zk_server.hosts}{zk_base}",
                             ["--workers", "2", "--namespace", namespace, "--zookeeper-ensembles",
                              "--ensemble-secret-namespace", ZKOP_NAMESPACE],
                             env={"TMPDIR": str(tmp_path)}) as proc:
            kube.request("POST", resource_path(*ZKE), body=ensemble(
                name, hosts, chroot="/team", auth={"digest": {"secretRef": {"name": secret}}}))
            create(kube, zkc("remote", "/app/flag", b"remote", namespace, ensembleRef={"name": name}))
            create(kube, zkc("local", "/app/flag", b"local", namespace))
            wait_for(lambda: synced(kube, "remote", namespace) and synced(kube, "local", namespace),
                     message="both synced")
            assert read(second, "/team/app/flag") == b"remote"
            assert read(zk, f"{zk_base}/app/flag") == b"local"
            wait_for(lambda: ready_condition(get_ensemble(kube, name)).get("status") == "True",
                     message="the ensemble Ready")
            printed = kubectl(plane, "get", "zke", name)
            assert "CONNECT" in printed and hosts in printed, printed
            before = second.get("/team/app/flag")[1]
            put_secret(kube, ZKOP_NAMESPACE, secret, {"credentials": b"bob:two"})
            wait_for(lambda: f"ensemble {name}: spec or Secrets changed; opening a new session" in proc.log_tail(500),
                     message="a new session")
            wait_for(lambda: ready_condition(get_ensemble(kube, name)).get("status") == "True",
                     message="Ready again")
            after = second.get("/team/app/flag")[1]
            assert (after.mzxid, after.version) == (before.mzxid, before.version)
            delete_ensemble(kube, name)
            wait_for(lambda: ready_condition(get_ensemble(kube, name)).get("reason") == "Terminating",
                     message="the ensemble waits for its object")
            kube.request("DELETE", resource_path(*ZKC, namespace, "remote"))
            wait_for(lambda: get(kube, "remote", namespace) is None and get_ensemble(kube, name) is None,
                     message="the object, then the ensemble, gone")
            assert not second.exists("/team/app/flag")
        assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()
    finally:
        try:
            kube.request("DELETE", resource_path("", "v1", "secrets", ZKOP_NAMESPACE, secret))
        except ApiException as err:
            if err.status != 404:
                raise
    assert refused_by_zkop(plane) == []


def refused_by_zkop(plane: ControlPlane) -> list[dict[str, object]]:
    """The audit log's requests of zkop's ServiceAccount that kube-apiserver answered 403."""
    return [e for e in plane.audit_events() if e.get("user", {}).get("username") == ZKOP_USER
            and e.get("stage") == "ResponseComplete" and e.get("responseStatus", {}).get("code") == 403]


def test_an_ensembles_tenancy_rules_hold_its_objects(
        plane: ControlPlane, installed: list[Obj], kube: KubeClient, zkop_kubeconfig: str, namespace: str,
        zk_server: ZooKeeperServer, zk_base: str, second_ensemble: tuple[KazooClient, str], tmp_path: Path) -> None:
    """The rules come from the ZooKeeperEnsemble's ``spec.tenancy``, not from a flag: its objects are held to them,
    and a namespace selected by label is admitted once labelled (the Namespace informer the component allows)."""
    second, hosts = second_ensemble
    kubectl(plane, "apply", "--server-side", "--force-conflicts", "--field-manager=zkop-tests",
            "-f", str(ENSEMBLE_CRD_FILE), "-f", str(REPO / "manifests/components/zookeeper-ensembles/rbac.yaml"))
    kubectl(plane, "wait", "--for=condition=Established", "crd/zookeeperensembles.platform.example.com",
            "--timeout=60s")
    name, label = f"{namespace}-tenants", f"{namespace}.zkop.test/team"
    tenancy = {"rules": [{"namespaceSelector": {"matchLabels": {label: "payments"}},
                          "pathPrefixes": ["/config/payments"]}]}
    with OperatorProcess(zkop_kubeconfig, f"{zk_server.hosts}{zk_base}",
                         ["--workers", "2", "--namespace", namespace, "--zookeeper-ensembles",
                          "--ensemble-secret-namespace", ZKOP_NAMESPACE],
                         env={"TMPDIR": str(tmp_path)}) as proc:
        kube.request("POST", resource_path(*ZKE), body=ensemble(name, hosts, chroot="/team", tenancy=tenancy))
        try:
            create(kube, zkc("inside", "/config/payments/3ds", b"required", namespace, ensembleRef={"name": name}))
            create(kube, zkc("outside", "/config/search/boost", b"2", namespace, ensembleRef={"name": name}))

            def stalled(obj: str, reason: str) -> bool:
                found = conditions(get(kube, obj, namespace))
                return found.get("Stalled", {}).get("status") == "True" and found["Stalled"]["reason"] == reason

            wait_for(lambda: stalled("inside", "NamespaceNotAllowed") and stalled("outside", "NamespaceNotAllowed"),
                     message="both stalled: the namespace lacks the label")
            assert not second.exists("/team/config")
            kube.request("PATCH", f"/api/v1/namespaces/{namespace}", content_type=MERGE_PATCH,
                         body={"metadata": {"labels": {label: "payments"}}})
            wait_for(lambda: synced(kube, "inside", namespace) and stalled("outside", "PathNotAllowed"),
                     message="the labelled namespace admitted, inside its prefix only")
            assert read(second, "/team/config/payments/3ds") == b"required"
            assert not second.exists("/team/config/search")

            # A new rule in the ensemble's spec admits "outside", in the session zkop already has.
            sessions = sessions_of(hosts)
            wider = {"rules": [*tenancy["rules"], {"namespaces": [namespace], "pathPrefixes": ["/config/search"]}]}
            kube.request("PATCH", resource_path(*ZKE, None, name), content_type=MERGE_PATCH,
                         body={"spec": {"tenancy": wider}})
            wait_for(lambda: synced(kube, "outside", namespace), message="admitted by the new rule")
            assert read(second, "/team/config/search/boost") == b"2"
            assert sessions_of(hosts) == sessions, "a tenancy change opened a new session"
            for obj in ("inside", "outside"):
                kube.request("DELETE", resource_path(*ZKC, namespace, obj))
            wait_for(lambda: get(kube, "inside", namespace) is None and get(kube, "outside", namespace) is None,
                     message="the objects deleted")
            assert not second.exists("/team/config/payments/3ds")
        finally:
            delete_ensemble(kube, name)
            wait_for(lambda: get_ensemble(kube, name) is None, message="the ensemble gone")
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()
    assert refused_by_zkop(plane) == []
