"""Tests of the ZooKeeper test harness (zkop_testing.zookeeper, zkop_testing.waiting)."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import ConnectionLoss, SessionExpiredError
from zkop_testing.clock import FakeClock
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import (
    ZooKeeperEnsemble,
    ZooKeeperError,
    ZooKeeperNotInstalledError,
    ZooKeeperNotServingError,
    ZooKeeperServer,
    ZooKeeperStartError,
    connected_client,
    expire_session,
    find_zookeeper,
    four_letter_word,
    free_ports,
    port_is_free,
)
from zkop_testing.zookeeper_lines import LINES, ZooKeeperLineError, installation, lines_under_test

RETRYABLE = (ConnectionLoss, SessionExpiredError)


# ----------------------------------------------------------------------------- waiting


def test_wait_for_returns_truthy_value() -> None:
    calls = iter([0, None, "", "done"])
    assert wait_for(lambda: next(calls), timeout=1, interval=0) == "done"


def test_wait_for_times_out_with_message_and_last_value(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    monkeypatch.setattr("zkop_testing.waiting.time", clock)
    calls: list[float] = []

    def never() -> int:
        calls.append(clock.now)
        return 0

    with pytest.raises(TimeoutError, match=r"the thing not met within 0.1 s \(last value: 0\)"):
        wait_for(never, timeout=0.1, interval=0.03, message="the thing")
    # Polled every interval, once more at the deadline, and never slept past it.
    assert calls == pytest.approx([1000.0, 1000.03, 1000.06, 1000.09, 1000.1])
    assert sum(clock.slept) == pytest.approx(0.1)


def test_wait_for_ignores_listed_exceptions_only() -> None:
    attempts: list[int] = []

    def flaky() -> int:
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionLoss()
        return len(attempts)

    assert wait_for(flaky, timeout=1, interval=0, ignore=(ConnectionLoss,)) == 3
    with pytest.raises(ZeroDivisionError):
        wait_for(lambda: 1 // 0, timeout=1)
    with pytest.raises(TimeoutError, match="last exception: ConnectionLoss"):
        wait_for(flaky_forever, timeout=0.05, ignore=(ConnectionLoss,))


def flaky_forever() -> bool:
    raise ConnectionLoss()


# ------------------------------------------------------------------------ installation


def test_the_default_server_is_the_newest_line_and_debian_on_request(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    """Unset, every test's server is the newest line's pinned release from Maven Central; ``debian`` (or a jar of
    ``ZKOP_ZOOKEEPER_JAR``) is Debian's package, another line that line."""
    monkeypatch.delenv("ZKOP_ZOOKEEPER_DEFAULT", raising=False)
    monkeypatch.delenv("ZKOP_ZOOKEEPER_JAR", raising=False)
    newest = find_zookeeper()
    assert (newest.name, newest.version) == (LINES["3.9"], (3, 9)) and newest == installation("3.9")
    assert installation("default") == newest
    monkeypatch.setenv("ZKOP_ZOOKEEPER_DEFAULT", "3.5")
    assert find_zookeeper() == installation("3.5")
    monkeypatch.setenv("ZKOP_ZOOKEEPER_DEFAULT", "debian")
    jar = tmp_path / "zookeeper.jar"  # a file for the check, never started here
    jar.touch()
    monkeypatch.setenv("ZKOP_ZOOKEEPER_JAR", str(jar))
    assert find_zookeeper().name == "debian" and find_zookeeper().classpath[0] == str(jar)
    monkeypatch.delenv("ZKOP_ZOOKEEPER_DEFAULT")
    assert find_zookeeper().name == "debian"  # a jar of one's own is Debian-style


def test_missing_installation_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZKOP_ZOOKEEPER_DEFAULT", raising=False)
    monkeypatch.setenv("ZKOP_ZOOKEEPER_JAR", "/nonexistent/zookeeper.jar")
    with pytest.raises(ZooKeeperNotInstalledError, match="apt-get install -y zookeeper"):
        find_zookeeper()
    with pytest.raises(ZooKeeperNotInstalledError):
        ZooKeeperServer()


def test_free_ports_are_distinct_and_free() -> None:
    ports = free_ports(6)
    assert len(set(ports)) == 6
    assert all(port_is_free(p) for p in ports)
    with socket.create_server(("127.0.0.1", 0)) as busy:
        assert not port_is_free(busy.getsockname()[1])


