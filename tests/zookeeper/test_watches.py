"""Persistent recursive watches against real ZooKeeper servers: roots, an exact cache filled from
zkop's own writes, invalidation before any later reply, reconnects, and the fallback for servers
without ``addWatch``.

Every test here runs on each ZooKeeper line under test (``ZKOP_ZOOKEEPER_LINES``). A 3.5 server has no
``addWatch`` (opcode 106 came with persistent watches in 3.6, ZOOKEEPER-1416): there the tests about
persistent watches alone are skipped, naming why, and the others assert the fallback zkop really makes
(one watch per znode); ``test_auto_on_a_real_35_server_falls_back_and_keeps_watching`` and
``test_a_rolling_upgrade_from_35_to_36`` show the fallback on real 3.5 servers in every run.
"""

from __future__ import annotations

import functools
import logging
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.states import Callback
from zkop_testing.tcpproxy import TcpProxy
from zkop_testing.waiting import EVENTUALLY, wait_for
from zkop_testing.zookeeper import (
    ZooKeeperEnsemble,
    ZooKeeperError,
    ZooKeeperInstallation,
    ZooKeeperServer,
    connected_client,
)
from zkop_testing.zookeeper_lines import installation

from zkop.zookeeper.actions import CheckVersion, CreateNode, DeleteNode, Observed, SetData
from zkop.zookeeper.adapter import ConnectionOptions, ZooKeeperAdapter
from zkop.zookeeper.errors import ZooKeeperUnavailable
from zkop.zookeeper.watches import covering_roots

#: Runs on every ZooKeeper line under test (ZKOP_ZOOKEEPER_LINES, tests/conftest.py).
pytestmark = pytest.mark.zookeeper_semantics


def watched_paths(server: ZooKeeperServer, session_id: int | None) -> set[str]:
    """The paths the server watches for ``session_id`` (``wchc``: a session line, then its paths)."""
    paths: dict[int, set[str]] = {}
    current: set[str] = set()
    for line in server.four_letter_word("wchc").splitlines():
        if line.startswith("0x"):
            current = paths.setdefault(int(line, 16), set())
        elif line.strip():
            current.add(line.strip())
    return paths.get(session_id or -1, set())


@pytest.fixture
def addwatch(zookeeper_installation: ZooKeeperInstallation) -> bool:
    """Does this test's server know ``addWatch`` (ZooKeeper 3.6+)?"""
    return zookeeper_installation.at_least(3, 6)


@pytest.fixture
def persistent_watches(addwatch: bool, zookeeper_installation: ZooKeeperInstallation) -> None:
    """Skip, naming the reason, a test about persistent watches alone on a line that has none."""
    if not addwatch:
        pytest.skip(f"ZooKeeper {zookeeper_installation.name} has no addWatch (persistent watches came in 3.6): "
                    "this test is about persistent watches alone; the fallback tests here assert what zkop does "
                    "on this line instead")


def session_states(adapter: ZooKeeperAdapter) -> list[str]:
    """The session states zkop reports from now on (``SUSPENDED``, ``CONNECTED``, ``LOST``), in order."""
    seen: list[str] = []
    adapter.add_session_listener(seen.append)
    return seen


def reconnected(states: list[str], heard: int) -> bool:
    """``states[heard:]`` shows the connection lost (SUSPENDED) and a new one (CONNECTED, last)."""
    return "SUSPENDED" in states[heard:] and states[-1:] == ["CONNECTED"]


def wait_for_fallback(adapter: ZooKeeperAdapter, states: list[str], heard: int = 0) -> None:
    """On a server without ``addWatch``: wait until zkop heard UNIMPLEMENTED and the connection the server then
    closes (``UnimplementedRequestProcessor``) is replaced: ``states[heard:]`` shows SUSPENDED, then CONNECTED.
    A request sent before that is lost with the connection (ConnectionLoss)."""
    wait_for(lambda: adapter.watches.supported is False, message="addWatch refused")
    wait_for(lambda: reconnected(states, heard) and adapter.connected,
             message=f"reconnected after the server closed the connection (states: {states[heard:]})")
    assert adapter.watch_mode == "per-node" and not adapter.watches.active


@contextmanager
def started(hosts: str, mode: str = "auto", opcode: int | None = None) -> Iterator[ZooKeeperAdapter]:
    adapter = ZooKeeperAdapter(ConnectionOptions(hosts=hosts, connect_timeout=10, watch_mode=mode))
    if opcode is not None:
        adapter.watches.opcode = opcode
    adapter.start()
    try:
        yield adapter
    finally:
        adapter.stop()


