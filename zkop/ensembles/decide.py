"""Every rule of the ZooKeeperEnsemble reconciler, as pure functions from facts to a :class:`Plan`.

The reconciler (:class:`zkop.ensembles.controller.EnsembleReconciler`) gathers the :class:`EnsembleFacts` — the
object, its parsed spec or why it is invalid, whether it is being deleted, the ZooKeeperConfigs still needing
it, the fingerprint of its spec and Secrets and the runtime that runs now — calls :func:`decide` once and applies
the :class:`Plan` through its writer (docs/architecture.md, "One reconcile shape"). No I/O, no clock; the facts
are plain data (this module imports nothing of zkop: an import contract says so).

Rules, in order:

1. an object that is gone: its runtime is closed (``not found``); nothing is written;
2. being deleted and no ZooKeeperConfig still holds zkop's finalizer naming it: the runtime is closed and zkop's
   finalizer removed (if the object carries it); nothing is reported;
3. being deleted while some still need it (to delete their znodes): the finalizer stays, the runtime runs on
   (made again after a restart of zkop) and the status says ``Terminating``, naming at most five of them;
4. otherwise zkop's finalizer is added first, before a session is opened;
5. an invalid spec closes the runtime and reports ``InvalidSpec``;
6. the Secrets the spec names are watched; a runtime made from the same fingerprint (spec but ``tenancy`` and
   ``adoption``, and the Secrets' data) is kept — given the new spec if only ``tenancy`` or ``adoption``
   changed — otherwise a new one is made (a new session) in place of the old one;
7. the status reports the runtime (:func:`runtime_condition`): ``Connected``, ``ZooKeeperUnavailable``, or why
   it cannot be made (``SecretNotFound``, ``InvalidSpec``), which only making it finds out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "Condition",
    "EnsembleFacts",
    "Plan",
    "ReportRuntime",
    "RunningRuntime",
    "RuntimeAction",
    "decide",
    "desired_status",
    "needs_runtime_facts",
    "runtime_condition",
    "terminating_message",
]

#: At most this many waiting ZooKeeperConfigs are named in a ``Terminating`` message.
SHOWN_WAITING = 5


@dataclass(frozen=True)
class RunningRuntime:
    """The runtime registered for the ensemble now: the fingerprint it was made from and the raw spec it holds."""

    fingerprint: str
    spec: Mapping[str, Any] | None


@dataclass(frozen=True)
class EnsembleFacts:
    """Everything one pass over ZooKeeperEnsemble ``name`` decides from.

    Attributes:
        name: the ZooKeeperEnsemble's name (its key).
        obj: the object from the informer cache; ``None``: gone.
        has_finalizer: ``obj`` carries zkop's finalizer.
        spec_error: why its spec is invalid (:class:`zkop.ensembles.spec.InvalidEnsemble`), ``None`` if valid.
        hosts: the spec's connect string (valid spec only).
        secret_names: the Secrets the spec names (valid spec only).
        needing: keys of the ZooKeeperConfigs naming it that still hold their finalizer (gathered only while
            it is being deleted).
        fingerprint: of its spec and Secrets now (:func:`zkop.ensembles.spec.fingerprint`); ``None`` when not
            gathered (:func:`needs_runtime_facts`).
        running: the runtime registered under ``name``, if any (gathered with ``fingerprint``).
    """

    name: str
    obj: Mapping[str, Any] | None
    has_finalizer: bool = False
    spec_error: str | None = None
    hosts: str = ""
    secret_names: frozenset[str] = frozenset()
    needing: tuple[str, ...] = ()
    fingerprint: str | None = None
    running: RunningRuntime | None = None

    @property
    def deleting(self) -> bool:
        """The object is being deleted (``metadata.deletionTimestamp`` set)."""
        return bool(((self.obj or {}).get("metadata") or {}).get("deletionTimestamp"))


@dataclass(frozen=True)
class RuntimeAction:
    """What becomes of the ensemble's runtime.

    Attributes:
        kind: ``keep`` (the running one, unchanged), ``change-policy`` (the running one, given the new ``spec``:
            only ``tenancy`` or ``adoption`` changed), ``rebuild`` (a new runtime from the spec and Secrets, in
            place of the running one if any), ``close`` (none runs any more).
        reason: for ``close``, why it cannot run (what its ZooKeeperConfigs' status will say).
    """

    kind: Literal["keep", "change-policy", "rebuild", "close"]
    reason: str | None = None


@dataclass(frozen=True)
class Condition:
    """The ``Ready`` condition to report: its status (``"True"``/``"False"``), reason and message."""

    ready: Literal["True", "False"]
    reason: str
    message: str


@dataclass(frozen=True)
class ReportRuntime:
    """Report what the runtime is once the plan's runtime action is applied (:func:`runtime_condition`).

    Attributes:
        hosts: the connect string (``Connected``'s message).
        terminating: the ``Terminating`` message while the ensemble is being deleted, else ``None``.
    """

    hosts: str
    terminating: str | None = None


@dataclass(frozen=True)
class Plan:
    """What one pass does, in order: the finalizer, the Secrets to watch, the runtime, the status.

    Attributes:
        finalizer: ``add`` (before anything else: a pass stops if the object is gone by then), ``remove``, or
            ``None``.
        watch_secrets: the Secrets (names in the trusted namespace) to cache and watch from now on.
        runtime: the runtime's action; ``None``: leave it alone.
        status: the ``Ready`` condition (:class:`Condition`), the runtime's (:class:`ReportRuntime`), or
            ``None``: nothing reported.
    """

    finalizer: Literal["add", "remove"] | None = None
    watch_secrets: frozenset[str] = frozenset()
    runtime: RuntimeAction | None = None
    status: Condition | ReportRuntime | None = None


def terminating_message(waiting: Sequence[str]) -> str:
    """The ``Terminating`` message naming the objects ``waiting`` (ZooKeeperConfigs as ``namespace/name``, other
    kinds as ``Kind namespace/name``; at most :data:`SHOWN_WAITING`)."""
    shown = ", ".join(waiting[:SHOWN_WAITING])
    if len(waiting) > SHOWN_WAITING:
        shown += f" and {len(waiting) - SHOWN_WAITING} more"
    return (f"being deleted; waiting for {len(waiting)} object(s) that still need it to delete their "
            f"znodes: {shown}")


def needs_runtime_facts(facts: EnsembleFacts) -> bool:
    """Whether the pass needs the fingerprint and the running runtime: a valid spec of an object that is not
    being deleted, or is still needed (rules 3, 6)."""
    return (facts.obj is not None and facts.spec_error is None
            and (not facts.deleting or bool(facts.needing)))


def _runtime_action(facts: EnsembleFacts) -> RuntimeAction:
    running = facts.running
    if running is None or facts.fingerprint is None or running.fingerprint != facts.fingerprint:
        return RuntimeAction("rebuild")
    spec = (facts.obj or {}).get("spec") or {}
    return RuntimeAction("keep") if running.spec == spec else RuntimeAction("change-policy")


def decide(facts: EnsembleFacts) -> Plan:
    """The one decision of a pass over complete ``facts`` (the rules in the module docstring)."""
    name = facts.name
    if facts.obj is None:
        return Plan(runtime=RuntimeAction("close", f"ZooKeeperEnsemble {name} not found"))
    terminating = None
    finalizer: Literal["add", "remove"] | None = None
    if facts.deleting:
        if not facts.needing:
            return Plan(finalizer="remove" if facts.has_finalizer else None,
                        runtime=RuntimeAction("close", f"ZooKeeperEnsemble {name} is being deleted"))
        terminating = terminating_message(facts.needing)
    elif not facts.has_finalizer:
        finalizer = "add"
    if facts.spec_error is not None:
        return Plan(finalizer=finalizer,
                    runtime=RuntimeAction("close", f"ZooKeeperEnsemble {name} has an invalid spec: {facts.spec_error}"),
                    status=Condition("False", "InvalidSpec", facts.spec_error))
    return Plan(finalizer=finalizer, watch_secrets=facts.secret_names, runtime=_runtime_action(facts),
                status=ReportRuntime(facts.hosts, terminating))


def runtime_condition(report: ReportRuntime, cannot_run: str | None, not_ready: str | None) -> Condition:
    """The ``Ready`` condition of rule 7.

    Args:
        report: the plan's :class:`ReportRuntime`.
        cannot_run: why making the runtime failed (a Secret or key missing, a credential that is not
            ``user:password``), ``None`` if it runs.
        not_ready: why the running runtime has no session
            (:meth:`~zkop.ensembles.running.EnsembleRuntime.not_ready_reason`), ``None`` when it has one.
    """
    if cannot_run is not None:
        return Condition("False", "SecretNotFound" if "Secret" in cannot_run else "InvalidSpec", cannot_run)
    if report.terminating is not None:
        return Condition("False", "Terminating", report.terminating)
    if not_ready is None:
        return Condition("True", "Connected", f"session established with {report.hosts}")
    return Condition("False", "ZooKeeperUnavailable", not_ready)


def desired_status(generation: int, managed_objects: int, ready: dict[str, Any], *,
                   watch_mode: str | None = None, server_version: str | None = None) -> dict[str, Any]:
    """The ``status`` to report: ``ready`` is the ``Ready`` condition built with
    :func:`zkop.runtime.conditions.condition` (it reads the clock); ``watch_mode`` and ``server_version`` only
    while a runtime runs (a server version only once known)."""
    status: dict[str, Any] = {
        "observedGeneration": generation,
        "managedObjects": managed_objects,
        "conditions": [ready],
    }
    if watch_mode is not None:
        status["watchMode"] = watch_mode
    if server_version:
        status["serverVersion"] = server_version
    return status
