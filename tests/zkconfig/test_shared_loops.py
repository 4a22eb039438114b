"""Every ensemble's watch-root follower and ACL check on one shared :class:`~zkop.runtime.taskloop.TaskLoop` per kind
(issue 42, item 4), against a real ZooKeeper: each component behaves as on a thread of its own (debounced
re-registration, periodic checks that enqueue the drifted), one ensemble's check that fails keeps no other from
checking, stopping one ensemble's component leaves the others' running, and each component reports the shared thread
having ended."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.security import make_acl
from zkop_testing.waiting import EVENTUALLY, wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import JSON
from zkop.ownership.registry import OwnershipRegistry
from zkop.runtime.cache import Indexer
from zkop.runtime.taskloop import TaskLoop
from zkop.zkconfig.aclcheck import AclCheck
from zkop.zkconfig.watchroots import WatchRoots
from zkop.zookeeper.adapter import ConnectionOptions, ZooKeeperAdapter
from zkop.zookeeper.watches import covered

#: Declared by every object here: world may read, write, create and administer, not delete (perms 23).
DECLARED = [{"scheme": "world", "id": "anyone", "permissions": ["read", "write", "create", "admin"]}]


class Fatal(BaseException):
    """Ends the loop's thread as a dependency's bug would."""


def config(name: str, path: str) -> JSON:
    return {"apiVersion": "zookeeper.example.com/v1alpha1", "kind": "ZooKeeperConfig",
            "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}",
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"path": path, "stringData": "x", "acl": DECLARED}}


class BrokenCache(Indexer):
    """An ensemble whose objects cannot be listed: every check of it raises."""

    def list(self) -> list[JSON]:
        raise RuntimeError("a broken cache")


@pytest.fixture
def loop() -> Iterator[TaskLoop]:
    made = TaskLoop("test-shared-loop")
    yield made
    made.stop(EVENTUALLY)


@pytest.fixture
def adapters(zk_server: ZooKeeperServer, zk_base: str, zk: KazooClient) -> Iterator[list[ZooKeeperAdapter]]:
    """Two ensembles as zkop sees them: two sessions, each chrooted at its own team below ``zk_base``."""
    made = []
    for team in ("a", "b"):
        zk.ensure_path(f"{zk_base}/{team}")
        made.append(ZooKeeperAdapter(ConnectionOptions(hosts=f"{zk_server.hosts}{zk_base}/{team}",
                                                       connect_timeout=10)))
    try:
        for adapter in made:
            adapter.start()
        yield made
    finally:
        for adapter in made:
            adapter.stop()


def shared_threads(loop: TaskLoop) -> int:
    return sum(1 for t in threading.enumerate() if t.name == loop.name and t.is_alive())


def test_acl_checks_of_several_ensembles_share_one_thread_and_one_failing_or_stopped_keeps_none_from_checking(
        loop: TaskLoop, adapters: list[ZooKeeperAdapter], zk: KazooClient, zk_base: str) -> None:
    caches, queues, checks = [], [], []
    for team, adapter in zip(("a", "b"), adapters, strict=True):
        zk.create(f"{zk_base}/{team}/flag", b"x", acl=[make_acl("world", "anyone", all=True)])  # drifted: may delete
        cache, queue = Indexer(), list[str]()
        cache.upsert(config(f"flag-{team}", "/flag"))
        caches.append(cache)
        queues.append(queue)
        checks.append(AclCheck(cache, adapter, queue.append, 0.02, loop=loop, task=f"zookeeperconfig/{team}"))
    broken = AclCheck(BrokenCache(), adapters[0], lambda key: None, 0.02, loop=loop, task="zookeeperconfig/broken")
    for check in (broken, *checks):
        check.start()
    try:
        wait_for(lambda: all(len(queue) >= 2 for queue in queues), message="each ensemble's drift found, twice")
        assert set(queues[0]) == {"team/flag-a"} and set(queues[1]) == {"team/flag-b"}
        assert shared_threads(loop) == 1
        assert loop.tasks() == ["zookeeperconfig/broken", "zookeeperconfig/a", "zookeeperconfig/b"]
        assert all(check.health_check() is None for check in (broken, *checks))

        checks[0].stop(EVENTUALLY)  # ensemble a deleted at runtime
        done_a, done_b = checks[0].checks, checks[1].checks
        wait_for(lambda: checks[1].checks >= done_b + 3, message="ensemble b goes on being checked")
        assert checks[0].checks == done_a  # never run again once stopped
        assert loop.tasks() == ["zookeeperconfig/broken", "zookeeperconfig/b"] and shared_threads(loop) == 1
    finally:
        for check in (broken, *checks):
            check.stop(EVENTUALLY)
    assert loop.tasks() == [] and shared_threads(loop) == 1  # the loop's owner ends it, not its tasks


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_watch_root_followers_of_several_ensembles_share_one_thread_and_report_it_ended(
        loop: TaskLoop, adapters: list[ZooKeeperAdapter]) -> None:
    caches = [Indexer(), Indexer()]
    followers = [WatchRoots(cache, adapter, OwnershipRegistry(adapter), wait=EVENTUALLY, loop=loop,
                            task=f"zookeeperconfig/{team}")
                 for cache, adapter, team in zip(caches, adapters, ("a", "b"), strict=True)]
    for cache, follower in zip(caches, followers, strict=True):
        old = config("moving", "/old/flag")
        cache.upsert(old)
        follower.start()  # registers at once and waits for the roots
    try:
        assert all(covered("/old/flag", adapter.watches.roots) for adapter in adapters)
        assert shared_threads(loop) == 1

        def move(index: int, path: str) -> None:
            old = caches[index].get("team/moving")
            assert old is not None
            new = config("moving", path)
            caches[index].upsert(new)
            followers[index].on_update(old, new)  # the informer's event: a debounced pass re-registers

        move(0, "/new/flag")
        move(1, "/new/flag")
        wait_for(lambda: all(covered("/new/flag", a.watches.roots) and not covered("/old/flag", a.watches.roots)
                             for a in adapters), message="both ensembles' roots follow the move")

        followers[0].stop(EVENTUALLY)  # ensemble a deleted at runtime: b's follower goes on
        move(1, "/newer/flag")
        wait_for(lambda: covered("/newer/flag", adapters[1].watches.roots), message="b's roots still follow")
        assert loop.tasks() == ["zookeeperconfig/b"] and shared_threads(loop) == 1

        def fatal() -> None:
            raise Fatal

        loop.add("fault", fatal).wake()
        assert wait_for(followers[1].health_check) == "its thread test-shared-loop ended"
        assert followers[0].health_check() is None  # stopped: not on the loop any more
    finally:
        for follower in followers:
            follower.stop(EVENTUALLY)
