"""Leader election through a ``coordination.k8s.io/v1`` Lease, after client-go ``tools/leaderelection``.

Not the official client's ``LeaseLock`` (docs/architecture.md, "Own leader election"). As client-go:

* expiry is judged from the local monotonic time at which the record was last seen to change plus
  the record's ``leaseDurationSeconds``, never from another pod's timestamps (``tryAcquireOrRenew``);
* every write is a PUT with the ``resourceVersion`` last read, so of two racing candidates one
  gets 409 Conflict and stays a standby;
* ``leaseTransitions`` counts takeovers, ``acquireTime`` is kept on renewal, times are RFC 3339
  micro-time in UTC;
* a leader that cannot renew within ``renew_deadline`` calls ``on_stopped_leading``;
  :meth:`LeaderElector.release` writes an empty holder with ``leaseDurationSeconds: 1``
  (``ReleaseOnCancel``).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import urllib3.exceptions

from zkop.kube.client import JSON, ApiException, KubeClient, resource_path
from zkop.runtime import metrics

#: This module's own jitter source: zkop leaves the global ``random`` state alone (the process may share it).
_random = random.Random()

__all__ = ["JITTER_FACTOR", "LeaderElector", "micro_time"]

log = logging.getLogger(__name__)

#: client-go ``JitterFactor``: acquire retries wait retry_period × [1, 1.2).
JITTER_FACTOR = 1.2


def micro_time(moment: datetime | None = None) -> str:
    """``metav1.MicroTime``: RFC 3339 with 6 fractional digits, UTC, e.g. ``2026-11-30T03:13:51.000000Z``."""
    return (moment or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Acquire and hold a Lease; tell the caller when leadership starts and ends.

    Args:
        client: JSON client (its per-request timeout is capped at ``max(renew_deadline / 2, 1)`` s here).
        namespace, name: the Lease.
        identity: this candidate, ``<hostname>_<uuid>``.
        lease_duration: seconds a standby waits after the last observed change before taking over.
        renew_deadline: seconds the leader keeps retrying renewal before giving up.
        retry_period: seconds between attempts.
        on_started_leading: called (on the election thread) once the Lease is ours.
        on_stopped_leading: called when leadership is lost (not after :meth:`release`).

    Raises:
        ValueError: durations violate ``lease_duration > renew_deadline > 1.2 × retry_period > 0``
            (client-go ``NewLeaderElector`` validation).
    """

    def __init__(
        self, client: KubeClient, *, namespace: str, name: str, identity: str, lease_duration: float = 15.0,
        renew_deadline: float = 10.0, retry_period: float = 2.0,
        on_started_leading: Callable[[], None] = lambda: None,
        on_stopped_leading: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not identity:
            raise ValueError("leader election identity must not be empty")
        if retry_period <= 0 or renew_deadline <= JITTER_FACTOR * retry_period:
            raise ValueError("renew deadline must be greater than 1.2 × retry period, which must be positive")
        if lease_duration <= renew_deadline:
            raise ValueError("lease duration must be greater than renew deadline")
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.clock = clock
        self.request_timeout = max(renew_deadline / 2, 1.0)
        self._lease: JSON | None = None
        self._observed_record: Any = None
        self._observed_time = 0.0
        self._leader = threading.Event()
        self._released = False
        self._lock = threading.Lock()
        metrics.LEADER_ELECTION_MASTER_STATUS.labels(name).set(0)

    @property
    def path(self) -> str:
        """REST path of the Lease."""
        return resource_path("coordination.k8s.io", "v1", "leases", self.namespace, self.name)

    def is_leader(self) -> bool:
        """True while this candidate holds the Lease (as of its last successful renewal)."""
        return self._leader.is_set()

    # --- the loop ----------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Acquire, then renew until ``stop`` is set or renewal fails; blocks.

        ``on_stopped_leading`` runs when renewal fails; after ``stop`` the caller
        should drain its work and call :meth:`release`.
        """
        if not self._acquire(stop):
            return
        metrics.LEADER_ELECTION_MASTER_STATUS.labels(self.name).set(1)
        log.info("became leader of lease %s/%s as %s", self.namespace, self.name, self.identity)
        try:
            self.on_started_leading()
        except Exception:
            log.exception("on_started_leading failed")
        self._renew(stop)

    def _acquire(self, stop: threading.Event) -> bool:
        log.info("attempting to acquire lease %s/%s", self.namespace, self.name)
        while not stop.is_set():
            if self._try_acquire_or_renew():
                self._leader.set()
                return True
            stop.wait(self.retry_period * _random.uniform(1.0, JITTER_FACTOR))
        return False

    def _renew(self, stop: threading.Event) -> None:
        while not stop.is_set():
            deadline = self.clock() + self.renew_deadline
            renewed = False
            while not stop.is_set() and self.clock() < deadline:
                if self._try_acquire_or_renew():
                    renewed = True
                    break
                stop.wait(min(self.retry_period, max(0.0, deadline - self.clock())))
            if stop.is_set():
                return
            if not renewed:
                self._leader.clear()
                metrics.LEADER_ELECTION_MASTER_STATUS.labels(self.name).set(0)
                log.error("failed to renew lease %s/%s within %.1f s", self.namespace, self.name,
                          self.renew_deadline)
                try:
                    self.on_stopped_leading()
                except Exception:
                    log.exception("on_stopped_leading failed")
                return
            stop.wait(self.retry_period)

    # --- one attempt -------------------------------------------------------------------------

    def _record(self, now_wall: str, old: JSON | None) -> JSON:
        spec: JSON = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": round(self.lease_duration),
            "renewTime": now_wall,
        }
        old_spec = (old or {}).get("spec") or {}
        transitions = int(old_spec.get("leaseTransitions") or 0)
        if old is not None and self._leader.is_set() and old_spec.get("holderIdentity") == self.identity:
            # Renewal (client-go: IsLeader): keep acquireTime and the transition count.
            spec["acquireTime"] = old_spec.get("acquireTime") or now_wall
            spec["leaseTransitions"] = transitions
        else:
            # Takeover, from another holder or from a released (empty) Lease: a new transition.
            spec["acquireTime"] = now_wall
            spec["leaseTransitions"] = transitions + 1 if old is not None else 0
        return spec

    def _try_acquire_or_renew(self) -> bool:
        """One client-go ``tryAcquireOrRenew``; True if we hold the Lease afterwards."""
        now_wall = micro_time()
        try:
            with self._lock:
                if self._released:
                    return False
                if self._leader.is_set() and self._lease is not None:
                    # Fast path: renew from the object we wrote last.
                    lease = dict(self._lease)
                    lease["spec"] = self._record(now_wall, self._lease)
                    if self._put(lease):
                        return True
                try:
                    current = self.client.request("GET", self.path, timeout=self.request_timeout)
                except ApiException as err:
                    if err.status != 404:
                        raise
                    body = {
                        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                        "metadata": {"name": self.name, "namespace": self.namespace},
                        "spec": self._record(now_wall, None),
                    }
                    try:
                        self._lease = self.client.request(
                            "POST", resource_path("coordination.k8s.io", "v1", "leases", self.namespace),
                            body=body, timeout=self.request_timeout,
                        )
                    except ApiException as create_err:
                        if create_err.status == 409:
                            return False
                        raise
                    self._observe(self._lease)
                    return True
                self._observe(current)
                spec = current.get("spec") or {}
                holder = spec.get("holderIdentity") or ""
                duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
                if holder and holder != self.identity and self._observed_time + duration > self.clock():
                    return False  # held by someone else and not expired by our own clock
                lease = dict(current)
                lease["spec"] = self._record(now_wall, current)
                return self._put(lease)
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as err:
            log.warning("lease %s/%s: %s", self.namespace, self.name, _describe(err))
            return False

    def _observe(self, lease: JSON) -> None:
        record = lease.get("spec") or {}
        if record != self._observed_record:
            self._observed_record = record
            self._observed_time = self.clock()

    def _put(self, lease: JSON) -> bool:
        try:
            self._lease = self.client.request("PUT", self.path, body=lease, timeout=self.request_timeout)
        except ApiException as err:
            if err.status == 409:
                log.info("lease %s/%s: lost an update race (409 Conflict)", self.namespace, self.name)
                self._lease = None
                return False
            raise
        self._observe(self._lease)
        return True

    def release(self) -> bool:
        """Give the Lease up if we hold it: empty holder, ``leaseDurationSeconds: 1``.

        Call only after everything the Lease guards has stopped. Returns True if released.
        """
        with self._lock:
            if not self._leader.is_set() or self._lease is None:
                self._released = True
                return False
            self._released = True
            lease = dict(self._lease)
            spec = dict(lease.get("spec") or {})
            spec.update(holderIdentity=None, leaseDurationSeconds=1, renewTime=micro_time())
            spec["acquireTime"] = spec.get("acquireTime")
            lease["spec"] = spec
            for _ in range(3):
                try:
                    self.client.request("PUT", self.path, body=lease, timeout=self.request_timeout)
                    break
                except ApiException as err:
                    if err.status != 409:
                        log.warning("could not release lease: %s", _describe(err))
                        break
                    current = self.client.request("GET", self.path, timeout=self.request_timeout)
                    if (current.get("spec") or {}).get("holderIdentity") != self.identity:
                        break
                    lease = dict(current)
                    lease["spec"] = {**(current.get("spec") or {}), "holderIdentity": None,
                                     "leaseDurationSeconds": 1}
                except (urllib3.exceptions.HTTPError, OSError) as err:
                    log.warning("could not release lease: %s", err)
                    break
            self._leader.clear()
            metrics.LEADER_ELECTION_MASTER_STATUS.labels(self.name).set(0)
            log.info("released lease %s/%s", self.namespace, self.name)
            return True


def _describe(err: BaseException) -> str:
    if isinstance(err, ApiException):
        return f"{err.status} {err.reason}"
    return f"{type(err).__name__}: {err}"
