"""Build a controller in one declarative place (controller-runtime's ``builder.ControllerManagedBy(m).For(...)
.Owns(...).Watches(...).Complete(r)``).

Every feature builds its controllers here: it names the controller, declares its sources (the primary kind with
:meth:`ControllerBuilder.for_`, other informers with :meth:`~ControllerBuilder.watches`, caches it reads but whose
events it maps itself with :meth:`~ControllerBuilder.waits_for`, components that follow an informer with
:meth:`~ControllerBuilder.handles`), and :meth:`~ControllerBuilder.complete` builds the
:class:`~zkop.runtime.controller.Controller` over the reconciler it is given. Nothing is started: the feature hands
the result to the :class:`~zkop.runtime.manager.Manager` (its informers on every replica, its controllers and
leader runnables while leading), or, for a ZooKeeperEnsemble's controller, to the ensemble's runtime.

The work queue exists from the builder's construction (:attr:`ControllerBuilder.queue`): the one device that
breaks a construction cycle (a reconciler, a ZooKeeper watch listener or an own-writes tracker that enqueues keys
needs the queue before the controller exists) — ``docs/architecture.md``, "Wiring".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from zkop.kube.client import JSON
from zkop.runtime.cache import EventHandler, FuncHandler, Informer, meta_namespace_key
from zkop.runtime.controller import Controller, Reconciler
from zkop.runtime.workerpool import WorkerPool
from zkop.runtime.workqueue import RateLimitingQueue

__all__ = ["Built", "ControllerBuilder"]

MapFunc = Callable[[JSON], list[str]]
UpdateFilter = Callable[[JSON, JSON], bool]


@dataclass
class Built:
    """What :meth:`ControllerBuilder.complete` made: the controller and the sources it was declared with.

    Attributes:
        controller: the controller, not started.
        informers: every informer it reads, in declaration order (the feature's owner starts them on every
            replica and the controller's workers wait for their sync).
        handlers: each ``(informer, handler)`` the builder registered, for :meth:`detach`.
    """

    controller: Controller
    informers: list[Informer] = field(default_factory=list)
    handlers: list[tuple[Informer, EventHandler]] = field(default_factory=list)

    def detach(self) -> None:
        """Remove every event handler the builder registered (the controller is going away); idempotent."""
        for informer, handler in self.handlers:
            informer.remove_event_handler(handler)
        self.handlers.clear()


class ControllerBuilder:
    """Declares one controller's sources, then builds it over a reconciler.

    Args:
        name: the controller's name (the ``controller`` label of its metrics, its queue's name).
        workers: concurrent reconciles (``--workers``; ``controller_runtime_max_concurrent_reconciles``).
        pool: a worker pool shared with other controllers (:class:`~zkop.runtime.workerpool.WorkerPool`), whose
            threads reconcile this controller's keys; ``None``: ``workers`` threads of its own.

    Each declaration returns the builder; :meth:`complete` may be called once.
    """

    def __init__(self, name: str, *, workers: int, pool: WorkerPool | None = None) -> None:
        self.name = name
        self.workers = workers
        self.pool = pool
        #: The controller's work queue, made now so that what enqueues keys can be built before the reconciler.
        self.queue: RateLimitingQueue[str] = RateLimitingQueue(name)
        self._sources: list[tuple[Informer, EventHandler | None]] = []
        self._done = False

    def for_(self, informer: Informer, *, update_filter: UpdateFilter | None = None) -> ControllerBuilder:
        """The primary kind: each event enqueues the object's own ``namespace/name`` (``For``).

        Args:
            update_filter: ``(old, new) -> bool``; False drops an update event (a predicate).
        """
        return self.watches(informer, None, update_filter=update_filter)

    def watches(self, informer: Informer, map_func: MapFunc | None, *,
                update_filter: UpdateFilter | None = None) -> ControllerBuilder:
        """Each event of ``informer`` enqueues the keys ``map_func`` maps the object to (``Watches`` with
        ``handler.EnqueueRequestsFromMapFunc``; ``None``: the object's own key).

        Args:
            update_filter: ``(old, new) -> bool``; False drops an update event (a predicate).
        """
        mapper: MapFunc = map_func or (lambda obj: [meta_namespace_key(obj)])
        queue = self.queue

        def enqueue(obj: JSON) -> None:
            for key in mapper(obj):
                queue.add(key)

        self._sources.append((informer, FuncHandler(enqueue, update_filter)))
        return self

    def handles(self, informer: Informer, handler: EventHandler) -> ControllerBuilder:
        """Register ``handler`` on ``informer`` as part of this controller (a component that follows the
        informer's events itself, e.g. the watched roots of the objects); the workers wait for its sync."""
        self._sources.append((informer, handler))
        return self

    def waits_for(self, informer: Informer) -> ControllerBuilder:
        """A cache the reconciler reads whose events enqueue nothing here: the workers start once it synced."""
        self._sources.append((informer, None))
        return self

    def complete(self, reconciler: Reconciler) -> Built:
        """Build the controller over ``reconciler`` and register the declared handlers on their informers, in
        declaration order; nothing is started.

        Raises:
            RuntimeError: called a second time.
        """
        if self._done:
            raise RuntimeError(f"controller {self.name} was already built")
        self._done = True
        controller = Controller(self.name, reconciler, workers=self.workers, queue=self.queue, pool=self.pool)
        built = Built(controller)
        for informer, handler in self._sources:
            if handler is not None:
                informer.add_event_handler(handler)
                built.handlers.append((informer, handler))
            controller.wait_for(informer)
            if informer not in built.informers:
                built.informers.append(informer)
        return built
