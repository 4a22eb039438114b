"""ZooKeeperConfig ACLs against real ZooKeeper and ``zkop run``: never lock zkop out, bounded ACL drift.

ZooKeeper fires no watch on ``setACL``, so a hand ``setAcl`` is caught by the periodic ACL check
(``--acl-check-period``), not by a data watch; and an ACL that would deny zkop its own znode is
refused before anything is written (the classic: a digest credential given in its hashed form).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.security import make_acl, make_digest_acl, make_digest_acl_credential
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import conditions, create, events, get, reasons, synced, zkc
from zkop_testing.waiting import EVENTUALLY, wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import KubeClient

OPS_ID = make_digest_acl_credential("ops", "ops-pw")
GUARDED = [{"scheme": "digest", "id": OPS_ID, "permissions": ["read", "write", "create", "delete", "admin"]},
           {"scheme": "world", "id": "anyone", "permissions": ["read"]}]


@pytest.fixture
def ops(zk_server: ZooKeeperServer) -> Iterator[KazooClient]:
    client = KazooClient(hosts=zk_server.hosts, auth_data=[("digest", "ops:ops-pw")])
    client.start(timeout=EVENTUALLY)
    yield client
    client.stop()
    client.close()


def test_hand_set_acl_is_corrected_by_the_acl_check(kubeconfig: str, kube: KubeClient,
                                                    zk_server: ZooKeeperServer, zk_base: str,
                                                    ops: KazooClient, tmp_path: Path, namespace: str) -> None:
    credentials = tmp_path / "credentials"
    credentials.write_text("ops:ops-pw\n")
    period = 1.0
    # A full resync only every 10 minutes: only the ACL check can notice an ACL change in time.
    args = ["--zk-auth-file", str(credentials), "--sync-period", "600", "--acl-check-period", f"{period:g}s",
            "--namespace", namespace]
    with OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", args):
        create(kube, zkc("guarded", "/app/guarded", b"v1", acl=GUARDED, namespace=namespace))
        wait_for(lambda: synced(kube, "guarded", namespace), message="synced")
        path = zk_base + "/app/guarded"
        # Someone with the password opens the node to the world. Only the ACL changes: no watch fires.
        ops.set_acls(path, [make_digest_acl("ops", "ops-pw", all=True), make_acl("world", "anyone", all=True)])
        started = time.monotonic()

        def restored() -> bool:
            entries = ops.get_acls(path)[0]
            return sorted((a.id.scheme, a.perms) for a in entries) == [("digest", 31), ("world", 1)]

        # Generous, and still far from the resync 10 minutes away: what corrects it is the ACL check.
        wait_for(restored, timeout=60, interval=0.05, message="hand setAcl corrected")
        took = time.monotonic() - started
        wait_for(lambda: "DriftCorrected" in reasons(kube, "guarded", namespace), message="DriftCorrected event")
        message = next(e["message"] for e in events(kube, "guarded", namespace) if e["reason"] == "DriftCorrected")
        assert "ACL restored" in message
        assert ops.get(path)[0] == b"v1"
        print(f"hand setAcl corrected in {took:.2f} s (acl-check-period {period:g} s)")


def test_an_acl_that_would_lock_zkop_out_is_refused_before_anything_is_written(
        kubeconfig: str, kube: KubeClient, zk_server: ZooKeeperServer, zk_base: str, zk: KazooClient,
        tmp_path: Path, namespace: str) -> None:
    # The classic: the Secret holds the hashed id (what goes into the ACL) instead of the password.
    credentials = tmp_path / "credentials"
    credentials.write_text(OPS_ID + "\n")
    args = ["--zk-auth-file", str(credentials), "--namespace", namespace]
    with OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", args):
        create(kube, zkc("guarded", "/app/deep/guarded", b"v1", acl=GUARDED, namespace=namespace))
        stalled = wait_for(lambda: conditions(get(kube, "guarded", namespace)).get("Stalled"), message="stalled")
        assert stalled["reason"] == "InvalidSpec"
        message = conditions(get(kube, "guarded", namespace))["Ready"]["message"]
        assert "would lock zkop out of /app/deep/guarded" in message
        assert f"the ACL grants digest:{OPS_ID} read, write, create, delete, admin; world:anyone read" in message
        assert "zkop authenticates as digest:ops:" in message and "is the hashed id itself" in message
        wait_for(lambda: any(e["type"] == "Warning" and e["reason"] == "InvalidSpec"
                             for e in events(kube, "guarded", namespace)), message="Warning event")
        # Nothing was written: neither the znode, its parents, nor an ownership record.
        assert zk.exists(zk_base + "/app") is None
        assert zk.exists(zk_base + "/zkop/owners/app") is None


def test_an_auth_acl_is_compared_as_the_server_stores_it(kubeconfig: str, kube: KubeClient,
                                                        zk_server: ZooKeeperServer, zk_base: str, zk: KazooClient,
                                                        ops: KazooClient, tmp_path: Path, namespace: str) -> None:
    # ``auth`` entries are stored as the writer's authenticated ids (PrepRequestProcessor.fixupACL): read
    # back, the ACL names digest:ops:…, never auth. Compared as written, it would look drifted forever.
    credentials = tmp_path / "credentials"
    credentials.write_text("ops:ops-pw\n")
    acl = [{"scheme": "auth", "id": "", "permissions": ["read", "write", "create", "delete", "admin"]},
           {"scheme": "world", "id": "anyone", "permissions": ["read"]}]
    with OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}",
                         ["--zk-auth-file", str(credentials), "--acl-check-period", "0.2s", "--namespace", namespace]):
        create(kube, zkc("mine", "/app/mine", b"v1", acl=acl, namespace=namespace))
        wait_for(lambda: synced(kube, "mine", namespace), message="synced")
        path = zk_base + "/app/mine"
        assert sorted((a.id.scheme, a.id.id, a.perms) for a in ops.get_acls(path)[0]) == [
            ("digest", OPS_ID, 31), ("world", "anyone", 1)]
        ops.set(path, b"hand edit")  # a data change: the pass re-reads the ACL too
        wait_for(lambda: "DriftCorrected" in reasons(kube, "mine", namespace), message="data drift corrected")
        message = next(e["message"] for e in events(kube, "mine", namespace) if e["reason"] == "DriftCorrected")
        assert "ACL restored" not in message, message
        assert ops.get(path)[1].aversion == 0  # never setACL'd: what the server stored is what was declared
