"""ZooKeeperConfig for production: drift, conditions, validation, ownership, ACLs, dataFrom, sessions.

Real ZooKeeper, the real kube-apiserver (zkop as its ServiceAccount, watching the test's namespace), and
``zkop run`` as a separate process (in-process :class:`~zkop.operator.run.Operator` where a test needs its session).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import make_acl, make_digest_acl, make_digest_acl_credential
from zkop_testing.controlplane import ControlPlane, fresh_namespace
from zkop_testing.crds import store_before_rules
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import OPEN_ACL, ZKC, conditions, create, events, get, read, reasons, state, synced, zkc
from zkop_testing.waiting import EVENTUALLY, wait_for
from zkop_testing.zookeeper import ZooKeeperEnsemble, ZooKeeperServer, expire_session

from zkop.kube.client import MERGE_PATCH, ApiException, KubeClient, resource_path
from zkop.operator.options import OperatorOptions
from zkop.operator.run import Operator
from zkop.runtime.manager import ManagerOptions
from zkop.zookeeper.adapter import ConnectionOptions


@pytest.fixture
def operator(kubeconfig: str, kube: KubeClient, zk_server: ZooKeeperServer, zk_base: str,
             namespace: str) -> Iterator[OperatorProcess]:
    args = ["--workers", "4", "--namespace", namespace]
    with OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", args) as proc:
        yield proc



def test_hand_edit_and_hand_delete_are_restored_by_the_watch(operator: OperatorProcess, kube: KubeClient,
                                                             zk: KazooClient, zk_base: str, namespace: str) -> None:
    # The full resync is 10 minutes away (the default --sync-period): only the watch can notice these.
    create(kube, zkc("flag", "/app/flag", b"true", namespace=namespace))
    wait_for(lambda: synced(kube, "flag", namespace), message="synced")
    zk.set(zk_base + "/app/flag", b"false")
    wait_for(lambda: read(zk, zk_base + "/app/flag") == b"true", message="hand edit restored")
    zk.delete(zk_base + "/app/flag")
    wait_for(lambda: read(zk, zk_base + "/app/flag") == b"true", message="hand delete restored")
    wait_for(lambda: reasons(kube, "flag", namespace).count("DriftCorrected") >= 2, message="DriftCorrected events")
    assert _sample(operator.metrics(), 'zkop_drift_corrections_total{controller="zookeeperconfig"}') >= 2


def test_create_only_hand_edit_is_left_alone(operator: OperatorProcess, kube: KubeClient, zk: KazooClient,
                                            zk_base: str, namespace: str) -> None:
    create(kube, zkc("switch", "/app/switch", b"off", syncPolicy="createOnly", namespace=namespace))
    wait_for(lambda: synced(kube, "switch", namespace))
    zk.set(zk_base + "/app/switch", b"on")
    wait_for(lambda: state(kube, "switch", namespace) == "OutOfSync", message="createOnly says so in status")
    assert read(zk, zk_base + "/app/switch") == b"on"
    assert conditions(get(kube, "switch", namespace))["Ready"]["reason"] == "CreateOnly"


@pytest.mark.parametrize(
    ("spec", "fragment", "refused_at_apply"),
    [
        # The CRD's CEL rules refuse these at apply time; zkop still refuses one stored before the CRD had them.
        ({"path": "/app/x\u0001y", "data": "eA=="}, "forbidden character", True),
        ({"path": "/app/../etc", "data": "eA=="}, "relative segment", True),
        ({"path": "/zookeeper/config", "data": "eA=="}, "reserved", True),
        # Only zkop knows these.
        ({"path": "/app/bin", "data": base64.b64encode(b"\xff\xfe").decode()}, "UTF-8", False),
        ({"path": "/app/big", "stringData": "x" * 2000}, "more than the limit", False),
    ],
)
def test_invalid_specs_get_their_reason_and_no_znode(kubeconfig: str, kube: KubeClient, zk_server: ZooKeeperServer,
                                                     zk_base: str, zk: KazooClient, spec: dict[str, str],
                                                     fragment: str, refused_at_apply: bool, namespace: str) -> None:
    obj = zkc("bad", "/x", namespace=namespace)
    obj["spec"] = spec
    if refused_at_apply:
        with pytest.raises(ApiException) as refused:
            create(kube, obj)
        assert refused.value.status == 422 and fragment in str(refused.value.body)
        store_before_rules(kube, obj)  # as a cluster upgraded from a CRD without the rules holds it
    else:
        create(kube, obj)
    args = ["--max-data-bytes", "1000", "--namespace", namespace]
    with OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", args) as proc:
        cond = wait_for(lambda: conditions(get(kube, "bad", namespace)).get("Stalled"), message="stalled")
        ready = conditions(get(kube, "bad", namespace))["Ready"]
        assert cond["status"] == "True" and ready["reason"] == "InvalidSpec" and fragment in ready["message"]
        assert "Reconciling" not in conditions(get(kube, "bad", namespace))
        wait_for(lambda: "InvalidSpec" in reasons(kube, "bad", namespace), message="Warning event")
        stalled = 'zkop_zookeeperconfig_condition{status="True",type="Stalled"}'
        wait_for(lambda: _sample(proc.metrics(), stalled) == 1.0, message="stalled gauge for alerts")
        assert zk.get_children(zk_base) in ([], ["zkop"])


def test_path_conflict_oldest_wins_and_successor_takes_over(operator: OperatorProcess, kube: KubeClient,
                                                            zk: KazooClient, zk_base: str, namespace: str) -> None:
    create(kube, zkc("first", "/app/shared", b"one", namespace=namespace))
    wait_for(lambda: synced(kube, "first", namespace))
    create(kube, zkc("second", "/app/shared", b"two", namespace=namespace))
    wait_for(lambda: conditions(get(kube, "second", namespace)).get("Ready", {}).get("reason") == "PathConflict")
    assert f"{namespace}/first" in conditions(get(kube, "second", namespace))["Ready"]["message"]
    assert conditions(get(kube, "second", namespace))["Stalled"]["status"] == "True"
    assert read(zk, zk_base + "/app/shared") == b"one"
    # The owner goes away (its znode with it); the next one takes over.
    kube.request("DELETE", resource_path(*ZKC, namespace, "first"))
    wait_for(lambda: read(zk, zk_base + "/app/shared") == b"two", message="successor wrote")
    wait_for(lambda: synced(kube, "second", namespace))


def test_two_installations_on_one_ensemble_do_not_fight(kubeconfig: str, kube: KubeClient,
                                                        control_plane: ControlPlane, zk_server: ZooKeeperServer,
                                                        zk_base: str, zk: KazooClient, namespace: str) -> None:
    """Two installations (``--cluster-id`` east and west), each watching a namespace of its own: what two clusters
    sharing one ensemble look like to ZooKeeper, where only the cluster id tells their records apart."""
    with contextlib.contextmanager(fresh_namespace)(control_plane) as west_namespace:
        hosts = f"{zk_server.hosts}{zk_base}"
        with OperatorProcess(kubeconfig, hosts, ["--cluster-id", "east", "--namespace", namespace]), \
                OperatorProcess(kubeconfig, hosts, ["--cluster-id", "west", "--namespace", west_namespace]):
            create(kube, zkc("flag", "/app/flag", b"east", namespace=namespace))
            wait_for(lambda: synced(kube, "flag", namespace))
            create(kube, zkc("flag", "/app/flag", b"west", namespace=west_namespace))
            wait_for(lambda: conditions(get(kube, "flag", west_namespace)).get("Ready", {}).get("reason")
                     == "PathConflict", message="second installation reports PathConflict")
            assert "east" in conditions(get(kube, "flag", west_namespace))["Ready"]["message"]
            assert read(zk, zk_base + "/app/flag") == b"east"
            # Deleting the loser never touches the winner's znode.
            kube.request("DELETE", resource_path(*ZKC, west_namespace, "flag"))
            wait_for(lambda: get(kube, "flag", west_namespace) is None)
            assert read(zk, zk_base + "/app/flag") == b"east"


def test_adopting_a_legacy_znode_is_recorded(operator: OperatorProcess, kube: KubeClient, zk: KazooClient,
                                             zk_base: str, namespace: str) -> None:
    # A legacy znode created with a narrower ACL (no version change since): adoption notices it.
    zk.ensure_path(zk_base + "/legacy")
    zk.create(zk_base + "/legacy/flag", b"old", acl=[make_acl("world", "anyone", read=True, write=True, admin=True)])
    create(kube, zkc("legacy", "/legacy/flag", b"new", namespace=namespace))
    wait_for(lambda: read(zk, zk_base + "/legacy/flag") == b"new")
    wait_for(lambda: "Adopted" in reasons(kube, "legacy", namespace), message="Adopted event")
    wait_for(lambda: [a.perms for a in zk.get_acls(zk_base + "/legacy/flag")[0]] == [31],
             message="declared (open) ACL applied on adoption")


def test_acl_is_enforced_and_acl_drift_corrected(kubeconfig: str, kube: KubeClient, zk_server: ZooKeeperServer,
                                                 zk: KazooClient, zk_base: str, tmp_path: Path, namespace: str) -> None:
    auth_file = tmp_path / "credentials"
    auth_file.write_text("ops:ops-pw\n")
    # ACL changes fire no ZooKeeper watch: they are caught by the periodic resync (here every ~2 s).
    args = ["--sync-period", "2", "--zk-auth-file", str(auth_file), "--namespace", namespace]
    with OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", args):
        ops_id = make_digest_acl_credential("ops", "ops-pw")
        acl = [{"scheme": "digest", "id": ops_id, "permissions": ["read", "write", "create", "delete", "admin"]},
               {"scheme": "world", "id": "anyone", "permissions": ["read"]}]
        create(kube, zkc("guarded", "/app/guarded", b"v1", acl=acl, namespace=namespace))
        wait_for(lambda: synced(kube, "guarded", namespace))
        with pytest.raises(NoAuthError):
            zk.set(zk_base + "/app/guarded", b"hacked")  # a client without the digest is refused
        ops = KazooClient(hosts=zk_server.hosts, auth_data=[("digest", "ops:ops-pw")])
        ops.start(timeout=EVENTUALLY)
        try:
            # Someone with the password opens the node up to the world.
            ops.set_acls(zk_base + "/app/guarded", [make_digest_acl("ops", "ops-pw", all=True),
                                                      make_acl("world", "anyone", all=True)])
            zk.set(zk_base + "/app/guarded", b"now anyone can write")

            def restored() -> bool:
                entries = ops.get_acls(zk_base + "/app/guarded")[0]
                world = [a for a in entries if a.id.scheme == "world"]
                return len(entries) == 2 and world[0].perms == 1 and read(zk, zk_base + "/app/guarded") == b"v1"

            wait_for(restored, message="ACL and data drift corrected")
            with pytest.raises(NoAuthError):
                zk.set(zk_base + "/app/guarded", b"hacked again")
        finally:
            ops.stop()
            ops.close()


def test_configmap_edit_propagates_and_missing_ref_waits(operator: OperatorProcess, kube: KubeClient,
                                                         zk: KazooClient, zk_base: str, namespace: str) -> None:
    create(kube, zkc("from-cm", "/app/rules", dataFrom={"configMapKeyRef": {"name": "rules", "key": "json"}},
                     namespace=namespace))
    wait_for(lambda: conditions(get(kube, "from-cm", namespace)).get("Ready", {}).get("reason") == "RefNotFound")
    assert conditions(get(kube, "from-cm", namespace))["Reconciling"]["status"] == "True"
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "rules", "namespace": namespace},
          "data": {"json": '{"v":1}'}}
    kube.request("POST", resource_path("", "v1", "configmaps", namespace), body=cm)
    wait_for(lambda: read(zk, zk_base + "/app/rules") == b'{"v":1}', message="znode from ConfigMap")
    kube.request("PATCH", resource_path("", "v1", "configmaps", namespace, "rules"),
                 body={"data": {"json": '{"v":2}'}}, content_type=MERGE_PATCH)
    wait_for(lambda: read(zk, zk_base + "/app/rules") == b'{"v":2}', message="ConfigMap edit propagated")


def test_a_configmap_edit_is_an_update_and_only_a_hand_edit_is_drift(operator: OperatorProcess, kube: KubeClient,
                                                                       zk: KazooClient, zk_base: str,
                                                                       namespace: str) -> None:
    drift = 'zkop_drift_corrections_total{controller="zookeeperconfig"}'
    kube.request("POST", resource_path("", "v1", "configmaps", namespace), body={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "limits", "namespace": namespace},
        "data": {"rate": "10"}})
    create(kube, zkc("limits", "/app/limits", dataFrom={"configMapKeyRef": {"name": "limits", "key": "rate"}},
                     namespace=namespace))
    wait_for(lambda: synced(kube, "limits", namespace)
             and (get(kube, "limits", namespace) or {})["status"].get("znodeVersion") == 0)

    kube.request("PATCH", resource_path("", "v1", "configmaps", namespace, "limits"),
                 body={"data": {"rate": "20"}}, content_type=MERGE_PATCH)
    wait_for(lambda: (get(kube, "limits", namespace) or {})["status"].get("znodeVersion") == 1,
             message="ConfigMap edit written and recorded")
    assert read(zk, zk_base + "/app/limits") == b"20"
    wait_for(lambda: "Updated" in reasons(kube, "limits", namespace), message="Updated Event")
    updated = [e for e in events(kube, "limits", namespace) if e["reason"] == "Updated"]
    assert "ConfigMap limits key rate changed" in updated[-1]["message"]
    assert "DriftCorrected" not in reasons(kube, "limits", namespace)
    assert _sample(operator.metrics(), drift) == 0

    zk.set(zk_base + "/app/limits", b"99")  # a hand edit
    wait_for(lambda: read(zk, zk_base + "/app/limits") == b"20", message="hand edit restored")
    wait_for(lambda: "DriftCorrected" in reasons(kube, "limits", namespace), message="DriftCorrected Event")
    wait_for(lambda: _sample(operator.metrics(), drift) == 1, message="drift counted once")


def test_secret_bytes_never_leak(operator: OperatorProcess, kube: KubeClient, zk: KazooClient, zk_base: str,
                                 namespace: str) -> None:
    secret_value = b"hunter2-very-secret"
    kube.request("POST", resource_path("", "v1", "secrets", namespace), body={
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": namespace},
        "data": {"password": base64.b64encode(secret_value).decode()}})
    create(kube, zkc("db-pass", "/app/db/password", dataFrom={"secretKeyRef": {"name": "db", "key": "password"}},
                     encoding="binary", acl=OPEN_ACL, namespace=namespace))  # declared open: zkop holds no credential
    wait_for(lambda: read(zk, zk_base + "/app/db/password") == secret_value)
    zk.set(zk_base + "/app/db/password", b"tampered")
    wait_for(lambda: read(zk, zk_base + "/app/db/password") == secret_value)
    text = str(get(kube, "db-pass", namespace)) + str(kube.request("GET", resource_path("", "v1", "events", namespace)))
    for leak in (secret_value.decode(), base64.b64encode(secret_value).decode(), "tampered"):
        assert leak not in text and leak not in operator.log_tail(10_000) and leak not in operator.metrics()


def test_idle_operator_and_warm_restart_write_nothing(kubeconfig: str, kube: KubeClient,
                                                      zk_server: ZooKeeperServer, zk_base: str,
                                                      zk: KazooClient, namespace: str) -> None:
    hosts = f"{zk_server.hosts}{zk_base}"
    success = 'controller_runtime_reconcile_total{controller="zookeeperconfig",result="success"}'
    with OperatorProcess(kubeconfig, hosts, ["--sync-period", "1", "--namespace", namespace]) as proc:
        for i in range(10):
            create(kube, zkc(f"f{i}", f"/app/f{i}", b"on", namespace=namespace))
        for i in range(10):
            wait_for(lambda i=i: synced(kube, f"f{i}", namespace))  # type: ignore[misc]
        mzxids = {i: zk.get(f"{zk_base}/app/f{i}")[1].mzxid for i in range(10)}
        rv = _item_versions(kube, namespace)
        # Several resync periods pass (every object reconciled again): nothing is written anywhere.
        gets = 'zkop_zookeeper_request_duration_seconds_count{operation="get"}'
        text = proc.metrics()
        count, reads = _sample(text, success), _sample(text, gets)
        wait_for(lambda: _sample(proc.metrics(), success) >= count + 30, message="resyncs happened")
        text = proc.metrics()
        # At most one ZooKeeper read per reconcile: ownership records are trusted from their watches.
        assert _sample(text, gets) - reads <= _sample(text, success) - count
        assert _item_versions(kube, namespace) == rv
    with OperatorProcess(kubeconfig, hosts, ["--namespace", namespace]) as proc:
        wait_for(lambda: _sample(proc.metrics(), success) >= 10, message="warm start reconciled all")
    assert {i: zk.get(f"{zk_base}/app/f{i}")[1].mzxid for i in range(10)} == mzxids
    assert _item_versions(kube, namespace) == rv


def _item_versions(kube: KubeClient, namespace: str) -> dict[str, str]:
    """resourceVersion of every ZooKeeperConfig (the list's own RV also moves with Events)."""
    return {i["metadata"]["name"]: i["metadata"]["resourceVersion"]
            for i in kube.request("GET", resource_path(*ZKC, namespace))["items"]}


def _sample(text: str, series: str) -> float:
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return 0.0


def test_session_expiry_rearms_watches(kubeconfig: str, kube: KubeClient, zk_server: ZooKeeperServer, zk_base: str,
                                       zk: KazooClient, namespace: str) -> None:
    options = OperatorOptions(kubeconfig=kubeconfig, zookeeper=ConnectionOptions(hosts=f"{zk_server.hosts}{zk_base}",
                                                                                session_timeout=4),
                              manager=ManagerOptions(metrics_bind_address="0", health_probe_bind_address="0"),
                              workers=2,
                              namespaces=[namespace])
    manager = Operator(options)
    thread = threading.Thread(target=manager.run, daemon=True)
    thread.start()
    try:
        create(kube, zkc("flag", "/app/flag", b"true", namespace=namespace))
        wait_for(lambda: synced(kube, "flag", namespace))
        old_session = manager.zookeeper.session_id
        expire_session(manager.zookeeper.client, zk_server.hosts)
        wait_for(lambda: manager.zookeeper.connected and manager.zookeeper.session_id != old_session,
                 message="new session")
        # The watch was re-armed by the full resync after the new session: a hand edit is still noticed.
        wait_for(lambda: "/app/flag" in manager.zookeeper.cache,
                 message="watch re-armed")
        zk.set(zk_base + "/app/flag", b"false")
        # The full resync is 10 minutes away (the default sync period): the re-armed watch notices it.
        wait_for(lambda: read(zk, zk_base + "/app/flag") == b"true", message="drift noticed after expiry")
    finally:
        manager.stop()
        thread.join(EVENTUALLY)


def test_ensemble_leader_killed_mid_stream_converges(kubeconfig: str, kube: KubeClient,
                                                     zk_ensemble: ZooKeeperEnsemble, namespace: str) -> None:
    admin = KazooClient(hosts=zk_ensemble.hosts)
    admin.start(timeout=EVENTUALLY)
    admin.ensure_path("/failover")
    try:
        with OperatorProcess(kubeconfig, f"{zk_ensemble.hosts}/failover", ["--workers", "4", "--namespace", namespace]):
            for i in range(40):
                create(kube, zkc(f"n{i}", f"/svc/n{i}", f"v{i}".encode(), namespace=namespace))
                if i == 15:
                    zk_ensemble.kill_leader()
            for i in range(40):
                wait_for(lambda i=i: synced(kube, f"n{i}", namespace), timeout=60,  # type: ignore[misc]
                         message=f"n{i} synced after failover")
            assert all(admin.get(f"/failover/svc/n{i}")[0] == f"v{i}".encode() for i in range(40))
    finally:
        zk_ensemble.heal()
        admin.stop()
        admin.close()


def test_deleting_a_whole_tree_converges_leaves_first(operator: OperatorProcess, kube: KubeClient, zk: KazooClient,
                                                      zk_base: str, namespace: str) -> None:
    names = {"root": "/tree", "mid": "/tree/mid", "leaf": "/tree/mid/leaf"}
    for name, path in names.items():
        create(kube, zkc(name, path, name.encode(), namespace=namespace))
    for name in names:
        wait_for(lambda name=name: synced(kube, name, namespace))  # type: ignore[misc]
    zk.create(zk_base + "/tree/unmanaged", b"keep me")  # a child zkop does not own
    for name in names:  # parents first: the worst order
        kube.request("DELETE", resource_path(*ZKC, namespace, name))
    wait_for(lambda: get(kube, "leaf", namespace) is None and get(kube, "mid", namespace) is None,
             message="leaves gone")
    assert read(zk, zk_base + "/tree/mid") is None
    # The root still has a child zkop does not own: never deleted recursively, reported, retried.
    wait_for(lambda: conditions(get(kube, "root", namespace)).get("Ready", {}).get("reason") == "HasChildren")
    assert read(zk, zk_base + "/tree/unmanaged") == b"keep me"
    zk.delete(zk_base + "/tree/unmanaged")
    wait_for(lambda: get(kube, "root", namespace) is None, message="root deleted once empty")
    assert read(zk, zk_base + "/tree") is None


def test_cold_start_over_existing_objects_is_batched_and_correct(kubeconfig: str, kube: KubeClient,
                                                                 zk_server: ZooKeeperServer, zk: KazooClient,
                                                                 zk_base: str, namespace: str) -> None:
    # Objects exist before zkop starts: one listing per parent replaces the first reads of their znodes
    # and records, and the cases a listing must not get wrong are among them.
    for i in range(6):
        create(kube, zkc(f"flag-{i}", f"/cold/flag-{i}", f"v{i}".encode(), namespace=namespace))
    zk.create(zk_base + "/cold/flag-0", b"legacy", makepath=True)  # adopted, not blindly created
    zk.create(zk_base + "/zkop/owners/cold/flag-1", b'{"clusterId":"other","managedBy":"zkop","name":"x",'
              b'"namespace":"y","uid":"z"}', makepath=True)  # owned by another installation
    args = ["--workers", "4", "--namespace", namespace]
    with OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", args) as operator:
        for i in (0, 2, 3, 4, 5):
            wait_for(functools.partial(synced, kube, f"flag-{i}", namespace), message=f"flag-{i} synced")
            assert read(zk, f"{zk_base}/cold/flag-{i}") == f"v{i}".encode()
        wait_for(lambda: conditions(get(kube, "flag-1", namespace)).get("Ready", {}).get("reason") == "PathConflict",
                 message="the foreign record is respected")
        assert zk.exists(zk_base + "/cold/flag-1") is None
        assert "Adopted" in reasons(kube, "flag-0", namespace)
        # 12 paths (6 znodes, 6 records) minus the legacy znode and the foreign record.
        assert "10 of 12 znodes and ownership records of unsynced objects do not exist yet" in operator.log_tail(200)
        gets = _sample(operator.metrics(), 'zkop_zookeeper_request_duration_seconds_count{operation="get"}')
        # Reads left: the legacy znode (and its ACL), the foreign record, and the watch-arming read behind
        # each of the 5 creates (2 nodes each) — no first read of an absent node.
        assert gets <= 2 + 5 * 2 + 2, gets


def test_ownership_record_changed_behind_zkops_back_is_never_overwritten(operator: OperatorProcess,
                                                                          kube: KubeClient, zk: KazooClient,
                                                                          zk_base: str, namespace: str) -> None:
    foreign = b'{"clusterId":"other","managedBy":"zkop","name":"x","namespace":"y","uid":"z"}'
    record = zk_base + "/zkop/owners/app/fenced"
    create(kube, zkc("fenced", "/app/fenced", b"one", namespace=namespace))
    wait_for(lambda: synced(kube, "fenced", namespace), message="synced")
    # Another installation's stamp replaces zkop's record in one step: deleted and re-created, so it
    # is at version 0 again, like the record zkop created (a version check alone cannot tell them apart).
    takeover = zk.transaction()
    takeover.delete(record)
    takeover.create(record, foreign)
    takeover.commit()
    wait_for(lambda: conditions(get(kube, "fenced", namespace)).get("Ready", {}).get("reason") == "PathConflict",
             message="the replaced record is seen as a conflict")
    # From now on zkop writes nothing there: neither a hand edit nor a spec change is "corrected".
    zk.set(zk_base + "/app/fenced", b"theirs")
    kube.request("PATCH", resource_path(*ZKC, namespace, "fenced"),
                 body={"spec": {"data": base64.b64encode(b"two").decode()}}, content_type=MERGE_PATCH)
    wait_for(lambda: (get(kube, "fenced", namespace) or {}).get("status", {}).get("observedGeneration") == 2,
             message="the spec change was reconciled")
    assert read(zk, zk_base + "/app/fenced") == b"theirs"
    assert zk.get(record)[0] == foreign
    assert conditions(get(kube, "fenced", namespace))["Ready"]["reason"] == "PathConflict"