@contextmanager
def callbacks_blocked(adapter: ZooKeeperAdapter) -> Iterator[None]:
    """Hold kazoo's callback thread: only what happens on its reader thread can happen meanwhile."""
    entered, release = threading.Event(), threading.Event()

    def hold() -> None:
        entered.set()
        release.wait(EVENTUALLY)  # a cap only: a loaded machine must not end the hold early

    adapter.client.handler.dispatch_callback(Callback("watch", hold, ()))
    assert entered.wait(EVENTUALLY)
    try:
        yield
    finally:
        release.set()


def test_covering_roots_are_one_per_top_level_name_and_as_deep_as_possible() -> None:
    assert covering_roots(["/app/a/x", "/app/a/y", "/zkop/owners/app/a/x"]) == {"/app/a", "/zkop/owners/app/a/x"}
    assert covering_roots(["/a/b", "/a/c/d", "/a/b/e"]) == {"/a"}
    assert covering_roots(["/app/a", "/app/a/b"]) == {"/app/a"}
    assert covering_roots(["/flag"]) == {"/flag"}  # never "/" for a path directly under it
    assert covering_roots(["/ab/x", "/a/x"]) == {"/ab/x", "/a/x"}
    assert covering_roots([]) == frozenset()


@pytest.mark.usefixtures("persistent_watches")
def test_one_watch_per_root_and_own_writes_fill_the_cache(adapter: ZooKeeperAdapter, zk: KazooClient,
                                                          zk_server: ZooKeeperServer, zk_base: str) -> None:
    paths = [f"/app/f/n{i}" for i in range(20)]
    records = ["/zkop/owners" + p for p in paths]
    fired: list[str] = []
    adapter.add_watch_listener(fired.append)
    adapter.watch_subtrees("test", [*paths, *records])
    assert adapter.wait_watches(5) and adapter.watch_mode == "persistent"
    assert adapter.watches.active == {"/app/f", "/zkop/owners/app/f"}
    reads = adapter.reads
    for path, record in zip(paths, records, strict=True):
        adapter.execute([CreateNode(record, b"rec"), CreateNode(path, b"v")], atomic=True, arm_watches=True)
    for path in paths:
        assert adapter.read(path, watch=True) == Observed(b"v", 0)
    assert adapter.reads == reads  # nothing read back: the cache was filled from the writes
    assert not fired  # zkop's own creates woke nobody
    assert watched_paths(zk_server, adapter.session_id) == {zk_base + "/app/f", zk_base + "/zkop/owners/app/f"}

    zk.set(zk_base + paths[3], b"hand edit")
    wait_for(lambda: paths[3] in fired, message="hand edit notified")
    observed = adapter.read(paths[3], watch=True)
    assert observed is not None and observed.data == b"hand edit" and adapter.reads == reads + 1

    # An update (the reconciler's multi with the record's check) is remembered from the Stat it returned.
    fired.clear()
    adapter.execute([SetData(paths[3], b"v2", 1)], atomic=True, require=[CheckVersion(records[3], 0)])
    observed = adapter.read(paths[3], watch=True)
    assert observed == Observed(b"v2", 2) and adapter.reads == reads + 1
    adapter.execute([DeleteNode(paths[4], 0)])
    assert adapter.read(paths[4], watch=True) is None and adapter.reads == reads + 1
    assert not fired

    # A node created by hand under a root is seen; absence was remembered without an exists watch.
    assert adapter.read("/app/f/later", watch=True) is None
    zk.create(zk_base + "/app/f/later", b"x")
    wait_for(lambda: "/app/f/later" not in adapter.cache, message="creation notified")
    observed = adapter.read("/app/f/later", watch=True)
    assert observed is not None and observed.data == b"x"


@pytest.mark.usefixtures("persistent_watches")
def test_a_change_is_forgotten_before_the_reply_to_any_later_request(adapter: ZooKeeperAdapter,
                                                                     zk: KazooClient, zk_base: str) -> None:
    adapter.watch_subtrees("test", ["/x/a", "/x/b"])
    assert adapter.wait_watches(5)
    adapter.execute([CreateNode("/x/a", b"0"), CreateNode("/x/b", b"b")], atomic=True, arm_watches=True)
    with callbacks_blocked(adapter):
        for i in range(1, 30):
            assert adapter.read("/x/a", watch=True) is not None  # remembered
            zk.set(zk_base + "/x/a", str(i).encode())
            adapter.read("/x/b")  # one request on zkop's session: its reply comes after the notification
            assert "/x/a" not in adapter.cache
            observed = adapter.read("/x/a", watch=True)
            assert observed is not None and observed.data == str(i).encode()
            # zkop's own write right behind a foreign one: the foreign one still counts.
            zk.set(zk_base + "/x/b", b"foreign")
            adapter.execute([SetData("/x/a", b"own", 3 * i - 2)], atomic=True,
                            require=[CheckVersion("/x/b", 2 * i - 1)])
            adapter.read("/x/b")
            observed = adapter.read("/x/a", watch=True)
            assert observed is not None and observed.data == b"own"
            adapter.execute([SetData("/x/a", str(i).encode(), 3 * i - 1)])  # one by one: filled too
            zk.set(zk_base + "/x/b", b"b")


