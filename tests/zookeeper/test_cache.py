"""The watch-validated cache against a real server: served while the watch has not fired, listings as hints."""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient

from zkop.zookeeper.actions import CreateNode
from zkop.zookeeper.adapter import (
    ConcurrentModification,
    ZooKeeperAdapter,
)


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
    wait_for(lambda: "/w" in fired, message="data watch fired")
    observed = adapter.read("/w", watch=True)
    assert observed is not None and observed.data == b"hand edit" and adapter.reads == reads + 1
    # Deletion and re-creation are seen too (exists watch on an absent node).
    fired.clear()
    zk.delete(zk_base + "/w")
    wait_for(lambda: "/w" in fired, message="delete watch fired")
    assert adapter.read("/w", watch=True) is None
    fired.clear()
    zk.create(zk_base + "/w", b"back")
    wait_for(lambda: "/w" in fired, message="create watch fired")
    observed = adapter.read("/w", watch=True)
    assert observed is not None and observed.data == b"back"


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
    wait_for(lambda: "/armed/n" in fired, message="data watch armed after the create fired")
    observed = adapter.read("/armed/n", watch=True)
    assert observed is not None and observed.data == b"hand edit" and adapter.reads == reads + 1
    zk.delete(zk_base + "/armed/r")
    wait_for(lambda: "/armed/r" in fired, message="the record's watch fired on delete")


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
