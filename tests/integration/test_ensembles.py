"""ZooKeeperEnsembles (``zkop run --zookeeper-ensembles``, docs/operations.md "Several ensembles"): objects
routed to their ensemble, one ensemble down while the others converge, credentials rotated in a Secret,
and an ensemble and its objects deleted together in every order. Real ZooKeeper servers (two or three),
``zkop run`` as its own process on the real control plane: zkop's ServiceAccount under the install's roles and the
``manifests/components/zookeeper-ensembles`` RBAC, ``--namespace`` the test's own. ZooKeeperEnsembles are
cluster-scoped and their Secrets live in ``zkop-system``: each test names its own after its namespace and
deletes them afterwards. What zkop asked for is read back from kube-apiserver's audit log."""

from __future__ import annotations

import base64
import signal
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import make_acl, make_digest_acl_credential
from prometheus_client.parser import text_string_to_metric_families
from zkop_testing.audit import requests, settled
from zkop_testing.controlplane import REPO, ControlPlane
from zkop_testing.ensembles import (
    ENSEMBLE_CRD_FILE,
    ZKE,
    delete_ensemble,
    ensemble,
    get_ensemble,
    put_secret,
    ready_condition,
)
from zkop_testing.faults import THREADS_ENV, THREADS_LOGGED
from zkop_testing.operator import OperatorProcess, OperatorStartError
from zkop_testing.resources import ZKC, conditions, create, events, get, read, reasons, synced, zkc
from zkop_testing.services import BRIDGE_ROOT, children, get_service, register, svc
from zkop_testing.waiting import EVENTUALLY, wait_for
from zkop_testing.zkop_install import ZKOP_NAMESPACE, ZKOP_SERVICE_ACCOUNT, kubectl
from zkop_testing.zookeeper import ZooKeeperServer, connected_client
from zkop_testing.zookeeper_secure import SecureZooKeeperServer, TestCA, digest_jaas

from zkop.kube.client import MERGE_PATCH, ApiException, KubeClient, resource_path

#: The one namespace zkop trusts for the ensembles' Secrets: its own, where the component's Role is.
TRUSTED = ZKOP_NAMESPACE
ZKOP_USER = f"system:serviceaccount:{ZKOP_NAMESPACE}:{ZKOP_SERVICE_ACCOUNT}"
#: The leader election's timing in the tests with two replicas (seconds): short, so a failover is quick.
LEASE, RENEW, RETRY = 4.0, 3.0, 0.5
COMPONENT_RBAC = REPO / "manifests" / "components" / "zookeeper-ensembles" / "rbac.yaml"

_component_applied: set[str] = set()


@pytest.fixture
def ensembles_kube(control_plane: ControlPlane, kubeconfig: str, kube: KubeClient,
                   namespace: str) -> Iterator[KubeClient]:
    """The admin client, with the ZooKeeperEnsemble CRD and the component's RBAC applied (the real ``kubectl apply
    --server-side``, once per control plane). Afterwards: the test's ensembles (``<namespace>-*``) deleted, their
    finalizers cleared (zkop has stopped by then) and waited for, and its Secrets in ``zkop-system`` deleted;
    no request of zkop's was refused (403)."""
    if control_plane.url not in _component_applied:
        kubectl(control_plane, "apply", "--server-side", "--force-conflicts", "--field-manager=zkop-tests",
                "-f", str(ENSEMBLE_CRD_FILE), "-f", str(COMPONENT_RBAC))
        kubectl(control_plane, "wait", "--for=condition=Established",
                "crd/zookeeperensembles.platform.example.com", "--timeout=60s")
        _component_applied.add(control_plane.url)
    seen = len(control_plane.audit_events())
    yield kube
    prefix = f"{namespace}-"
    mine = [e["metadata"]["name"] for e in kube.request("GET", resource_path(*ZKE))["items"]
            if e["metadata"]["name"].startswith(prefix)]
    for name in mine:
        delete_ensemble(kube, name)
        try:
            kube.request("PATCH", resource_path(*ZKE, None, name), body={"metadata": {"finalizers": None}},
                         content_type=MERGE_PATCH)
        except ApiException as err:
            if err.status != 404:
                raise
    wait_for(lambda: all(get_ensemble(kube, name) is None for name in mine), message="the test's ensembles gone")
    secrets = resource_path("", "v1", "secrets", TRUSTED)
    for secret in kube.request("GET", secrets)["items"]:
        if secret["metadata"]["name"].startswith(prefix):
            try:
                kube.request("DELETE", f"{secrets}/{secret['metadata']['name']}")
            except ApiException as err:
                if err.status != 404:
                    raise
    refused = [e for e in control_plane.audit_events()[seen:] if (e.get("user") or {}).get("username") == ZKOP_USER
               and e.get("stage") == "ResponseComplete" and (e.get("responseStatus") or {}).get("code") == 403]
    assert refused == [], refused


@pytest.fixture
def second() -> Iterator[ZooKeeperServer]:
    """A second ensemble (standalone), for this test only."""
    with ZooKeeperServer() as server:  # started on entering, stopped on leaving
        yield server


@pytest.fixture
def second_zk(second: ZooKeeperServer) -> Iterator[KazooClient]:
    client = KazooClient(hosts=second.hosts)
    client.start()
    client.ensure_path("/team")
    yield client
    client.stop()
    client.close()


