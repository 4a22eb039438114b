"""Install, upgrade and uninstall zkop on a real control plane, as docs/operations.md tells users to.

Each test gets a control plane of its own (the install's cluster-scoped objects, the CRD above all, are
created and removed here, which the session's shared plane must keep). There is no kubelet:
:func:`cluster_support.pod_of_deployment` runs ``zkop run`` as the live Deployment says (its args, its env
from the ConfigMap, its Secret volume, a token of its ServiceAccount under the RBAC installed with it).

- kustomize: ``kubectl apply -k`` of an overlay over ``manifests/default`` (ZooKeeper's address patched into
  the ConfigMap, the auth Secret made with ``kubectl create secret``, as README says); the examples converge
  (``acl.yaml`` only because zkop authenticates with the mounted Secret); the documented uninstall (delete the
  ZooKeeperConfigs while zkop runs, then ``kubectl delete -k``) leaves nothing, and the Orphan's znode.
- Helm: ``helm install`` of ``charts/zkop`` (ZooKeeper and its credentials as values); the same story, then
  ``helm uninstall`` keeps the CRD (``helm.sh/resource-policy: keep``) until it is deleted by hand.
- Upgrade: 0.1.0 (the release commit's ``manifests/``, ``examples/`` and ``zkop/``, run by that zkop) to this
  tree with objects in place: the new CRD (CEL rules, a bound on ``spec.acl`` that an object stored before
  exceeds: ratcheting lets it be labelled, a new one like it is refused) is accepted, no znode is written
  (``mzxid`` unchanged), the status keeps its conditions (the CHANGELOG's one status write adds
  ``status.znodeVersion`` and stamps ``lastSyncedTime``), and the new replica takes the Lease over from the old
  one within a Lease duration.
- Flux: ``examples/flux/zkop.yaml`` and a Kustomization of the examples applied by Flux's own controllers from
  Git; pruned in the documented order (the examples' Kustomization first), nothing left.
- The unsafe order with Flux (zkop's Kustomization pruned first) keeps the CRD and so the objects
  (``kustomize.toolkit.fluxcd.io/prune: disabled``); a new install takes them over.
- The unsafe order (``kubectl delete -k`` after zkop is gone) leaves the CRD terminating while the objects hold
  their finalizer; the documented way out (remove the finalizers) ends it and keeps every znode.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import subprocess
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cluster_support import kubectl, pod_of_deployment
from kazoo.client import KazooClient
from zkop_testing.controlplane import REPO, ControlPlane, minors_under_test
from zkop_testing.ensembles import ensemble
from zkop_testing.flux import GITREPOSITORY, KUSTOMIZATION, Flux, GitServer, condition
from zkop_testing.helm import CHART, HelmError, helm
from zkop_testing.kubectl import venv_kubectl
from zkop_testing.operator import OperatorProcess
from zkop_testing.releases import (
    for_install,
    newest_release_with,
    numbered_steps,
    release_tree,
    upgrade_steps,
)
from zkop_testing.resources import ZKC, conditions, create, get, synced, zkc
from zkop_testing.services import get_service, register
from zkop_testing.waiting import EVENTUALLY, wait_for
from zkop_testing.zookeeper import ZooKeeperServer, connected_client, find_zookeeper

from zkop.kube.client import ApiException, KubeClient, resource_path

NAMESPACE = "zkop-system"
CRD = "zookeeperconfigs.platform.example.com"
#: Every CRD the install makes; each is kept by helm uninstall and a Flux prune (docs/operations.md, "Uninstall").
CRDS = [CRD, "zookeeperconfigtrees.platform.example.com", "zookeeperensembles.platform.example.com",
        "zookeepermirrors.platform.example.com", "zookeeperserviceimports.platform.example.com"]
#: examples/acl.yaml's identity: zkop must authenticate as it to manage the znode once its ACL is on.
OPS_CREDENTIALS = "ops:ops-password"
FINALIZER = "zookeeperconfigs.platform.example.com/finalizer"


@pytest.fixture(params=minors_under_test(), ids=lambda minor: f"k8s-{minor}")
def cluster(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    """A control plane of this test's own."""
    with ControlPlane(str(request.param)) as plane:
        yield plane


@pytest.fixture
def admin(cluster: ControlPlane) -> Iterator[KubeClient]:
    """An admin client on ``cluster``."""
    with cluster.admin() as client:
        yield client


