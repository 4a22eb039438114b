"""The ZooKeeper adapter against a real server: conditional writes, idempotent retries, chroot, errors."""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient

from zkop.testing.zookeeper import ZooKeeperServer
from zkop.zookeeper.actions import CreateNode, DeleteNode, SetData
from zkop.zookeeper.adapter import (
    ConcurrentModification,
    ConnectionOptions,
    ZooKeeperAdapter,
    ZooKeeperUnavailable,
    split_chroot,
)


def test_create_makes_parents_and_is_idempotent(adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    adapter.execute([CreateNode("/a/b/c", b"v1")])
    assert zk.get(zk_base + "/a/b/c")[0] == b"v1"
    assert zk.get(zk_base + "/a/b")[0] == b""
    # A retry after a lost reply finds the node with the intended bytes: success.
    adapter.execute([CreateNode("/a/b/c", b"v1")])
    # Different bytes mean someone else created it: re-plan.
    with pytest.raises(ConcurrentModification):
        adapter.execute([CreateNode("/a/b/c", b"other")])


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


def test_read_reports_stat(adapter: ZooKeeperAdapter) -> None:
    assert adapter.read("/missing") is None
    adapter.execute([CreateNode("/s/x", b"1"), CreateNode("/s/y", b"2")])
    observed = adapter.read("/s")
    assert observed is not None and observed.num_children == 2 and observed.ephemeral_owner == 0


def test_missing_chroot_is_a_clear_error(zk_server: ZooKeeperServer, zk_base: str) -> None:
    a = ZooKeeperAdapter(ConnectionOptions(hosts=f"{zk_server.hosts}{zk_base}/does-not-exist", connect_timeout=10))
    with pytest.raises(ZooKeeperUnavailable, match=r"chroot .*does-not-exist does not exist"):
        a.start()
    a.stop()


def test_unreachable_server_is_unavailable() -> None:
    from zkop.testing.zookeeper import free_port

    a = ZooKeeperAdapter(ConnectionOptions(hosts=f"127.0.0.1:{free_port()}", connect_timeout=1))
    with pytest.raises(ZooKeeperUnavailable, match="could not connect"):
        a.start()
    a.stop()


def test_split_chroot() -> None:
    assert split_chroot("h1:1,h2:2/app/x") == ("h1:1,h2:2", "/app/x")
    assert split_chroot("h1:1") == ("h1:1", "")


def test_watched_reads_are_cached_until_the_watch_fires(adapter: ZooKeeperAdapter, zk: KazooClient,
                                                        zk_base: str) -> None:
    from zkop.testing.waiting import wait_for

    fired: list[str] = []
    adapter.add_watch_listener(fired.append)
    adapter.execute([CreateNode("/w", b"v1")])
    first = adapter.read("/w", watch=True)
    reads = adapter.reads
    assert adapter.read("/w", watch=True) == first
    assert adapter.reads == reads  # answered from memory: the watch has not fired
    zk.set(zk_base + "/w", b"hand edit")
    wait_for(lambda: "/w" in fired, timeout=5, message="data watch fired")
    observed = adapter.read("/w", watch=True)
    assert observed is not None and observed.data == b"hand edit" and adapter.reads == reads + 1
    # Deletion and re-creation are seen too (exists watch on an absent node).
    fired.clear()
    zk.delete(zk_base + "/w")
    wait_for(lambda: "/w" in fired, timeout=5, message="delete watch fired")
    assert adapter.read("/w", watch=True) is None
    fired.clear()
    zk.create(zk_base + "/w", b"back")
    wait_for(lambda: "/w" in fired, timeout=5, message="create watch fired")
    observed = adapter.read("/w", watch=True)
    assert observed is not None and observed.data == b"back"


def test_acl_is_read_and_restored(adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    from kazoo.security import make_acl, make_digest_acl

    from zkop.zookeeper.actions import OPEN_ACL, AclEntry, acl_matches

    ops = make_digest_acl("ops", "pw", all=True)
    ops_entry = AclEntry("digest", ops.id.id, 31)
    restricted = (ops_entry, AclEntry("world", "anyone", 1))  # world may read (and list children)
    adapter.execute([CreateNode("/acl", b"x", tuple(sorted(restricted)))])
    observed = adapter.read("/acl", tuple(sorted(restricted)))
    # Without ADMIN on the node ZooKeeper redacts digest hashes (ZOOKEEPER-1392); they still match.
    assert observed is not None and observed.acl is not None
    assert acl_matches(observed.acl, tuple(sorted(restricted)))
    assert not acl_matches(observed.acl, OPEN_ACL)
    # A client without the digest can read but not write.
    from kazoo.exceptions import NoAuthError

    with pytest.raises(NoAuthError):
        zk.set(zk_base + "/acl", b"y")
    # Open ACL nodes that were never changed are not read twice.
    adapter.execute([CreateNode("/open", b"x")])
    observed = adapter.read("/open")
    assert observed is not None and observed.acl is None and observed.acl_version == 0
    zk.set_acls(zk_base + "/open", [make_digest_acl("ops", "pw", all=True), make_acl("world", "anyone", read=True)])
    observed = adapter.read("/open")
    assert observed is not None and observed.acl_version == 1 and observed.acl is not None
    assert not acl_matches(observed.acl, OPEN_ACL)
