"""Own writes: recognise the watch events that only echo a write this process made.

:class:`OwnWrites` drops an update only when the object went from exactly the version a write of
ours was computed from to exactly the version that write returned; any other transition (a
concurrent change, a relist spanning more than our write) is delivered. That is narrower than
controller-runtime's ``GenerationChangedPredicate``, which drops every status-only change.
:meth:`OwnWrites.newest` answers the reverse question, "is the cache behind a write of ours?"
(client-go's ``MutationCache``), so a reconcile never writes the same status or finalizer twice.

Rests on the Kubernetes API conventions, "Concurrency Control and Consistency": every write
produces a new ``resourceVersion`` and a watch reports each version once, in order.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from zkop.kube.client import JSON
from zkop.runtime import metrics

__all__ = ["OwnWrites"]


def _resource_version(obj: JSON) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class _Writing:
    """The context manager :meth:`OwnWrites.writing` returns (a small class, not a generator: every
    finalizer and status write of zkop goes through it)."""

    __slots__ = ("_base_rv", "_key", "_owner", "_response")

    def __init__(self, owner: OwnWrites, key: str, base_rv: str) -> None:
        self._owner, self._key, self._base_rv = owner, key, base_rv
        self._response: list[JSON] = []

    def __enter__(self) -> Callable[[JSON], None]:
        owner = self._owner
        with owner._lock:
            owner._in_flight[self._key] = (self._base_rv, [])
        return self._response.append

    def __exit__(self, *exc_info: object) -> None:
        self._owner._finish(self._key, self._base_rv, self._response)


class OwnWrites:
    """Versions this process wrote, per object key, with the versions they were computed from.

    The watch event of a write can reach the informer before the writer has read
    the response, so a write is announced first (:meth:`writing`): an update that
    starts from the version the write in flight was computed from is held until
    the response is in, then dropped if it is that write's echo or handed to
    :attr:`release` (the work queue's ``add``) if it is not. Without ``release`` nothing
    is held and only echoes that arrive after the response are recognised.

    Thread-safe; memory is bounded by ``per_key`` remembered writes per key (the
    oldest go first), and :meth:`forget` drops a key.

    Args:
        controller: the ``controller`` label of ``zkop_own_write_echoes_dropped_total``.
        per_key: writes remembered per key whose echo has not arrived yet.
        release: called with a key whose held event turned out not to be an echo.
        recorded: called as ``recorded(key, base_resource_version, response)`` once a write's response
            is in and remembered, outside this object's lock (the informer's
            :meth:`~zkop.runtime.cache.informer.Informer.expect_echo`, so the echo need not be decoded).
        wait_past: ``wait_past(key, version, timeout)`` waits until the cache no longer holds ``key`` at
            ``version`` (the informer's :meth:`~zkop.runtime.cache.informer.Informer.wait_past`), for
            :meth:`await_echo`; ``None``: :meth:`await_echo` returns at once.
    """

    def __init__(self, controller: str = "zookeeperconfig", per_key: int = 4,
                 release: Callable[[str], None] | None = None,
                 recorded: Callable[[str, str, JSON], None] | None = None,
                 wait_past: Callable[[str, str, float], bool] | None = None) -> None:
        self.controller = controller
        self.wait_past = wait_past
        self.per_key = per_key
        self.release = release
        self.recorded = recorded
        self._writes: dict[str, OrderedDict[str, str]] = {}
        #: The response of the latest write per key, kept while an echo of that key is awaited.
        self._newest: dict[str, JSON] = {}
        self._in_flight: dict[str, tuple[str, list[tuple[str, str]]]] = {}
        self._lock = threading.Lock()
        self.echoes_dropped = 0
        # The labelled child, looked up once (not on every echo).
        self._echoes_metric = metrics.OWN_WRITE_ECHOES_DROPPED.labels(controller)

    def writing(self, key: str, base: JSON) -> _Writing:
        """Announce a write of ``key`` computed from ``base``; call the yielded function with the response.

        Usage::

            with own_writes.writing(key, obj) as respond:
                respond(client.request("PATCH", ...))

        The write is announced on entering the ``with`` block. A write that raises (or whose
        response is never passed) releases every event held for it.
        """
        return _Writing(self, key, _resource_version(base))

    def _finish(self, key: str, base_rv: str, response: list[JSON]) -> None:
        """The end of :meth:`writing`'s block: remember the response, drop or release what was held."""
        with self._lock:
            _, held = self._in_flight.pop(key, (base_rv, []))
            written_rv = _resource_version(response[0]) if response else ""
            if response:
                self._record(key, base_rv, response[0])
            missed = False
            for old_rv, new_rv in held:
                if response and (old_rv, new_rv) == (base_rv, written_rv):
                    self._consume(key, new_rv)
                else:
                    missed = True
        if missed and self.release is not None:
            self.release(key)
        if response and self.recorded is not None:
            self.recorded(key, base_rv, response[0])

    def _record(self, key: str, base_rv: str, response: JSON) -> None:
        written_rv = _resource_version(response)
        if not base_rv or not written_rv or base_rv == written_rv:
            return
        writes = self._writes.setdefault(key, OrderedDict())
        writes[written_rv] = base_rv
        self._newest[key] = response
        while len(writes) > self.per_key:
            writes.popitem(last=False)

    def _consume(self, key: str, written_rv: str) -> None:
        writes = self._writes.get(key)
        if writes is not None:
            writes.pop(written_rv, None)
            if not writes:
                del self._writes[key]
                self._newest.pop(key, None)
        self.echoes_dropped += 1
        self._echoes_metric.inc()

    def is_echo(self, key: str, old: JSON, new: JSON) -> bool:
        """True if the update ``old`` → ``new`` of ``key`` is one write of ours, or is held until the write returns.

        A held update is either dropped later (it was the echo) or handed to :attr:`release`.
        """
        old_rv, new_rv = _resource_version(old), _resource_version(new)
        with self._lock:
            writes = self._writes.get(key)
            if writes and writes.get(new_rv) == old_rv:
                self._consume(key, new_rv)
                return True
            in_flight = self._in_flight.get(key)
            if self.release is not None and in_flight is not None and in_flight[0] == old_rv != new_rv:
                in_flight[1].append((old_rv, new_rv))
                return True
            return False

    def newest(self, key: str, read: Callable[[], JSON | None]) -> JSON | None:
        """``read()`` (the informer cache's copy of ``key``), or our newer write of it if the cache lags.

        If the cached object's ``resourceVersion`` is one a write of ours was computed
        from and that write's echo has not arrived, the cache is behind that write: the
        response of our latest write of ``key`` is returned instead (it is newer, and
        holds every change the cache has). An object gone from the cache stays gone.

        The remembered writes are copied before ``read()`` is called, and the informer
        updates its cache before it hands the echo to :meth:`is_echo`, so an echo that
        arrives in between shows up as a newer cached version: never as a stale one.

        Args:
            key: ``namespace/name``.
            read: returns the cached object (e.g. ``lambda: indexer.get(key)``); called once, unlocked.

        Returns:
            The object to reconcile, or ``None`` if ``read()`` found none.
        """
        with self._lock:
            bases = set((self._writes.get(key) or {}).values())
            latest = self._newest.get(key)
        cached = read()
        if cached is None or latest is None or _resource_version(cached) not in bases:
            return cached
        return latest

    def await_echo(self, key: str, written: JSON, timeout: float) -> bool:
        """Before another write of ``key``: wait (at most ``timeout`` seconds) until the cache has seen ``written``,
        the response of our last write of it; True at once if there is nothing to wait for.

        kube-apiserver applies a PATCH to its watch cache's copy of the object (``CacheDelegator.GuaranteedUpdate`` of
        k8s.io/apiserver's storage/cacher passes it as the cached existing object); when that copy is older than etcd's,
        the etcd transaction fails and the patch is decoded, admitted and applied again on the object read from etcd. A
        status write sent right after our finalizer write finds that copy stale whenever the watch lags the write:
        measured at 32 workers, 0.86 extra transactions per object and 1.2 ms of kube-apiserver CPU
        (docs/performance.md, "Levers of issue 42"). Our informer is fed from that same watch cache, so once it has the
        echo, a single kube-apiserver's copy is fresh. (With several kube-apiservers behind a load balancer, the next
        request may reach another one; it is then as before.)
        """
        if self.wait_past is None:
            return True
        written_rv = _resource_version(written)
        with self._lock:
            writes = self._writes.get(key)
            base = writes.get(written_rv) if writes is not None else None
        if base is None:  # its echo is in (consumed), or it was not a write of ours
            return True
        return self.wait_past(key, base, timeout)

    def forget(self, key: str) -> None:
        """Drop everything remembered for ``key`` (the object is gone)."""
        with self._lock:
            self._writes.pop(key, None)
            self._newest.pop(key, None)

    def __len__(self) -> int:
        with self._lock:
            return sum(len(w) for w in self._writes.values())
