"""Writes against a real server: conditional writes, idempotent retries, atomic multi, preconditions,
and never leaving a node zkop cannot read (a create it cannot read back is undone; the start-up probe)."""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient, TransactionRequest
from kazoo.security import make_digest_acl_credential
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.zookeeper.actions import AclEntry, Action, CheckVersion, CreateNode, DeleteNode, SetData
from zkop.zookeeper.adapter import (
    ConcurrentModification,
    ConnectionOptions,
    ZooKeeperAdapter,
    ZooKeeperNoAuth,
)
from zkop.zookeeper.writer import multi_request, to_kazoo_acl

#: Runs on every ZooKeeper line under test (ZKOP_ZOOKEEPER_LINES, tests/conftest.py).
pytestmark = pytest.mark.zookeeper_semantics


def test_create_makes_parents_and_is_idempotent(adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    adapter.execute([CreateNode("/a/b/c", b"v1")])
    assert zk.get(zk_base + "/a/b/c")[0] == b"v1"
    assert zk.get(zk_base + "/a/b")[0] == b""
    # A retry after a lost reply finds the node with the intended bytes: success.
    adapter.execute([CreateNode("/a/b/c", b"v1")])
    # Different bytes mean someone else created it: re-plan.
    with pytest.raises(ConcurrentModification):
        adapter.execute([CreateNode("/a/b/c", b"other")])


def test_a_multi_creating_a_node_and_its_descendants_is_one_transaction(adapter: ZooKeeperAdapter,
                                                                         zk: KazooClient, zk_base: str) -> None:
    # /t/config is declared with data and so is /t/config/db/url below it (a tree's children): /t/config/db,
    # implied, is created inside the same multi, never beforehand (which would fail or write outside it).
    adapter.execute([CreateNode("/t/config", b"interior"), CreateNode("/t/config/db/url", b"jdbc")], atomic=True)
    stats = [zk.get(zk_base + p)[1] for p in ("/t/config", "/t/config/db", "/t/config/db/url")]
    assert len({s.czxid for s in stats}) == 1
    assert [zk.get(zk_base + p)[0] for p in ("/t/config", "/t/config/db")] == [b"interior", b""]


def test_set_is_compare_and_set(adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    adapter.execute([CreateNode("/n", b"v1")])
    observed = adapter.read("/n")
    assert observed is not None and observed.version == 0
    zk.set(zk_base + "/n", b"hand edit")  # version 1 now
    with pytest.raises(ConcurrentModification):
        adapter.execute([SetData("/n", b"v2", observed.version)])
    assert zk.get(zk_base + "/n")[0] == b"hand edit"
    adapter.execute([SetData("/n", b"v2", 1)])
    assert zk.get(zk_base + "/n")[0] == b"v2"


def test_delete_is_conditional_idempotent_and_never_recursive(adapter: ZooKeeperAdapter, zk: KazooClient,
                                                               zk_base: str) -> None:
    adapter.execute([CreateNode("/p/child", b"x")])
    with pytest.raises(ConcurrentModification):
        adapter.execute([DeleteNode("/p", 0)])
    assert zk.exists(zk_base + "/p/child") is not None
    with pytest.raises(ConcurrentModification):
        adapter.execute([DeleteNode("/p/child", 5)])
    adapter.execute([DeleteNode("/p/child", 0)])
    assert zk.exists(zk_base + "/p/child") is None
    adapter.execute([DeleteNode("/p/child", 0)])  # already gone: success


def test_atomic_execute_writes_all_or_nothing(adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    # Parents are missing: the multi fails with NoNode, the parents are made and it is retried once.
    adapter.execute([CreateNode("/reg/a/x", b"record"), CreateNode("/a/x", b"data")], atomic=True)
    assert zk.get(zk_base + "/reg/a/x")[0] == b"record" and zk.get(zk_base + "/a/x")[0] == b"data"
    # The second create fails (the node exists): the first is rolled back, nothing is written.
    with pytest.raises(ConcurrentModification, match="NodeExistsError"):
        adapter.execute([CreateNode("/reg/a/y", b"record"), CreateNode("/a/x", b"other")], atomic=True)
    assert zk.exists(zk_base + "/reg/a/y") is None
    assert zk.get(zk_base + "/a/x")[0] == b"data"
    # A stale version in one part refuses the whole multi too.
    with pytest.raises(ConcurrentModification, match="BadVersionError"):
        adapter.execute([SetData("/reg/a/x", b"new record", 0), SetData("/a/x", b"v2", 7)], atomic=True)
    assert zk.get(zk_base + "/reg/a/x")[0] == b"record"
    adapter.execute([SetData("/reg/a/x", b"new record", 0), SetData("/a/x", b"v2", 0)], atomic=True)
    assert zk.get(zk_base + "/reg/a/x")[0] == b"new record" and zk.get(zk_base + "/a/x")[0] == b"v2"


def test_required_versions_guard_writes(adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    from zkop.zookeeper.actions import OPEN_ACL, CheckVersion, SetAcl

    adapter.execute([CreateNode("/guard/record", b"mine"), CreateNode("/guard/node", b"v1")], atomic=True)
    adapter.execute([SetData("/guard/node", b"v2", 0)], require=[CheckVersion("/guard/record", 0)])
    assert zk.get(zk_base + "/guard/node")[0] == b"v2"
    zk.set(zk_base + "/guard/record", b"theirs")
    with pytest.raises(ConcurrentModification, match="guard/record"):
        adapter.execute([SetData("/guard/node", b"v3", 1)], require=[CheckVersion("/guard/record", 0)])
    assert zk.get(zk_base + "/guard/node")[0] == b"v2"
    # With a SetAcl (no multi for it) the check is a read first.
    with pytest.raises(ConcurrentModification, match="guard/record"):
        adapter.execute([SetAcl("/guard/node", OPEN_ACL, 0)], require=[CheckVersion("/guard/record", 0)])
    adapter.execute([], require=[CheckVersion("/guard/record", 0)])  # nothing to write: nothing checked


OTHER = AclEntry("digest", make_digest_acl_credential("someone", "else"), 31)  # not zkop: it holds no credential


def _left_under(zk: KazooClient, base: str) -> list[str]:
    return sorted(zk.get_children(base))


def test_a_create_zkop_cannot_read_back_is_undone_in_a_multi(adapter: ZooKeeperAdapter, zk: KazooClient,
                                                             zk_base: str) -> None:
    # The reconciler's write: record and znode in one multi, watches armed by a read behind it.
    # The znode's ACL does not grant zkop READ: ZooKeeper accepts it, the read behind it is refused.
    with pytest.raises(ZooKeeperNoAuth) as info:
        adapter.execute([CreateNode("/rec/x", b"r"), CreateNode("/locked/a/b", b"x", (OTHER,))], atomic=True,
                        arm_watches=True)
    assert "cannot read it back" in str(info.value)
    # Everything that step created is gone again, the parents it made included.
    assert _left_under(zk, zk_base) == []


def test_a_create_zkop_cannot_read_back_is_undone_one_by_one(adapter: ZooKeeperAdapter, zk: KazooClient,
                                                             zk_base: str) -> None:
    zk.ensure_path(zk_base + "/kept")  # existed before: stays
    with pytest.raises(ZooKeeperNoAuth):
        adapter.execute([CreateNode("/kept/new/n", b"x", (OTHER,))])
    assert _left_under(zk, zk_base) == ["kept"] and zk.get_children(zk_base + "/kept") == []


def test_a_redaction_marker_is_never_sent(adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    with pytest.raises(ValueError, match="redacted digest id"):
        adapter.execute([CreateNode("/n", b"x", (AclEntry("digest", "ops:x", 31),))])
    assert _left_under(zk, zk_base) == []


def test_the_probe_refuses_a_parent_acl_that_excludes_zkop(zk_server: ZooKeeperServer, zk: KazooClient,
                                                           zk_base: str) -> None:
    options = ConnectionOptions(hosts=f"{zk_server.hosts}{zk_base}", connect_timeout=10, parent_acl=(OTHER,))
    probing = ZooKeeperAdapter(options)
    probing.start()
    try:
        with pytest.raises(ZooKeeperNoAuth) as info:
            probing.probe("/zkop/probe")
        message = str(info.value)
        assert "--zk-parent-acl the ACL would deny zkop read, create, delete" in message
        assert "zkop authenticates as ip:127.0.0.1" in message and f"digest:{OTHER.id}" in message
        assert _left_under(zk, zk_base) == []  # refused before anything was written
    finally:
        probing.stop()


def test_the_probe_leaves_nothing_it_cannot_read(zk_server: ZooKeeperServer, zk: KazooClient, zk_base: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # Should the check be wrong (a super identity, NAT, a SASL realm rule), the server has the last word:
    # the probe's parents, which zkop cannot read or write below, are deleted again.
    options = ConnectionOptions(hosts=f"{zk_server.hosts}{zk_base}", connect_timeout=10, parent_acl=(OTHER,))
    probing = ZooKeeperAdapter(options)
    monkeypatch.setattr(ZooKeeperAdapter, "parent_acl_problem", lambda self: None)
    probing.start()
    try:
        with pytest.raises(ZooKeeperNoAuth):
            probing.probe("/zkop/probe")
        assert _left_under(zk, zk_base) == []
    finally:
        probing.stop()


@pytest.mark.parametrize("chroot", ["", "/bench/root"])
def test_multi_request_is_what_kazoos_transaction_builder_sends(chroot: str) -> None:
    client = KazooClient(hosts=f"127.0.0.1:1{chroot}")  # never started: only its chroot is read
    digest = (AclEntry("digest", "u:x", 31),)
    actions: list[Action] = [CreateNode("/app/x", b"1"), CreateNode("/zkop/registry/app/x", b"{}", digest),
               CreateNode("//odd//path/", b""), SetData("/app/y", b"2", 3), DeleteNode("/app/z", 4),
               DeleteNode("/a/.hidden", -1)]
    require = [CheckVersion("/app", 7)]
    kazoo_builder = TransactionRequest(client)
    kazoo_builder.check("/app", 7)
    for action in actions:
        if isinstance(action, CreateNode):
            kazoo_builder.create(action.path, action.data, acl=to_kazoo_acl(action.acl))
        elif isinstance(action, SetData):
            kazoo_builder.set_data(action.path, action.data, version=action.expected_version)
        elif isinstance(action, DeleteNode):
            kazoo_builder.delete(action.path, version=action.expected_version)
    built = multi_request(client.chroot, actions, require)
    assert list(built.operations) == kazoo_builder.operations
    assert built.operations[1].path == f"{chroot}/app/x"


def test_atomic_execute_with_a_precondition_under_a_chroot(adapter: ZooKeeperAdapter, zk: KazooClient,
                                                            zk_base: str) -> None:
    zk.create(f"{zk_base}/app/y", b"old", makepath=True)
    zk.create(f"{zk_base}/app/z", b"gone soon")
    adapter.execute([CreateNode("/app/x", b"new"), SetData("/app/y", b"changed", 0), DeleteNode("/app/z", 0)],
                    atomic=True, require=[CheckVersion("/app", 0)])
    assert zk.get(f"{zk_base}/app/x")[0] == b"new"
    assert zk.get(f"{zk_base}/app/y")[0] == b"changed"
    assert zk.exists(f"{zk_base}/app/z") is None
    zk.set(f"{zk_base}/app", b"moved on")
    with pytest.raises(ConcurrentModification):
        adapter.execute([SetData("/app/y", b"again", 1), CreateNode("/app/w", b"")], atomic=True,
                        require=[CheckVersion("/app", 0)])  # /app is at version 1 now: nothing written
    assert zk.get(f"{zk_base}/app/y")[0] == b"changed"
    assert zk.exists(f"{zk_base}/app/w") is None
