"""The ZooKeeper adapter against a real server: conditional writes, idempotent retries, chroot, errors."""

from __future__ import annotations

from collections.abc import Iterator

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


@pytest.fixture
def adapter(zk_server: ZooKeeperServer, zk_base: str) -> Iterator[ZooKeeperAdapter]:
    a = ZooKeeperAdapter(ConnectionOptions(hosts=f"{zk_server.hosts}{zk_base}", connect_timeout=10))
    a.start()
    yield a
    a.stop()


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
