"""Kubernetes Events for the objects zkop manages, written from a thread of their own (a slow API stalls no reconcile).

Correlated as client-go's ``EventCorrelator`` (:mod:`zkop.kube.correlator`). ``Normal`` Events also
share one token bucket (``normal_qps``, ``normal_burst``), so a cold start over thousands of objects
does not double the API write load; over budget they are dropped and counted in
``zkop_events_dropped_total``. Messages never carry secret data.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from datetime import UTC, datetime
from typing import Any, Literal

from zkop.kube import metrics
from zkop.kube.cancel import CancelToken, cancel_scope
from zkop.kube.client import JSON, ApiException, KubeClient, resource_path
from zkop.kube.correlator import EventCorrelator, EventFields
from zkop.kube.flowcontrol import TokenBucket

__all__ = ["EventRecorder"]

log = logging.getLogger(__name__)

EventType = Literal["Normal", "Warning"]


_last_second: tuple[int, str] = (-1, "")


def now_rfc3339() -> str:
    """The current UTC time as RFC 3339 with seconds (``metav1.Time``); formatted once a second."""
    global _last_second
    second = int(time.time())
    cached = _last_second
    if cached[0] != second:
        cached = _last_second = (second, datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    return cached[1]


class EventRecorder:
    """Record Events about objects, asynchronously and deduplicated.

    Args:
        client: JSON client; ``None`` makes a recorder that only logs (``zkop sync``).
        component: ``source.component`` / ``reportingController``.
        correlator: aggregation, counting and the per-object spam filter (client-go's defaults if ``None``).
        max_pending: events waiting to be written; more are dropped (and logged).
        normal_qps, normal_burst: budget of ``Normal`` Events, per second and at once.
    """

    def __init__(self, client: KubeClient | None, component: str = "zkop", *,
                 correlator: EventCorrelator | None = None, max_pending: int = 1000, normal_qps: float = 1.0,
                 normal_burst: int = 50) -> None:
        self.client = client
        self._normal_budget = TokenBucket(normal_qps, normal_burst)
        self._normal_dropped = metrics.EVENTS_DROPPED.labels("Normal")  # looked up once
        metrics.EVENTS_DROPPED.labels("Warning").inc(0)  # both series from the start, at 0
        self.component = component
        self.correlator = correlator or EventCorrelator()
        self._queue: queue.Queue[tuple[JSON, EventType, str, str] | None] = queue.Queue(max_pending)
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._stop_requested = False  # stop() began: the writer ends after the flush
        self._cancel = CancelToken("event recorder")  # aborts the write in hand once the flush ran out of time
        self.recorded: list[tuple[str, EventType, str, str]] = []

    def start(self) -> None:
        """Start the writer thread."""
        if self.client is not None and self._thread is None:
            thread = threading.Thread(target=self._run, name="event-recorder", daemon=True)
            thread.start()  # then published: is_alive() is False until start()
            self._thread = thread

    def stop(self, timeout: float = 2.0) -> None:
        """Flush what is queued for up to ``timeout`` seconds, then stop: the write in hand is cancelled
        (:class:`~zkop.kube.cancel.CancelToken`: a request that gets no answer would otherwise hold the
        shutdown for the client's request timeout) and this waits for the writer up to ``timeout`` seconds
        more. Events still queued then are dropped, with a warning. Idempotent; a no-op from the writer
        thread itself."""
        thread = self._thread
        if thread is None or thread is threading.current_thread():
            return
        self._stop_requested = True
        deadline = time.monotonic() + timeout
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:  # the writer is behind
            self._stopping.set()
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():  # the flush ran out of time
            self._stopping.set()
            self._cancel.cancel()
            thread.join(timeout)
        dropped = sum(1 for item in list(self._queue.queue) if item is not None)
        if dropped:
            log.warning("event recorder stopped with %d events not written", dropped)
        if thread.is_alive():
            log.warning("event recorder still writing %g s after stop began", 2 * timeout)

    def health_check(self) -> str | None:
        """``None``, or that the writer thread ended before :meth:`stop` (no Event would be written again).

        The writer catches every ``Exception``; only a ``BaseException`` ends it early.
        """
        thread = self._thread
        if thread is None or thread.is_alive() or self._stopping.is_set() or self._stop_requested:
            return None
        return f"its writer thread {thread.name} ended"

    def event(self, obj: JSON, type_: EventType, reason: str, message: str) -> None:
        """Queue an Event about ``obj`` (a dict with ``kind``, ``apiVersion`` and ``metadata``)."""
        meta = obj.get("metadata") or {}
        log.log(
            logging.WARNING if type_ == "Warning" else logging.INFO, "event %s %s/%s %s: %s",
            type_, meta.get("namespace"), meta.get("name"), reason, message,
        )
        self.recorded.append((f"{meta.get('namespace')}/{meta.get('name')}", type_, reason, message))
        del self.recorded[:-1000]
        if self.client is None:
            return
        if type_ == "Normal" and not self._normal_budget.allow():
            self._normal_dropped.inc()
            return
        try:
            self._queue.put_nowait((obj, type_, reason, message))
        except queue.Full:
            log.warning("event queue full; dropped %s event for %s", reason, meta.get("name"))

    def _run(self) -> None:
        with cancel_scope(self._cancel):
            self._write_queued()

    def _write_queued(self) -> None:
        while not self._stopping.is_set():
            item = self._queue.get()
            if item is None:
                return
            try:
                self._write(*item)
            except Exception as err:  # never let events break anything
                log.warning("could not record event: %s", err)

    def _write(self, obj: JSON, type_: EventType, reason: str, message: str) -> None:
        """Write one Event as client-go's ``recordToSink`` does: correlate, then patch or create it.

        A patch of an Event object that is gone (404) creates it again (client-go ``recordEvent``).
        """
        assert self.client is not None
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        fields = EventFields(self.component, str(obj.get("kind")), str(meta.get("namespace")), str(meta.get("name")),
                             str(meta.get("uid")), str(obj.get("apiVersion")), type_, reason, message[:1024])
        result = self.correlator.correlate(fields, f"{meta.get('name')}.{time.time_ns():x}")
        if result is None:
            metrics.EVENTS_DROPPED.labels(type_).inc()
            return
        now = now_rfc3339()
        first = result.first_timestamp or now
        if result.count > 1:
            try:
                self.client.request(
                    "PATCH", resource_path("", "v1", "events", namespace, result.name),
                    body={"count": result.count, "lastTimestamp": now, "message": result.message},
                    content_type="application/merge-patch+json",
                )
                self.correlator.update_state(result.key, result.name, result.count, first)
                return
            except ApiException as err:
                if err.status != 404:
                    raise
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": result.name, "namespace": namespace},
            "involvedObject": {
                "apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "namespace": meta.get("namespace"),
                "name": meta.get("name"), "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion"),
            },
            "reason": reason,
            "message": result.message,
            "type": type_,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "firstTimestamp": first,
            "lastTimestamp": now,
            "count": result.count,
        }
        self.client.request("POST", resource_path("", "v1", "events", namespace), body=body)
        self.correlator.update_state(result.key, result.name, result.count, first)