# -------------------------------------------------------------------------- standalone


def test_shared_server_four_letter_words(zk_server: ZooKeeperServer, zk: KazooClient, zk_base: str) -> None:
    zk.create(f"{zk_base}/watched", b"x")
    zk.get(f"{zk_base}/watched", watch=lambda event: None)
    assert zk_server.four_letter_word("ruok") == "imok"
    assert zk_server.mode() == "standalone"
    assert "Mode: standalone" in zk_server.four_letter_word("stat")
    assert "Mode: standalone" in four_letter_word("127.0.0.1", zk_server.client_port, "srvr")
    assert "queued=" in zk_server.four_letter_word("cons")
    assert "watching" in zk_server.four_letter_word("wchs")
    mntr = zk_server.mntr()
    assert mntr["zk_server_state"] == "standalone"
    assert int(mntr["zk_znode_count"]) >= 3
    with pytest.raises(ValueError):
        zk_server.four_letter_word("RUOK")


def test_zk_fixture_base_path(zk: KazooClient, zk_base: str) -> None:
    assert zk.connected
    assert zk_base.startswith("/t-")
    assert zk.exists(zk_base) is not None
    assert zk.get_children(zk_base) == []


def test_standalone_start_stop_restart_keeps_data() -> None:
    server = ZooKeeperServer()
    try:
        started = time.monotonic()
        server.start()
        print(f"standalone start: {time.monotonic() - started:.2f} s")
        base_dir, port = server.base_dir, server.client_port
        assert server.hosts == f"127.0.0.1:{port}"
        with pytest.raises(ZooKeeperError, match="already running"):
            server.start()

        with connected_client(server.hosts) as client:
            client.create("/kept", b"v1")

            server.restart()  # clean stop + start: data dir kept
            assert server.client_port == port
            value = wait_for(lambda: client.get("/kept")[0], timeout=15, ignore=RETRYABLE)
            assert value == b"v1"

            client.set("/kept", b"v2")
            server.kill()  # crash: data dir kept, start() recovers it
            assert not server.is_running
            assert port_is_free(port)
            server.start()
            value = wait_for(lambda: client.get("/kept")[0], timeout=15, ignore=RETRYABLE)
            assert value == b"v2"

        assert server.log_path.stat().st_size > 0  # log4j output lands in the temp dir
        assert "binding to port" in server.log_path.read_text()
    finally:
        server.stop()
    assert not server.is_running
    assert not base_dir.exists()
    assert port_is_free(port)
    server.stop()  # idempotent


def test_start_failure_surfaces_log_tail() -> None:
    server = ZooKeeperServer(extra_config={"tickTime": "not-a-number"})
    try:
        with pytest.raises(ZooKeeperStartError, match=r"exited with code \d+") as info:
            server.start(timeout=20)
        assert "not-a-number" in str(info.value)
        assert not server.is_running
    finally:
        server.stop()


def test_pinned_port_in_use_fails_with_bind_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as busy:
        server = ZooKeeperServer(port=busy.getsockname()[1])
        try:
            with pytest.raises(ZooKeeperStartError, match="Address already in use"):
                server.start(timeout=20)
        finally:
            server.stop()


def test_context_manager_starts_and_stops() -> None:
    with ZooKeeperServer() as server:
        assert server.is_serving()
        base_dir = server.base_dir
    assert not server.is_running
    assert not base_dir.exists()


def test_unpinned_port_taken_by_another_server_is_retried(zk_server: ZooKeeperServer) -> None:
    server = ZooKeeperServer()
    # simulate another ZooKeeper grabbing our port before the first start: its answers
    # to ruok/srvr must not be mistaken for ours, and start-up must move to a new port
    server.client_port = zk_server.client_port
    try:
        server.start()
        assert server.client_port != zk_server.client_port
        assert server.is_serving()
    finally:
        server.stop()
    assert zk_server.is_serving()


# ---------------------------------------------------------------------- session expiry


