"""Kubernetes Events for the objects zkop manages (``kubectl describe`` shows them).

Events are ``core/v1`` Events written from a background thread so a slow API
never stalls a reconcile; repeats of the same (object, type, reason, message)
within ``dedupe_window`` seconds are folded into one Event whose ``count`` goes
up, like client-go's ``EventCorrelator``. Messages must never carry secret data.

``Normal`` Events share one token bucket (``normal_qps``, ``normal_burst``): a
cold start over thousands of objects would otherwise double the API write load
with ``Created`` Events. Over budget they are dropped and counted
(``zkop_events_dropped_total``), as client-go's spam filter drops Events;
``Warning`` Events are never dropped.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from datetime import UTC, datetime
from typing import Any, Literal

from zkop.kube import metrics
from zkop.kube.client import JSON, ApiException, KubeClient, resource_path
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
        dedupe_window: seconds within which identical events are folded.
        max_pending: events waiting to be written; more are dropped (and logged).
        normal_qps, normal_burst: budget of ``Normal`` Events, per second and at once.
    """

    def __init__(self, client: KubeClient | None, component: str = "zkop", *, dedupe_window: float = 600.0,
                 max_pending: int = 1000, normal_qps: float = 1.0, normal_burst: int = 50) -> None:
        self.client = client
        self._normal_budget = TokenBucket(normal_qps, normal_burst)
        self._normal_dropped = metrics.EVENTS_DROPPED.labels("Normal")  # looked up once
        self.component = component
        self.dedupe_window = dedupe_window
        self._queue: queue.Queue[tuple[JSON, EventType, str, str] | None] = queue.Queue(max_pending)
        self._seen: dict[tuple[str, str, str, str], tuple[str, str, int, float]] = {}
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._stop_requested = False  # stop() began: the writer ends after the flush
        self.recorded: list[tuple[str, EventType, str, str]] = []

    def start(self) -> None:
        """Start the writer thread."""
        if self.client is not None and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="event-recorder", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Flush what is queued for up to ``timeout`` seconds, then stop: the writer ends after the
        write in hand, and this waits for it up to ``timeout`` seconds more (a write is bounded by the
        client's request timeout). Events still queued then are dropped, with a warning. Idempotent;
        a no-op from the writer thread itself."""
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
        while not self._stopping.is_set():
            item = self._queue.get()
            if item is None:
                return
            try:
                self._write(*item)
            except Exception as err:  # never let events break anything
                log.warning("could not record event: %s", err)

    def _write(self, obj: JSON, type_: EventType, reason: str, message: str) -> None:
        assert self.client is not None
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        key = (str(meta.get("uid")), type_, reason, message)
        now = now_rfc3339()
        seen = self._seen.get(key)
        mono = time.monotonic()
        if seen is not None and mono - seen[3] < self.dedupe_window:
            name, first, count, _ = seen
            try:
                self.client.request(
                    "PATCH", resource_path("", "v1", "events", namespace, name),
                    body={"count": count + 1, "lastTimestamp": now}, content_type="application/merge-patch+json",
                )
                self._seen[key] = (name, first, count + 1, mono)
                return
            except ApiException as err:
                if err.status != 404:
                    raise
        name = f"{meta.get('name')}.{time.time_ns():x}"
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": {
                "apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "namespace": meta.get("namespace"),
                "name": meta.get("name"), "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion"),
            },
            "reason": reason,
            "message": message[:1024],
            "type": type_,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        self.client.request("POST", resource_path("", "v1", "events", namespace), body=body)
        if len(self._seen) > 10_000:
            self._seen.clear()
        self._seen[key] = (name, now, 1, mono)