def run_zkop(kubeconfig: str, zk_server: ZooKeeperServer, zk_base: str, tmp_path: Path,
             namespace: str, *extra: str, module: str = "zkop") -> OperatorProcess:
    # TMPDIR: each ensemble's private TLS/SASL directory goes there, not to /tmp.
    return OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}",
                           ["--zookeeper-ensembles", "--ensemble-secret-namespace", TRUSTED, "--workers", "2",
                            "--namespace", namespace, *extra],
                           env={"TMPDIR": str(tmp_path)}, module=module)


def delete_object(kube: KubeClient, name: str, namespace: str) -> None:
    kube.request("DELETE", resource_path(*ZKC, namespace, name))


def test_objects_are_routed_to_their_ensemble(
        kubeconfig: str, namespace: str, ensembles_kube: KubeClient, zk_server: ZooKeeperServer, zk_base: str,
        zk: KazooClient, second: ZooKeeperServer, second_zk: KazooClient, tmp_path: Path) -> None:
    """The same path on two ensembles: no conflict, each value on its own ensemble (the second's under its
    chroot), and the ensemble's status says Ready, the server's version, the watch mode and its objects."""
    kube, name = ensembles_kube, f"{namespace}-second"  # cluster-scoped: the test's own
    with run_zkop(kubeconfig, zk_server, zk_base, tmp_path, namespace):
        create_ensemble(kube, ensemble(name, second.hosts, chroot="/team"))
        create(kube, zkc("on-default", "/app/flag", b"default", namespace))
        create(kube, zkc("on-second", "/app/flag", b"second", namespace, ensembleRef={"name": name}))
        wait_for(lambda: synced(kube, "on-default", namespace) and synced(kube, "on-second", namespace),
                 message="both synced")
        assert read(zk, f"{zk_base}/app/flag") == b"default"
        assert read(second_zk, "/team/app/flag") == b"second"
        assert not second_zk.exists("/app/flag")
        # created before the ensemble's session was up: waited for, never reported as unusable
        assert "EnsembleNotUsable" not in reasons(kube, "on-second", namespace)
        status = wait_for(lambda: (e := get_ensemble(kube, name)) and ready_condition(e).get("status") == "True"
                          and (e.get("status") or {}).get("serverVersion") and e["status"], message="ensemble Ready")
        assert status["managedObjects"] == 1
        assert status["watchMode"] in ("persistent", "per-node")
        assert status["serverVersion"][0].isdigit()
        assert status["observedGeneration"] == 1


def create_ensemble(kube: KubeClient, obj: dict[str, object]) -> None:
    kube.request("POST", resource_path(*ZKE), body=obj)


def thread_names(proc: OperatorProcess) -> list[str]:
    """The names of the live threads of ``proc`` (run as :mod:`zkop_testing.faults`, which logs them on ``SIGUSR2``)."""
    def lines() -> list[str]:
        return [line for line in proc.log_tail(10**6).splitlines() if THREADS_LOGGED in line]

    seen = len(lines())
    proc.signal(signal.SIGUSR2)

    def listed() -> list[str] | None:
        found = lines()
        return found if len(found) > seen else None

    return wait_for(listed, message="the threads listed")[seen].split(THREADS_LOGGED, 1)[1].split(", ")


#: Declared by the objects of the shared-threads test: world may do all but delete (perms 23); a hand ``setAcl``
#: to all (31) is drift only the ACL check sees.
NO_DELETE = [{"scheme": "world", "id": "anyone", "permissions": ["read", "write", "create", "admin"]}]