@pytest.mark.zookeeper_semantics
def test_expire_session_really_expires(zk_server: ZooKeeperServer, zk: KazooClient, zk_base: str) -> None:
    states: list[str] = []
    lock = threading.Lock()

    def record(state: str) -> None:
        with lock:
            states.append(state)

    zk.add_listener(record)
    old_session = zk.client_id[0]
    ephemeral = f"{zk_base}/ephemeral"
    zk.create(ephemeral, b"", ephemeral=True)
    with connected_client(zk_server.hosts) as observer:
        assert observer.exists(ephemeral) is not None

        started = time.monotonic()
        expire_session(zk, zk_server.hosts)
        print(f"expire_session: {time.monotonic() - started:.2f} s")

        assert KazooState.LOST in states
        # kazoo sets the new session id before it calls the listeners with CONNECTED (ConnectionHandler._connect)
        wait_for(lambda: states[-1:] == [KazooState.CONNECTED], message="the listeners heard CONNECTED")
        assert zk.connected
        assert zk.client_id[0] != old_session
        assert observer.exists(ephemeral) is None
        assert zk.exists(ephemeral) is None
        zk.create(ephemeral, b"", ephemeral=True)  # the new session works


def test_expire_session_needs_connected_client(zk_server: ZooKeeperServer) -> None:
    with pytest.raises(ZooKeeperError, match="connected"):
        expire_session(KazooClient(hosts=zk_server.hosts), zk_server.hosts)


# ---------------------------------------------------------------------------- ensemble


@pytest.mark.zookeeper_semantics
def test_ensemble_forms_quorum_with_one_leader(zk_ensemble: ZooKeeperEnsemble) -> None:
    modes = zk_ensemble.modes()
    assert sorted(m or "" for m in modes.values()) == ["follower", "follower", "leader"]
    leader = zk_ensemble.leader()
    assert modes[leader] == "leader"
    assert zk_ensemble.hosts == ",".join(f"127.0.0.1:{m.client_port}" for m in zk_ensemble.members)
    assert zk_ensemble.member(leader).mntr()["zk_server_state"] == "leader"
    assert len({p for m in zk_ensemble.members for p in m.ports()}) == 9

    with connected_client(zk_ensemble.member(0).hosts) as writer:
        writer.create("/replicated", b"hello")
    for member in zk_ensemble.members:
        with connected_client(member.hosts) as reader:
            reader.sync("/replicated")
            assert reader.get("/replicated")[0] == b"hello"


@pytest.mark.zookeeper_semantics
def test_ensemble_member_stop_start_keeps_quorum(zk_ensemble: ZooKeeperEnsemble) -> None:
    follower = next(i for i, mode in zk_ensemble.modes().items() if mode == "follower")
    member = zk_ensemble.member(follower)
    with connected_client(zk_ensemble.hosts) as client:
        try:
            member.stop()
            assert member.mode() is None
            assert zk_ensemble.wait_for_quorum(timeout=30) == zk_ensemble.leader()
            client.retry(client.create, "/while-member-down", b"1")
            member.start()  # rejoins with its data and catches up
            assert member.mode() == "follower"
            with pytest.raises(ZooKeeperError, match="already running"):
                member.start()
            with connected_client(member.hosts) as reader:
                reader.sync("/while-member-down")
                assert reader.get("/while-member-down")[0] == b"1"
        finally:
            zk_ensemble.heal()


@pytest.mark.zookeeper_semantics
def test_ensemble_without_quorum_is_not_serving(zk_ensemble: ZooKeeperEnsemble) -> None:
    followers = [i for i, mode in zk_ensemble.modes().items() if mode == "follower"]
    leader = zk_ensemble.leader()
    try:
        for i in followers:
            zk_ensemble.member(i).kill()
        lonely = zk_ensemble.member(leader)
        wait_for(lambda: not lonely.is_serving(), timeout=15, message="lone leader steps down")
        assert lonely.four_letter_word("ruok") == "imok"
        with pytest.raises(ZooKeeperNotServingError):
            lonely.mntr()
        with pytest.raises(ZooKeeperError, match="exactly one leader"):
            zk_ensemble.leader()
        with pytest.raises(ZooKeeperError, match="quorum needs 2"):
            zk_ensemble.wait_for_quorum(timeout=1)
    finally:
        started = time.monotonic()
        zk_ensemble.heal()
        print(f"heal after losing quorum: {time.monotonic() - started:.2f} s")
    assert all(m.is_serving() for m in zk_ensemble.members)


