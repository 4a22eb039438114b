"""One ZooKeeper ensemble at run time: its session and ZooKeeperConfig controller (:class:`EnsembleRuntime`),
and :class:`Ensembles`, the lookup of every ensemble by name.

Each ensemble has its own session, watch set (the adapter's), ownership registry and ACL check (its
:func:`~zkop.zkconfig.controller.build_ensemble` parts), data-loss reset (the session's) and its own
workers: an ensemble that is down or misconfigured holds up only the keys of its own objects, never
another ensemble's. The flags' ensemble (name ``""``) is set up by ``zkop run`` as before and only
registered here; a ZooKeeperEnsemble's runtime is made by :mod:`zkop.ensembles.controller` when the
ensemble appears, made anew when its connection spec or Secrets change (a change of its tenancy or adoption alone
keeps the session), and closed when it goes. The Manager supervises every ZooKeeperEnsemble's runtime through the
controller's leader runnable (:meth:`Ensembles.health_check`, :meth:`Ensembles.stop_all`): a thread of one that
ends ends the run and gives up the Lease, as a thread of the flags' ensemble does.
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from zkop.feature.session import resync_on_new_session
from zkop.feature.tenancy import ADMIT_ALL, TenancyPolicy
from zkop.kube.client import JSON
from zkop.runtime.threads import describe_end
from zkop.zkconfig.controller import ZooKeeperConfigController
from zkop.zkconfig.objects import DEFAULT_ENSEMBLE, ensemble_of
from zkop.zookeeper.adapter import ZooKeeperAdapter, ZooKeeperError
from zkop.zookeeper.connect_retry import connect_retrying

__all__ = ["EnsembleRuntime", "Ensembles", "PolicySlot"]

log = logging.getLogger(__name__)


class PolicySlot:
    """The tenancy policy an ensemble's objects are held to, replaceable while its controller runs.

    Called with an object (the controller's ``policy_for``) it returns the current :attr:`policy`; the object is
    not read: every object of an ensemble is held to the same rules.
    """

    def __init__(self, policy: TenancyPolicy = ADMIT_ALL) -> None:
        self.policy = policy

    def __call__(self, obj: JSON) -> TenancyPolicy:
        return self.policy


class EnsembleRuntime:
    """One ensemble's session and ZooKeeperConfig controller, running on threads of their own.

    Args:
        name: the ZooKeeperEnsemble's name (``""``: the flags' ensemble).
        spec: the ZooKeeperEnsemble's raw ``spec`` (``None`` for the flags' ensemble), for the rules
            that read it (tenancy, adoption).
        fingerprint: of the spec and Secrets it was made from (:func:`zkop.ensembles.spec.fingerprint`).
        adapter: the ensemble's ZooKeeper adapter, not started.
        parts: its ZooKeeperConfig controller (:func:`zkop.zkconfig.controller.build_ensemble`), not started.
        policy: the tenancy rules and adoption mode its objects are held to, the ``policy_for`` its controller
            was built with (replaced by :meth:`change_policy`).
        directory: the private directory of its TLS/SASL files, removed by :meth:`stop`; ``None``: none.
        on_change: called (from the session's thread, must only enqueue) when the session's state changes
            or a connection attempt fails.
    """

    def __init__(self, name: str, spec: JSON | None, fingerprint: str, adapter: ZooKeeperAdapter,
                 parts: ZooKeeperConfigController, *, policy: PolicySlot | None = None,
                 directory: Path | None = None, on_change: Callable[[], None] = lambda: None) -> None:
        self.name, self.spec, self.fingerprint = name, spec, fingerprint
        self.policy = policy or PolicySlot()
        self.adapter, self.parts, self.directory = adapter, parts, directory
        self.on_change = on_change
        #: Why the last connection attempt failed, ``None`` once connected.
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._workers_started = False  # the start-up thread started the workers
        self._finished = False  # the start-up thread's target returned or raised (not is_alive(): see health_check)
        self._ended_by: str | None = None  # the exception that ended the start-up thread, if one did
        # The one resync-on-reconnect rule, as for the flags' ensemble; then the status follows every state.
        resync_on_new_session(adapter, [self._resync])
        adapter.add_session_listener(self._on_state)

    # --- state -----------------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """True while the session is CONNECTED (it was made only once the chroot was found)."""
        return self.adapter.connected

    def not_ready_reason(self) -> str | None:
        """``None`` when ready, else why not: the session's reason and the last connection error."""
        if self.ready:
            return None
        reasons = [r for r in (self.adapter.unavailable_reason, self.last_error or self.adapter.last_connect_error)
                   if r]
        return "; ".join(dict.fromkeys(reasons)) or "no ZooKeeper session yet"

    def _resync(self) -> None:
        log.info("ensemble %s: ZooKeeper session re-established; resyncing its objects", self.name)
        self.parts.on_session_reconnected()

    def _on_state(self, state: str) -> None:
        if state == "CONNECTED":
            self.last_error = None
        self.on_change()

    def change_policy(self, spec: JSON, policy: TenancyPolicy) -> None:
        """Hold the ensemble's objects to ``policy`` from now on, in the same session (only ``spec.tenancy`` or
        ``spec.adoption`` changed), and look at each of them again: admitted or refused, watched or not."""
        self.spec, self.policy.policy = spec, policy
        log.info("ensemble %s: tenancy or adoption changed; its objects are looked at again", self.name)
        self.parts.admission_changed()

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Connect (retrying, 0.5 s doubling to 10 s: :func:`~zkop.zookeeper.connect_retry.connect_retrying`) and
        start the controller, on a thread; returns at once.

        The workers start after the first connection attempt whatever its result, so the objects of an
        ensemble that is down report ``ZooKeeperUnavailable`` while the attempts go on.
        """
        self._thread = threading.Thread(target=self._run, name=f"ensemble-{self.name}", daemon=True)
        self._thread.start()

    def _attempt(self) -> None:
        """One connection attempt; a failure is kept for :meth:`not_ready_reason`, logged once per distinct
        reason in a row, and re-raised."""
        try:
            self.adapter.start()
        except ZooKeeperError as err:
            if self.last_error != str(err):
                log.warning("ensemble %s: ZooKeeper not reachable yet: %s", self.name, err)
            self.last_error = str(err)
            self.on_change()
            raise

    def _start_workers(self, connected: bool) -> None:
        parts = self.parts
        assert parts.watch_roots is not None
        parts.watch_roots.start()
        if connected:
            parts.reconciler.learn_absent()
        parts.controller.start()
        if parts.acl_check is not None:
            parts.acl_check.start()
        self._workers_started = True

    def _run(self) -> None:
        try:
            self._connect()
        except BaseException as err:
            self._ended_by = describe_end(err)
            raise  # threading.excepthook still reports it
        finally:
            self._finished = True

    def _connect(self) -> None:
        first = True
        try:
            for attempt in connect_retrying(self._stop, retry_on=ZooKeeperError):
                with attempt:
                    self._attempt()
                if first:  # before the wait for the second attempt
                    first = False
                    if self._stop.is_set():
                        return
                    outcome = attempt.retry_state.outcome
                    error = outcome.exception() if outcome is not None and outcome.failed else None
                    if error is None or isinstance(error, ZooKeeperError):  # any other: raised by the retries
                        self._start_workers(connected=error is None)
        except ZooKeeperError:
            return  # stopped before a session was made
        self.on_change()

    def health_check(self) -> str | None:
        """``None``, or which thread the ensemble's work needs ended before :meth:`stop` (``"; "``-joined): its
        start-up thread before it started the workers (or ended by an exception), one of its session's own
        threads, its controller's workers or work-queue thread, its watch-root follower, its ACL check.

        What :class:`~zkop.runtime.manager.HealthChecker` asks: takes no lock, never blocks.
        """
        if self._stop.is_set():
            return None
        reasons: list[str] = []
        thread, ended_by = self._thread, self._ended_by
        if thread is not None and self._finished and (ended_by is not None or not self._workers_started):
            how = f" (ended by {ended_by})" if ended_by is not None else ""
            when = "" if self._workers_started else " before starting its workers"
            reasons.append(f"its thread {thread.name} ended{how}{when}")
        parts = self.parts
        checks = [("", self.adapter.health_check), (f"{parts.controller.name}: ", parts.controller.health_check)]
        if parts.watch_roots is not None:
            checks.append(("watch roots: ", parts.watch_roots.health_check))
        if parts.acl_check is not None:
            checks.append(("ACL check: ", parts.acl_check.health_check))
        reasons += [f"{prefix}{why}" for prefix, check in checks if (why := check())]
        # A stop that began meanwhile ends threads on purpose (the start-up thread, before the workers).
        return None if self._stop.is_set() or not reasons else "; ".join(reasons)

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop the controller (in-flight reconciles drain for at most ``timeout`` seconds), close the session,
        remove the event handlers and the private files. Idempotent.

        Returns:
            False if a reconcile was still running when the drain ended (:meth:`Controller.stop
            <zkop.runtime.controller.Controller.stop>`), else True.
        """
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        parts = self.parts
        if parts.acl_check is not None:
            parts.acl_check.stop(timeout)
        drained = True
        if parts.controller.started.is_set():
            drained = parts.controller.stop(timeout)
        else:
            parts.controller.queue.shutdown()
        if parts.watch_roots is not None:
            parts.watch_roots.stop(timeout)
        parts.detach()
        try:
            self.adapter.stop(timeout)
        except Exception:
            log.debug("ensemble %s: closing the ZooKeeper session failed", self.name, exc_info=True)
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
        return drained


class Ensembles:
    """Every ensemble zkop manages objects on, by name; thread-safe.

    The lookup the rules that depend on an object's ensemble call (tenancy, adoption): :meth:`spec_of`.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runtimes: dict[str, EnsembleRuntime] = {}
        self._unusable: dict[str, str] = {}
        self._closed = False  # set by stop_all: no ZooKeeperEnsemble's runtime is registered after it
        self._listeners: list[Callable[[str], None]] = []

    def add_listener(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(name)`` (it must only enqueue) after ensemble ``name``'s runtime is registered, replaced
        or removed, or :meth:`changed` is called for it."""
        self._listeners.append(listener)

    def changed(self, name: str) -> None:
        """Tell the listeners that ensemble ``name`` changed (its runtime, or its tenancy in the same runtime)."""
        for listener in list(self._listeners):
            listener(name)

    def get(self, name: str) -> EnsembleRuntime | None:
        """The running ensemble ``name`` (``""``: the flags'), or ``None``."""
        with self._lock:
            return self._runtimes.get(name)

    def of(self, obj: JSON) -> EnsembleRuntime | None:
        """The running ensemble of the ZooKeeperConfig ``obj`` (``spec.ensembleRef.name``, else the flags')."""
        return self.get(ensemble_of(obj))

    def spec_of(self, obj: JSON) -> Mapping[str, Any] | None:
        """The raw ZooKeeperEnsemble ``spec`` of ``obj``'s ensemble, ``None`` for the flags' ensemble or one
        that is not running (:meth:`unusable_reason` says why)."""
        runtime = self.of(obj)
        return runtime.spec if runtime is not None else None

    def names(self) -> list[str]:
        """The running ensembles' names, sorted (``""`` first: the flags')."""
        with self._lock:
            return sorted(self._runtimes)

    def put(self, runtime: EnsembleRuntime) -> EnsembleRuntime | None:
        """Register ``runtime`` under its name; returns the one it replaces (to be stopped by the caller)."""
        with self._lock:
            self._unusable.pop(runtime.name, None)
            old = self._runtimes.get(runtime.name)
            self._runtimes[runtime.name] = runtime
        self.changed(runtime.name)
        return old

    def put_unless_closed(self, runtime: EnsembleRuntime) -> bool:
        """:meth:`put` ``runtime`` unless :meth:`stop_all` has run (then ``False``: the caller stops it). A reconcile
        still draining when the run ends must not start a session, and a private directory, that nothing stops."""
        with self._lock:
            if self._closed:
                return False
            self._unusable.pop(runtime.name, None)
            self._runtimes[runtime.name] = runtime
        self.changed(runtime.name)
        return True

    def reopen(self) -> None:
        """Accept runtimes again (leadership starts anew)."""
        with self._lock:
            self._closed = False

    def remove(self, name: str, reason: str | None = None) -> EnsembleRuntime | None:
        """Unregister ``name`` (``reason``: why it cannot run, for its objects' status); returns its runtime."""
        if name == DEFAULT_ENSEMBLE:
            raise ValueError("the flags' ensemble is never removed")
        with self._lock:
            if reason is None:
                self._unusable.pop(name, None)
            else:
                self._unusable[name] = reason
            runtime = self._runtimes.pop(name, None)
        self.changed(name)
        return runtime

    def unusable_reason(self, name: str) -> str | None:
        """Why ensemble ``name`` has no runtime, as last set by :meth:`remove`, or ``None``."""
        with self._lock:
            return self._unusable.get(name)

    def health_check(self) -> str | None:
        """``None``, or which ZooKeeperEnsembles' runtimes stopped working and why (``ensemble <name>: <why>``,
        :meth:`EnsembleRuntime.health_check`); the flags' ensemble is supervised by its own owner. Takes no lock
        (the runtimes are copied under the GIL), never blocks."""
        runtimes = dict(self._runtimes)
        reasons = [f"ensemble {name}: {why}" for name, runtime in sorted(runtimes.items())
                   if name != DEFAULT_ENSEMBLE and (why := runtime.health_check())]
        return "; ".join(reasons) or None

    def stop_all(self, timeout: float) -> bool:
        """Stop every ZooKeeperEnsemble's runtime (the flags' ensemble is stopped by its own owner), each within
        ``timeout`` seconds; False if a reconcile of one was still running when its drain ended."""
        with self._lock:
            self._closed = True
            runtimes = [r for n, r in self._runtimes.items() if n != DEFAULT_ENSEMBLE]
            for runtime in runtimes:
                del self._runtimes[runtime.name]
        for runtime in runtimes:
            self.changed(runtime.name)
        drained = [runtime.stop(timeout) for runtime in runtimes]
        return all(drained)
