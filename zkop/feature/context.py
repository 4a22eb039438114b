"""What a feature's ``setup`` is given: the shared collaborators and settings, in one value.

controller-runtime hands every ``SetupWithManager`` the Manager; cert-manager's ``controller.Register``
hands every constructor one ``controller.Context``. :class:`FeatureContext` is both for zkop: every
feature's ``setup(context, options)`` receives the same one, built once by the composition root
(:class:`zkop.operator.run.Operator`), so no collaborator is assigned to a feature after construction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from zkop.feature.gate import ReservedRoot
from zkop.kube.client import KubeClient
from zkop.kube.events import EventRecorder
from zkop.runtime.manager import Manager
from zkop.zookeeper.adapter import ZooKeeperAdapter

__all__ = ["DRY_RUN", "FeatureContext", "FeatureSettings", "MissingFeature"]

T = TypeVar("T")


#: Why every ZooKeeper write is refused under ``--dry-run`` (``ZooKeeperAdapter(refuse_writes=...)``): the net under
#: the features' dry-run writers, on the flags' session and on every ensemble's.
DRY_RUN = "zkop run --dry-run"


@dataclass(frozen=True)
class FeatureSettings:
    """The settings every feature shares (``zkop run``'s flags of the same names; durations in seconds).

    Attributes:
        namespaces: the namespaces watched (``--namespace``); ``None``: all.
        workers: each controller's concurrent reconciles (``--workers``).
        sync_period: seconds between resyncs from the informer caches (``--sync-period``).
        inactivity_timeout: seconds a silent API watch is kept before it is reopened.
        acl_check_period: seconds between ACL checks of znodes that declare an ACL; 0 disables.
        cluster_id: this installation's id in ownership records (``--cluster-id``).
        registry_root: where ownership records live (``--registry-root``).
        dry_run: ``--dry-run``: each feature chooses its planning-only writer once, when it is built.
        reserved: the roots no object may have zkop write (or read), whatever the tenancy rules
            (:func:`zkop.feature.gate.reserved_roots`); empty: the ZooKeeperConfig feature's defaults.
    """

    namespaces: Sequence[str] | None = None
    workers: int = 4
    sync_period: float = 600.0
    inactivity_timeout: float = 90.0
    acl_check_period: float = 60.0
    cluster_id: str = "default"
    registry_root: str = "/zkop/owners"
    dry_run: bool = False
    reserved: tuple[ReservedRoot, ...] = ()


class MissingFeature(LookupError):
    """A feature asked for the parts of another that was not built before it (see the registry's order)."""


@dataclass
class FeatureContext:
    """The collaborators every feature's ``setup(context, options)`` is built from.

    Attributes:
        manager: where a feature adds its informers (every replica) and controllers (while leading).
        client: the API client (JSON) every feature lists, watches and writes with.
        recorder: the Event recorder.
        zookeeper: the adapter on the flags' ensemble.
        settings: the settings every feature shares.
        ensemble_zookeeper: ``name`` → an adapter on the ZooKeeperEnsemble ``name`` as it is at start-up,
            opened by a session runnable of its own (``--service-bridge-ensemble``, ``--import-ensemble``); for an
            unusable one it raises the composition root's :class:`zkop.operator.run.ConfigurationError`.
    """

    manager: Manager
    client: KubeClient
    recorder: EventRecorder
    zookeeper: ZooKeeperAdapter
    settings: FeatureSettings
    ensemble_zookeeper: Callable[[str], ZooKeeperAdapter]
    _parts: list[object] = field(default_factory=list, repr=False)
    _session_hooks: list[tuple[ZooKeeperAdapter, Callable[[], None]]] = field(default_factory=list, repr=False)

    def session(self, ensemble: str | None) -> ZooKeeperAdapter:
        """The adapter on ZooKeeperEnsemble ``ensemble``, or on the flags' ensemble for ``None``/empty."""
        return self.ensemble_zookeeper(ensemble) if ensemble else self.zookeeper

    def on_new_session(self, zookeeper: ZooKeeperAdapter, hook: Callable[[], None]) -> None:
        """Call ``hook`` (it must only enqueue) each time ``zookeeper``'s session is back after LOST or SUSPENDED
        (:func:`zkop.feature.session.resync_on_new_session`)."""
        self._session_hooks.append((zookeeper, hook))

    def session_hooks(self) -> list[tuple[ZooKeeperAdapter, list[Callable[[], None]]]]:
        """Every hook registered with :meth:`on_new_session`, grouped by adapter in registration order."""
        grouped: list[tuple[ZooKeeperAdapter, list[Callable[[], None]]]] = []
        for zookeeper, hook in self._session_hooks:
            for known, hooks in grouped:
                if known is zookeeper:
                    hooks.append(hook)
                    break
            else:
                grouped.append((zookeeper, [hook]))
        return grouped

    def built(self, parts: object) -> None:
        """Record a feature's parts (or anything it provides to the features built after it, such as the flags'
        ensemble's :class:`~zkop.feature.gate.Gate`), so that a feature built later can ask for it with
        :meth:`part`."""
        self._parts.append(parts)

    def part(self, kind: type[T]) -> T:
        """The parts of type ``kind`` a feature built earlier returned.

        Raises:
            MissingFeature: no feature built before returned parts of that type.
        """
        for parts in self._parts:
            if isinstance(parts, kind):
                return parts
        raise MissingFeature(f"no feature built before this one provides {kind.__name__}")
