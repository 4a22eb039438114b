"""The Manager: runs runnables, serves probes and metrics, elects a leader (controller-runtime ``pkg/manager``).

It knows no feature: features :meth:`Manager.add` what they build (anything with ``start()`` and
``stop(timeout)``) and name their health and readiness checks.

Start order [CR pkg/manager/internal.go ``Start``]: the servers; the ``needs_leader=False``
runnables in the order added (so standbys keep warm caches); wait until each one with
``has_synced()`` has synced (``WaitForCacheSync``); with ``gc_freeze_after_sync``, :func:`freeze_heap`;
leader election, if configured; once leading, the ``needs_leader=True`` runnables in order; with
``gc_freeze_after_sync`` :func:`freeze_heap` once more, the first time every leader runnable that
:class:`Settles` has settled (the initial reconciles are done).

Shutdown [CR pkg/manager/internal.go ``engageStopProcedure``]: a standby stops campaigning first;
the leader runnables stop together within ``graceful_shutdown_timeout`` **while the Lease is
still renewed** (controller-runtime cancels leader election "only after we waited"); then renewal
stops, the Lease is released after a clean stop, the other runnables stop in reverse order and the
servers close. When :meth:`Manager.run` returns, no thread the Manager started runs (each wait is
bounded). A lost Lease stops the leader runnables at once and ends the run with exit code 1.

A runnable that stopped working (its :class:`HealthChecker` answer, asked every
``liveness_period`` seconds, or a ``start()`` that raised; also the Manager's own threads) ends the
run with exit code 1, as a runnable's error ends controller-runtime's manager
[CR pkg/manager/runnable_group.go ``reconcile``]: the leader runnables get at most half the renew
deadline (never more than ``graceful_shutdown_timeout``) to drain, the Lease renewed meanwhile; the
Lease is released only if they all stopped in time [client-go tools/leaderelection/leaderelection.go
``release``].
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from zkop.kube.client import KubeClient
from zkop.runtime.leaderelection import LeaderElector
from zkop.runtime.metrics_auth import DelegatingAuth
from zkop.runtime.serving import (
    Check,
    HealthServer,
    MetricsServer,
    SecureServing,
    parse_bind_address,
    start_metrics_server,
)
from zkop.runtime.threads import describe_end

__all__ = ["HasSynced", "HealthChecker", "LeaderElectionOptions", "Manager", "ManagerOptions", "Runnable", "Settles",
           "freeze_heap"]

log = logging.getLogger(__name__)


class Runnable(Protocol):
    """Something the manager starts and stops (controller-runtime ``manager.Runnable``).

    ``start()`` returns at once (work happens on the runnable's own threads); ``stop(timeout)``
    stops it, waiting at most ``timeout`` seconds.
    """

    def start(self) -> None: ...

    def stop(self, timeout: float, /) -> object: ...


@runtime_checkable
class HasSynced(Protocol):
    """A runnable with a cache: leader runnables start only once ``has_synced()`` is True."""

    def has_synced(self) -> bool: ...


@runtime_checkable
class Settles(Protocol):
    """A runnable that can tell it has nothing to do: ``settled()`` is True when no work is queued or running.

    Asked by the Manager every ``liveness_period`` seconds until the leader runnables first settle
    (``gc_freeze_after_sync``); must not block.
    """

    def settled(self) -> bool: ...


@runtime_checkable
class HealthChecker(Protocol):
    """A runnable that can tell it is alive: ``health_check()`` is ``None`` or why not.

    "Not alive" means it can no longer do its work (a thread it needs ended): ``/healthz`` fails and
    the Manager ends the run with exit code 1. Not called before ``start()`` returned or once stopping.
    Must not block: it takes no lock a thread that died might have held.
    """

    def health_check(self) -> str | None: ...


@dataclass(frozen=True)
class LeaderElectionOptions:
    """The Lease and its timing; see :class:`zkop.runtime.leaderelection.LeaderElector`.

    Durations are seconds; ``identity`` is ``<hostname>_<uuid>``.
    """

    namespace: str
    name: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


@dataclass
class ManagerOptions:
    """Manager settings, as controller-runtime's ``manager.Options``.

    Attributes:
        metrics_bind_address: ``--metrics-bind-address``; ``"0"`` disables.
        metrics_secure: ``--metrics-secure``: HTTPS, and every ``/metrics`` request authenticated
            (TokenReview) and authorised (SubjectAccessReview) through the manager's API client
            [CR pkg/metrics/server/server.go ``SecureServing``, pkg/metrics/filters/filters.go].
        metrics_cert_dir: ``--metrics-cert-dir``: holds ``metrics_cert_name`` and
            ``metrics_key_name``, reloaded when they change; ``None`` (or a file missing) means
            a self-signed certificate generated at start.
        health_probe_bind_address: ``--health-probe-bind-address``; ``"0"`` disables.
        leader_election: ``None`` runs leader runnables at once (single replica).
        graceful_shutdown_timeout: seconds the leader runnables get to drain on a clean stop.
        cache_sync_poll: seconds between checks of ``has_synced`` and of a stop request.
        liveness_period: seconds between checks that every runnable still works (see the module
            docstring); with leader election at most a quarter of the renew deadline is used.
        gc_freeze_after_sync: once the caches have synced, and again once the leader runnables first
            settled, collect and ``gc.freeze()`` the heap (:func:`freeze_heap`); ``zkop run`` sets it, the
            library default leaves the process's garbage collector alone (the Manager may run inside
            someone else's process, e.g. a test's).
    """

    metrics_bind_address: str = ":8080"
    metrics_secure: bool = False
    metrics_cert_dir: str | None = None
    metrics_cert_name: str = "tls.crt"
    metrics_key_name: str = "tls.key"
    health_probe_bind_address: str = ":8081"
    leader_election: LeaderElectionOptions | None = None
    graceful_shutdown_timeout: float = 30.0
    cache_sync_poll: float = 0.05
    liveness_period: float = 0.5
    gc_freeze_after_sync: bool = False


@dataclass
class _Entry:
    runnable: Runnable
    name: str
    needs_leader: bool
    started: bool = field(default=False)


def _name_of(runnable: object) -> str:
    name = getattr(runnable, "name", None)
    return name if isinstance(name, str) and name else type(runnable).__name__


class Manager:
    """Runs runnables until stopped; build, :meth:`add`, then :meth:`run` (blocks).

    Args:
        options: servers, leader election, shutdown timing.
        client: the API client the leader elector and the secure metrics filter use; required
            with ``options.leader_election`` or ``options.metrics_secure``.

    Raises:
        ValueError: leader election or secure metrics without a client (or invalid durations,
            see :class:`~zkop.runtime.leaderelection.LeaderElector`).
    """

    def __init__(self, options: ManagerOptions, client: KubeClient | None = None) -> None:
        if options.leader_election is not None and client is None:
            raise ValueError("leader election needs an API client")
        if options.metrics_secure and client is None:
            raise ValueError("secure metrics serving needs an API client (TokenReview, SubjectAccessReview)")
        self.options = options
        self.client = client
        self.stop_event = threading.Event()
        #: Ends the leader election; set during shutdown only once the leader runnables have stopped.
        self._election_stop = threading.Event()
        #: Set once the leader runnables have been started (controller-runtime ``Elected()``).
        self.elected = threading.Event()
        self.exit_code = 0
        self.health: HealthServer | None = None
        self.metrics_server: MetricsServer | None = None
        self._bound = False
        self._entries: list[_Entry] = []
        self._healthz: dict[str, Check] = {}
        self._readyz: dict[str, Check] = {}
        self._lock = threading.Lock()
        self._started = False
        self._leading = False
        self._elector: LeaderElector | None = None
        self._election_thread: threading.Thread | None = None
        self._leader_start_thread: threading.Thread | None = None
        #: Why a runnable stopped working (the run ends with exit code 1), once one did.
        self.failure: str | None = None
        self._lease_lost = False  # renewal failed, or its thread ended: stop at once, release nothing

    # --- registration ------------------------------------------------------------------------

    def add(self, runnable: Runnable, *, needs_leader: bool) -> None:
        """Register ``runnable``; ``needs_leader`` ones run only on the elected replica.

        Added after :meth:`run` began, it starts at once if its group already started
        (controller-runtime allows the same).
        """
        entry = _Entry(runnable, _name_of(runnable), needs_leader)
        with self._lock:
            self._entries.append(entry)
            start_now = self._leading if needs_leader else self._started
        if start_now:
            self._start(entry)

    def add_controllers(self, informers: Iterable[Runnable], controllers: Iterable[Runnable]) -> None:
        """Register a feature's ``informers`` (every replica keeps a warm cache) and its ``controllers``
        (only the elected replica reconciles), in order."""
        for informer in informers:
            self.add(informer, needs_leader=False)
        for controller in controllers:
            self.add(controller, needs_leader=True)

    def add_healthz_check(self, name: str, check: Check) -> None:
        """Add a liveness check served on ``/healthz`` (``None`` = healthy, else the reason).

        Raises:
            ValueError: a check of that name exists.
        """
        self._add_check(self._healthz, name, check)

    def add_readyz_check(self, name: str, check: Check) -> None:
        """Add a readiness check served on ``/readyz``.  Raises :class:`ValueError` on a duplicate name."""
        self._add_check(self._readyz, name, check)

    @staticmethod
    def _add_check(checks: dict[str, Check], name: str, check: Check) -> None:
        if name in checks:
            raise ValueError(f"check {name!r} already exists")
        checks[name] = check

    # --- generic checks features register ----------------------------------------------------

    def not_synced(self) -> list[str]:
        """Names of the non-leader runnables whose ``has_synced()`` is still False."""
        with self._lock:
            entries = [e for e in self._entries if not e.needs_leader]
        return [e.name for e in entries if isinstance(e.runnable, HasSynced) and not e.runnable.has_synced()]

    def runnables_healthy(self) -> str | None:
        """Liveness over every started runnable that is a :class:`HealthChecker`; ``None`` while stopping."""
        if self.stop_event.is_set():
            return None
        with self._lock:
            entries = [e for e in self._entries if e.started]
        reasons = [why for e in entries if isinstance(e.runnable, HealthChecker) and (why := e.runnable.health_check())]
        return "; ".join(reasons) or None

    # --- lifecycle ---------------------------------------------------------------------------

    def run(self) -> int:
        """Start everything in order, block until :meth:`stop`, :meth:`fail`, a lost Lease or a runnable that
        stopped working; shut down.

        Returns the exit code: 0 after :meth:`stop`, 1 after a lost Lease or a runnable that stopped
        working (see the module docstring), or what :meth:`fail` set.

        Raises:
            ValueError: a server address is malformed.
            OSError: a server address cannot be bound; ``strerror`` names the server and the address,
                e.g. ``cannot serve metrics on :8080: Address already in use`` (``errno`` is the bind's).
            zkop.runtime.certs.CertificateError: no usable metrics serving certificate.
        """
        self._start_servers()
        try:
            with self._lock:
                self._started = True
                entries = [e for e in self._entries if not e.needs_leader]
            for entry in entries:
                if not self._start(entry):
                    break
            if self._wait_for_caches():
                if self.options.gc_freeze_after_sync:
                    freeze_heap("the caches synced")
                self._elect()
                self._watch()
            self._shutdown()
        finally:
            self._close_servers()
        return self.exit_code

    def stop(self) -> None:
        """Ask :meth:`run` to shut down cleanly (thread- and signal-safe)."""
        self.stop_event.set()

    def fail(self, exit_code: int, reason: str) -> None:
        """End the run with ``exit_code`` (a fatal start-up error of a runnable); logged at error."""
        log.error("%s; stopping", reason)
        if self.exit_code == 0:
            self.exit_code = exit_code
        self.stop_event.set()

    def _start(self, entry: _Entry) -> bool:
        """Start ``entry``; False if its ``start()`` raised (a runnable that cannot work: the run ends)."""
        try:
            entry.runnable.start()
        except Exception as err:
            log.debug("starting %s failed", entry.name, exc_info=True)
            self._stopped_working(entry.name, f"start() raised {describe_end(err)}")
            return False
        entry.started = True
        return True

    def _liveness_period(self) -> float:
        """Seconds between liveness checks: ``options.liveness_period``, at most a quarter of the renew deadline."""
        election = self.options.leader_election
        period = self.options.liveness_period
        return min(period, election.renew_deadline / 4) if election is not None else period

    def _watch(self) -> None:
        """Block until the run must end, checking every runnable's liveness meanwhile (see the module docstring)."""
        period = self._liveness_period()
        freeze_when_settled = self.options.gc_freeze_after_sync
        while not self.stop_event.wait(period):
            self._check_liveness()
            if freeze_when_settled and self._leader_runnables_settled():
                freeze_when_settled = False
                freeze_heap("the first reconciles were done")

    def _leader_runnables_settled(self) -> bool:
        """True once the leader runnables have started and every one that :class:`Settles` has settled."""
        if not self.elected.is_set():
            return False
        with self._lock:
            settling = [e.runnable for e in self._entries
                        if e.needs_leader and e.started and isinstance(e.runnable, Settles)]
        return bool(settling) and all(r.settled() for r in settling)

    def _check_liveness(self) -> None:
        """End the run (:meth:`_stopped_working`) if a started runnable or a thread of the Manager's stopped working."""
        if self.stop_event.is_set():
            return
        with self._lock:
            entries = [e for e in self._entries if e.started]
        for entry in entries:
            why = entry.runnable.health_check() if isinstance(entry.runnable, HealthChecker) else None
            if why:
                self._stopped_working(entry.name, why)
                return
        election = self._election_thread
        if election is not None and not election.is_alive() and not self._election_stop.is_set():
            self._stopped_working("leader election", f"its thread {election.name} ended", lease_lost=True)
            return
        with self._lock:
            starter = self._leader_start_thread
        if starter is not None and not starter.is_alive() and not self.elected.is_set():
            self._stopped_working("leader runnables", f"the thread {starter.name} ended before starting them all")

    def _stopped_working(self, what: str, why: str, *, lease_lost: bool = False) -> None:
        """Log the one line saying ``what`` stopped working and why, and end the run with exit code 1.

        Nothing once the run is ending anyway (a stop, a lost Lease, an earlier failure). With
        ``lease_lost`` (the election thread ended) the leader runnables stop at once and nothing is released.
        """
        with self._lock:
            if self.stop_event.is_set():
                return
            self.failure = f"{what} stopped working ({why})"
            self.stop_event.set()
            leading = self._leading
        if self.exit_code == 0:
            self.exit_code = 1
        if not leading:
            then = "stopping"
        elif lease_lost:
            then = "stopping the leader runnables at once; the Lease is no longer renewed"
            self._lease_lost = True
        else:
            then = "stopping and giving up the Lease"
        log.error("%s; %s, exit code 1", self.failure, then)

    def bind(self) -> None:
        """Bind the probe and metrics addresses, neither listening yet (:meth:`run` serves them); once.

        ``zkop run`` calls it before anything starts, so an address that cannot be bound is a usage
        error with no server listening and nothing else started (docs/operations.md, "Exit codes").

        Raises:
            ValueError: a server address is malformed.
            OSError: a server address cannot be bound; ``strerror`` names the server and the address,
                e.g. ``cannot serve metrics on :8080: Address already in use`` (``errno`` is the bind's).
                Nothing stays bound.
            zkop.runtime.certs.CertificateError: no usable metrics serving certificate.
        """
        if self._bound:
            return
        bind = parse_bind_address(self.options.health_probe_bind_address)
        if bind is not None:
            self.health = HealthServer(*bind)
            self.health.liveness = self._healthz
            self.health.readiness = self._readyz
            try:
                self.health.bind()
            except OSError as err:
                raise _bind_error("health probes", self.options.health_probe_bind_address, err) from err
        secure = None
        if self.options.metrics_secure:
            assert self.client is not None
            secure = SecureServing(DelegatingAuth(self.client), cert_dir=self.options.metrics_cert_dir,
                                   cert_name=self.options.metrics_cert_name,
                                   key_name=self.options.metrics_key_name)
        try:
            self.metrics_server = start_metrics_server(self.options.metrics_bind_address, secure, serve=False)
        except OSError as err:
            self._close_servers()
            raise _bind_error("metrics", self.options.metrics_bind_address, err) from err
        except BaseException:
            self._close_servers()
            raise
        self._bound = True

    def _start_servers(self) -> None:
        self.bind()
        try:
            if self.health is not None:
                self.health.start()
                log.info("health probes on %s:%d", self.health.host, self.health.port)
            if self.metrics_server is not None:
                self.metrics_server.serve()
                log.info("metrics on %s (secure: %s)", self.metrics_server.url, self.options.metrics_secure)
        except BaseException:
            self._close_servers()
            raise

    def _close_servers(self) -> None:
        if self.health is not None:
            self.health.shutdown()
        if self.metrics_server is not None:
            self.metrics_server.shutdown()

    def _wait_for_caches(self) -> bool:
        """Block until every non-leader runnable has synced; False if stopped (or one stopped working) first."""
        while self.not_synced():
            if self.stop_event.wait(self.options.cache_sync_poll):
                return False
            self._check_liveness()
        return not self.stop_event.is_set()

    def _elect(self) -> None:
        election = self.options.leader_election
        if election is None:
            self._start_leader_runnables()
            return
        assert self.client is not None
        self._elector = LeaderElector(
            self.client, namespace=election.namespace, name=election.name, identity=election.identity,
            lease_duration=election.lease_duration, renew_deadline=election.renew_deadline,
            retry_period=election.retry_period,
            on_started_leading=self._on_started_leading,
            on_stopped_leading=self._on_stopped_leading,
        )
        thread = threading.Thread(target=self._elector.run, args=(self._election_stop,), name="leader-election",
                                  daemon=True)
        thread.start()  # then published: is_alive() is False until start()
        self._election_thread = thread

    def _on_started_leading(self) -> None:
        # On the election thread, which must go on renewing: start the runnables on a thread of their own.
        # Started and published under the lock, so that _shutdown and _check_liveness see either no
        # thread or a started one (is_alive() is False until start()); none once the run is stopping.
        with self._lock:
            if self.stop_event.is_set():
                return
            thread = threading.Thread(target=self._start_leader_runnables, name="start-leader-runnables",
                                      daemon=True)
            thread.start()
            self._leader_start_thread = thread

    def _start_leader_runnables(self) -> None:
        with self._lock:
            self._leading = True
            entries = [e for e in self._entries if e.needs_leader]
        for entry in entries:
            if self.stop_event.is_set() or not self._start(entry):
                return
        self.elected.set()
        log.info("leader runnables started")

    def _on_stopped_leading(self) -> None:
        # Renewal failed (the elector does not call this once _election_stop is set): during a
        # drain too, and before the leader runnables were all started, they stop at once and the
        # run ends with 1.
        log.error("leader election lost; stopping leader runnables and exiting")
        self._lease_lost = True
        if self.exit_code == 0:
            self.exit_code = 1
        self.stop_event.set()
        for entry in self._leader_entries():
            entry.runnable.stop(0.0)

    def _leader_entries(self) -> list[_Entry]:
        with self._lock:
            return [e for e in self._entries if e.needs_leader]

    def _drain_timeout(self) -> tuple[float, float]:
        """Seconds the leader runnables get to stop, and the slack their threads are joined with beyond it.

        A clean stop: ``graceful_shutdown_timeout`` (+2 s). A runnable that stopped working: at most
        half the renew deadline (+ a quarter of it, at most 2 s), so that renewal stops within the
        renew deadline of the failure. A lost Lease or :meth:`fail`: nothing to drain.
        """
        graceful = self.options.graceful_shutdown_timeout
        election = self.options.leader_election
        if self.failure is not None and not self._lease_lost:
            if election is None:
                return graceful, 2.0
            return min(graceful, election.renew_deadline / 2), min(2.0, election.renew_deadline / 4)
        if self.exit_code == 0:
            return graceful, 2.0
        return 0.0, 2.0

    def _shutdown(self) -> None:
        """Stop leader runnables (concurrently, bounded), release the Lease, stop the others."""
        with self._lock:  # the start thread is published under it (_on_started_leading)
            leading = self._leading
            starter = self._leader_start_thread
        timeout, slack = self._drain_timeout() if leading else (0.0, 2.0)
        deadline = time.monotonic() + timeout
        election = self.options.leader_election
        # The elector ends at its next wake-up or when its request returns (at most the renew
        # deadline); on a lost Lease it has stopped the leader runnables first.
        election_join = (election.renew_deadline if election else 0.0) + 2.0
        if not leading:  # a standby: no acquiring from now on [CR "prevent leader election when
            self._election_stop.set()  # shutting down a non-elected manager"]
            _join(self._election_thread, election_join)
        # A start in progress is part of the drain: it checks stop_event before each start, but one
        # start (a controller's informer start, on a starved machine) may take a while to return.
        _join(starter, max(0.0, deadline - time.monotonic()) + slack)
        stopped: list[object] = []

        def stop(entry: _Entry) -> None:
            stopped.append(entry.runnable.stop(timeout))

        entries = self._leader_entries()
        threads = [threading.Thread(target=stop, args=(entry,), name=f"stop-{entry.name}", daemon=True)
                   for entry in entries]
        for thread in threads:
            thread.start()
        for thread in threads:
            # Controller.stop drains up to ``timeout`` and then joins its workers briefly.
            _join(thread, max(0.0, deadline - time.monotonic()) + slack)
        # Only now stop renewing [CR internal.go: "Cancel leader election only after we waited"].
        self._election_stop.set()
        _join(self._election_thread, election_join)
        if self._elector is not None and self.exit_code == 0:
            self._elector.release()
        elif self._elector is not None and self.failure is not None and not self._lease_lost and leading:
            # ReleaseOnCancel only once the guarded work has ended: every stop returned, none said
            # its in-flight work outlived it (Controller.stop returns False then).
            if len(stopped) == len(entries) and False not in stopped:
                self._elector.release()
            else:
                log.warning("not releasing the Lease: leader runnables were still working when the drain ended; "
                            "it expires on its own")
        with self._lock:
            others = [e for e in self._entries if not e.needs_leader and e.started]
        for entry in reversed(others):
            try:
                entry.runnable.stop(max(1.0, deadline - time.monotonic()))
            except Exception:
                log.exception("stopping %s failed", entry.name)


def freeze_heap(when: str = "the caches synced") -> int:
    """Run a full collection, then move every object still alive out of the collector's reach; the count frozen.

    Why: after the initial sync the informers' caches hold one decoded dict per object (70,000 in the scale run),
    and every full (generation-2) collection traverses all of them -- 600-840 ms at that size, pauses that land in
    the reconciles (the 50,000-object scale run's drift p99). ``gc.freeze()`` [CPython ``gc`` module docs: "freeze
    all the objects tracked by the garbage collector; move them to a permanent generation and ignore them in all
    the future collections"] makes that pause 0 ms; the interpreter's own start-up heap (modules, classes) goes
    with it. Measured with ``python -m hack.bench.gcpause`` (docs/performance.md, "The gc.freeze() lever").

    What it does not change: reference counting still frees a frozen object when its last reference goes, so a
    cached object a watch event replaces is freed as before (cached objects are trees of dicts, lists and strings
    from JSON, without reference cycles); objects allocated later, the replacements included, are collected as
    ever, so the pause grows back as the cache is replaced (100-140 ms after every cached object was replaced
    once, at 70,000). The risk is a reference *cycle* among frozen objects that later becomes garbage: it is
    never freed. The collection first frees the cycles that are garbage already, and what is frozen is the
    long-lived heap of a process that runs until it exits. The Manager runs it twice per process: where it has
    synced its caches, and when the first reconciles are done: a cold start replaces every cached object (the
    echoes of its own writes) and fills the ZooKeeper caches after the first freeze, which brought the full
    collections of the 50,000-object scale run on the real control plane back to 330 ms (its drift p99). A later
    relist replaces objects the way watch events do. ``when`` goes into the log line.
    """
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.info("froze %d objects after %s (full collections skip them)", frozen, when)
    return frozen


def _bind_error(what: str, address: str, err: OSError) -> OSError:
    """``err`` (a failed bind) as an OSError whose message names the server and the address the
    user gave, as controller-runtime's ``error listening on :8080: listen tcp :8080: bind: address already in use``
    does [CR pkg/manager/manager.go defaultHealthProbeListener, pkg/metrics/server/server.go]."""
    return OSError(err.errno, f"cannot serve {what} on {address}: {err.strerror or err}")


def _join(thread: threading.Thread | None, timeout: float) -> None:
    """Wait at most ``timeout`` seconds for ``thread`` (``None`` or never started: nothing); log it if still running.

    Never the calling thread: a stop that runs on a thread it would join must not deadlock.
    """
    if thread is None or thread.ident is None or thread is threading.current_thread():
        return
    thread.join(timeout)
    if thread.is_alive():
        log.warning("thread %s still running %g s after shutdown began", thread.name, timeout)
