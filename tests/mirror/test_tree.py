"""The mirror's watched, read-only subtree reads against a real ZooKeeper, in both watch modes."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.mirror.tree import TreeReader
from zkop.zookeeper.adapter import ConnectionOptions, ZooKeeperAdapter


@pytest.fixture(params=["auto", "per-node"])
def session(request: pytest.FixtureRequest, zk_server: ZooKeeperServer, zk_base: str) -> Iterator[ZooKeeperAdapter]:
    adapter = ZooKeeperAdapter(ConnectionOptions(hosts=f"{zk_server.hosts}{zk_base}", connect_timeout=10,
                                                 watch_mode=request.param))
    adapter.start()
    yield adapter
    adapter.stop()


def test_every_change_below_the_root_is_noticed_and_only_changes_are_read_again(
        session: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    for path in ("/root/a", "/root/b/c", "/root/b/d/e"):
        zk.create(zk_base + path, path.encode(), makepath=True)
    changed: list[str] = []
    fired = threading.Event()

    def on_change(path: str) -> None:
        changed.append(path)
        fired.set()

    reader = TreeReader(session, on_change)
    session.add_watch_listener(on_change)
    session.watch_subtrees("test", ["/root"], whole=True)
    if session.watch_mode != "per-node":
        assert session.wait_watches(10)

    def values() -> dict[str, bytes]:
        return {n.relative: n.data for n in reader.snapshot("/root", recursive=True).nodes}

    # Interior znodes hold data here (makepath leaves b and b/d empty: structure, not values).
    assert values() == {"a": b"/root/a", "b/c": b"/root/b/c", "b/d/e": b"/root/b/d/e"}
    reads = session.reads
    assert values() == {"a": b"/root/a", "b/c": b"/root/b/c", "b/d/e": b"/root/b/d/e"}
    assert session.reads == reads, "an unchanged subtree is answered from the watch-validated cache"

    changes: list[tuple[Callable[[], object], dict[str, bytes | None]]] = [
        (lambda: zk.set(zk_base + "/root/b/d/e", b"new"), {"b/d/e": b"new"}),
        (lambda: zk.create(zk_base + "/root/b/d/f/g", b"deep", makepath=True), {"b/d/f/g": b"deep"}),
        (lambda: zk.delete(zk_base + "/root/a"), {"a": None}),
    ]
    for change, expected in changes:
        fired.clear()
        change()
        wait_for(fired.is_set, message="the change was notified")
        wait_for(lambda expected=expected: all(values().get(k) == v for k, v in expected.items()),  # type: ignore[misc]
                 message=f"snapshot shows {expected}")
    assert session.reads - reads <= 4, "only what changed was read again"


def test_a_missing_root_is_watched_for_its_creation(session: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    fired = threading.Event()
    reader = TreeReader(session, lambda path: fired.set())
    snapshot = reader.snapshot("/later", recursive=True)
    assert not snapshot.root_exists and not snapshot.nodes
    zk.create(zk_base + "/later/x", b"1", makepath=True)
    wait_for(fired.is_set, message="the root's creation was notified")
    assert [n.relative for n in reader.snapshot("/later", recursive=True).nodes] == ["x"]


def test_a_whole_subtree_hears_of_nodes_nobody_read(zk_server: ZooKeeperServer, zk_base: str,
                                                    zk: KazooClient) -> None:
    adapter = ZooKeeperAdapter(ConnectionOptions(hosts=f"{zk_server.hosts}{zk_base}", connect_timeout=10))
    adapter.start()
    try:
        heard: list[str] = []
        adapter.add_watch_listener(heard.append)
        adapter.watch_subtrees("partial", ["/v/a", "/v/b"])  # the covering root is /v
        adapter.watch_subtrees("mirror", ["/w"], whole=True)
        zk.create(zk_base + "/v/a", b"", makepath=True)
        zk.create(zk_base + "/w", b"")
        assert adapter.wait_watches(10) and adapter.watch_mode == "persistent"
        assert adapter.watches.active == {"/v", "/w"}
        zk.create(zk_base + "/v/unregistered", b"")
        zk.create(zk_base + "/w/new/deep", b"", makepath=True)
        wait_for(lambda: "/w/new/deep" in heard, message="a node nobody read, below a whole subtree")
        # Notifications arrive in order: the one of /v/unregistered came first and was dropped.
        assert "/w/new" in heard and "/v/unregistered" not in heard, heard
    finally:
        adapter.stop()