def test_every_ensemble_shares_one_watch_roots_and_one_acl_check_thread(
        kubeconfig: str, namespace: str, ensembles_kube: KubeClient, zk_server: ZooKeeperServer, zk_base: str,
        second: ZooKeeperServer, second_zk: KazooClient, tmp_path: Path) -> None:
    """docs/performance.md, "One worker pool for every ensemble": with three ZooKeeperEnsembles the process has one
    ``zookeeperconfig-watch-roots`` and one ``zookeeperconfig-acl-check`` thread (the flags' ensemble's, every
    ensemble's follower and check a task on it), while a hand edit and a hand ``setAcl`` are put back on every
    ensemble; one ensemble deleted at runtime, the others' data and ACL drift are still put back and a new root
    of theirs is still followed."""
    kube = ensembles_kube
    teams = ("a", "b", "c")
    name = {team: f"{namespace}-{team}" for team in teams}  # cluster-scoped: the test's own
    for team in teams:
        second_zk.ensure_path(f"/{team}")  # three ensembles as zkop sees them: three chroots, three sessions
    with run_zkop(kubeconfig, zk_server, zk_base, tmp_path, namespace, "--acl-check-period", "200ms",
                  module="zkop_testing.faults") as proc:
        for team in teams:
            create_ensemble(kube, ensemble(name[team], second.hosts, chroot=f"/{team}"))
            create(kube, zkc(f"flag-{team}", "/app/flag", team.encode(), namespace, acl=NO_DELETE,
                             ensembleRef={"name": name[team]}))
        wait_for(lambda: all(synced(kube, f"flag-{team}", namespace) for team in teams), message="all synced")
        threads = thread_names(proc)
        assert threads.count("zookeeperconfig-watch-roots") == 1, threads
        assert threads.count("zookeeperconfig-acl-check") == 1, threads
        assert threads.count("zk-session-events") == 1 + len(teams), threads  # the flags' session and each ensemble's

        def drift_put_back(on: tuple[str, ...]) -> None:
            for team in on:
                second_zk.set(f"/{team}/app/flag", b"hand edit")
                second_zk.set_acls(f"/{team}/app/flag", [make_acl("world", "anyone", all=True)])
            wait_for(lambda: all(read(second_zk, f"/{team}/app/flag") == team.encode() for team in on),
                     message="every hand edit put back")
            wait_for(lambda: all([a.perms for a in second_zk.get_acls(f"/{team}/app/flag")[0]] == [23] for team in on),
                     message="every hand setAcl put back")

        drift_put_back(teams)
        delete_object(kube, "flag-c", namespace)
        delete_ensemble(kube, name["c"])
        wait_for(lambda: get(kube, "flag-c", namespace) is None and get_ensemble(kube, name["c"]) is None,
                 message="ensemble c and its object gone")
        drift_put_back(("a", "b"))
        create(kube, zkc("later", "/later/flag", b"later", namespace, ensembleRef={"name": name["a"]}))
        wait_for(lambda: synced(kube, "later", namespace), message="a new root on ensemble a synced")
        second_zk.set("/a/later/flag", b"hand edit")
        wait_for(lambda: read(second_zk, "/a/later/flag") == b"later", message="drift under the new root put back")
        # ensemble c's session closed (its runtime stopped as its finalizer went)
        def sessions_left(count: int) -> list[str] | None:
            listed = thread_names(proc)
            return listed if listed.count("zk-session-events") == count else None

        threads = wait_for(lambda: sessions_left(3), message="three sessions left")
        assert threads.count("zookeeperconfig-watch-roots") == 1, threads
        assert threads.count("zookeeperconfig-acl-check") == 1, threads
        assert proc.probe("/healthz") == 200
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()


def replica(kubeconfig: str, zk_server: ZooKeeperServer, zk_base: str, tmp_path: Path, namespace: str, lease: str,
            *, fault_in: str | None = None) -> OperatorProcess:
    """A ``zkop run --zookeeper-ensembles --leader-elect`` replica with one worker per controller; with ``fault_in``,
    ``SIGUSR1`` kills that thread from inside (:mod:`zkop_testing.faults`)."""
    election = ["--leader-elect", "--leader-election-namespace", ZKOP_NAMESPACE, "--leader-election-id", lease,
                "--leader-election-lease-duration", str(LEASE), "--leader-election-renew-deadline", str(RENEW),
                "--leader-election-retry-period", str(RETRY)]
    return OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}",
                           ["--zookeeper-ensembles", "--ensemble-secret-namespace", TRUSTED, "--workers", "1",
                            "--namespace", namespace, *election],
                           env={"TMPDIR": str(tmp_path), **({THREADS_ENV: fault_in} if fault_in else {})},
                           module="zkop_testing.faults" if fault_in else "zkop")


def leads(proc: OperatorProcess, lease: str) -> bool:
    """Whether ``proc`` runs and reports itself the leader (``leader_election_master_status``)."""
    if proc.proc is None or proc.proc.poll() is not None:
        return False
    try:
        return f'leader_election_master_status{{name="{lease}"}} 1' in proc.metrics()
    except OSError:
        return False


def logged_at(line: str) -> datetime:
    """When zkop logged ``line`` (its text format starts ``2006-01-02 15:04:05,000``)."""
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")


