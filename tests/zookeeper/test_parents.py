"""Parents created once (issue #26): a missing parent costs one ZooKeeper request whatever the number of workers
racing for it. Counted with the adapter's own per-operation request counter, against a real server."""

from __future__ import annotations

import threading
from collections.abc import Callable

from kazoo.client import KazooClient

from zkop.zookeeper.actions import CreateNode
from zkop.zookeeper.adapter import ZooKeeperAdapter

WORKERS = 8
PARENTS = 20
PER_PARENT = 20


def _requests() -> dict[str, float]:
    from prometheus_client import REGISTRY

    out: dict[str, float] = {}
    for metric in REGISTRY.collect():
        for sample in metric.samples:
            if sample.name == "zkop_zookeeper_request_duration_seconds_count":
                op = sample.labels["operation"]
                out[op] = out.get(op, 0.0) + sample.value
    return out


def _delta(before: dict[str, float], after: dict[str, float]) -> dict[str, int]:
    return {op: int(after[op] - before.get(op, 0.0)) for op in after if after[op] != before.get(op, 0.0)}


def _objects() -> list[tuple[str, str]]:
    """(znode, ownership record) of every object: PER_PARENT objects under each of PARENTS new parents,
    interleaved so that the eight workers race for the same parents."""
    return [(f"/app/g-{k}/obj-{i}", f"/owners/app/g-{k}/obj-{i}") for i in range(PER_PARENT) for k in range(PARENTS)]


def _race(adapter: ZooKeeperAdapter, objects: list[tuple[str, str]]) -> None:
    """Create every object (znode and record in one multi, as a reconcile does) from WORKERS threads at once."""
    start = threading.Barrier(WORKERS)
    errors: list[BaseException] = []

    def worker(mine: list[tuple[str, str]]) -> None:
        start.wait()
        try:
            for znode, record in mine:
                adapter.execute([CreateNode(znode, b"v"), CreateNode(record, b"owner")], atomic=True)
        except BaseException as err:  # reported by the test below
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(objects[w::WORKERS],)) for w in range(WORKERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors


#: Every parent the objects need: /app, /owners, /owners/app, and the PARENTS groups under both roots.
MISSING_PARENTS = 3 + 2 * PARENTS


def _all_there(zk: KazooClient, base: str) -> Callable[[], None]:
    def check() -> None:
        for znode, record in _objects():
            assert zk.exists(base + znode) is not None and zk.exists(base + record) is not None
    return check


def test_cold_start_creates_each_missing_parent_once_and_no_write_fails(
        adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    objects = _objects()
    before = _requests()
    # The cold start's one exists per parent (zkop.zkconfig.reconciler.learn_absent) finds them all missing.
    learned = adapter.learn_absent([path for pair in objects for path in pair])
    _race(adapter, objects)
    counts = _delta(before, _requests())
    assert learned == 2 * len(objects)
    # One multi per object, none failed; one create per missing parent, whatever the racing.
    assert counts == {"exists": 2 * PARENTS, "multi": len(objects), "create": MISSING_PARENTS}
    _all_there(zk, zk_base)()


def test_without_the_hint_each_missing_parent_is_still_created_once(
        adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    objects = _objects()
    before = _requests()
    _race(adapter, objects)
    counts = _delta(before, _requests())
    # A worker whose multi went out before the parent existed sees it fail and retries (at most one failure
    # per worker per parent pair); the parent itself is created once, the others wait for that create.
    assert counts["create"] == MISSING_PARENTS
    assert len(objects) < counts["multi"] <= len(objects) + WORKERS * PARENTS
    assert set(counts) == {"create", "multi"}
    _all_there(zk, zk_base)()


def test_a_parent_deleted_behind_zkop_is_created_again(adapter: ZooKeeperAdapter, zk: KazooClient,
                                                        zk_base: str) -> None:
    adapter.execute([CreateNode("/app/g/one", b"1"), CreateNode("/owners/app/g/one", b"o")], atomic=True)
    zk.delete(zk_base + "/app", recursive=True)  # zkop still believes /app and /app/g exist
    before = _requests()
    adapter.execute([CreateNode("/app/g/two", b"2"), CreateNode("/owners/app/g/two", b"o")], atomic=True)
    counts = _delta(before, _requests())
    # The multi fails once (NoNode) although every parent was known: all five are forgotten and asked for
    # again from the top (/app and /app/g created, the other three answered NodeExists), the multi retried.
    assert counts == {"multi": 2, "create": 5}
    assert zk.get(zk_base + "/app/g/two")[0] == b"2"


def test_a_multi_creates_the_parents_below_its_own_new_nodes_inside_itself_once_each() -> None:
    """``_inner_parents``: a missing parent below a node the same ``multi`` creates is created in the transaction,
    once, just before the first create under it; a parent above every created node is left to the parents step
    (it may exist already), and so is one below nothing created."""
    from zkop.zookeeper.actions import Action, SetData
    from zkop.zookeeper.writer import _inner_parents

    acl = ()
    actions: list[Action] = [CreateNode("/t", b"", acl), CreateNode("/t/a/b/c", b"1", acl),
                             CreateNode("/t/a/x", b"2", acl), CreateNode("/other/y/z", b"3", acl),
                             SetData("/t/s", b"4", 0)]
    out = _inner_parents(actions, acl)
    assert [(type(a).__name__, a.path) for a in out] == [
        ("CreateNode", "/t"), ("CreateNode", "/t/a"), ("CreateNode", "/t/a/b"), ("CreateNode", "/t/a/b/c"),
        ("CreateNode", "/t/a/x"), ("CreateNode", "/other/y/z"), ("SetData", "/t/s")]
    # Nothing inner: the same list back.
    assert _inner_parents(actions[3:], acl) == actions[3:]
