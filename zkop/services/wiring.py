"""What the two service builders share: the watched resources, the parts handed to the manager
and the full-sync request.

The manager owns the lifecycle (controller-runtime's ``Manager``): it starts a feature's
``informers`` on every replica and waits for their sync, starts its ``controllers`` only while
leading, and calls ``on_session_reconnected`` after a new ZooKeeper session.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from zkop.feature.context import FeatureContext
from zkop.kube.client import KubeClient
from zkop.kube.events import EventRecorder
from zkop.runtime.cache import Informer, ResourceRef
from zkop.runtime.controller import Controller
from zkop.zookeeper.adapter import ZooKeeperAdapter

__all__ = ["ENDPOINTSLICES", "SERVICES", "ServiceSync", "all_synced", "setup_direction"]

#: core/v1 Services.
SERVICES = ResourceRef("", "v1", "services")
#: discovery.k8s.io/v1 EndpointSlices.
ENDPOINTSLICES = ResourceRef("discovery.k8s.io", "v1", "endpointslices")

R = TypeVar("R")


@dataclass
class ServiceSync(ABC, Generic[R]):
    """One direction's parts, for the manager.

    Attributes:
        informers: what the manager starts and stops on every replica and waits for.
        controllers: the direction's one controller; started only while leading.
        reconciler: the reconciler (for tests and diagnostics).

    Subclasses set :attr:`FULL_SYNC_KEY` and define :meth:`on_session_reconnected`.
    """

    #: The queue key of the direction's full sync.
    FULL_SYNC_KEY: ClassVar[str]

    informers: list[Informer]
    controllers: list[Controller]
    reconciler: R

    @property
    def controller(self) -> Controller:
        """The direction's controller."""
        return self.controllers[0]

    def request_full_sync(self, delay: float = 0.0) -> None:
        """Enqueue a full sync after ``delay`` seconds."""
        self.controller.queue.add_after(self.FULL_SYNC_KEY, delay)

    @abstractmethod
    def on_session_reconnected(self) -> None:
        """A new ZooKeeper session (after LOST or SUSPENDED): enqueue what must be re-read.

        Called on kazoo's event thread (:func:`zkop.feature.session.resync_on_new_session`), so it
        must only enqueue.
        """


def all_synced(informers: Sequence[Informer]) -> Callable[[], bool]:
    """A ``synced()`` for the reconcilers: True once every one of ``informers`` has listed."""
    def synced() -> bool:
        return all(i.has_synced() for i in informers)

    return synced


S = TypeVar("S", bound="ServiceSync[Any]")
S_co = TypeVar("S_co", covariant=True)
Opts = TypeVar("Opts")
Opts_contra = TypeVar("Opts_contra", contravariant=True)


class BuildDirection(Protocol[Opts_contra, S_co]):
    """A direction's ``build_*``: its parts from the shared collaborators, its options and the shared settings."""

    def __call__(self, client: KubeClient, zookeeper: ZooKeeperAdapter, recorder: EventRecorder, options: Opts_contra,
                 /, *, cluster_id: str, resync_period: float, inactivity_timeout: float, dry_run: bool) -> S_co: ...


def setup_direction(context: FeatureContext, options: Opts, ensemble: str | None, build: BuildDirection[Opts, S]) -> S:
    """``build`` one service direction on the session of ZooKeeperEnsemble ``ensemble`` (``None``: the flags'
    ensemble) with ``options`` and the shared settings (``--dry-run`` chooses its planning-only writer), add its
    informers (every replica) and controller (while leading) to ``context.manager``, and hook its resync to that
    session; return its parts."""
    settings = context.settings
    zookeeper = context.session(ensemble)
    direction = build(context.client, zookeeper, context.recorder, options, cluster_id=settings.cluster_id,
                      resync_period=settings.sync_period, inactivity_timeout=settings.inactivity_timeout,
                      dry_run=settings.dry_run)
    context.manager.add_controllers(direction.informers, direction.controllers)
    context.on_new_session(zookeeper, direction.on_session_reconnected)
    return direction