def test_a_leader_whose_ensemble_worker_dies_gives_up_the_lease_and_exits_1(
        kubeconfig: str, namespace: str, ensembles_kube: KubeClient, zk_server: ZooKeeperServer, zk_base: str,
        second: ZooKeeperServer, second_zk: KazooClient, lease: str, tmp_path: Path) -> None:
    """docs/operations.md, "A leader that can no longer work gives up the Lease", for a ZooKeeperEnsemble's runtime
    as for the flags' ensemble (``tests/integration/test_leader_election_processes.py``): the worker pool every
    ensemble's controller shares has one worker (``--workers 1``), which dies inside the live leader as it takes the
    ensemble's key (a BaseException raised in that thread, from inside it); the leader logs one line saying why,
    stops renewing and releases the Lease within the renew deadline, and exits 1; the standby takes over and
    reconciles on the ensemble, the key the dead worker never took included."""
    kube, name = ensembles_kube, f"{namespace}-second"  # cluster-scoped: the test's own
    worker = "zookeeperconfig-worker-0"  # the shared pool's (zkop.runtime.workerpool)
    leader = replica(kubeconfig, zk_server, zk_base, tmp_path, namespace, lease, fault_in=worker)
    standby = replica(kubeconfig, zk_server, zk_base, tmp_path, namespace, lease)
    lease_path = resource_path("coordination.k8s.io", "v1", "leases", ZKOP_NAMESPACE, lease)
    try:
        leader.start()
        wait_for(lambda: leads(leader, lease), message="the first replica leads")
        standby.start()
        create_ensemble(kube, ensemble(name, second.hosts, chroot="/team"))
        create(kube, zkc("before", "/app/before", b"1", namespace, ensembleRef={"name": name}))
        wait_for(lambda: synced(kube, "before", namespace), message="the leader reconciles on the ensemble")
        transitions = kube.request("GET", lease_path)["spec"]["leaseTransitions"]
        leader.signal(signal.SIGUSR1)
        wait_for(lambda: f"injected InjectedFault into {worker}" in leader.log_tail(400),
                 message="the fault armed in the ensemble's worker")
        # Wakes the worker, which dies instead of reconciling.
        create(kube, zkc("woken", "/app/woken", b"2", namespace, ensembleRef={"name": name}))
        assert leader.wait(EVENTUALLY) == 1
        log = leader.log_tail(400)
        stopped = [line for line in log.splitlines() if "stopped working" in line]
        assert len(stopped) == 1, log
        assert (f"zookeeperconfig stopped working (worker threads died: {worker} (ended by InjectedFault)); "
                "stopping and giving up the Lease, exit code 1") in stopped[0], log
        (released,) = [line for line in log.splitlines() if f"released lease {ZKOP_NAMESPACE}/{lease}" in line]
        assert (logged_at(released) - logged_at(stopped[0])).total_seconds() < RENEW, log
        wait_for(lambda: leads(standby, lease), message="the standby takes over")
        spec = kube.request("GET", lease_path)["spec"]
        assert spec["leaseTransitions"] == transitions + 1
        create(kube, zkc("after", "/app/after", b"3", namespace, ensembleRef={"name": name}))
        wait_for(lambda: synced(kube, "woken", namespace) and synced(kube, "after", namespace),
                 message="the new leader reconciles on the ensemble")
        assert read(second_zk, "/team/app/woken") == b"2"
        assert standby.proc is not None and standby.proc.poll() is None
    finally:
        leader.stop()
        standby.stop()


def test_a_dry_run_adds_no_finalizer_to_an_ensemble_and_still_reports_its_status(
        kubeconfig: str, namespace: str, ensembles_kube: KubeClient, zk_server: ZooKeeperServer, zk_base: str,
        second: ZooKeeperServer, second_zk: KazooClient, tmp_path: Path) -> None:
    """docs/operations.md, "Dry run": under ``--dry-run`` a ZooKeeperEnsemble is reported as in a real run (Ready,
    its objects) but gets no finalizer, its objects plan their writes and make none, and deleting it does not
    wait for zkop."""
    kube, name = ensembles_kube, f"{namespace}-second"  # cluster-scoped: the test's own
    with run_zkop(kubeconfig, zk_server, zk_base, tmp_path, namespace, "--dry-run") as proc:
        create_ensemble(kube, ensemble(name, second.hosts, chroot="/team"))
        create(kube, zkc("planned", "/app/planned", b"1", namespace, ensembleRef={"name": name}))
        wait_for(lambda: conditions(get(kube, "planned", namespace)).get("Ready", {}).get("reason") == "DryRun",
                 message="the object on the ensemble reports its planned writes")
        held = wait_for(lambda: (e := get_ensemble(kube, name)) and ready_condition(e).get("status") == "True"
                        and (e.get("status") or {}).get("managedObjects") == 1 and e,
                        message="the ensemble reports Ready and its object")
        assert held["metadata"].get("finalizers") is None, held["metadata"]
        assert not second_zk.exists("/team/app/planned")
        assert "REFUSED" not in proc.log_tail(1_000_000)
        delete_ensemble(kube, name)
        wait_for(lambda: get_ensemble(kube, name) is None, message="the ensemble deleted at once")


def test_an_ensemble_that_is_down_affects_only_its_own_objects(
        kubeconfig: str, namespace: str, ensembles_kube: KubeClient, zk_server: ZooKeeperServer, zk_base: str,
        zk: KazooClient, second: ZooKeeperServer, second_zk: KazooClient, tmp_path: Path) -> None:
    """The second ensemble stops: its objects say ZooKeeperUnavailable and the ensemble Ready=False, while
    objects of the flags' ensemble are still created and a hand edit of one is put back; zkop stays ready;
    the second ensemble back, its objects converge."""
    kube, name = ensembles_kube, f"{namespace}-second"  # cluster-scoped: the test's own
    with run_zkop(kubeconfig, zk_server, zk_base, tmp_path, namespace) as proc:
        create_ensemble(kube, ensemble(name, second.hosts, chroot="/team", sessionTimeout="4s"))
        create(kube, zkc("steady", "/app/steady", b"1", namespace))
        create(kube, zkc("remote", "/app/remote", b"1", namespace, ensembleRef={"name": name}))
        wait_for(lambda: synced(kube, "steady", namespace) and synced(kube, "remote", namespace), message="both synced")
        second.kill()  # its data stays, the chroot with it
        wait_for(lambda: ready_condition(get_ensemble(kube, name)).get("status") == "False",
                 message="the ensemble not Ready")
        for n in range(3):  # more keys than workers on the ensemble that is down
            create(kube, zkc(f"remote-{n}", f"/app/remote-{n}", b"1", namespace, ensembleRef={"name": name}))
        wait_for(lambda: conditions(get(kube, "remote-0", namespace)).get("Ready", {}).get("reason")
                 == "ZooKeeperUnavailable",
                 message="the object on the stopped ensemble says ZooKeeperUnavailable")
        # Meanwhile the flags' ensemble converges: a new object, and a hand edit put back.
        create(kube, zkc("new", "/app/new", b"1", namespace))
        wait_for(lambda: synced(kube, "new", namespace), message="a new object on the other ensemble synced")
        zk.set(f"{zk_base}/app/steady", b"hand edit")
        wait_for(lambda: read(zk, f"{zk_base}/app/steady") == b"1", message="drift on the other ensemble put back")
        assert proc.probe("/readyz") == 200
        assert f'zkop_ensemble_ready{{ensemble="{name}"}} 0.0' in proc.metrics()
        second.start()
        wait_for(lambda: all(synced(kube, f"remote-{n}", namespace) for n in range(3)), message="converged once back")
        client = KazooClient(hosts=second.hosts)
        client.start()
        try:
            assert read(client, "/team/app/remote-2") == b"1"
        finally:
            client.stop()
            client.close()


