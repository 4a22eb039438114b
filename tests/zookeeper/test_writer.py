"""Writes against a real server: conditional writes, idempotent retries, atomic multi, preconditions."""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient

from zkop.zookeeper.actions import CreateNode, DeleteNode, SetData
from zkop.zookeeper.adapter import (
    ConcurrentModification,
    ZooKeeperAdapter,
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
