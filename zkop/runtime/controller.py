"""The generic controller: informers feed a rate-limited work queue drained by N workers.

Semantics follow controller-runtime's ``internal/controller`` (``controller.go``
``reconcileHandler``) on top of client-go's ``RateLimitingInterface``:

=====================  =========================================  ==========================
reconcile outcome      queue action                               ``result`` label
=====================  =========================================  ==========================
exception              ``add_rate_limited`` (no ``forget``)       ``error``
:class:`TerminalError`  no requeue                                ``error`` (+ terminal counter)
``requeue_after > 0``  ``forget`` then ``add_after``              ``requeue_after``
``requeue=True``       ``add_rate_limited``                       ``requeue``
success                ``forget``                                 ``success``
=====================  =========================================  ==========================

``done`` is always called. An ``Exception`` never kills a worker; a ``BaseException`` escaping a
reconcile does, and :meth:`Controller.health_check` reports it to the Manager.

Workers reconcile under the controller's :class:`~zkop.kube.cancel.CancelToken`: a reconcile still
running when :meth:`Controller.stop`'s drain ends has its API requests aborted and later ones refused,
as controller-runtime cancels the reconcile's context when it stops.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from zkop.kube.cancel import CancelToken, cancel_scope
from zkop.kube.client import JSON
from zkop.runtime import metrics
from zkop.runtime.cache import FuncHandler, Informer, meta_namespace_key
from zkop.runtime.threads import OwnedThreads
from zkop.runtime.workerpool import WorkerPool
from zkop.runtime.workqueue import RateLimitingQueue

__all__ = ["Controller", "Reconciler", "Result", "RetryableError", "TerminalError"]

log = logging.getLogger(__name__)

#: Seconds :meth:`Controller.stop` waits for the worker threads after the drain.
WORKER_JOIN = 1.0


@dataclass(frozen=True)
class Result:
    """What a reconcile asks of the queue.

    Attributes:
        requeue_after: seconds; reconcile this key again after that long (``forget`` first).
        requeue: reconcile again after a rate-limited delay (deprecated in controller-runtime).
    """

    requeue_after: float | None = None
    requeue: bool = False


class TerminalError(Exception):
    """A failure that retrying cannot fix; the key is not requeued (controller-runtime ``TerminalError``)."""


class RetryableError(Exception):
    """An expected, already reported failure (ZooKeeper or API trouble): the key goes back to the rate limiter.

    Logged at info without a traceback (its ``expected`` attribute), counted in
    ``controller_runtime_reconcile_errors_total`` like any returned error.
    """

    expected = True


class Reconciler(Protocol):
    """Level-triggered, idempotent reconciliation of one key (``namespace/name``)."""

    def reconcile(self, key: str) -> Result: ...


class Controller:
    """Runs one reconciler over a rate-limited work queue with ``workers`` threads.

    Args:
        name: the ``controller`` label value (``zookeeperconfig``, ``service-bridge``).
        reconciler: called with a key; reads the cache itself.
        workers: concurrent reconciles (``controller_runtime_max_concurrent_reconciles``).
        queue: defaults to a named :class:`RateLimitingQueue` with the default controller limiter.
        pool: a :class:`~zkop.runtime.workerpool.WorkerPool` whose threads reconcile this controller's keys, shared
            with other controllers (fairly between them); ``None``: ``workers`` threads of its own.
    """

    def __init__(
        self, name: str, reconciler: Reconciler, *, workers: int = 4,
        queue: RateLimitingQueue[str] | None = None, pool: WorkerPool | None = None,
    ) -> None:
        self.name = name
        self.reconciler = reconciler
        self.pool = pool
        self.workers = pool.workers if pool is not None else workers
        self.queue: RateLimitingQueue[str] = queue if queue is not None else RateLimitingQueue(name)
        self.informers: list[Informer] = []
        self._threads = OwnedThreads()
        self._active = 0
        self._active_lock = threading.Lock()
        self.started = threading.Event()
        self._stopping = threading.Event()
        #: Cancels the workers' API requests once the drain of :meth:`stop` has ended.
        self.cancel = CancelToken(f"controller {name}")
        # The labelled children of the per-reconcile metrics, looked up once.
        self._active_gauge = metrics.ACTIVE_WORKERS.labels(name)
        self._reconcile_time = metrics.RECONCILE_TIME.labels(name)
        self._successes = metrics.RECONCILE_TOTAL.labels(name, metrics.RESULT_SUCCESS)

    # --- sources -----------------------------------------------------------------------------

    def watch(self, informer: Informer, map_func: Callable[[JSON], list[str]] | None = None, *,
              update_filter: Callable[[JSON, JSON], bool] | None = None) -> None:
        """Enqueue keys for every event of ``informer``.

        Args:
            map_func: maps an object to the keys to reconcile (default: its own ``namespace/name``),
                like controller-runtime's ``handler.EnqueueRequestsFromMapFunc``.
            update_filter: ``(old, new) -> bool``; False drops an update event (a predicate,
                e.g. :meth:`zkop.runtime.ownwrites.OwnWrites.is_echo` negated).
        """
        mapper = map_func or (lambda obj: [meta_namespace_key(obj)])

        def enqueue(obj: JSON) -> None:
            for key in mapper(obj):
                self.queue.add(key)

        informer.add_event_handler(FuncHandler(enqueue, update_filter))
        self.wait_for(informer)

    def wait_for(self, informer: Informer) -> None:
        """Start the workers only once ``informer`` has synced (a source whose events the caller maps itself)."""
        if informer not in self.informers:
            self.informers.append(informer)

    def has_synced(self) -> bool:
        """True once all watched informers have listed."""
        return all(i.has_synced() for i in self.informers)

    def settled(self) -> bool:
        """True when no key is waiting for a worker and no reconcile is running (keys waiting out a delay, e.g.
        a requeue or a backoff, do not count): :class:`zkop.runtime.manager.Settles`."""
        with self._active_lock:
            active = self._active
        return active == 0 and len(self.queue) == 0

    def health_check(self) -> str | None:
        """Liveness: ``None``, or which worker threads died (and what ended them) while the controller runs.

        A worker only ends when the queue shuts down: a ``BaseException`` escaping a reconcile
        (``process`` catches ``Exception`` only, as controller-runtime recovers panics) ends it, and the
        controller would reconcile with fewer workers, or none, until restarted. The
        :class:`~zkop.runtime.manager.Manager` ends the run on it (and ``/healthz`` reports it). The
        queue's delaying thread counts too: without it no retry after a backoff is added again.
        """
        if not self.started.is_set() or self._stopping.is_set():  # no lock: a thread that died may hold one
            return None
        dead = self._threads.ended()
        if self.pool is not None:
            pooled = self.pool.health_check()
            if pooled:
                return pooled
        if dead:
            return f"worker threads died: {', '.join(dead)}"
        queue = self.queue.health_check()
        return f"work queue {self.name}: {queue}" if queue else None

    # --- workers -----------------------------------------------------------------------------

    def start(self) -> None:
        """Start the worker threads; returns at once. Informers are started by their owner
        (the :class:`~zkop.runtime.manager.Manager` starts controllers only while leading)."""
        metrics.init_controller_metrics(self.name, self.workers)
        # Read when scraped, not set twice per reconcile (about 4,500 instructions each: docs/performance.md).
        self._active_gauge.set_function(lambda: self._active)
        if self.pool is not None:
            self.pool.attach(self)
        else:
            for index in range(self.workers):
                self._threads.start(self._worker, f"{self.name}-worker-{index}")
        self.started.set()

    def _worker(self) -> None:
        with cancel_scope(self.cancel):
            self._work()

    def _work(self) -> None:
        while True:
            key, shutdown = self.queue.get()
            if shutdown:
                return
            if key is None:
                continue
            try:
                self.work_on(key)
            finally:
                self.queue.done(key)

    def work_on(self, key: str) -> None:
        """Reconcile ``key`` unless the controller is stopping (a key still queued then is dropped); the caller
        calls the queue's ``done`` afterwards (a worker of its own, or of its :class:`WorkerPool`)."""
        if not self._stopping.is_set():
            self.process(key)

    def process(self, key: str) -> None:
        """Reconcile one key and update the queue and metrics (the worker loop body)."""
        with self._active_lock:
            self._active += 1
        started = time.monotonic()
        try:
            result = self.reconciler.reconcile(key)
        except TerminalError as err:
            log.error("%s: reconcile %s failed permanently: %s", self.name, key, err)
            metrics.RECONCILE_TOTAL.labels(self.name, "error").inc()
            metrics.RECONCILE_ERRORS.labels(self.name).inc()
            metrics.TERMINAL_RECONCILE_ERRORS.labels(self.name).inc()
            return
        except Exception as err:
            level = logging.INFO if getattr(err, "expected", False) else logging.ERROR
            log.log(level, "%s: reconcile %s failed: %s", self.name, key, err,
                    exc_info=level == logging.ERROR)
            metrics.RECONCILE_TOTAL.labels(self.name, "error").inc()
            metrics.RECONCILE_ERRORS.labels(self.name).inc()
            self.queue.add_rate_limited(key)
            return
        finally:
            self._reconcile_time.observe(time.monotonic() - started)
            with self._active_lock:
                self._active -= 1
        if result.requeue_after and result.requeue_after > 0:
            self.queue.forget(key)
            self.queue.add_after(key, result.requeue_after)
            metrics.RECONCILE_TOTAL.labels(self.name, "requeue_after").inc()
        elif result.requeue:
            self.queue.add_rate_limited(key)
            metrics.RECONCILE_TOTAL.labels(self.name, "requeue").inc()
        else:
            self.queue.forget(key)
            self._successes.inc()

    def stop(self, drain_timeout: float = 30.0) -> bool:
        """Stop taking work and wait up to ``drain_timeout`` seconds for in-flight reconciles.

        Keys still queued are dropped, not reconciled: a replica shutting down hands
        over quickly, and the next leader's initial list enqueues everything anyway.
        A reconcile still running when the drain ends is cancelled: its API requests in flight are
        aborted and later ones refused (:class:`~zkop.kube.cancel.CancelToken`; a request the API server
        already received may still take effect, as with a cancelled context in client-go), so it
        ends with an error instead of holding its worker (and writing) after the Lease is released.
        Then the worker threads are joined, all within :data:`WORKER_JOIN` seconds more (they only
        skip what is still queued; a reconcile blocked elsewhere, e.g. in a ZooKeeper wait bounded by the
        session timeout, keeps its worker running),
        as controller-runtime's ``Start`` waits for its workers once the context ends
        [CR pkg/internal/controller/controller.go ``Controller.Start``]; the queue's own shutdown has joined
        its delaying thread. Idempotent; never joins the calling thread (a stop from a reconcile).

        Returns:
            True if every in-flight reconcile finished in time.
        """
        self._stopping.set()
        drained = self.queue.shutdown_with_drain(drain_timeout)
        if not drained:
            aborted = self.cancel.cancel()
            log.warning("%s: reconciles still running after the %g s drain; their API requests are cancelled "
                        "(%d in flight aborted)", self.name, drain_timeout, aborted)
        if self.pool is not None:
            self.pool.detach(self)
        deadline = time.monotonic() + WORKER_JOIN
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))
        return drained