@pytest.mark.usefixtures("persistent_watches")
def test_a_foreign_change_between_read_and_write_cancels_the_fill(adapter: ZooKeeperAdapter, zk: KazooClient,
                                                                  zk_base: str) -> None:
    fired: list[str] = []
    adapter.add_watch_listener(fired.append)
    adapter.watch_subtrees("test", ["/y/a"])
    assert adapter.wait_watches(5)
    assert adapter.read("/y/a", watch=True) is None
    zk.create(zk_base + "/y/a", b"theirs", makepath=True)  # created by someone else after zkop read "absent"
    zk.delete(zk_base + "/y/a")
    adapter.execute([CreateNode("/y/a", b"ours")], atomic=True, arm_watches=True)
    wait_for(lambda: "/y/a" in fired, message="the foreign create and delete woke the listeners")
    observed = adapter.read("/y/a", watch=True)
    assert observed is not None and observed.data == b"ours"


@pytest.mark.parametrize("mode", ["auto", "per-node"])
def test_a_change_while_disconnected_is_not_served_and_watches_come_back(
        mode: str, zk: KazooClient, zk_server: ZooKeeperServer, zk_base: str, addwatch: bool) -> None:
    host, port = zk_server.hosts.split(",")[0].rsplit(":", 1)
    with TcpProxy((host, int(port))) as proxy, started(f"{proxy.address}{zk_base}", mode) as adapter:
        fired: list[str] = []
        adapter.add_watch_listener(fired.append)
        states = session_states(adapter)
        adapter.watch_subtrees("test", ["/r/n", "/r/m"])
        adapter.wait_watches(5)
        if mode == "auto" and not addwatch:
            wait_for_fallback(adapter, states)
        adapter.execute([CreateNode("/r/n", b"v"), CreateNode("/r/m", b"m")], atomic=True, arm_watches=True)
        assert adapter.read("/r/n", watch=True) == Observed(b"v", 0)
        proxy.cut()
        wait_for(lambda: not adapter.connected, message="zkop disconnected")
        zk.set(zk_base + "/r/n", b"edited while away")
        proxy.restore()
        wait_for(lambda: adapter.connected, message="zkop reconnected (same session)")
        assert "/r/n" not in adapter.cache  # every watch went with the connection
        observed = adapter.read("/r/n", watch=True)
        assert observed is not None and observed.data == b"edited while away"
        if mode == "auto" and addwatch:
            assert adapter.wait_watches(5) and adapter.watches.active == {"/r"}
        else:  # per-node, asked for or fallen back to: nothing is asked again on the same session
            assert adapter.watch_mode == "per-node" and not adapter.watches.active
        fired.clear()
        zk.set(zk_base + "/r/n", b"after")
        wait_for(lambda: "/r/n" in fired, message="hand edit after the reconnect notified")


def test_per_node_mode_arms_one_watch_per_znode(zk_server: ZooKeeperServer, zk_base: str) -> None:
    with started(f"{zk_server.hosts}{zk_base}", "per-node") as adapter:
        adapter.watch_subtrees("test", ["/p/a", "/p/b"])
        assert not adapter.wait_watches(1) and adapter.watch_mode == "per-node"
        adapter.execute([CreateNode("/p/a", b"a"), CreateNode("/p/b", b"b")], atomic=True, arm_watches=True)
        assert watched_paths(zk_server, adapter.session_id) == {zk_base + "/p/a", zk_base + "/p/b"}