def examples(root: Path = REPO) -> list[dict[str, Any]]:
    """The ZooKeeperConfigs (and ConfigMaps) of ``root/examples``."""
    return [doc for path in sorted((root / "examples").glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


def configs(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ZooKeeperConfigs among ``objects``."""
    return [o for o in objects if o["kind"] == "ZooKeeperConfig"]


def expected_bytes(obj: dict[str, Any], objects: list[dict[str, Any]]) -> bytes:
    """The bytes a ZooKeeperConfig's znode must hold (``data``, ``stringData`` or a ConfigMap key)."""
    spec = obj["spec"]
    if "stringData" in spec:
        return str(spec["stringData"]).encode()
    if "data" in spec:
        return base64.b64decode(spec["data"])
    ref = spec["dataFrom"]["configMapKeyRef"]
    (source,) = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == ref["name"]]
    return str(source["data"][ref["key"]]).encode()


def converged(kube: KubeClient, zk: KazooClient, zk_base: str, objects: list[dict[str, Any]]) -> None:
    """Wait until every example ZooKeeperConfig is Synced and its znode holds its bytes."""
    for obj in configs(objects):
        name, path = obj["metadata"]["name"], zk_base + obj["spec"]["path"]
        wait_for(lambda n=name: synced(kube, n), message=f"{name} Synced")  # type: ignore[misc]
        assert zk.get(path)[0] == expected_bytes(obj, objects), name


def shell_env(cluster: ControlPlane, env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a command run as a person would: the venv's kubectl first on PATH, the admin's
    kubeconfig, ``env`` over that."""
    return {**os.environ, "KUBECONFIG": str(cluster.kubeconfig),
            "PATH": f"{Path(venv_kubectl()).parent}:{os.environ['PATH']}", **(env or {})}


def documented(cluster: ControlPlane, start: str, *, settled: Callable[[], bool] | None = None) -> None:
    """Run, as written, the command of docs/operations.md's "Uninstall" that begins with ``start`` (with the lines
    it continues onto), in bash with the venv's kubectl on PATH and the admin's kubeconfig; it must exit 0.

    ``settled``: the command's effect that counts, for a ``kubectl delete`` whose own wait is kube-apiserver's to
    end (a deleted CRD goes when its ``customresourcecleanup`` finalizer is dropped, retried with client-go's
    backoff: :func:`install_gone`, and step 3 of the page says so). Once it holds, the command is done even if
    kubectl still waits; it is then stopped. Either must come within ``DOCUMENTED`` seconds."""
    text = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
    section = text[text.index("\n## Uninstall\n"):text.index("\n## Metrics, dashboard and alerts\n")]
    lines = [line.strip() for line in section.splitlines()]  # the steps' blocks are indented under their item
    (first,) = [i for i, line in enumerate(lines) if line.startswith(start)]
    command = [lines[first]]
    while command[-1].rstrip().endswith(("|", "\\")):
        command.append(lines[first + len(command)])
    script = "\n".join(command).split("   # ")[0]
    with tempfile.TemporaryFile() as stderr, subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", script], stdout=subprocess.DEVNULL, stderr=stderr,
            start_new_session=True, env=shell_env(cluster)) as done:
        def finished() -> str | None:
            if done.poll() is not None:
                return "exited"
            return "settled" if settled is not None and settled() else None

        try:
            how = wait_for(finished, timeout=DOCUMENTED, interval=0.2, message=f"{script} done")
        finally:
            if done.poll() is None:
                os.killpg(done.pid, signal.SIGKILL)
                done.wait()
        stderr.seek(0)
        assert how == "settled" or done.returncode == 0, f"{script}\n{stderr.read().decode(errors='replace')}"


DOCUMENTED = 120.0
"""Seconds one documented command (a block's commands, each with its own ``--timeout``) may take."""


def delete_examples_while_zkop_runs(cluster: ControlPlane, kube: KubeClient, zk: KazooClient, zk_base: str,
                                    root: Path = REPO) -> None:
    """Uninstall, step 1: delete every ZooKeeperConfig and wait until each is gone; Delete's znodes go, Orphan's
    stay."""
    objects = examples(root)
    documented(cluster, "kubectl delete zookeeperconfigs --all --all-namespaces")
    wait_for(lambda: not kube.request("GET", "/apis/platform.example.com/v1alpha1/zookeeperconfigs")["items"],
             message="every ZooKeeperConfig gone")
    for obj in configs(objects):
        assert get(kube, obj["metadata"]["name"]) is None
        kept = zk.exists(zk_base + obj["spec"]["path"]) is not None
        assert kept == (obj["spec"].get("deletionPolicy") == "Orphan"), obj["metadata"]["name"]


def nothing_of_zkop_left(kube: KubeClient, *, crd: bool = False) -> None:
    """No object labelled ``app.kubernetes.io/part-of=zkop`` of the kinds the install makes (the CRDs only if
    ``crd``, and then none of them being deleted; else each is gone or released), and zkop-system gone or released
    (:func:`install_gone` says why absence is not waited for)."""
    query = {"labelSelector": "app.kubernetes.io/part-of=zkop"}
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    for path in (f"{rbac}/clusterroles", f"{rbac}/clusterrolebindings"):
        names = [o["metadata"]["name"] for o in kube.request("GET", path, query=query)["items"]]
        assert names == [], (path, names)
    crds = zkop_crds(kube)
    if crd:
        assert [c["metadata"]["name"] for c in crds if "deletionTimestamp" not in c["metadata"]] == CRDS
    else:
        assert [c["metadata"]["name"] for c in crds if not released(kube, c)] == []
    assert namespace_released(kube)


def namespace_gone(kube: KubeClient) -> bool:
    """zkop-system finalized by kube-controller-manager."""
    try:
        kube.request("GET", f"/api/v1/namespaces/{NAMESPACE}")
    except ApiException as err:
        if err.status == 404:
            return True
        raise
    return False


NAMESPACE_GONE = 300.0
"""Seconds a test that installs again in the same plane waits for the deleted zkop-system to be gone (a namespace
being deleted accepts nothing new): kube-controller-manager's namespace controller retries with client-go's
exponential backoff too (see :func:`install_gone`); the wait ends as soon as it is gone."""


def released(kube: KubeClient, crd: dict[str, Any]) -> bool:
    """``crd`` is being deleted and has no instance left: nothing of zkop's (no object, no finalizer) holds it,
    only kube-apiserver's own ``customresourcecleanup`` finalizer, which it drops asynchronously
    (see :func:`install_gone`)."""
    if "deletionTimestamp" not in crd["metadata"]:
        return False
    version = next(v["name"] for v in crd["spec"]["versions"] if v.get("served"))
    try:
        items = kube.request("GET", f"/apis/{crd['spec']['group']}/{version}/{crd['spec']['names']['plural']}")
    except ApiException as err:
        if err.status == 404:
            return True
        if err.status in (429, 503):  # its watch cache starting again: ask again
            return False
        raise
    return not items["items"]


def zkop_crds(kube: KubeClient) -> list[dict[str, Any]]:
    """The CRDs labelled ``app.kubernetes.io/part-of=zkop`` (being deleted or not)."""
    return list(kube.request("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                             query={"labelSelector": "app.kubernetes.io/part-of=zkop"})["items"])


def crds_released(kube: KubeClient) -> bool:
    """Every CRD labelled part-of=zkop gone or :func:`released`."""
    return all(released(kube, crd) for crd in zkop_crds(kube))


def namespace_released(kube: KubeClient) -> bool:
    """zkop-system gone, or being deleted by kube-controller-manager's namespace controller."""
    try:
        namespace = kube.request("GET", f"/api/v1/namespaces/{NAMESPACE}")
    except ApiException as err:
        if err.status == 404:
            return True
        raise
    return "deletionTimestamp" in namespace["metadata"]


def install_gone(cluster: ControlPlane, kube: KubeClient, *, crds: bool = True) -> None:
    """Wait until zkop-system (and, if ``crds``, every CRD labelled part-of=zkop) is gone or released: being
    deleted with nothing of zkop's holding it. On a timeout, fail naming what holds each one.

    Absence itself is kube-apiserver's and kube-controller-manager's to bring, asynchronously and with client-go's
    per-item exponential backoff: apiextensions-apiserver's CRD finalizer lists a CRD's instances through its watch
    cache, and while that cache starts again ("storage is (re)initializing", a 429, reason InstanceDeletionFailed)
    it requeues the CRD, 5 ms, 10 ms, ... minutes later. This suite's CI saw a deleted CRD stay for 60 s, then
    `kubectl delete -k --wait=true --timeout=120s` outlast 120 s, then a CRD outlast a 300 s wait
    (operator-framework/operator-controller issue 1437 reports the same). Each test has a control plane of its own,
    so nothing after it waits for the absence either."""
    def left() -> list[dict[str, Any]]:
        return zkop_crds(kube) if crds else []

    try:
        wait_for(lambda: namespace_released(kube) and (not crds or crds_released(kube)),
                 message="zkop-system and the install's CRDs deleted or released")
    except TimeoutError as err:
        held: dict[str, Any] = {}
        if not namespace_released(kube):
            held[NAMESPACE] = kube.request("GET", f"/api/v1/namespaces/{NAMESPACE}")["metadata"]
        for crd in left():
            if not released(kube, crd):
                held[crd["metadata"]["name"]] = (
                    crd["metadata"].get("deletionTimestamp"),
                    [c for c in (crd.get("status") or {}).get("conditions") or []
                     if c["type"] in ("Terminating", "Established")],
                    kubectl(cluster, "get", crd["metadata"]["name"], "-A", "-o", "name"))
        raise AssertionError(f"{err}: {held}") from None


def kustomize_overlay(directory: Path, zk_hosts: str, base: Path) -> Path:
    """An overlay over ``base`` (a manifests/default) that points zkop at ``zk_hosts``, as README's does."""
    directory.mkdir(parents=True, exist_ok=True)
    overlay = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
               "resources": [os.path.relpath(base, directory)],  # kustomize refuses absolute paths
               "patches": [{"target": {"kind": "ConfigMap", "name": "zkop-config"},
                            "patch": yaml.safe_dump([{"op": "replace", "path": "/data/ZOOKEEPER_HOSTS",
                                                      "value": zk_hosts}])}]}
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(overlay), encoding="utf-8")
    return directory


def start(proc: OperatorProcess) -> OperatorProcess:
    """Start ``proc`` (ready: /readyz answers 200)."""
    return proc.start()


def stopped(proc: OperatorProcess) -> None:
    """Stop ``proc``; it must exit 0 (a graceful shutdown)."""
    code = proc.stop()
    assert code in (None, 0), proc.log_tail()


def test_kubectl_apply_k_install_uninstall(cluster: ControlPlane, admin: KubeClient, zk_server: ZooKeeperServer,
                                           zk_base: str, zk: KazooClient, tmp_path: Path) -> None:
    overlay = kustomize_overlay(tmp_path / "overlay", f"{zk_server.hosts}{zk_base}", REPO / "manifests" / "default")
    kubectl(cluster, "apply", "-k", str(overlay))
    kubectl(cluster, "wait", "--for=condition=Established", f"crd/{CRD}", "--timeout=60s")
    kubectl(cluster, "-n", NAMESPACE, "create", "secret", "generic", "zkop-zookeeper-auth",
            f"--from-literal=credentials={OPS_CREDENTIALS}")
    zkop = start(pod_of_deployment(cluster, tmp_path / "pod"))
    try:
        kubectl(cluster, "apply", "-f", str(REPO / "examples"))
        converged(admin, zk, zk_base, examples())
        delete_examples_while_zkop_runs(cluster, admin, zk, zk_base)
    finally:
        stopped(zkop)
    kubectl(cluster, "delete", "-k", str(overlay), "--wait=false")
    install_gone(cluster, admin)
    nothing_of_zkop_left(admin)


def test_helm_install_uninstall(cluster: ControlPlane, admin: KubeClient, zk_server: ZooKeeperServer, zk_base: str,
                                zk: KazooClient, tmp_path: Path) -> None:
    home = tmp_path / "helm"
    helm(home, "install", "zkop", str(CHART), "--namespace", NAMESPACE, "--create-namespace",
         "--set", f"zookeeper.hosts={zk_server.hosts}{zk_base}".replace(",", "\\,"),
         "--set", f"zookeeper.auth.credentials={OPS_CREDENTIALS}", kubeconfig=cluster.kubeconfig)
    kubectl(cluster, "wait", "--for=condition=Established", f"crd/{CRD}", "--timeout=60s")
    zkop = start(pod_of_deployment(cluster, tmp_path / "pod"))
    try:
        kubectl(cluster, "apply", "-f", str(REPO / "examples"))
        converged(admin, zk, zk_base, examples())
        # A value changed in place: the bridge's RBAC comes, the Deployment's args follow.
        helm(home, "upgrade", "zkop", str(CHART), "--namespace", NAMESPACE, "--reset-then-reuse-values",
             "--set", "serviceBridge.enabled=true", kubeconfig=cluster.kubeconfig)
        deployment = admin.request("GET", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/zkop-controller-manager")
        assert "--service-bridge" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        admin.request("GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/zkop-service-bridge-role")
        delete_examples_while_zkop_runs(cluster, admin, zk, zk_base)
    finally:
        stopped(zkop)
    helm(home, "uninstall", "zkop", "--namespace", NAMESPACE, "--wait", kubeconfig=cluster.kubeconfig)
    admin.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD}")  # kept
    # The same release installed again takes the kept CRD over (its meta.helm.sh annotations name it).
    helm(home, "install", "zkop", str(CHART), "--namespace", NAMESPACE, kubeconfig=cluster.kubeconfig)
    helm(home, "uninstall", "zkop", "--namespace", NAMESPACE, "--wait", kubeconfig=cluster.kubeconfig)
    # helm uninstall leaves the namespace (helm made it with --create-namespace, outside the release) and the
    # CRD (resource-policy keep); both go by hand, as docs/operations.md says.
    kubectl(cluster, "delete", "namespace", NAMESPACE, "--wait=false")
    install_gone(cluster, admin, crds=False)
    nothing_of_zkop_left(admin, crd=True)
    documented(cluster, "kubectl delete crd", settled=lambda: crds_released(admin))
    nothing_of_zkop_left(admin)


def test_helm_tenancy_policy_is_what_zkop_enforces(cluster: ControlPlane, admin: KubeClient, zk_server: ZooKeeperServer,
                                                  zk_base: str, zk: KazooClient, tmp_path: Path) -> None:
    """``tenancy.policy``: zkop, run as the Deployment says (the policy file from the chart's ConfigMap volume,
    Namespaces listed and watched under the chart's RBAC), writes the labelled namespace's object and stalls the
    other's, writing nothing for it."""
    home = tmp_path / "helm"
    label = {"zkop-test.example.com/tenant": "payments"}
    policy = {"tenancy": {"rules": [{"namespaceSelector": {"matchLabels": label},
                                     "pathPrefixes": ["/config/payments"]}]}}
    helm(home, "install", "zkop", str(CHART), "--namespace", NAMESPACE, "--create-namespace",
         "--set", f"zookeeper.hosts={zk_server.hosts}{zk_base}".replace(",", "\\,"),
         "--set-json", f"tenancy.policy={json.dumps(policy)}", kubeconfig=cluster.kubeconfig)
    kubectl(cluster, "wait", "--for=condition=Established", f"crd/{CRD}", "--timeout=60s")
    admin.request("POST", "/api/v1/namespaces", body={"metadata": {"name": "payments", "labels": label}})
    zkop = start(pod_of_deployment(cluster, tmp_path / "pod"))
    try:
        create(admin, zkc("3ds", "/config/payments/3ds", b"required", namespace="payments"))
        create(admin, zkc("squatter", "/config/payments/3ds", b"hijacked"))  # namespace default: not labelled
        wait_for(lambda: synced(admin, "3ds", "payments"), message="the labelled namespace's object Synced")
        stalled = wait_for(lambda: conditions(get(admin, "squatter")).get("Stalled"), message="the other stalled")
        assert (stalled["status"], stalled["reason"]) == ("True", "NamespaceNotAllowed")
        assert zk.get(zk_base + "/config/payments/3ds")[0] == b"required"
        for name, namespace in (("3ds", "payments"), ("squatter", "default")):
            admin.request("DELETE", resource_path(*ZKC, namespace, name))
        wait_for(lambda: get(admin, "3ds", "payments") is None and get(admin, "squatter") is None,
                 message="both deleted")
    finally:
        stopped(zkop)
    helm(home, "uninstall", "zkop", "--namespace", NAMESPACE, "--wait", kubeconfig=cluster.kubeconfig)
    assert not [o for o in admin.request("GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles")["items"]
                if o["metadata"]["name"].startswith("zkop-tenancy")]


def as_written(cluster: ControlPlane, script: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run ``script`` as a person would paste it: bash (``-euo pipefail``) in ``cwd``, the venv's kubectl first on
    PATH, the admin's kubeconfig, ``env`` over that; its stdout (it must exit 0)."""
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, timeout=360,
                          cwd=cwd, env=shell_env(cluster, env), check=False)
    if done.returncode != 0:
        states = kubectl(cluster, "get", "zkc", "-A", "-o",
                         "jsonpath={range .items[*]}{.metadata.name} {.status}\n{end}")
        raise AssertionError(f"{script}\n{done.stderr}\n{states}")
    return done.stdout


#: The commands of CHANGELOG's "Upgrading from 0.1.0" that the test cannot run as written, and why.
NEEDS_A_KUBELET = ("kubectl -n zkop-system rollout status",)
#: kube-prometheus' ServiceAccount, which the CHANGELOG's metrics step binds.
PROMETHEUS = ("monitoring", "prometheus-k8s")


LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/zkop-leader"


def record_before(admin: KubeClient, zk: KazooClient, zk_base: str,
                  objects: list[dict[str, Any]]) -> dict[str, tuple[Any, dict[str, Any]]]:
    """Each ZooKeeperConfig of ``objects`` as stored now, with its znode's stat: what an upgrade must not change."""
    before: dict[str, tuple[Any, dict[str, Any]]] = {}
    for o in configs(objects):
        stored = get(admin, o["metadata"]["name"])
        assert stored is not None
        before[o["metadata"]["name"]] = (zk.exists(zk_base + o["spec"]["path"]), stored)
    return before


def prometheus_accounts(cluster: ControlPlane) -> None:
    """The cluster's Prometheus' ServiceAccount, and one the upgrade grants nothing (the CHANGELOG's metrics step)."""
    kubectl(cluster, "create", "namespace", PROMETHEUS[0])
    for account in (PROMETHEUS[1], "other"):
        kubectl(cluster, "-n", PROMETHEUS[0], "create", "serviceaccount", account)


def assert_new_crd_accepted(admin: KubeClient, before: dict[str, tuple[Any, dict[str, Any]]]) -> None:
    """The new ZooKeeperConfig CRD (with its CEL rules) is established, and every stored object reads back unchanged."""
    crd = admin.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD}")
    assert any("x-kubernetes-validations" in str(v["schema"]) for v in crd["spec"]["versions"])
    assert {c["type"]: c["status"] for c in crd["status"]["conditions"]}["Established"] == "True"
    for name, (_, obj) in before.items():
        assert get(admin, name)["spec"] == obj["spec"]  # type: ignore[index]


def hand_over(cluster: ControlPlane, admin: KubeClient, directory: Path, previous: OperatorProcess) -> OperatorProcess:
    """The CHANGELOG's rollout step without a kubelet: the new Deployment's replica starts as a standby, the old one
    ends and hands the Lease over within a Lease duration (15 s); Prometheus' token may read the new, secure
    /metrics, another may not. The new replica, running."""
    new = start(pod_of_deployment(cluster, directory, pod="zkop-controller-manager-new"))
    old_holder = admin.request("GET", LEASE_PATH)["spec"]["holderIdentity"]
    assert old_holder
    handed = time.monotonic()
    stopped(previous)
    wait_for(lambda: admin.request("GET", LEASE_PATH)["spec"].get("holderIdentity") not in (None, "", old_holder),
             timeout=15, interval=0.1, message="the new replica leads within a Lease duration")
    print(f"Lease handed over in {time.monotonic() - handed:.2f} s")
    assert new.secure_metrics
    for account, status in ((PROMETHEUS[1], 200), ("other", 403)):
        token = kubectl(cluster, "-n", PROMETHEUS[0], "create", "token", account).strip()
        assert new.scrape(token)[0] == status, account
    return new


def assert_nothing_rewritten(admin: KubeClient, zk: KazooClient, zk_base: str,
                             before: dict[str, tuple[Any, dict[str, Any]]]) -> None:
    """Every object re-observed by the new zkop: its znode not rewritten, one status write (``znodeVersion``,
    ``lastSyncedTime``), its conditions kept."""
    for name, (stat, obj) in before.items():
        after: dict[str, Any] = wait_for(
            lambda n=name: (o if (o := synced(admin, n)) and "znodeVersion" in o["status"] else None),  # type: ignore[misc]
            timeout=EVENTUALLY, message=f"{name} re-observed by the new zkop")
        znode = zk.exists(zk_base + obj["spec"]["path"])
        assert (znode.mzxid, znode.version) == (stat.mzxid, stat.version), f"{name}: znode rewritten"
        assert after["status"]["znodeVersion"] == stat.version
        written = ("znodeVersion", "lastSyncedTime")
        kept = {k: v for k, v in after["status"].items() if k not in written}
        assert kept == {k: v for k, v in obj["status"].items() if k not in written}, f"{name}: status changed"
        assert after["status"]["lastSyncedTime"] >= obj["status"]["lastSyncedTime"]


def nothing_listed(out: str) -> None:
    """The CHANGELOG's listing steps: none of this installation's objects needs moving or an ACL."""
    assert out == "", out


def follow_upgrade_steps(cluster: ControlPlane, install: str, work: Path, *, apply: Callable[[], None],
                         applied: Callable[[], None], rolling_update: Callable[[], None],
                         still_ready: Callable[[], None]) -> None:
    """CHANGELOG.md's "Upgrading from 0.1.0", step by step as written for ``install`` (``kustomize``, ``Flux``): step
    5's action is ``apply`` and its check ``applied``; the rollout (which needs a kubelet) is ``rolling_update``; step
    7's check is ``still_ready``; each ``sh`` block for ``install`` runs in bash in ``work``. A step the test does not
    know fails it."""
    known: dict[str, tuple[Callable[[], None] | None, Callable[[str], None] | None]] = {
        "Move ZooKeeperConfigs off the paths 0.2.0 reserves": (None, nothing_listed),
        "Give every other reader of a Secret's value an identity": (None, nothing_listed),
        "Change scripts that call `zkop export -o DIR` or `--output-dir DIR`": (None, None),  # no scripts here
        "Let Prometheus scrape the now-secure `/metrics`": (None, None),  # checked once the new replica runs
        "Apply 0.2.0": (apply, lambda _out: applied()),
        "Wait for the rolling update": (None, None),
        "Check every ZooKeeperConfig is still Ready": (None, lambda _out: still_ready()),
    }
    steps = upgrade_steps("0.1.0")
    assert [s.title for s in steps] == list(known), "CHANGELOG's steps changed: teach the test the new ones"
    for step in steps:
        action, check = known[step.title]
        if action is not None:
            action()
        out = ""
        for command in for_install(step.commands, install):
            if command.startswith(NEEDS_A_KUBELET):
                rolling_update()
            else:
                out += as_written(cluster, command, work)
        if check is not None:
            check(out)


def test_upgrade_from_the_previous_release_follows_the_changelog(cluster: ControlPlane, admin: KubeClient,
                                                                 zk_server: ZooKeeperServer, zk_base: str,
                                                                 zk: KazooClient, tmp_path: Path) -> None:
    """0.1.0 (docs/release.md's commit) installed with its examples converged, then CHANGELOG.md's "Upgrading from
    0.1.0" run step by step as written: each ``sh`` block in bash, each action by the test, the rollout (which needs
    a kubelet) by a new replica started beside the old one; a step the test does not know fails it."""
    old = release_tree("0.1.0", tmp_path / "0.1.0", ("manifests", "examples", "zkop"))
    hosts = f"{zk_server.hosts}{zk_base}"
    work = tmp_path / "work"
    overlay = kustomize_overlay(work / "my-zkop", hosts, old / "manifests" / "default")
    kubectl(cluster, "apply", "-k", str(overlay))
    kubectl(cluster, "wait", "--for=condition=Established", f"crd/{CRD}", "--timeout=60s")
    kubectl(cluster, "-n", NAMESPACE, "create", "secret", "generic", "zkop-zookeeper-auth",
            f"--from-literal=credentials={OPS_CREDENTIALS}")
    prometheus_accounts(cluster)
    previous = start(pod_of_deployment(cluster, tmp_path / "old-pod", pod="zkop-controller-manager-old",
                                       python_path=old))
    new: OperatorProcess | None = None
    try:
        assert f"{old}/zkop/" in subprocess.run(
            [".venv/bin/python", "-c", "import zkop; print(zkop.__file__)"], cwd=REPO, capture_output=True, text=True,
            env={**previous.env, "PYTHONSAFEPATH": "1"}, check=True, timeout=60).stdout
        objects = examples(old)
        kubectl(cluster, "apply", "-f", str(old / "examples"))
        converged(admin, zk, zk_base, objects)
        # 0.1.0's CRD had no bound on spec.acl; this one allows 256 entries. An object stored before keeps working.
        legacy = {"apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperConfig",
                  "metadata": {"name": "legacy-acl", "namespace": "default"},
                  "spec": {"path": "/app/legacy", "stringData": "x", "deletionPolicy": "Orphan",
                           "acl": [{"scheme": "world", "id": "anyone",
                                    "permissions": ["read", "write", "create", "delete", "admin"]}] * 257}}
        kubectl(cluster, "apply", "-f", "-", input=yaml.safe_dump(legacy))
        before = record_before(admin, zk, zk_base, objects)

        def apply_the_release() -> None:
            """Step 5's action: the checkout at the release (this tree) and its tag in the overlay."""
            kustomize_overlay(overlay, hosts, REPO / "manifests" / "default")

        def new_crd_accepted() -> None:
            assert_new_crd_accepted(admin, before)
            # CRD validation ratcheting: the stored object beyond the new bound may still be changed where it is
            # not beyond it (a label), while a new object like it is refused.
            kubectl(cluster, "label", "zkc", "legacy-acl", "team=payments")
            like_it = {**legacy, "metadata": {"name": "new-acl", "namespace": "default"}}
            refused = subprocess.run([venv_kubectl(), "--kubeconfig", str(cluster.kubeconfig), "create", "-f", "-"],
                                     input=yaml.safe_dump(like_it), capture_output=True, text=True, timeout=60,
                                     check=False)
            assert refused.returncode != 0 and "spec.acl: Too many: 257: must have at most 256 items" in \
                refused.stderr, refused.stderr

        def rolling_update() -> None:
            nonlocal new
            new = hand_over(cluster, admin, tmp_path / "new-pod", previous)

        follow_upgrade_steps(cluster, "kustomize", work, apply=apply_the_release, applied=new_crd_accepted,
                             rolling_update=rolling_update,
                             still_ready=lambda: assert_nothing_rewritten(admin, zk, zk_base, before))
        assert new is not None, "the steps never rolled the Deployment"
        delete_examples_while_zkop_runs(cluster, admin, zk, zk_base, old)
    finally:
        stopped(previous)
        if new is not None:
            stopped(new)


def flux_files(root: Path) -> dict[str, str]:
    """What a platform repository holds for zkop at ``root`` (a release's tree): its manifests, and its examples (but
    acl.yaml: no auth Secret here) under ``zookeeper/``."""
    files = {str(path.relative_to(root)): path.read_text(encoding="utf-8")
             for path in sorted((root / "manifests").rglob("*.yaml"))}
    files.update({f"zookeeper/{path.name}": path.read_text(encoding="utf-8")
                  for path in sorted((root / "examples").glob("*.yaml")) if path.name != "acl.yaml"})
    return files


def flux_zkop_kustomization(root: Path, hosts: str) -> dict[str, Any]:
    """``root``'s examples/flux/zkop.yaml as Flux's Kustomization of zkop, pointed at ``hosts`` (``wait: false``:
    without a kubelet the Deployment never rolls out)."""
    spec = yaml.safe_load((root / "examples" / "flux" / "zkop.yaml").read_text(encoding="utf-8"))["spec"]
    (patch,) = spec["patches"]
    patch["patch"] = patch["patch"].replace(yaml.safe_load(patch["patch"])[0]["value"], hosts)
    extra = {k: spec[k] for k in ("components", "images") if k in spec}
    return Flux.kustomization("zkop", "platform", spec["path"], NAMESPACE, wait=False, patches=spec["patches"], **extra)


def test_flux_upgrade_from_the_previous_release_follows_the_changelog(cluster: ControlPlane, admin: KubeClient,
                                                                      zk_server: ZooKeeperServer, zk_base: str,
                                                                      zk: KazooClient, tmp_path: Path) -> None:
    """0.1.0 installed by Flux's own controllers from a platform repository (its manifests and examples/flux/zkop.yaml),
    its examples applied by a second Kustomization and converged; then CHANGELOG.md's "Upgrading from 0.1.0" run as a
    Flux user follows it: the blocks for Flux as written, step 5's action a commit of the release's manifests and the
    Kustomization's image tag (Flux applies them), the rollout by a new replica beside the old one."""
    old = release_tree("0.1.0", tmp_path / "0.1.0", ("manifests", "examples", "zkop"))
    hosts = f"{zk_server.hosts}{zk_base}"
    work = tmp_path / "work"
    work.mkdir()
    prometheus_accounts(cluster)
    with GitServer() as git_server, Flux(cluster) as flux:
        repo = git_server.create("platform")
        repo.commit("zkop 0.1.0 and its ZooKeeperConfigs", flux_files(old))
        Flux.create(admin, Flux.git_repository("platform", repo.url))
        Flux.create(admin, flux_zkop_kustomization(old, hosts))

        def applied(sha: str) -> bool:
            ks = Flux.get(admin, KUSTOMIZATION, "zkop") or {}
            return (ks.get("status", {}).get("lastAppliedRevision") == repo.revision(sha)
                    and condition(ks).get("status") == "True")

        try:
            wait_for(lambda: condition(Flux.get(admin, KUSTOMIZATION, "zkop")).get("status") == "True",
                     message="zkop 0.1.0's Kustomization Ready")
        except TimeoutError as err:
            raise AssertionError(f"{err}\n{flux.log_tail()}") from None
        previous = start(pod_of_deployment(cluster, tmp_path / "old-pod", pod="zkop-controller-manager-old",
                                           python_path=old))
        new: OperatorProcess | None = None
        try:
            Flux.create(admin, Flux.kustomization("zookeeper", "platform", "./zookeeper", "default",
                                                  dependsOn=[{"name": "zkop"}]))
            wait_for(lambda: condition(Flux.get(admin, KUSTOMIZATION, "zookeeper")).get("status") == "True",
                     message="the examples' Kustomization Ready (0.1.0 reported every object Current)")
            objects = [o for o in examples(old) if o["metadata"]["name"] != "payments-routing-rules"]
            converged(admin, zk, zk_base, objects)
            before = record_before(admin, zk, zk_base, objects)

            def commit_the_release() -> None:
                """Step 5's action with Flux: the release's manifests committed, the Kustomization's image tag set;
                Flux applies them."""
                files: dict[str, str | None] = dict.fromkeys(
                    (name for name in flux_files(old) if name.startswith("manifests/")), None)
                files.update({k: v for k, v in flux_files(REPO).items() if k.startswith("manifests/")})
                sha = repo.commit("zkop 0.2.0", files)
                body = flux_zkop_kustomization(REPO, hosts)
                live = Flux.get(admin, KUSTOMIZATION, "zkop")
                assert live is not None
                admin.request("PUT", resource_path(*KUSTOMIZATION, "flux-system", "zkop"),
                              body={**body, "metadata": {**body["metadata"],
                                                         "resourceVersion": live["metadata"]["resourceVersion"]}})
                Flux.reconcile(admin, GITREPOSITORY, "platform")
                try:
                    wait_for(lambda: applied(sha), message="the release applied by Flux")
                except TimeoutError as err:
                    raise AssertionError(f"{err}\n{flux.log_tail()}") from None

            def rolling_update() -> None:
                nonlocal new
                new = hand_over(cluster, admin, tmp_path / "new-pod", previous)

            follow_upgrade_steps(cluster, "Flux", work, apply=commit_the_release,
                                 applied=lambda: assert_new_crd_accepted(admin, before), rolling_update=rolling_update,
                                 still_ready=lambda: assert_nothing_rewritten(admin, zk, zk_base, before))
            assert new is not None, "the steps never rolled the Deployment"
        finally:
            stopped(previous)
            if new is not None:
                stopped(new)
            for name in ("zookeeper", "zkop"):
                Flux.delete(admin, KUSTOMIZATION, name)
            Flux.delete(admin, GITREPOSITORY, "platform")


def test_deleting_the_install_before_its_objects_leaves_them_terminating_until_finalizers_go(
        cluster: ControlPlane, admin: KubeClient, zk_server: ZooKeeperServer, zk_base: str, zk: KazooClient,
        tmp_path: Path) -> None:
    overlay = kustomize_overlay(tmp_path / "overlay", f"{zk_server.hosts}{zk_base}", REPO / "manifests" / "default")
    kubectl(cluster, "apply", "-k", str(overlay))
    kubectl(cluster, "wait", "--for=condition=Established", f"crd/{CRD}", "--timeout=60s")
    zkop = start(pod_of_deployment(cluster, tmp_path / "pod"))
    objects = [o for o in examples() if o["metadata"]["name"] != "payments-routing-rules"]  # no auth here
    for obj in objects:
        kubectl(cluster, "apply", "-f", "-", input=yaml.safe_dump(obj))
    try:
        converged(admin, zk, zk_base, objects)
    finally:
        stopped(zkop)  # the Deployment's Pods end first: its namespace is deleted with the install
    kubectl(cluster, "delete", "-k", str(overlay), "--wait=false")

    def stuck() -> bool:
        crd = admin.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD}")
        return all((get(admin, o["metadata"]["name"]) or {}).get("metadata", {}).get("deletionTimestamp")
                   for o in configs(objects)) and "deletionTimestamp" in crd["metadata"]

    wait_for(stuck, message="CRD and objects terminating")
    for obj in configs(objects):
        assert FINALIZER in get(admin, obj["metadata"]["name"])["metadata"]["finalizers"]  # type: ignore[index]
    # The way out docs/operations.md gives: remove the finalizers; the znodes stay (zkop never saw the deletion).
    documented(cluster, "kubectl get zkc -A -o jsonpath=")
    # Every CRD the install made, not only ZooKeeperConfig's: kube-apiserver removes a deleted CRD only after its
    # customresourcecleanup.apiextensions.k8s.io finalizer ran (asynchronously, with backoff: see install_gone), so the
    # ZooKeeperEnsemble CRD may still be terminating when ZooKeeperConfig's is gone.
    install_gone(cluster, admin)
    nothing_of_zkop_left(admin)
    for obj in configs(objects):
        assert zk.get(zk_base + obj["spec"]["path"])[0] == expected_bytes(obj, objects)


@contextlib.contextmanager
def flux_install(cluster: ControlPlane, admin: KubeClient, hosts: str, tmp_path: Path
                 ) -> Iterator[tuple[OperatorProcess, list[dict[str, Any]]]]:
    """Flux's own controllers on ``cluster`` install zkop from Git with examples/flux/zkop.yaml (ZooKeeper at
    ``hosts``) and the examples (but acl.yaml: no auth Secret here) with a Kustomization that ``dependsOn`` it;
    yields zkop, run as the Deployment says, and the examples, converged. Flux's objects are gone afterwards."""
    files = {str(path.relative_to(REPO)): path.read_text(encoding="utf-8")
             for path in sorted((REPO / "manifests").rglob("*.yaml"))}
    files.update({f"zookeeper/{path.name}": path.read_text(encoding="utf-8")
                  for path in sorted((REPO / "examples").glob("*.yaml")) if path.name != "acl.yaml"})
    objects = [o for o in examples() if o["metadata"]["name"] != "payments-routing-rules"]
    zkop_ks: dict[str, Any] = yaml.safe_load((REPO / "examples" / "flux" / "zkop.yaml").read_text(encoding="utf-8"))
    spec = zkop_ks["spec"]
    (patch,) = spec["patches"]
    patch["patch"] = patch["patch"].replace(yaml.safe_load(patch["patch"])[0]["value"], hosts)
    with GitServer() as git_server, Flux(cluster) as flux:
        repo = git_server.create("platform")
        repo.commit("zkop and its ZooKeeperConfigs", files)
        Flux.create(admin, Flux.git_repository("platform", repo.url))
        # wait: false where the example says true: without a kubelet the Deployment never rolls out.
        Flux.create(admin, Flux.kustomization("zkop", "platform", spec["path"], NAMESPACE, wait=False,
                                              components=spec["components"], images=spec["images"],
                                              patches=spec["patches"]))
        try:
            wait_for(lambda: condition(Flux.get(admin, KUSTOMIZATION, "zkop")).get("status") == "True",
                     message="zkop's Kustomization Ready")
        except TimeoutError as err:
            raise AssertionError(f"{err}\n{flux.log_tail()}") from None
        deployment = admin.request("GET", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/zkop-controller-manager")
        assert "--service-bridge" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        zkop = start(pod_of_deployment(cluster, tmp_path / "pod"))
        try:
            Flux.create(admin, Flux.kustomization("zookeeper", "platform", "./zookeeper", "default",
                                                  dependsOn=[{"name": "zkop"}]))
            wait_for(lambda: condition(Flux.get(admin, KUSTOMIZATION, "zookeeper")).get("status") == "True",
                     message="the examples' Kustomization Ready (zkop reported every object Current)")
            yield zkop, objects
        finally:
            stopped(zkop)
            for name in ("zookeeper", "zkop"):
                Flux.delete(admin, KUSTOMIZATION, name)
                wait_for(lambda n=name: Flux.get(admin, KUSTOMIZATION, n) is None,  # type: ignore[misc]
                         message=f"Kustomization {name} gone")
            Flux.delete(admin, GITREPOSITORY, "platform")


def test_flux_installs_zkop_from_git_and_prunes_it(cluster: ControlPlane, admin: KubeClient,
                                                   zk_server: ZooKeeperServer, zk_base: str, zk: KazooClient,
                                                   tmp_path: Path) -> None:
    """Removed in the documented order: the examples' Kustomization first (its prune deletes the objects, zkop
    the znodes), then zkop's (its prune deletes the install but the CRD, which is deleted by hand)."""
    with flux_install(cluster, admin, f"{zk_server.hosts}{zk_base}", tmp_path) as (_zkop, objects):
        converged(admin, zk, zk_base, objects)
        Flux.delete(admin, KUSTOMIZATION, "zookeeper")
        wait_for(lambda: Flux.get(admin, KUSTOMIZATION, "zookeeper") is None, message="examples pruned")
        wait_for(lambda: not admin.request("GET", "/apis/platform.example.com/v1alpha1/zookeeperconfigs")["items"],
                 message="every ZooKeeperConfig gone")
        for obj in configs(objects):
            kept = zk.exists(zk_base + obj["spec"]["path"]) is not None
            assert kept == (obj["spec"].get("deletionPolicy") == "Orphan"), obj["metadata"]["name"]
    install_gone(cluster, admin, crds=False)  # zkop-system pruned
    nothing_of_zkop_left(admin, crd=True)  # kustomize.toolkit.fluxcd.io/prune: disabled
    documented(cluster, "kubectl delete crd", settled=lambda: crds_released(admin))
    nothing_of_zkop_left(admin)


def test_flux_prune_of_the_install_first_leaves_the_objects_in_place(cluster: ControlPlane, admin: KubeClient,
                                                                     zk_server: ZooKeeperServer, zk_base: str,
                                                                     zk: KazooClient, tmp_path: Path) -> None:
    """The unsafe order made safe: zkop's Kustomization deleted while the objects exist prunes the install but the
    CRD, so no object is left terminating; a new install takes them over, and the documented order then works."""
    hosts = f"{zk_server.hosts}{zk_base}"
    overlay = kustomize_overlay(tmp_path / "overlay", hosts, REPO / "manifests" / "default")
    with flux_install(cluster, admin, hosts, tmp_path) as (zkop, objects):
        converged(admin, zk, zk_base, objects)
        zkop.stop()  # its Pods end with the pruned Deployment
        Flux.delete(admin, KUSTOMIZATION, "zkop")
        # installed again below, in a namespace that must be gone first
        wait_for(lambda: namespace_gone(admin), timeout=NAMESPACE_GONE, message="zkop-system pruned")
        nothing_of_zkop_left(admin, crd=True)
        for obj in configs(objects):
            stored = get(admin, obj["metadata"]["name"])
            assert stored is not None and "deletionTimestamp" not in stored["metadata"], obj["metadata"]["name"]
            assert FINALIZER in stored["metadata"]["finalizers"]
            assert zk.get(zk_base + obj["spec"]["path"])[0] == expected_bytes(obj, objects)
        # Installed again (kubectl apply -k this time), zkop takes them over; the documented order then works.
        kubectl(cluster, "apply", "-k", str(overlay))
        again = start(pod_of_deployment(cluster, tmp_path / "pod-again"))
        try:
            converged(admin, zk, zk_base, objects)
            Flux.delete(admin, KUSTOMIZATION, "zookeeper")
            wait_for(lambda: not admin.request("GET", "/apis/platform.example.com/v1alpha1/zookeeperconfigs")["items"],
                     message="every ZooKeeperConfig pruned, its znode deleted by zkop")
            for obj in configs(objects):
                kept = zk.exists(zk_base + obj["spec"]["path"]) is not None
                assert kept == (obj["spec"].get("deletionPolicy") == "Orphan"), obj["metadata"]["name"]
        finally:
            stopped(again)
    kubectl(cluster, "delete", "-k", str(overlay), "--wait=false")
    install_gone(cluster, admin)
    nothing_of_zkop_left(admin)


def zkcli_on_path(directory: Path) -> Path:
    """A directory holding ``zkCli.sh``: ZooKeeper's own CLI (``org.apache.zookeeper.ZooKeeperMain``) from the
    suite's ZooKeeper release, as its distribution's ``bin/zkCli.sh`` runs it."""
    installation = find_zookeeper()
    directory.mkdir()
    script = directory / "zkCli.sh"
    script.write_text(f"#!/bin/sh\nexec {installation.java} -XX:-UsePerfData -cp '{':'.join(installation.classpath)}' "
                      "org.apache.zookeeper.ZooKeeperMain \"$@\"\n", encoding="utf-8")
    script.chmod(0o755)
    return directory


def test_uninstall_everything_as_documented(cluster: ControlPlane, admin: KubeClient, zk_server: ZooKeeperServer,
                                            zk_base: str, zk: KazooClient, second_ensemble: tuple[KazooClient, str],
                                            tmp_path: Path) -> None:
    """Every component enabled (ZooKeeperConfigs on two ensembles, ZooKeeperMirrors, the service bridge, the
    importer, a tenancy policy), then docs/operations.md's "Uninstall" steps run as written (read from the doc, the
    kustomize blocks): nothing of zkop left, nothing terminating, each znode as its deletionPolicy says, the kept
    mirror's ConfigMap kept (unowned) and the other's deleted, the bridge's records and claims gone, the imported
    Service and its EndpointSlices gone."""
    team, team_hosts = second_ensemble
    hosts = f"{zk_server.hosts}{zk_base}"
    work = tmp_path / "work"
    overlay = kustomize_overlay(work / "my-zkop", hosts, REPO / "manifests" / "default")
    kustomization = yaml.safe_load((overlay / "kustomization.yaml").read_text(encoding="utf-8"))
    kustomization["components"] = [os.path.relpath(REPO / "manifests" / "components" / c, overlay) for c in
                                   ("service-bridge", "service-import", "zookeeper-mirror", "zookeeper-ensembles",
                                    "tenancy")]
    policy = {"tenancy": {"rules": [{"namespaces": ["default"], "pathPrefixes": ["/app", "/legacy"]}]}}
    (overlay / "policy.yaml").write_text(yaml.safe_dump(policy), encoding="utf-8")
    kustomization["configMapGenerator"] = [{"name": "zkop-tenancy-policy", "namespace": NAMESPACE,
                                           "files": ["policy.yaml"], "options": {"disableNameSuffixHash": True}}]
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization), encoding="utf-8")
    kubectl(cluster, "apply", "-k", str(overlay))
    for crd in CRDS:
        kubectl(cluster, "wait", "--for=condition=Established", f"crd/{crd}", "--timeout=60s")

    with connected_client(hosts) as chrooted:  # what legacy applications and people wrote in ZooKeeper
        for key, value in (("orders/db/url", b"jdbc:postgresql://db:5432/orders"), ("scratch/x", b"1")):
            chrooted.create(f"/legacy/{key}", value, makepath=True)
        register(chrooted, "legacy-api", "i1", "192.0.2.10", ephemeral=False)
    zkop = start(pod_of_deployment(cluster, tmp_path / "pod"))
    try:
        assert {"--service-bridge", "--import-services", "--zookeeper-mirrors", "--zookeeper-ensembles"} <= \
            set(zkop.args) and any(a.startswith("--tenancy-policy-file=") for a in zkop.args)
        kubectl(cluster, "apply", "-f", "-", input=yaml.safe_dump(ensemble("team", team_hosts, chroot="/team")))
        objects = {"on-default": ("default", None), "kept-on-default": ("Orphan", None),
                   "on-team": ("default", "team"), "kept-on-team": ("Orphan", "team")}
        for name, (policy_name, ensemble_name) in objects.items():
            spec: dict[str, Any] = {"stringData": name}
            if policy_name == "Orphan":
                spec["deletionPolicy"] = "Orphan"
            if ensemble_name:
                spec["ensembleRef"] = {"name": ensemble_name}
            create(admin, zkc(name, f"/app/{name}", **spec))
        (orders,) = [d for d in yaml.safe_load_all((REPO / "examples/workload-config/mirror.yaml").read_text(
            encoding="utf-8")) if d and d["kind"] == "ZooKeeperMirror"]
        scratch = {**orders, "metadata": {"name": "scratch", "namespace": "default"},
                   "spec": {"path": "/legacy/scratch", "recursive": True, "configMap": "scratch-config"}}
        for mirror in (orders, scratch):
            kubectl(cluster, "apply", "-f", "-", input=yaml.safe_dump(mirror))
        admin.request("POST", "/api/v1/namespaces/default/services",
                      body={"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}})

        for name in objects:
            wait_for(lambda n=name: synced(admin, n), message=f"{name} Synced")  # type: ignore[misc]
        for config_map in ("orders-config", "scratch-config"):
            wait_for(lambda c=config_map: (configmap(admin, c) or {}).get("data"),  # type: ignore[misc]
                     message=f"{config_map} mirrored")
        record, claim = "/kubernetes/services/default-web", "/zkop/owners/kubernetes/services/default-web"
        wait_for(lambda: zk.exists(zk_base + record) and zk.exists(zk_base + claim), message="web published")
        wait_for(lambda: get_service(admin, "legacy-api", "default"), message="legacy-api imported")
        wait_for(lambda: slices(admin, "legacy-api"), message="legacy-api's EndpointSlices")

        steps = numbered_steps(REPO / "docs" / "operations.md", "## Uninstall")
        env = {"ZOOKEEPER_HOSTS": hosts,
               "PATH": f"{zkcli_on_path(tmp_path / 'zk-bin')}:{Path(venv_kubectl()).parent}:{os.environ['PATH']}"}
        known = ["Keep the ConfigMaps of the ZooKeeperMirrors that workloads still mount",
                 "Delete zkop's objects while zkop runs", "Remove zkop", "Delete the Services the importer made",
                 "Delete the service bridge's records and their claims from ZooKeeper", "Check nothing is left"]
        assert [s.title for s in steps] == known, "the documented uninstall changed: teach the test the new steps"
        out = ""
        for step in steps:
            if step.title == "Remove zkop":
                stopped(zkop)  # its Pods end with the Deployment
            for command in for_install(step.commands, "kustomize"):
                out = as_written(cluster, command, work, env=env)
            if step.title.startswith("Delete zkop's objects"):  # each znode as its deletionPolicy says
                for name, (policy_name, ensemble_name) in objects.items():
                    on = team if ensemble_name else zk
                    path = f"/team/app/{name}" if ensemble_name else f"{zk_base}/app/{name}"
                    assert (on.exists(path) is not None) == (policy_name == "Orphan"), name
        assert out == "", out  # the last step's check printed nothing
    finally:
        stopped(zkop)

    install_gone(cluster, admin)
    nothing_of_zkop_left(admin)
    assert not [n["metadata"]["name"] for n in admin.request("GET", "/api/v1/namespaces")["items"]
                if n["metadata"].get("deletionTimestamp") and n["metadata"]["name"] != NAMESPACE], \
        "a namespace is stuck terminating"  # zkop-system: released, judged by install_gone
    kept = configmap(admin, "orders-config")
    assert kept is not None and not kept["metadata"].get("ownerReferences")
    assert kept["data"] == {"db.url": "jdbc:postgresql://db:5432/orders"}
    wait_for(lambda: configmap(admin, "scratch-config") is None, message="the deleted mirror's ConfigMap collected")
    assert zk.exists(zk_base + "/kubernetes/services") is None
    assert zk.exists(zk_base + "/zkop/owners/kubernetes/services") is None
    assert get_service(admin, "legacy-api", "default") is None
    wait_for(lambda: not slices(admin, "legacy-api"), message="the imported Service's EndpointSlices collected")
    assert zk.exists(zk_base + "/services/legacy-api/i1") is not None  # what the legacy application registered


def configmap(kube: KubeClient, name: str, namespace: str = "default") -> dict[str, Any] | None:
    """The ConfigMap, ``None`` if absent."""
    try:
        return kube.request("GET", f"/api/v1/namespaces/{namespace}/configmaps/{name}")
    except ApiException as err:
        if err.status == 404:
            return None
        raise


def slices(kube: KubeClient, service: str, namespace: str = "default") -> list[dict[str, Any]]:
    """The EndpointSlices of ``namespace/service``."""
    return list(kube.request("GET", f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices",
                             query={"labelSelector": f"kubernetes.io/service-name={service}"})["items"])


def test_helm_upgrade_from_the_newest_release_with_a_chart_and_rollback(
        cluster: ControlPlane, admin: KubeClient, zk_server: ZooKeeperServer, zk_base: str, zk: KazooClient,
        tmp_path: Path) -> None:
    """The chart of the newest release that had one (docs/release.md's table: its commit's tree, or this tree's while
    it is pending) installed with the values in a file, then upgraded to this tree's chart the documented way
    (``--reset-then-reuse-values``; a renamed value fails loudly and changes nothing), then rolled back with
    ``helm rollback`` with an object made after the upgrade in place: no znode rewritten, every object Ready."""
    previous = newest_release_with("charts/zkop")
    assert previous is not None, "docs/release.md names no release with a chart"
    old = release_tree(previous.version, tmp_path / previous.version, ("charts", "manifests", "zkop"))
    home, work = tmp_path / "helm", tmp_path / "work"
    work.mkdir()
    values = work / "zkop-values.yaml"
    values.write_text(yaml.safe_dump({"zookeeper": {"hosts": f"{zk_server.hosts}{zk_base}",
                                                    "auth": {"credentials": OPS_CREDENTIALS}}}), encoding="utf-8")
    helm(home, "install", "zkop", str(old / "charts" / "zkop"), "-n", NAMESPACE, "--create-namespace",
         "-f", str(values), kubeconfig=cluster.kubeconfig)
    kubectl(cluster, "wait", "--for=condition=Established", f"crd/{CRD}", "--timeout=60s")
    running = start(pod_of_deployment(cluster, tmp_path / "pod-1", pod="zkop-1", python_path=old))
    try:
        objects = examples()
        kubectl(cluster, "apply", "-f", str(REPO / "examples"))
        converged(admin, zk, zk_base, objects)

        def snapshot() -> dict[str, tuple[tuple[int, int], dict[str, Any]]]:
            found = {}
            for o in [*configs(objects), zkc("after-upgrade", "/app/after-upgrade")]:
                name = o["metadata"]["name"]
                stored = get(admin, name)
                if stored is not None:
                    stat = zk.exists(zk_base + o["spec"]["path"])
                    found[name] = ((stat.mzxid, stat.version), conditions(stored))
            return found

        def roll(to: Path | None, pod: str) -> None:
            """The Deployment's rolling update: a replica of ``to``'s zkop (``None``: this tree's) takes over."""
            nonlocal running
            new = start(pod_of_deployment(cluster, tmp_path / pod, pod=pod, python_path=to))
            stopped(running)
            running = new

        def revisions() -> int:
            return len(json.loads(helm(home, "history", "zkop", "-n", NAMESPACE, "-o", "json",
                                       kubeconfig=cluster.kubeconfig)))

        before = snapshot()
        with pytest.raises(HelmError) as refused:  # a renamed value fails the upgrade, naming it
            helm(home, "upgrade", "zkop", str(CHART), "-n", NAMESPACE, "--reset-then-reuse-values",
                 "--set", "serviceBridge.enable=true", kubeconfig=cluster.kubeconfig)
        assert "additional properties 'enable' not allowed" in str(refused.value)
        assert revisions() == 1
        helm(home, "upgrade", "zkop", str(CHART), "-n", NAMESPACE, "--reset-then-reuse-values",
             kubeconfig=cluster.kubeconfig)
        assert revisions() == 2
        deployment = admin.request("GET", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/zkop-controller-manager")
        assert deployment["spec"]["template"]["spec"]["containers"][0]["image"].endswith(":" + zkop_version())
        roll(None, "zkop-2")
        wait_for(lambda: snapshot() == before, timeout=EVENTUALLY, message="nothing rewritten by the upgrade")
        create(admin, zkc("after-upgrade", "/app/after-upgrade", b"new"))
        wait_for(lambda: synced(admin, "after-upgrade"), message="an object made after the upgrade Synced")
        with_new = snapshot()

        helm(home, "rollback", "zkop", "1", "-n", NAMESPACE, kubeconfig=cluster.kubeconfig)  # no --wait: no kubelet
        assert revisions() == 3
        roll(old, "zkop-3")
        for name in with_new:
            wait_for(lambda n=name: synced(admin, n), message=f"{name} Synced after the rollback")  # type: ignore[misc]
        assert snapshot() == with_new, "the rollback rewrote a znode or changed a status"
        documented(cluster, "kubectl delete zookeeperconfigs --all --all-namespaces")
    finally:
        stopped(running)
    helm(home, "uninstall", "zkop", "-n", NAMESPACE, "--wait", kubeconfig=cluster.kubeconfig)


def zkop_version() -> str:
    """This tree's version (``pyproject.toml``)."""
    return str(tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"])
