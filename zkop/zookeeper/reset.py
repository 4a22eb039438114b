"""Giving up a session that cannot come back: Curator's rule, the zxid refusal, and a session from scratch.

A session SUSPENDED for longer than the session timeout is declared LOST and replaced by a new one
(no session id, zxid 0): Curator's ``ConnectionStateManager.checkSessionExpiration``
(``sessionExpirationPercent`` 100) and ``HandleHolder.closeAndReset``. The servers have expired it
by then anyway (``SessionTrackerImpl``).

It is also the way out when the ensemble lost its data: a server whose last zxid is older than the
client's refuses the handshake (``ZooKeeperServer.processConnectRequest``, "Refusing session
request for client … as it has seen zxid …") by closing the socket, which looks like a server not
serving yet, and kazoo retries forever. :func:`zxid_refused` tells the two apart by asking the
ensemble for a new session and for one that has seen our zxid; on a refusal the session is reset at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import kazoo
from kazoo.client import KazooClient, KazooState
from kazoo.retry import KazooRetry

from zkop.zookeeper.handler import SelectHandler
from zkop.zookeeper.threads import join_bounded

__all__ = ["SuspensionWatchdog", "restart_from_scratch", "zxid_refused"]

log = logging.getLogger(__name__)
#: kazoo's log of the refusal probes: their refused connections are the expected answer, not news.
probe_log = logging.getLogger(f"{__name__}.probe")
probe_log.setLevel(logging.ERROR)

#: ``make_client(connection_retry, handler, logger)``: a kazoo client for the ensemble with those.
ClientFactory = Callable[[KazooRetry, SelectHandler, logging.Logger], KazooClient]


def restart_from_scratch(client: KazooClient) -> None:
    """Close ``client``'s session and start a brand-new one: no session id, last zxid 0.

    Curator's ``HandleHolder.closeAndReset`` with kazoo's public API only (``stop`` then
    ``start_async``). It relies on kazoo 2.11.0 (``tests/zookeeper/test_session_reset.py`` checks it):
    ``KazooClient.stop`` joins the connection thread (``_safe_close``), even one retrying a refused
    handshake; that thread ends with
    ``_session_callback(KeeperState.CLOSED)`` (``ConnectionHandler.zk_loop``), whose
    ``KazooClient._reset`` clears the session id, password and ``last_zxid``; ``start_async``'s new
    thread then sends ``Connect`` with session id 0 and zxid 0 (``ConnectionHandler._connect``): a new
    session any server accepts.

    Must not be called on one of kazoo's own threads (``stop`` joins them).

    Raises:
        RuntimeError: kazoo kept the old session id or zxid (a kazoo whose ``stop`` no longer
            resets them: this function needs updating); the client is left stopped.
    """
    client.stop()
    if client.last_zxid != 0 or client.client_id is not None:
        raise RuntimeError(
            f"kazoo {kazoo.__version__} kept last_zxid={client.last_zxid:#x} or the session after stop(); "
            "a new session would be refused again (zkop.zookeeper.reset.restart_from_scratch needs updating)"
        )
    client.start_async()


def _one_pass(make_client: ClientFactory, last_zxid: int, timeout: float) -> bool | None:
    """Try for a new session claiming to have seen ``last_zxid``, one pass over every host.

    Returns ``True`` if a server gave a session (it is closed again at once), ``False`` if every
    host closed the connection or refused it, ``None`` if neither happened within ``timeout``
    seconds. kazoo 2.11.0 gives no signal when a pass fails (the state stays LOST), so the end of
    the first pass is seen through the retry policy's public ``sleep_func``: ``KazooRetry.__call__``
    calls it before the second pass; ``KazooClient.__init__`` wants the handler's ``sleep_func`` (an
    ``IHandler`` attribute) to be the same function. ``last_zxid`` is the public attribute
    ``ConnectionHandler._connect`` sends; a new client starts from 0 (``KazooClient._reset``).
    """
    done = threading.Event()

    def pass_failed(seconds: float) -> None:
        done.set()
        time.sleep(min(seconds, 0.1))

    handler = SelectHandler()
    handler.sleep_func = pass_failed
    client = make_client(KazooRetry(max_tries=-1, delay=60.0, max_delay=60.0, sleep_func=pass_failed), handler,
                         probe_log)
    client.add_listener(lambda state: done.set() if state == KazooState.CONNECTED else None)
    client.last_zxid = last_zxid
    try:
        client.start_async()
        if not done.wait(timeout):
            return None
        return bool(client.connected)
    finally:
        client.stop()
        client.close()


def zxid_refused(make_client: ClientFactory, last_zxid: int, timeout: float) -> bool:
    """True if the ensemble gives a new session but refuses one that has seen ``last_zxid``.

    That is ``ZooKeeperServer.processConnectRequest`` refusing a client ahead of it: every
    reachable server's last zxid is older than ``last_zxid``, the ensemble lost its data. Costs a
    session created and closed at once (two transactions) and one refused connection per host.
    ``False`` also when nothing answers (not serving yet: a leader election, a restart).
    """
    if last_zxid <= 0 or _one_pass(make_client, 0, timeout) is not True:
        return False
    return _one_pass(make_client, last_zxid, timeout) is False


class SuspensionWatchdog:
    """Decides when a SUSPENDED session is given up; a thread of its own runs ``reset(reason)``.

    Args:
        lost_after: seconds of SUSPENDED after which the session is given up, ``None`` never.
        reset: gives the session up and starts a new one (:func:`restart_from_scratch`); called
            on the watchdog's thread with the reason, logged by the caller.
        refused: ``refused()`` is True if the ensemble refuses the session (:func:`zxid_refused`);
            asked every ``check_interval`` seconds after the first ``check_interval`` of a
            suspension, twice in a row before it counts (a follower a few transactions behind
            refuses a client for a moment too).
        check_interval: seconds; ``None`` disables the refusal check (only the time rule).
    """

    def __init__(self, lost_after: float | None, reset: Callable[[str], None], *,
                 refused: Callable[[], bool] | None = None, check_interval: float | None = 1.0) -> None:
        self.lost_after = lost_after
        self._reset = reset
        self._refused = refused
        self._check_interval = check_interval if refused is not None else None
        self._cond = threading.Condition(threading.Lock())
        self._suspended_since: float | None = None
        self._resetting: str | None = None
        self._stopped = False
        self._finished = False
        self._thread = threading.Thread(target=self._run, name="zk-session-watchdog", daemon=True)

    def start(self) -> None:
        """Start the thread (idempotent)."""
        if not self._thread.is_alive() and not self._stopped:
            self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """End the thread and wait at most ``timeout`` seconds for it (no reset starts after this returns).

        A refusal check in flight (each probe waits at most the probe timeout) or a reset in progress
        (kazoo's ``stop`` joins its connection thread) finishes first. Idempotent; called on the
        watchdog's own thread (from ``reset``), it does not wait.
        """
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        join_bounded(self._thread, timeout)

    def ended(self) -> bool:
        """True if the thread ended before :meth:`stop` (an exception nothing caught): no reset would come."""
        # No lock: the thread that died may hold it. Decided by the loop having returned, not by is_alive(): a
        # thread being started has an ident before it is alive, and a health check then would take it for dead.
        return self._finished and not self._stopped

    def on_state(self, state: str) -> None:
        """Feed a kazoo state (``"CONNECTED"``, ``"SUSPENDED"``, ``"LOST"``); never blocks."""
        with self._cond:
            self._suspended_since = time.monotonic() if state == KazooState.SUSPENDED else None
            if state == KazooState.CONNECTED:
                self._resetting = None
            self._cond.notify_all()

    def reason(self) -> str | None:
        """Why there is no session, if the watchdog knows: a reset in progress, or the time left SUSPENDED."""
        with self._cond:
            resetting, since = self._resetting, self._suspended_since
        if resetting is not None:
            return f"ZooKeeper session reset in progress: {resetting}; no session until a new one is established"
        if since is not None and self.lost_after is not None:
            return (f"ZooKeeper session SUSPENDED for {time.monotonic() - since:.1f} s "
                    f"(declared LOST and reset after {self.lost_after:g} s)")
        return None

    def _run(self) -> None:
        try:
            while (reason := self._next_reset()) is not None:
                try:
                    self._reset(reason)
                except Exception:
                    log.exception("ZooKeeper session reset failed; trying again")
                    with self._cond:  # the clock starts again: the next try after another lost_after
                        self._resetting = None
                        self._suspended_since = time.monotonic()
        finally:
            self._finished = True

    def _check_refused(self) -> bool:
        try:
            return self._refused is not None and self._refused()
        except Exception as err:  # a check that cannot be made proves nothing; the time rule still holds
            log.warning("ZooKeeper refusal check could not be made: %s", err, exc_info=log.isEnabledFor(logging.DEBUG))
            return False

    def _next_reset(self) -> str | None:
        """Block until the session must be given up; the reason, or ``None`` once stopped."""
        refusals = 0
        with self._cond:
            while not self._stopped:
                since, lost_after = self._suspended_since, self.lost_after
                if since is None or self._resetting is not None or (lost_after is None and
                                                                    self._check_interval is None):
                    refusals = 0
                    self._cond.wait()
                    continue
                elapsed = time.monotonic() - since
                if lost_after is not None and elapsed >= lost_after:
                    reason = (f"SUSPENDED for {elapsed:.1f} s, longer than the session timeout "
                              f"({lost_after:g} s); the ensemble may have lost its data")
                    break
                if refusals >= 2:
                    reason = ("the ensemble refuses the session: it has seen a zxid the servers do not have "
                              "(the ensemble lost its data)")
                    break
                waits = [x for x in (None if lost_after is None else lost_after - elapsed,
                                     self._check_interval) if x is not None]
                self._cond.wait(min(waits))
                if self._check_interval is None or self._stopped or self._suspended_since != since:
                    continue
                if time.monotonic() - since < self._check_interval:
                    continue
                self._cond.release()  # the check is network I/O: states keep coming meanwhile
                try:
                    refused = self._check_refused()
                finally:
                    self._cond.acquire()
                refusals = refusals + 1 if refused and self._suspended_since == since else 0
                if refusals:
                    log.info("ZooKeeper ensemble refuses the suspended session (check %d of 2)", refusals)
            else:
                return None
            self._resetting = reason
            return reason
