"""The ZooKeeper session as a Manager runnable, and the one resync-on-reconnect rule.

:class:`ZooKeeperStartup` opens a session (the flags' ensemble, or a ZooKeeperEnsemble read at start-up)
and runs the start-up probe, retried while ZooKeeper is unreachable; :func:`resync_on_new_session` calls
each feature's hook when a session is back after LOST or SUSPENDED.
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from zkop.zookeeper.adapter import ZooKeeperAdapter, ZooKeeperError, ZooKeeperUnavailable
from zkop.zookeeper.connect_retry import connect_retrying

__all__ = ["ZooKeeperStartup", "resync_on_new_session"]

log = logging.getLogger(__name__)


def resync_on_new_session(zookeeper: ZooKeeperAdapter, callbacks: Sequence[Callable[[], None]]) -> None:
    """Call every callback when the ZooKeeper session is CONNECTED again after LOST or SUSPENDED.

    After a LOST session every watch is gone and the data may have changed; after SUSPENDED, keys
    may sit in long backoffs.  Either way each feature resyncs (cheap where the watch-validated
    cache still holds).  Callbacks run on kazoo's event thread and must only enqueue.
    """
    interrupted = threading.Event()

    def on_state(state: str) -> None:
        if state in ("LOST", "SUSPENDED"):
            interrupted.set()
        elif state == "CONNECTED" and interrupted.is_set():
            interrupted.clear()
            log.info("ZooKeeper session re-established; resyncing everything")
            for callback in callbacks:
                callback()

    zookeeper.add_session_listener(on_state)


class ZooKeeperStartup:
    """Non-leader runnable: opens the ZooKeeper session and runs the start-up probe; closes it on stop.

    Retries while ZooKeeper is unavailable (an ensemble electing a leader), waiting 0.5 s doubling
    to 10 s, and logs each distinct reason once (docs/operations.md, "Connecting to a secured ensemble");
    only a probe ZooKeeper refuses (credentials that cannot read what they write) is fatal:
    ``on_fatal(2, reason)``.  :meth:`has_synced` is True once the session is up and the probe passed,
    so the Manager starts leader election only then.

    Args:
        zookeeper: the adapter (not started).
        probe_root: where the probe writes, e.g. ``/zkop/probe``.
        probe: False skips the probe (``--no-startup-probe``-style tests).
        on_fatal: ``(exit_code, reason)``, e.g. :meth:`zkop.runtime.manager.Manager.fail`.
        directory: removed on :meth:`stop` (a ZooKeeperEnsemble's files: ``--service-bridge-ensemble``).
        name: the runnable's name (logs, ``/readyz``): ``zookeeper``, ``zookeeper-<ensemble>``.
    """

    def __init__(self, zookeeper: ZooKeeperAdapter, probe_root: str, *, probe: bool,
                 on_fatal: Callable[[int, str], None], directory: Path | None = None, name: str = "zookeeper") -> None:
        self.name = name
        self.zookeeper = zookeeper
        self.directory = directory  # a ZooKeeperEnsemble's private TLS/SASL files, removed on stop
        self.probe_root = probe_root
        self.probe = probe
        self.on_fatal = on_fatal
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._fatal = False  # on_fatal was called: the run ends anyway
        self._thread: threading.Thread | None = None

    def has_synced(self) -> bool:
        """True once the session is open and the probe passed."""
        return self._ready.is_set()

    def health_check(self) -> str | None:
        """``None``, or what ended that the session needs: the start-up thread before the session was up
        (nothing would ever start), or one of the session's own threads (``ZooKeeperAdapter.health_check``)."""
        if self._stop.is_set():
            return None
        thread = self._thread
        if thread is not None and not thread.is_alive() and not self._ready.is_set() and not self._fatal:
            return f"its thread {thread.name} ended before the session was up"
        return self.zookeeper.health_check()

    def readiness(self) -> str | None:
        """``None`` when ready, else why ZooKeeper is not, with the last connection error (an untrusted
        certificate, a rejected SASL login), as docs/operations.md ("Connecting to a secured ensemble") shows.

        Before the first session: ``ZooKeeper session not connected: <reason>``, then, connected but not yet
        probed, ``ZooKeeper start-up probe not complete``. Later the session's own reason (how long it has
        been SUSPENDED, a reset in progress) followed by ``: <reason>``.
        """
        reason = self.zookeeper.last_connect_error
        if not self._ready.is_set():
            if not self.zookeeper.connected:
                return "ZooKeeper session not connected" + (f": {reason}" if reason else "")
            return "ZooKeeper start-up probe not complete"
        unavailable = self.zookeeper.unavailable_reason  # None while connected; names a session reset in progress
        if unavailable is None:
            return None
        return unavailable + (f": {reason}" if reason else "")

    def start(self) -> None:
        """Connect and probe on a thread; returns at once."""
        thread = threading.Thread(target=self._connect, name="zookeeper-startup", daemon=True)
        thread.start()  # then published: is_alive() is False until start()
        self._thread = thread

    def _connect(self) -> None:
        started = threading.Event()
        logged: set[str] = set()

        def log_once(error: BaseException | None) -> None:
            """Log why an attempt failed once per distinct reason, not at every retry; a connection error
            the connect guard logged already (``ZooKeeper connection failed: …``) only at debug."""
            text = str(error or "")
            guarded = self.zookeeper.last_connect_error
            if text in logged or (guarded and text.endswith(guarded)):
                log.debug("ZooKeeper not reachable yet: %s", text)
                return
            logged.add(text)
            log.warning("ZooKeeper not reachable yet: %s", text)

        def connect_and_probe() -> None:
            if not started.is_set():
                self.zookeeper.start()  # safe to repeat after it raised (kazoo stops itself on timeout)
                started.set()
            if not self.zookeeper.connected:
                reason = self.zookeeper.last_connect_error
                raise ZooKeeperUnavailable("ZooKeeper session not connected yet" + (f": {reason}" if reason else ""))
            if self.probe:
                self.zookeeper.probe(self.probe_root)

        retrying = connect_retrying(self._stop, retry_on=ZooKeeperUnavailable, sleep=self._sleep,
                                    before_sleep=lambda rs: log_once(rs.outcome.exception() if rs.outcome else None))
        try:
            for attempt in retrying:
                with attempt:
                    connect_and_probe()
        except ZooKeeperUnavailable:
            return  # stopped while waiting
        except ZooKeeperError as err:
            self._fatal = True
            self.on_fatal(2, f"ZooKeeper start-up probe failed: {err}")
            return
        self._ready.set()

    def _sleep(self, seconds: float) -> None:
        """Wait between attempts, returning early when stopped."""
        self._stop.wait(seconds)

    def stop(self, timeout: float, /) -> None:
        """End the retries, then close the session."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        try:
            self.zookeeper.stop()
        except Exception:
            log.debug("closing the ZooKeeper session failed", exc_info=True)
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
