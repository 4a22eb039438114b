"""A session SUSPENDED past its timeout is reset from scratch: surviving an ensemble that lost its data.

Real standalone servers, wiped (data dir deleted) and restarted on the same port: their zxid
starts again from 0 and they refuse the old session ("Refusing session request for client …
as it has seen zxid …", ``ZooKeeperServer.processConnectRequest``). Without the reset the
client retries that handshake forever in SUSPENDED (first test: kazoo on its own).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace

import kazoo
import pytest
from kazoo.client import KazooClient, KazooState
from kazoo.retry import KazooRetry
from prometheus_client import REGISTRY
from zkop_testing.waiting import EVENTUALLY, result_within, wait_for
from zkop_testing.zookeeper import ZooKeeperInstallation, ZooKeeperServer

from zkop.zookeeper import reset
from zkop.zookeeper.adapter import ConnectionOptions, ZooKeeperAdapter, ZooKeeperUnavailable
from zkop.zookeeper.handler import SelectHandler
from zkop.zookeeper.reset import restart_from_scratch, zxid_refused
from zkop.zookeeper.session import build_client

REFUSED = "as it has seen zxid"
RESETS = "zkop_zookeeper_session_resets_total"


@pytest.fixture
def server(zookeeper_installation: ZooKeeperInstallation) -> Iterator[ZooKeeperServer]:
    """A standalone server of this test's own (of the test's ZooKeeper line), which it may wipe."""
    with ZooKeeperServer(installation=zookeeper_installation) as s:
        yield s


def _refusals(server: ZooKeeperServer) -> int:
    return server.log_path.read_text(errors="replace").count(REFUSED)


def _resets() -> float:
    return REGISTRY.get_sample_value(RESETS) or 0.0


def _states(adapter: ZooKeeperAdapter) -> list[str]:
    seen: list[str] = []
    adapter.add_session_listener(seen.append)
    return seen


def _new_session_heard(adapter: ZooKeeperAdapter, old_session: int | None, states: list[str], heard: int) -> bool:
    """Connected with a new session, and the listeners told so: they run on the session's dispatcher
    thread, after ``connected`` already says it (a test that asserted the states on ``connected`` alone
    read ['CONNECTED', 'SUSPENDED', 'LOST'], the last CONNECTED still on its way)."""
    return adapter.connected and adapter.session_id != old_session and "CONNECTED" in states[heard:]


def test_kazoo_alone_stays_suspended_after_data_loss(server: ZooKeeperServer) -> None:
    # The premise, and main's behaviour: nothing in kazoo ever gives up on the old session.
    client = build_client(ConnectionOptions(hosts=server.hosts, session_timeout=2))
    client.start(timeout=EVENTUALLY)
    try:
        for i in range(5):
            client.create(f"/n{i}", b"x")  # the client has now seen zxids the wiped server does not have
        server.wipe_and_restart()
        wait_for(lambda: _refusals(server) >= 3, message="the wiped server refuses the old session")
        # Refused three times, far past the 2 s session timeout: still SUSPENDED, still the old zxid.
        assert client.state == KazooState.SUSPENDED
        assert client.last_zxid >= 5
    finally:
        client.stop()
        client.close()


@pytest.mark.parametrize("refusal_check", [None, 1.0], ids=["time-rule", "refusal-check"])
@pytest.mark.zookeeper_semantics
def test_session_suspended_past_its_timeout_is_reset_from_scratch(server: ZooKeeperServer, refusal_check: float | None,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    # The time rule alone (2 s), and with the refusal check on (which may come first; either resets).
    adapter = ZooKeeperAdapter(ConnectionOptions(hosts=server.hosts, session_timeout=2, connect_timeout=10,
                                                 refusal_check_interval=refusal_check))
    states = _states(adapter)
    adapter.start()
    try:
        for result in [adapter.client.create_async(f"/n{i}", b"x") for i in range(30)]:
            result.get(timeout=EVENTUALLY)
        seen = adapter.client.last_zxid
        assert adapter.read("/n0", watch=True) is not None
        assert "/n0" in adapter.cache
        old_session, resets = adapter.session_id, _resets()
        started, heard = time.monotonic(), len(states)
        with caplog.at_level(logging.WARNING, logger="zkop.zookeeper.session"):
            server.wipe_and_restart()
            wait_for(lambda: _new_session_heard(adapter, old_session, states, heard),
                     message=f"a new session after the wipe (states seen: {states})")
        converged = time.monotonic() - started
        logging.getLogger(__name__).warning("standalone wipe: new session %.1f s after the wipe began", converged)
        assert states[-3:] == ["SUSPENDED", "LOST", "CONNECTED"], states
        assert _resets() == resets + 1
        assert "/n0" not in adapter.cache  # the watch-validated cache was invalidated with the session
        assert adapter.read("/n0", watch=True) is None  # the data is gone; the new session reads the truth
        assert adapter.client.last_zxid < seen  # a session from scratch on the wiped server's history
        assert "Declaring it LOST and starting a new session from scratch" in caplog.text
        assert adapter.unavailable_reason is None
    finally:
        adapter.stop()


def test_while_the_reset_lasts_every_request_names_it(server: ZooKeeperServer, monkeypatch: pytest.MonkeyPatch) -> None:
    # The watchdog's clock is the test's: SUSPENDED lasts until the test moves it past the session timeout,
    # however long the machine stalls, so the SUSPENDED reason is there to be read.
    now = [1000.0]
    monkeypatch.setattr(reset, "time", SimpleNamespace(monotonic=lambda: now[0], sleep=time.sleep))
    adapter = ZooKeeperAdapter(ConnectionOptions(hosts=server.hosts, session_timeout=2, connect_timeout=10))
    states = _states(adapter)
    adapter.start()
    try:
        adapter.client.create("/n", b"x")
        server.kill()  # the ensemble is gone (and comes back empty, below): no session to be had meanwhile
        # Listeners hear SUSPENDED after the watchdog was told (Session._on_state): its reason is set.
        wait_for(lambda: "SUSPENDED" in states, message="SUSPENDED is reported")
        reason = adapter.unavailable_reason
        assert reason is not None and "SUSPENDED" in reason and "reset after 2 s" in reason
        now[0] += 1.5
        reason = adapter.unavailable_reason
        assert reason is not None and "SUSPENDED for 1.5 s" in reason
        now[0] += 0.5  # the session timeout has passed
        wait_for(lambda: "LOST" in states, message="declared LOST after the session timeout")
        reason_now = adapter.unavailable_reason
        assert reason_now is not None and "session reset in progress" in reason_now
        with pytest.raises(ZooKeeperUnavailable, match="session reset in progress"):
            adapter.read("/n")
        server.wipe_and_restart()
        wait_for(lambda: adapter.connected, message="the new session")
        assert adapter.read("/n") is None
        assert states.count("LOST") == 1
    finally:
        adapter.stop()


def test_a_zero_expiration_percent_keeps_the_old_session(server: ZooKeeperServer) -> None:
    adapter = ZooKeeperAdapter(ConnectionOptions(hosts=server.hosts, session_timeout=2, connect_timeout=10,
                                                 session_expiration_percent=0, refusal_check_interval=None))
    states = _states(adapter)
    adapter.start()
    try:
        adapter.client.create("/n", b"x")
        server.wipe_and_restart()
        wait_for(lambda: _refusals(server) >= 3, message="refused")
        assert "LOST" not in states and not adapter.connected
        assert adapter.unavailable_reason == "ZooKeeper session is SUSPENDED"
    finally:
        adapter.stop()


def test_restart_from_scratch_relies_on_kazoo_2_11(server: ZooKeeperServer) -> None:
    # restart_from_scratch cites kazoo 2.11.0's source lines: a new kazoo must be re-read first.
    assert kazoo.__version__ == "2.11.0", (
        f"kazoo {kazoo.__version__}: re-check zkop.zookeeper.session.restart_from_scratch against its "
        "KazooClient.stop/_reset/start_async and ConnectionHandler._connect, then update this pin")
    client = KazooClient(hosts=server.hosts, timeout=2)
    client.start(timeout=EVENTUALLY)
    lost = threading.Event()
    client.add_listener(lambda state: lost.set() if state == KazooState.LOST else None)
    try:
        client.create("/n", b"x")
        old_id, old_zxid = client.client_id, client.last_zxid
        assert old_id is not None and old_zxid > 0
        restart_from_scratch(client)
        assert lost.is_set()  # listeners heard LOST on the way
        wait_for(lambda: client.connected, message="new session")
        assert client.client_id is not None and client.client_id[0] != old_id[0]
        assert client.exists("/n") is not None  # same server, same data: only the session is new
    finally:
        client.stop()
        client.close()


def test_a_refusing_ensemble_is_given_up_before_the_timeout(server: ZooKeeperServer,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    # A 30 s session timeout: the wiped server's refusal, asked for directly, resets the session long before.
    adapter = ZooKeeperAdapter(ConnectionOptions(hosts=server.hosts, session_timeout=30, connect_timeout=10))
    states = _states(adapter)
    adapter.start()
    try:
        for i in range(5):
            adapter.client.create(f"/n{i}", b"x")
        old_session = adapter.session_id
        started, heard = time.monotonic(), len(states)
        with caplog.at_level(logging.WARNING, logger="zkop.zookeeper.session"):
            server.wipe_and_restart()
            wait_for(lambda: _new_session_heard(adapter, old_session, states, heard),
                     message=f"a new session after the wipe (states seen: {states})")
        logging.getLogger(__name__).warning("refusal check: new session %.1f s after the wipe began",
                                            time.monotonic() - started)
        assert states[-3:] == ["SUSPENDED", "LOST", "CONNECTED"], states
        # Given up for the refusal, not by the time rule (SUSPENDED for the 30 s session timeout).
        assert "the ensemble refuses the session: it has seen a zxid the servers do not have" in caplog.text
        assert "longer than the session timeout" not in caplog.text, caplog.text
        assert adapter.read("/n0") is None
    finally:
        adapter.stop()


@pytest.mark.zookeeper_semantics
def test_zxid_refused_asks_the_ensemble(server: ZooKeeperServer) -> None:
    options = ConnectionOptions(hosts=server.hosts, session_timeout=5)

    def make_client(retry: KazooRetry, handler: SelectHandler, logger: logging.Logger) -> KazooClient:
        return build_client(options, retry, handler, logger)

    client = build_client(options)
    client.start(timeout=EVENTUALLY)
    try:
        for i in range(5):
            client.create(f"/n{i}", b"x")
        seen = client.last_zxid
        assert not zxid_refused(make_client, seen, 5)  # the server has it
    finally:
        client.stop()
        client.close()
    server.kill()
    assert not zxid_refused(make_client, seen, 5)  # nothing serving: not a refusal (maybe an election)
    server.wipe_and_restart()
    assert zxid_refused(make_client, seen, 5)  # serving, and behind what the client has seen
    assert not zxid_refused(make_client, 0, 5)


def test_a_server_that_never_answers_costs_one_check_not_the_session_timeout() -> None:
    # A server shutting down or starting accepts TCP connections it does not answer (the kernel's backlog):
    # a refusal probe gives up after PROBE_TIMEOUT, not after the (here an hour's) session timeout.
    import socket

    from zkop.zookeeper.session import Session

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        host, port = silent.getsockname()
        session = Session(ConnectionOptions(hosts=f"{host}:{port}", session_timeout=3600))
        session.client.last_zxid = 0x100  # as if it had seen transactions
        assert not result_within(session._refused, message="a refusal probe waiting out the session timeout (an hour)")
        session.client.close()