def test_credentials_rotated_in_a_secret_open_a_new_session_and_rewrite_nothing(
        kubeconfig: str, control_plane: ControlPlane, namespace: str, ensembles_kube: KubeClient,
        zk_server: ZooKeeperServer, zk_base: str, second: ZooKeeperServer, second_zk: KazooClient,
        tmp_path: Path) -> None:
    """Digest credentials from a Secret in the trusted namespace; replacing them opens a new session with the
    new identity (an ACL for the new user only is then accepted, refused before as a lock-out) and writes
    neither the existing znode nor its object's status."""
    kube, name = ensembles_kube, f"{namespace}-second"  # cluster-scoped: the test's own
    put_secret(kube, TRUSTED, f"{name}-auth", {"credentials": b"alice:one"})
    with run_zkop(kubeconfig, zk_server, zk_base, tmp_path, namespace) as proc:
        create_ensemble(kube, ensemble(name, second.hosts, chroot="/team",
                                       auth={"digest": {"secretRef": {"name": f"{name}-auth"}}}))
        create(kube, zkc("kept", "/app/kept", b"1", namespace, ensembleRef={"name": name}))
        wait_for(lambda: synced(kube, "kept", namespace), message="synced")
        before = second_zk.get("/team/app/kept")[1]
        bob = {"scheme": "digest", "id": make_digest_acl_credential("bob", "two"),
               "permissions": ["read", "write", "create", "delete", "admin"]}
        create(kube, zkc("bobs", "/app/bobs", b"1", namespace, ensembleRef={"name": name}, acl=[bob]))
        wait_for(lambda: conditions(get(kube, "bobs", namespace)).get("Ready", {}).get("reason") == "InvalidSpec",
                 message="an ACL locking alice out refused")
        status_writes = status_patches(control_plane, namespace, "kept")
        put_secret(kube, TRUSTED, f"{name}-auth", {"credentials": b"bob:two"})
        wait_for(lambda: synced(kube, "bobs", namespace), message="the new session's identity accepts bob's ACL")
        assert f"ensemble {name}: spec or Secrets changed; opening a new session" in proc.log_tail(400)
        after = second_zk.get("/team/app/kept")[1]
        assert (after.mzxid, after.version) == (before.mzxid, before.version)
        assert status_patches(control_plane, namespace, "kept") == status_writes
        assert base64.b64decode(get(kube, "kept", namespace)["spec"]["data"]) == b"1"  # type: ignore[index]


def status_patches(plane: ControlPlane, namespace: str, name: str) -> int:
    """How many status patches of zkop's on ZooKeeperConfig ``name`` the audit log holds so far."""
    settled(plane, namespace)
    return sum(1 for r in requests(plane, namespace=namespace, resource="zookeeperconfigs", verbs=("patch",),
                                   user=ZKOP_USER) if r.name == name and r.subresource == "status")


@pytest.mark.parametrize("order", ["objects-first", "ensemble-first", "together"])
def test_an_ensemble_and_its_objects_deleted_together_leave_nothing(
        order: str, kubeconfig: str, namespace: str, ensembles_kube: KubeClient, zk_server: ZooKeeperServer,
        zk_base: str, second: ZooKeeperServer, second_zk: KazooClient, tmp_path: Path) -> None:
    """Flux prunes an ensemble and its objects in any order: every znode (deletionPolicy Delete) is removed,
    the ensemble waits (terminating) while an object still needs it, and nothing is left terminating."""
    kube, name = ensembles_kube, f"{namespace}-second"  # cluster-scoped: the test's own
    names = [f"pruned-{n}" for n in range(3)]
    with run_zkop(kubeconfig, zk_server, zk_base, tmp_path, namespace):
        create_ensemble(kube, ensemble(name, second.hosts, chroot="/team"))
        for obj in names:
            create(kube, zkc(obj, f"/app/{obj}", b"1", namespace, ensembleRef={"name": name}))
        wait_for(lambda: all(synced(kube, n, namespace) for n in names), message="synced")
        if order == "ensemble-first":
            delete_ensemble(kube, name)
            held = wait_for(lambda: (e := get_ensemble(kube, name)) and ready_condition(e).get("reason")
                            == "Terminating" and e, message="the ensemble waits for its objects")
            assert held["metadata"]["deletionTimestamp"]
        if order != "together":
            first, then = (names, []) if order == "objects-first" else ([], names)
        else:
            first, then = [], []
            delete_ensemble(kube, name)
            for obj in names:
                delete_object(kube, obj, namespace)
        for obj in first:
            delete_object(kube, obj, namespace)
        if order == "objects-first":
            delete_ensemble(kube, name)
        for obj in then:
            delete_object(kube, obj, namespace)
        wait_for(lambda: all(get(kube, n, namespace) is None for n in names) and get_ensemble(kube, name) is None,
                 message="every object and the ensemble gone")
        for obj in names:
            assert not second_zk.exists(f"/team/app/{obj}"), obj