@pytest.mark.zookeeper_semantics
def test_expire_session_on_ensemble(zk_ensemble: ZooKeeperEnsemble) -> None:
    with connected_client(zk_ensemble.hosts) as client:
        client.create("/ensemble-ephemeral", b"", ephemeral=True)
        old_session = client.client_id[0]
        expire_session(client, zk_ensemble.hosts)
        assert client.client_id[0] != old_session
        assert client.exists("/ensemble-ephemeral") is None


def test_kill_leader_elects_new_leader_and_clients_keep_working() -> None:
    started = time.monotonic()
    ensemble = ZooKeeperEnsemble(3)
    with ensemble:
        print(f"ensemble start: {time.monotonic() - started:.2f} s")
        ports = [p for m in ensemble.members for p in m.ports()]
        base_dir = ensemble.member(0).base_dir.parent
        with connected_client(ensemble.hosts) as client:
            client.create("/before", b"1")
            killed_at = time.monotonic()
            old_leader = ensemble.kill_leader()
            assert not ensemble.member(old_leader).is_running
            new_leader = ensemble.wait_for_quorum(timeout=30)
            print(f"re-election after leader kill: {time.monotonic() - killed_at:.2f} s")
            assert new_leader != old_leader
            assert ensemble.member(new_leader).mode() == "leader"

            wait_for(lambda: client.create("/after", b"2"), timeout=20, ignore=RETRYABLE)
            assert client.get("/after")[0] == b"2"
            assert client.get("/before")[0] == b"1"

            ensemble.member(old_leader).start()  # the old leader rejoins as a follower
            assert ensemble.member(old_leader).mode() == "follower"
            assert ensemble.leader() == new_leader
    assert all(not m.is_running for m in ensemble.members)
    assert all(port_is_free(p) for p in ports)
    assert not base_dir.exists()


def test_ensemble_rejects_bad_size() -> None:
    with pytest.raises(ValueError):
        ZooKeeperEnsemble(0)


# ---------------------------------------------------------------------------- lines


def test_lines_under_test_follow_zkop_zookeeper_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZKOP_ZOOKEEPER_LINES", raising=False)
    monkeypatch.delenv("ZKOP_ZOOKEEPER_DEFAULT", raising=False)
    monkeypatch.delenv("ZKOP_ZOOKEEPER_JAR", raising=False)
    assert lines_under_test() == ("default",)  # a developer's run: the default server alone
    monkeypatch.setenv("ZKOP_ZOOKEEPER_LINES", "all")  # the default is 3.9: not run twice
    assert lines_under_test() == ("default", "3.5", "3.6", "3.7", "3.8")
    assert list(LINES) == ["3.5", "3.6", "3.7", "3.8", "3.9"]
    monkeypatch.setenv("ZKOP_ZOOKEEPER_LINES", "3.9, 3.5,3.9,3.6")
    assert lines_under_test() == ("default", "3.5", "3.6")
    monkeypatch.setenv("ZKOP_ZOOKEEPER_DEFAULT", "debian")  # Debian's 3.8.0 is no line: every line runs
    assert lines_under_test() == ("default", "3.9", "3.5", "3.6")
    monkeypatch.setenv("ZKOP_ZOOKEEPER_DEFAULT", LINES["3.5"])  # a pinned release is its line
    assert lines_under_test() == ("default", "3.9", "3.6")
    monkeypatch.setenv("ZKOP_ZOOKEEPER_LINES", "3.4")
    with pytest.raises(ZooKeeperLineError, match=r"\['3\.4'\]"):
        lines_under_test()


def test_a_line_resolves_to_its_pinned_release_from_the_cache() -> None:
    v35 = installation("3.5")
    assert v35.name == LINES["3.5"] and v35.version == (3, 5) and v35.bundles_netty
    assert {Path(jar).name for jar in v35.classpath} >= {f"zookeeper-{v35.name}.jar", f"zookeeper-jute-{v35.name}.jar"}
    assert installation(v35.name) == v35  # a release names the same installation
    assert not v35.at_least(3, 6) and installation("3.9").at_least(3, 6)
    with pytest.raises(ZooKeeperLineError, match="not a ZooKeeper line"):
        installation("latest")
