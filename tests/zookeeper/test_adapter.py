"""The ZooKeeper adapter against a real server: conditional writes, idempotent retries, chroot, errors."""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient
from zkop_testing.zookeeper import ZooKeeperServer

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
    from zkop_testing.zookeeper import free_port

    a = ZooKeeperAdapter(ConnectionOptions(hosts=f"127.0.0.1:{free_port()}", connect_timeout=1))
    with pytest.raises(ZooKeeperUnavailable, match="could not connect"):
        a.start()
    a.stop()


def test_split_chroot() -> None:
    assert split_chroot("h1:1,h2:2/app/x") == ("h1:1,h2:2", "/app/x")
    assert split_chroot("h1:1") == ("h1:1", "")


def test_watched_reads_are_cached_until_the_watch_fires(adapter: ZooKeeperAdapter, zk: KazooClient,
                                                        zk_base: str) -> None:
    from zkop_testing.waiting import wait_for

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


def test_arm_watches_after_create_remembers_and_sees_hand_edits(adapter: ZooKeeperAdapter, zk: KazooClient,
                                                                zk_base: str) -> None:
    from zkop_testing.waiting import wait_for

    fired: list[str] = []
    adapter.add_watch_listener(fired.append)
    adapter.execute([CreateNode("/armed/r", b"record"), CreateNode("/armed/n", b"data")], atomic=True,
                    arm_watches=True)
    reads = adapter.reads
    observed = adapter.read("/armed/n", watch=True)
    assert observed is not None and observed.data == b"data" and observed.version == 0
    assert adapter.reads == reads  # remembered by the read sent behind the multi
    assert not fired  # zkop's own create fired no watch of its own
    zk.set(zk_base + "/armed/n", b"hand edit")
    wait_for(lambda: "/armed/n" in fired, timeout=5, message="data watch armed after the create fired")
    observed = adapter.read("/armed/n", watch=True)
    assert observed is not None and observed.data == b"hand edit" and adapter.reads == reads + 1
    zk.delete(zk_base + "/armed/r")
    wait_for(lambda: "/armed/r" in fired, timeout=5, message="the record's watch fired on delete")


def test_read_async_pipelines_reads(adapter: ZooKeeperAdapter) -> None:
    adapter.execute([CreateNode("/p1", b"1"), CreateNode("/p2", b"2")])
    first, second, missing = (adapter.read_async("/p1", watch=True), adapter.read_async("/p2"),
                              adapter.read_async("/p3", watch=True, watch_absent=False))
    one, two = first.result(), second.result()
    assert one is not None and one.data == b"1" and two is not None and two.data == b"2"
    assert missing.result() is None
    reads = adapter.reads
    assert adapter.read_async("/p1", watch=True).result() == one and adapter.reads == reads


def test_select_handler_falls_back_past_fd_setsize() -> None:
    import os
    import resource
    import socket

    from zkop.zookeeper.handler import SelectHandler

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1100:
        pytest.skip(f"cannot open a descriptor past FD_SETSIZE (hard limit {hard})")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1100), hard))
    left, right = socket.socketpair()
    high = os.dup2(left.fileno(), 1050)
    try:
        right.send(b"x")
        handler = SelectHandler()
        readable, _, _ = handler.select([high], [], [], 1.0)
        assert readable == [high]  # plain select(2) cannot take fd 1050: the stock selector answered
        assert handler.select([left], [], [], 0)[0] == [left]
    finally:
        os.close(high)
        left.close()
        right.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_learn_absent_answers_first_reads_from_one_listing(adapter: ZooKeeperAdapter, zk: KazooClient,
                                                           zk_base: str) -> None:
    adapter.execute([CreateNode("/many/present", b"p")])
    paths = ["/many/present", "/many/a", "/many/b", "/nowhere/x", "/nowhere/y", "/single/z"]
    assert adapter.learn_absent(paths) == 4  # /single holds one path only: not listed
    reads = adapter.reads
    assert adapter.read("/many/a", watch=True, watch_absent=False) is None
    assert adapter.read("/nowhere/x", watch=True, watch_absent=False) is None
    assert adapter.reads == reads and adapter.absent_hits == 2
    # Once only, and never for a present node or a read that wants an exists watch.
    assert adapter.read("/many/a", watch=True, watch_absent=False) is None and adapter.reads == reads + 1
    present = adapter.read("/many/present", watch=True, watch_absent=False)
    assert present is not None and present.data == b"p"
    assert adapter.read("/many/b", watch=True) is None and adapter.absent_hits == 2
    # A stale hint can only cost a refused create: the node appeared after the listing.
    adapter.learn_absent(["/nowhere/x", "/nowhere/y"])
    zk.create(zk_base + "/nowhere/y", b"someone else", makepath=True)
    assert adapter.read("/nowhere/y", watch=True, watch_absent=False) is None  # the stale hint
    with pytest.raises(ConcurrentModification):
        adapter.execute([CreateNode("/reg/nowhere/y", b"record"), CreateNode("/nowhere/y", b"mine")], atomic=True)
    assert zk.get(zk_base + "/nowhere/y")[0] == b"someone else" and zk.exists(zk_base + "/reg/nowhere/y") is None
    observed = adapter.read("/nowhere/y", watch=True, watch_absent=False)
    assert observed is not None and observed.data == b"someone else"


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