def test_an_object_whose_ensemble_is_missing_says_so(
        kubeconfig: str, namespace: str, ensembles_kube: KubeClient, zk_server: ZooKeeperServer, zk_base: str,
        zk: KazooClient, second: ZooKeeperServer, second_zk: KazooClient, tmp_path: Path) -> None:
    """No such ZooKeeperEnsemble: EnsembleNotFound and nothing written; a Secret missing: EnsembleNotUsable on
    the object and SecretNotFound on the ensemble; both converge once what is missing appears."""
    kube, name = ensembles_kube, f"{namespace}-second"  # cluster-scoped: the test's own
    with run_zkop(kubeconfig, zk_server, zk_base, tmp_path, namespace):
        create(kube, zkc("lost", "/app/lost", b"1", namespace, ensembleRef={"name": name}))
        wait_for(lambda: conditions(get(kube, "lost", namespace)).get("Ready", {}).get("reason") == "EnsembleNotFound",
                 message="EnsembleNotFound")
        assert not zk.exists(f"{zk_base}/app/lost")
        create_ensemble(kube, ensemble(name, second.hosts, chroot="/team",
                                       auth={"digest": {"secretRef": {"name": f"{name}-absent"}}}))
        wait_for(lambda: ready_condition(get_ensemble(kube, name)).get("reason") == "SecretNotFound",
                 message="the ensemble says its Secret is missing")
        wait_for(lambda: conditions(get(kube, "lost", namespace)).get("Ready", {}).get("reason") == "EnsembleNotUsable",
                 message="EnsembleNotUsable")
        lost = get(kube, "lost", namespace)
        assert lost is not None and lost["status"]["state"] == "Error"
        assert "Stalled" not in conditions(lost)  # retried: it converges once the Secret is there
        wait_for(lambda: {"EnsembleNotFound", "EnsembleNotUsable"} <= {
            e["reason"] for e in events(kube, "lost", namespace) if e["type"] == "Warning"},
                 message="a Warning Event of each")
        put_secret(kube, TRUSTED, f"{name}-absent", {"credentials": b"carol:three"})
        wait_for(lambda: synced(kube, "lost", namespace), message="synced once the Secret is there")
        assert read(second_zk, "/team/app/lost") == b"1"


def test_the_service_bridge_and_importer_use_the_ensemble_their_flags_name(
        kubeconfig: str, namespace: str, ensembles_kube: KubeClient, zk_server: ZooKeeperServer, zk_base: str,
        zk: KazooClient, second: ZooKeeperServer, second_zk: KazooClient, tmp_path: Path) -> None:
    """``--service-bridge-ensemble`` and ``--import-ensemble``: Services published into, and registrations
    imported from, the named ZooKeeperEnsemble (chroot and credentials from its spec and Secret); nothing of
    the kind on the flags' ensemble."""
    kube, name = ensembles_kube, f"{namespace}-second"  # cluster-scoped: the test's own
    put_secret(kube, TRUSTED, f"{name}-auth", {"credentials": b"alice:one"})
    create_ensemble(kube, ensemble(name, second.hosts, chroot="/team",
                                   auth={"digest": {"secretRef": {"name": f"{name}-auth"}}}))
    register(second_zk, "orders", "i1", "10.3.0.1", root="/team/services", ephemeral=False)
    kube.request("POST", resource_path("", "v1", "services", namespace), body=svc("web", namespace))
    args = ["--zookeeper-ensembles", "--ensemble-secret-namespace", TRUSTED, "--service-bridge",
            "--service-bridge-ensemble", name, "--service-bridge-namespace", namespace, "--import-services",
            "--import-namespace", namespace, "--import-ensemble", name, "--namespace", namespace]
    with OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", args, env={"TMPDIR": str(tmp_path)}) as proc:
        wait_for(lambda: f"{namespace}-web" in children(second_zk, f"/team{BRIDGE_ROOT}"),
                 message="the Service published into the named ensemble")
        wait_for(lambda: get_service(kube, "orders", namespace) is not None,
                 message="the registration imported from it")
        assert not zk.exists(f"{zk_base}{BRIDGE_ROOT}")
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()  # a clean exit, which
    assert list(tmp_path.glob("zkop-ensemble-*")) == [], proc.log_tail()  # removes its private files


def test_a_service_ensemble_that_does_not_exist_is_a_usage_error(
        kubeconfig: str, namespace: str, ensembles_kube: KubeClient, zk_server: ZooKeeperServer, zk_base: str,
        tmp_path: Path) -> None:
    name = f"{namespace}-nope"  # no such ZooKeeperEnsemble
    proc = OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}",
                           ["--service-bridge", "--service-bridge-ensemble", name, "--namespace", namespace],
                           env={"TMPDIR": str(tmp_path)})
    with pytest.raises(OperatorStartError) as err:
        proc.start()
    assert err.value.returncode == 2
    assert f"ZooKeeperEnsemble {name}: ZooKeeperEnsemble {name!r} not found" in err.value.output


