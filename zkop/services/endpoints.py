"""Ready endpoint addresses from EndpointSlices, and the debounce that keeps them from flapping.

EndpointSlices (``discovery.k8s.io/v1``) of a Service carry the label
``kubernetes.io/service-name``. Each endpoint's conditions (EndpointSlice API reference) decide
what it is published as:

==================================================  ===============================================
conditions                                          published as
==================================================  ===============================================
``ready`` true or unset ("nil should be             ready (``addresses``)
interpreted as ready")
``ready`` false, ``serving`` true, ``terminating``  draining (``draining``): still answering, going
true (a pod shutting down gracefully)               away; formats mark it so consumers stop choosing it
anything else (``ready`` false and not serving)     not published
any, with the Service's ``publishNotReadyAddresses``  ready
==================================================  ===============================================

An address listed twice (two slices during a rollout) is ready if either says so.

A rolling restart moves endpoints through not-ready and ready many times in a few seconds;
:class:`Debouncer` publishes a new ready set only once it has been stable for ``delay`` seconds, or after
``max_delay`` seconds of continuous change, so a record is rewritten a few
times per rollout instead of on every pod transition.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from zkop.kube.client import JSON

__all__ = ["SERVICE_NAME_LABEL", "Debouncer", "EndpointPort", "EndpointsView", "endpoints_view", "slice_service_key"]

SERVICE_NAME_LABEL = "kubernetes.io/service-name"


@dataclass(frozen=True, order=True)
class EndpointPort:
    """One EndpointSlice port: ``name`` (``None`` if unnamed), ``port`` number, ``protocol``."""

    name: str | None
    port: int | None
    protocol: str


@dataclass(frozen=True)
class EndpointsView:
    """The ready endpoints of one Service, normalised so equal sets compare equal.

    Attributes:
        addresses: ready endpoint addresses, sorted, without duplicates.
        ports: the union of the slices' ports, sorted.
        draining: serving but terminating addresses (not ready), sorted, none of them in ``addresses``.
    """

    addresses: tuple[str, ...] = ()
    ports: tuple[EndpointPort, ...] = ()
    draining: tuple[str, ...] = ()


def slice_service_key(obj: JSON) -> list[str]:
    """Index function: ``["<namespace>/<service name>"]`` for a slice with the service-name label, else ``[]``."""
    meta = obj.get("metadata") or {}
    service = (meta.get("labels") or {}).get(SERVICE_NAME_LABEL)
    namespace = meta.get("namespace")
    return [f"{namespace}/{service}"] if service and namespace else []


def endpoints_view(slices: Iterable[JSON], *, publish_not_ready: bool = False) -> EndpointsView:
    """Collect the ready and draining addresses and the ports of a Service's EndpointSlices (the module's table).

    Slices being deleted (``metadata.deletionTimestamp``) are ignored. ``publish_not_ready`` is the Service's
    ``spec.publishNotReadyAddresses``: every endpoint counts as ready.
    """
    addresses: set[str] = set()
    draining: set[str] = set()
    ports: set[EndpointPort] = set()
    for obj in slices:
        if (obj.get("metadata") or {}).get("deletionTimestamp"):
            continue
        for endpoint in obj.get("endpoints") or []:
            found = {str(a) for a in endpoint.get("addresses") or []}
            conditions = endpoint.get("conditions") or {}
            if publish_not_ready or conditions.get("ready") is not False:
                addresses.update(found)
            elif conditions.get("serving") is True and conditions.get("terminating") is True:
                draining.update(found)
        for port in obj.get("ports") or []:
            number = port.get("port")
            ports.add(EndpointPort(port.get("name") or None, int(number) if number is not None else None,
                                   str(port.get("protocol") or "TCP")))
    return EndpointsView(tuple(sorted(addresses)), tuple(sorted(ports, key=_port_sort_key)),
                         tuple(sorted(draining - addresses)))


def _port_sort_key(port: EndpointPort) -> tuple[str, int, str]:
    return (port.name or "", port.port if port.port is not None else -1, port.protocol)


@dataclass
class _State:
    published: EndpointsView
    pending: EndpointsView | None = None
    first_change: float = 0.0
    last_change: float = 0.0


class Debouncer:
    """Per-key trailing debounce with a ceiling (thread-safe).

    Args:
        delay: seconds a new value must stay unchanged before it is published.
        max_delay: seconds after the first unpublished change at which the newest value is
            published even if it keeps changing.
        clock: monotonic seconds.
    """

    def __init__(self, delay: float, max_delay: float, clock: Callable[[], float]) -> None:
        self.delay = delay
        self.max_delay = max(max_delay, delay)
        self.clock = clock
        self._states: dict[str, _State] = {}
        self._lock = threading.Lock()

    def settle(self, key: str, current: EndpointsView) -> tuple[EndpointsView, float | None]:
        """Return ``(value to publish now, seconds until it should be asked again or None)``.

        The first value seen for a key is published at once (there is nothing to flap from).
        """
        now = self.clock()
        with self._lock:
            state = self._states.get(key)
            if state is None or self.delay <= 0:
                self._states[key] = _State(current)
                return current, None
            if current == state.published:
                state.pending = None
                return current, None
            if current != state.pending:
                if state.pending is None:
                    state.first_change = now
                state.pending = current
                state.last_change = now
            quiet_left = self.delay - (now - state.last_change)
            ceiling_left = self.max_delay - (now - state.first_change)
            if quiet_left <= 0 or ceiling_left <= 0:
                self._states[key] = _State(current)
                return current, None
            return state.published, min(quiet_left, ceiling_left)

    def forget(self, key: str) -> None:
        """Drop what is remembered about ``key`` (its Service is gone)."""
        with self._lock:
            self._states.pop(key, None)
