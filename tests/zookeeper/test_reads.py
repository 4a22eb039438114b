"""Reads against a real server: stat, ACLs, pipelined reads, walks, watched listings, bounded waits."""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.zookeeper.actions import CreateNode, Observed
from zkop.zookeeper.adapter import ConnectionOptions, ZooKeeperAdapter, ZooKeeperUnavailable


def test_read_reports_stat(adapter: ZooKeeperAdapter) -> None:
    assert adapter.read("/missing") is None
    adapter.execute([CreateNode("/s/x", b"1"), CreateNode("/s/y", b"2")])
    observed = adapter.read("/s")
    assert observed is not None and observed.num_children == 2 and observed.ephemeral_owner == 0


def test_acl_is_read_and_restored(adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    from kazoo.security import make_acl, make_digest_acl

    from zkop.zookeeper.actions import OPEN_ACL, AclEntry, acl_matches

    ops = make_digest_acl("ops", "pw", all=True)
    ops_entry = AclEntry("digest", ops.id.id, 31)
    restricted = (ops_entry, AclEntry("world", "anyone", 1))  # world may read (and list children)
    adapter.execute([CreateNode("/acl", b"x", tuple(sorted(restricted)))])
    observed = adapter.read("/acl", tuple(sorted(restricted)))
    # Without ADMIN on the node ZooKeeper redacts digest hashes (ZOOKEEPER-1392): a redacted ACL
    # is never taken for the real one.
    assert observed is not None and observed.acl is not None
    assert AclEntry("digest", "ops:x", 31) in observed.acl
    assert not acl_matches(observed.acl, tuple(sorted(restricted)))
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


def test_read_async_pipelines_reads(adapter: ZooKeeperAdapter) -> None:
    adapter.execute([CreateNode("/p1", b"1"), CreateNode("/p2", b"2")])
    first, second, missing = (adapter.read_async("/p1", watch=True), adapter.read_async("/p2"),
                              adapter.read_async("/p3", watch=True, watch_absent=False))
    one, two = first.result(), second.result()
    assert one is not None and one.data == b"1" and two is not None and two.data == b"2"
    assert missing.result() is None
    reads = adapter.reads
    assert adapter.read_async("/p1", watch=True).result() == one and adapter.reads == reads


def _sample(name: str, **labels: str) -> float:
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_walk_reads_a_subtree_level_by_level(adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str,
                                             request: pytest.FixtureRequest) -> None:
    from kazoo.security import make_acl

    from zkop.zookeeper.actions import OPEN_ACL
    from zkop.zookeeper.adapter import NodeNotFound, NodeSnapshot, ZooKeeperNoAuth

    adapter.execute([CreateNode("/tree/a/deep", b"d"), CreateNode("/tree/b", b"b"), CreateNode("/tree/skip/x", b"")])
    zk.create(zk_base + "/tree/locked", b"secret", acl=[make_acl("digest", "ops:hash", all=True)])
    request.addfinalizer(lambda: zk.delete(zk_base + "/tree/locked"))  # the recursive clean-up cannot list it
    visited: list[NodeSnapshot] = []

    def visit(node: NodeSnapshot) -> bool:
        visited.append(node)
        return node.path != "/tree/b"

    gets = _sample("zkop_zookeeper_request_duration_seconds_count", operation="get_children")
    unreadable = adapter.walk("/tree", visit, skip=lambda path: path.endswith("/skip"))
    assert [n.path for n in visited] == ["/tree", "/tree/a", "/tree/b", "/tree/a/deep"]  # parents first
    assert visited[0].children == ("a", "b", "locked", "skip")  # every child listed, walked or not
    deep = visited[3].observed
    assert deep.data == b"d" and deep.version == 0 and deep.acl == OPEN_ACL  # the ACL is always read
    assert unreadable == ["/tree/locked"]
    # Every request went through the session: timed like any other.
    assert _sample("zkop_zookeeper_request_duration_seconds_count", operation="get_children") == gets + 5
    with pytest.raises(NodeNotFound, match="/nowhere does not exist"):
        adapter.walk("/nowhere", visit)
    with pytest.raises(ZooKeeperNoAuth, match="/tree/locked"):
        adapter.walk("/tree/locked", visit)


def test_read_many_reports_each_node_or_its_error(adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str,
                                                  request: pytest.FixtureRequest) -> None:
    from kazoo.security import make_acl

    from zkop.zookeeper.actions import OPEN_ACL
    from zkop.zookeeper.adapter import ZooKeeperNoAuth

    adapter.execute([CreateNode("/many/a", b"a")])
    zk.create(zk_base + "/many/locked", b"secret", acl=[make_acl("digest", "ops:hash", all=True)])
    request.addfinalizer(lambda: zk.delete(zk_base + "/many/locked"))  # the recursive clean-up cannot list it
    counted: list[None] = []
    result = adapter.read_many(["/many/a", "/many/missing", "/many/locked"], on_node=lambda: counted.append(None))
    present = result["/many/a"]
    assert isinstance(present, Observed) and present.data == b"a" and present.acl == OPEN_ACL
    assert result["/many/missing"] is None
    assert isinstance(result["/many/locked"], ZooKeeperNoAuth) and len(counted) == 3


def test_list_watched_arms_a_child_watch_or_an_exists_watch(adapter: ZooKeeperAdapter, zk: KazooClient,
                                                            zk_base: str) -> None:
    from zkop_testing.waiting import wait_for

    fired: list[str] = []
    assert adapter.list_watched("/svc", fired.append) is None  # absent: an exists watch instead
    zk.create(zk_base + "/svc/b", b"", makepath=True)
    wait_for(lambda: "/svc" in fired, message="exists watch fired on create")
    fired.clear()
    listing = adapter.list_watched("/svc", fired.append)
    assert listing is not None and listing.children == ("b",)
    assert listing.created_zxid == zk.exists(zk_base + "/svc").czxid
    zk.create(zk_base + "/svc/a", b"")
    wait_for(lambda: "/svc" in fired, message="child watch fired")
    listing = adapter.list_watched("/svc", fired.append)
    assert listing is not None and listing.children == ("a", "b")  # sorted


def test_requests_to_a_stopped_server_end_within_the_session_timeout() -> None:
    """kazoo queues a request sent while it reconnects; with the server gone it would wait forever."""
    import time

    from zkop_testing.waiting import result_within, wait_for

    with ZooKeeperServer() as server:
        # The bounded wait on its own: no session reset after the timeout (it would fail the requests earlier).
        adapter = ZooKeeperAdapter(ConnectionOptions(hosts=server.hosts, session_timeout=2.0, connect_timeout=10,
                                                     session_expiration_percent=0, refusal_check_interval=None))
        adapter.start()
        try:
            adapter.execute([CreateNode("/tree/a", b"1")])
            server.kill()
            wait_for(lambda: not adapter.connected, message="session suspended")
            for request in (lambda: adapter.walk("/tree", lambda _: True), lambda: adapter.read_many(["/tree/a"])):
                # Ended by the request's own wait (the session timeout): a timeout error, not a refusal; a
                # request waiting forever would still be running when result_within stops waiting.
                started = time.monotonic()
                with pytest.raises(ZooKeeperUnavailable, match="KazooTimeoutError"):
                    result_within(request, message="a request to a stopped server waiting forever")
                assert time.monotonic() - started > 1.5  # it did wait (a lower bound: no load makes it fail)
            # Single reads are refused at once while the session is not connected.
            with pytest.raises(ZooKeeperUnavailable, match="refused until it is back"):
                adapter.list_watched("/tree", lambda _: None)
        finally:
            adapter.stop()