def test_an_ensemble_deleted_while_zkop_is_down_still_lets_its_objects_delete_their_znodes(
        kubeconfig: str, namespace: str, ensembles_kube: KubeClient, zk_server: ZooKeeperServer, zk_base: str,
        second: ZooKeeperServer, second_zk: KazooClient, tmp_path: Path) -> None:
    """The ensemble is deleted while zkop is stopped; the zkop that starts next makes its session again for
    the objects that still need it, deletes their znodes when they go, and only then lets the ensemble go."""
    kube, name = ensembles_kube, f"{namespace}-second"  # cluster-scoped: the test's own
    with run_zkop(kubeconfig, zk_server, zk_base, tmp_path, namespace):
        create_ensemble(kube, ensemble(name, second.hosts, chroot="/team"))
        create(kube, zkc("late", "/app/late", b"1", namespace, ensembleRef={"name": name}))
        wait_for(lambda: synced(kube, "late", namespace), message="synced")
    delete_ensemble(kube, name)
    assert (get_ensemble(kube, name) or {}).get("metadata", {}).get("deletionTimestamp")  # held: finalizer
    with run_zkop(kubeconfig, zk_server, zk_base, tmp_path, namespace):
        wait_for(lambda: ready_condition(get_ensemble(kube, name)).get("reason") == "Terminating",
                 message="the ensemble waits for its object")
        delete_object(kube, "late", namespace)
        wait_for(lambda: get(kube, "late", namespace) is None and get_ensemble(kube, name) is None,
                 message="the object, then the ensemble, gone")
        assert not second_zk.exists("/team/app/late")


def test_changing_the_ensemble_ref_moves_the_object_and_leaves_the_old_znode(
        kubeconfig: str, namespace: str, ensembles_kube: KubeClient, zk_server: ZooKeeperServer, zk_base: str,
        zk: KazooClient, second: ZooKeeperServer, second_zk: KazooClient, tmp_path: Path) -> None:
    """docs/operations.md: a changed spec.ensembleRef writes on the new ensemble and leaves the old znode and
    its ownership record as they are."""
    kube, name = ensembles_kube, f"{namespace}-second"  # cluster-scoped: the test's own
    with run_zkop(kubeconfig, zk_server, zk_base, tmp_path, namespace):
        create_ensemble(kube, ensemble(name, second.hosts, chroot="/team"))
        create(kube, zkc("mover", "/app/mover", b"1", namespace))
        wait_for(lambda: synced(kube, "mover", namespace), message="synced on the flags' ensemble")
        kube.request("PATCH", resource_path(*ZKC, namespace, "mover"),
                     body={"spec": {"ensembleRef": {"name": name}}}, content_type=MERGE_PATCH)
        wait_for(lambda: synced(kube, "mover", namespace) and read(second_zk, "/team/app/mover") == b"1",
                 message="written on the new ensemble")
        assert read(zk, f"{zk_base}/app/mover") == b"1"  # left on the old one
        assert zk.exists(f"{zk_base}/zkop/owners/app/mover")


def ensemble_reconciles(operator: OperatorProcess) -> float:
    """``controller_runtime_reconcile_total`` of the ZooKeeperEnsemble controller, every result."""
    return sum(s.value for family in text_string_to_metric_families(operator.metrics()) for s in family.samples
               if s.name == "controller_runtime_reconcile_total" and s.labels.get("controller") == "zookeeperensemble")


def managed_objects(kube: KubeClient, name: str) -> int | None:
    return ((get_ensemble(kube, name) or {}).get("status") or {}).get("managedObjects")


def test_managed_objects_follow_membership_and_data_changes_leave_the_ensemble_alone(
        kubeconfig: str, namespace: str, ensembles_kube: KubeClient, zk_server: ZooKeeperServer, zk_base: str,
        second: ZooKeeperServer, second_zk: KazooClient, tmp_path: Path) -> None:
    """An ensemble's ``managedObjects`` counts the objects that name it, the one they left included, at once; an
    object's data and status changes do not reconcile its ensemble (its reconcile depends only on membership and,
    while it is deleted, on finalizers: ``EnsembleMembership``)."""
    kube, first, then = ensembles_kube, f"{namespace}-first", f"{namespace}-then"
    second_zk.ensure_path("/team2")
    with run_zkop(kubeconfig, zk_server, zk_base, tmp_path, namespace) as operator:
        create_ensemble(kube, ensemble(first, second.hosts, chroot="/team"))
        create_ensemble(kube, ensemble(then, second.hosts, chroot="/team2"))
        create(kube, zkc("member", "/app/member", b"0", namespace, ensembleRef={"name": first}))
        wait_for(lambda: synced(kube, "member", namespace) and managed_objects(kube, first) == 1
                 and managed_objects(kube, then) == 0, message="the member counted by its ensemble")
        before = ensemble_reconciles(operator)
        for value in (b"1", b"2", b"3"):
            kube.request("PATCH", resource_path(*ZKC, namespace, "member"),
                         body={"spec": {"data": base64.b64encode(value).decode()}}, content_type=MERGE_PATCH)
            wait_for(lambda: synced(kube, "member", namespace) and read(second_zk, "/team/app/member")
                     == value, message=f"data {value!r} written")  # noqa: B023 - called in this iteration
        assert ensemble_reconciles(operator) == before
        kube.request("PATCH", resource_path(*ZKC, namespace, "member"),
                     body={"spec": {"ensembleRef": {"name": then}}}, content_type=MERGE_PATCH)
        wait_for(lambda: managed_objects(kube, first) == 0 and managed_objects(kube, then) == 1,
                 message="both ensembles count the move")