def test_a_server_without_addwatch_falls_back_to_one_watch_per_znode(
        zk: KazooClient, zk_server: ZooKeeperServer, zk_base: str, caplog: pytest.LogCaptureFixture) -> None:
    # Every line answers an opcode it does not know exactly as 3.5 answers addWatch (106):
    # UNIMPLEMENTED, then it closes the connection (ZooKeeperServer.submitRequest).
    caplog.set_level(logging.WARNING, logger="zkop.zookeeper.watches")
    with started(f"{zk_server.hosts}{zk_base}", opcode=9999) as adapter:
        fired: list[str] = []
        adapter.add_watch_listener(fired.append)
        states = session_states(adapter)
        adapter.watch_subtrees("test", ["/fb/a", "/fb/b"])
        wait_for_fallback(adapter, states)
        adapter.watch_subtrees("test", ["/fb/a", "/fb/b", "/fb/c"])  # nothing is sent again
        adapter.execute([CreateNode("/fb/a", b"a"), CreateNode("/fb/b", b"b")], atomic=True, arm_watches=True)
        assert watched_paths(zk_server, adapter.session_id) == {zk_base + "/fb/a", zk_base + "/fb/b"}
        zk.set(zk_base + "/fb/a", b"hand edit")
        wait_for(lambda: "/fb/a" in fired, message="hand edit seen through the per-node watch")
        observed = adapter.read("/fb/a", watch=True)
        assert observed is not None and observed.data == b"hand edit"
    assert sum("does not support persistent watches" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.usefixtures("persistent_watches")
def test_a_change_after_the_write_but_before_the_fill_cancels_it(adapter: ZooKeeperAdapter, zk: KazooClient,
                                                                 zk_base: str, monkeypatch: pytest.MonkeyPatch) -> None:
    adapter.watch_subtrees("test", ["/z/a", "/z/b"])
    assert adapter.wait_watches(5)
    adapter.execute([CreateNode("/z/a", b"0"), CreateNode("/z/b", b"b")], atomic=True, arm_watches=True)
    writer = adapter._writer
    settle = writer._settle

    def late_settle(*args: object, **kwargs: object) -> None:
        # Someone else writes right after zkop's write was answered, before zkop fills the cache.
        zk.set(zk_base + "/z/a", b"theirs")
        adapter.read("/z/b")  # the notification is in (it precedes this reply)
        settle(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(writer, "_settle", late_settle)
    adapter.execute([SetData("/z/a", b"ours", 0)], atomic=True, require=[CheckVersion("/z/b", 0)])
    observed = adapter.read("/z/a", watch=True)
    assert observed is not None and observed.data == b"theirs"


def test_roots_are_added_again_after_a_session_reset(adapter: ZooKeeperAdapter, zk: KazooClient,
                                                     zk_server: ZooKeeperServer, zk_base: str, addwatch: bool) -> None:
    fired: list[str] = []
    adapter.add_watch_listener(fired.append)
    states = session_states(adapter)
    adapter.watch_subtrees("test", ["/s/a", "/s/b"])
    assert adapter.wait_watches(5) == addwatch
    if not addwatch:
        wait_for_fallback(adapter, states)
    adapter.execute([CreateNode("/s/a", b"a"), CreateNode("/s/b", b"b")], atomic=True, arm_watches=True)
    old_session, heard = adapter.session_id, len(states)
    adapter._session._reset("test: Curator's rule")  # what the watchdog runs: LOST, then a brand-new session
    wait_for(lambda: adapter.connected and adapter.session_id != old_session, message="new session")
    assert "/s/a" not in adapter.cache
    if addwatch:
        assert adapter.wait_watches(5) and adapter.watch_mode == "persistent"
        assert watched_paths(zk_server, adapter.session_id) == {zk_base + "/s"}
    else:  # a new session asks the server again, and is refused again
        wait_for_fallback(adapter, states, heard)
        assert adapter.read("/s/a", watch=True) == Observed(b"a", 0)
        assert watched_paths(zk_server, adapter.session_id) == {zk_base + "/s/a"}
    zk.set(zk_base + "/s/a", b"hand edit")
    wait_for(lambda: "/s/a" in fired, message="hand edit notified in the new session")


def _line(line: str) -> ZooKeeperInstallation:
    try:
        return installation(line)
    except ZooKeeperError as exc:  # never skipped: the line is resolved from Maven Central like the others
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="module")
def zk35() -> Iterator[ZooKeeperServer]:
    """A real ZooKeeper 3.5 server (the newest 3.5 release, from Maven Central), whatever lines the run tests."""
    with ZooKeeperServer(installation=_line("3.5")) as server:
        yield server


def test_auto_on_a_real_35_server_falls_back_and_keeps_watching(zk35: ZooKeeperServer,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="zkop.zookeeper.watches")
    with connected_client(zk35.hosts) as zk:
        base = f"/t-{uuid.uuid4().hex}"
        zk.ensure_path(base)
        with started(f"{zk35.hosts}{base}", "auto") as adapter:
            fired: list[str] = []
            adapter.add_watch_listener(fired.append)
            states = session_states(adapter)
            adapter.watch_subtrees("test", ["/fb/a", "/fb/b"])
            assert not adapter.wait_watches(5)
            wait_for_fallback(adapter, states)
            session = adapter.session_id  # the server closed the connection, not the session
            adapter.execute([CreateNode("/fb/a", b"a"), CreateNode("/fb/b", b"b")], atomic=True, arm_watches=True)
            assert watched_paths(zk35, adapter.session_id) == {base + "/fb/a", base + "/fb/b"}
            zk.set(base + "/fb/a", b"hand edit")
            wait_for(lambda: "/fb/a" in fired, message="hand edit seen through the per-node watch")
            observed = adapter.read("/fb/a", watch=True)
            assert observed is not None and observed.data == b"hand edit"
            assert adapter.session_id == session and adapter.watch_mode == "per-node"
        zk.delete(base, recursive=True)
    assert sum("does not support persistent watches" in r.getMessage() for r in caplog.records) == 1
    assert "unknown type 106" in zk35.log_path.read_text()  # the server's own word for addWatch


def test_a_rolling_upgrade_from_35_to_36(caplog: pytest.LogCaptureFixture) -> None:
    """One three-member ensemble upgraded member by member from 3.5 to 3.6, zkop connected throughout.

    What ``auto`` does: refused on the 3.5 ensemble, it uses one watch per znode for the rest of the session;
    it does not ask again on a reconnect of the same session, so it stays on per-node watches after every member
    runs 3.6 (and is never refused halfway); the next new session asks again and gets persistent watches."""
    caplog.set_level(logging.WARNING, logger="zkop.zookeeper.watches")
    v35, v36 = _line("3.5"), _line("3.6")
    with ZooKeeperEnsemble(3, installation=v35) as ensemble, connected_client(ensemble.hosts) as zk:
        zk.ensure_path("/up")
        with started(ensemble.hosts, "auto") as adapter:
            fired: list[str] = []
            adapter.add_watch_listener(fired.append)
            states = session_states(adapter)
            adapter.watch_subtrees("test", ["/up/a", "/up/b"])
            wait_for_fallback(adapter, states)
            session = adapter.session_id
            adapter.execute([CreateNode("/up/a", b"0"), CreateNode("/up/b", b"b")], atomic=True, arm_watches=True)
            for step, member in enumerate(ensemble.members, start=1):
                heard = len(states)
                on_member = f"sid=0x{session:x}" in member.four_letter_word("cons")
                member.stop()
                member.installation = v36
                member.start()
                ensemble.wait_for_quorum()
                assert f"Zookeeper version: {v36.name}" in member.srvr()
                if on_member:  # zkop moves to another member; its watches went with the connection
                    wait_for(functools.partial(reconnected, states, heard),
                             message=f"zkop reconnected after member {member.myid} stopped (states {states[heard:]})")
                # What a resync after a reconnect does: read the managed nodes again, arming their watches. A
                # restarted leader drops every member's clients until a new one serves, zkop's too: read once
                # zkop is back.
                def read_armed() -> bool:
                    try:
                        return adapter.read("/up/a", watch=True) is not None
                    except ZooKeeperUnavailable:
                        return False

                wait_for(read_armed, message=f"zkop reads /up/a again after member {member.myid} restarted")
                fired.clear()
                zk.retry(zk.set, "/up/a", str(step).encode())  # a hand edit in the mixed (then all-3.6) ensemble
                wait_for(lambda: "/up/a" in fired, message=f"hand edit seen after upgrading member {member.myid}")
                observed = adapter.read("/up/a", watch=True)
                assert observed is not None and observed.data == str(step).encode()
                assert adapter.session_id == session and adapter.watch_mode == "per-node"
            assert not adapter.watches.active  # every member runs 3.6, the session still uses per-node watches

            adapter._session._reset("test: a new session")  # e.g. the session expired
            wait_for(lambda: adapter.connected and adapter.session_id != session, message="a new session")
            assert adapter.wait_watches(5) and adapter.watch_mode == "persistent"
            assert adapter.watches.active == {"/up"}
            fired.clear()
            zk.set("/up/b", b"edit")
            wait_for(lambda: "/up/b" in fired, message="hand edit seen through the persistent watch")
    assert sum("does not support persistent watches" in r.getMessage() for r in caplog.records) == 1