def test_an_ensemble_over_mutual_tls_from_a_cert_manager_style_secret(
        kubeconfig: str, namespace: str, ensembles_kube: KubeClient, zk_server: ZooKeeperServer, zk_base: str,
        tmp_path: Path) -> None:
    """``spec.tls.secretRef``: the Secret's ``ca.crt``, ``tls.crt`` and ``tls.key`` (a cert-manager Certificate's
    keys) open a session to a ``secureClientPort`` that needs a client certificate; the object converges."""
    kube, name = ensembles_kube, f"{namespace}-second"  # cluster-scoped: the test's own
    ca = TestCA(tmp_path / "ca")
    client = ca.issue("zkop")
    put_secret(kube, TRUSTED, f"{name}-tls", {"ca.crt": ca.cert.read_bytes(), "tls.crt": client.cert.read_bytes(),
                                            "tls.key": client.key.read_bytes()})
    with SecureZooKeeperServer(tmp_path / "zk", server_cert=ca.issue("zookeeper", dns=["localhost"]),
                               trust=ca.cert) as server:
        hosts = server.secure_hosts("localhost")
        with run_zkop(kubeconfig, zk_server, zk_base, tmp_path, namespace):
            create_ensemble(kube, ensemble(name, hosts, tls={"secretRef": {"name": f"{name}-tls"}}))
            create(kube, zkc("secure", "/app/secure", b"1", namespace, ensembleRef={"name": name}))
            wait_for(lambda: synced(kube, "secure", namespace), message="synced over mutual TLS")
            wait_for(lambda: ready_condition(get_ensemble(kube, name)).get("status") == "True",
                     message="the ensemble Ready")
        reader = KazooClient(hosts=hosts, use_ssl=True, ca=str(ca.cert), certfile=str(client.cert),
                             keyfile=str(client.key), verify_certs=True)
        reader.start()
        try:
            assert read(reader, "/app/secure") == b"1"
        finally:
            reader.stop()
            reader.close()


def test_an_ensemble_over_sasl_digest_md5_writes_a_sasl_acl_and_bad_credentials_say_so(
        kubeconfig: str, namespace: str, ensembles_kube: KubeClient, zk_server: ZooKeeperServer, zk_base: str,
        tmp_path: Path) -> None:
    """``spec.auth.sasl`` (DIGEST-MD5, ``user:password`` in a Secret key) against a server that enforces SASL: the
    object converges under an ACL only zkop's SASL identity can read; an ensemble whose Secret holds a wrong
    password is ``Ready=False`` and its object is not written, while the good one goes on."""
    kube, good, bad = ensembles_kube, f"{namespace}-sasl", f"{namespace}-sasl-bad"
    put_secret(kube, TRUSTED, good, {"credentials": b"zkop:zkop-secret"})
    put_secret(kube, TRUSTED, bad, {"credentials": b"zkop:wrong"})
    jaas = digest_jaas({"zkop": "zkop-secret", "reader": "reader-secret"})
    acl = [{"scheme": "sasl", "id": "zkop", "permissions": ["read", "write", "create", "delete", "admin"]}]
    with SecureZooKeeperServer(tmp_path / "zk", jaas=jaas, enforce_sasl=True) as server:
        with run_zkop(kubeconfig, zk_server, zk_base, tmp_path, namespace):
            for name in (good, bad):
                create_ensemble(kube, ensemble(name, server.hosts, auth={"sasl": {
                    "mechanism": "DIGEST-MD5", "secretRef": {"name": name, "key": "credentials"}}}))
            create(kube, zkc("flag", "/sasl/flag", b"on", namespace, ensembleRef={"name": good}, acl=acl))
            create(kube, zkc("other", "/sasl/other", b"on", namespace, ensembleRef={"name": bad}))
            wait_for(lambda: synced(kube, "flag", namespace), message="synced over SASL")
            refused = wait_for(lambda: (c := ready_condition(get_ensemble(kube, bad))).get("status") == "False"
                               and c.get("reason") == "ZooKeeperUnavailable" and c, message="the bad one not Ready")
            assert "SASL" in refused["message"], refused
            assert synced(kube, "other", namespace) is None
        def login(user: str, password: str) -> dict[str, str]:
            return {"mechanism": "DIGEST-MD5", "username": user, "password": password}

        with connected_client(server.hosts, sasl_options=login("zkop", "zkop-secret")) as client:
            assert read(client, "/sasl/flag") == b"on"
            assert client.exists("/sasl/other") is None  # the bad ensemble wrote nothing
        with connected_client(server.hosts, sasl_options=login("reader", "reader-secret")) as client, \
                pytest.raises(NoAuthError):
            client.get("/sasl/flag")
