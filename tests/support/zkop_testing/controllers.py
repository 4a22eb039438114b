"""Test support: run informers and controllers in-process through the same Manager ``zkop run`` uses."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence

from zkop.feature.session import resync_on_new_session
from zkop.runtime.cache import Informer
from zkop.runtime.controller import Controller
from zkop.runtime.manager import Manager, ManagerOptions
from zkop.zookeeper.adapter import ZooKeeperAdapter
from zkop_testing.waiting import EVENTUALLY, wait_for

__all__ = ["running", "running_manager"]


@contextlib.contextmanager
def running_manager(setup: Callable[[Manager], None], *, zookeeper: ZooKeeperAdapter | None = None,
                    on_new_session: Sequence[Callable[[], None]] = (), sync_timeout: float = EVENTUALLY,
                    drain_timeout: float = 2.0) -> Iterator[Manager]:
    """Run a :class:`~zkop.runtime.manager.Manager` (no servers, no leader election) on a thread.

    ``setup(manager)`` adds the runnables (a feature's ``setup``, or informers and controllers).
    With ``zookeeper``, ``on_new_session`` callbacks run when its session comes back after LOST or
    SUSPENDED, exactly as ``zkop run`` wires them (:func:`zkop.feature.session.resync_on_new_session`).
    Yields once the leader runnables started; on exit stops the manager (``drain_timeout``
    seconds for in-flight reconciles) and waits for it.

    Raises:
        AssertionError: the caches did not sync within ``sync_timeout`` seconds, or the manager
            ended early.
    """
    manager = Manager(ManagerOptions(metrics_bind_address="0", health_probe_bind_address="0",
                                     graceful_shutdown_timeout=drain_timeout, cache_sync_poll=0.01))
    setup(manager)
    if zookeeper is not None:
        resync_on_new_session(zookeeper, on_new_session)
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(manager.run()), name="test-manager", daemon=True)
    thread.start()
    try:
        try:
            wait_for(lambda: manager.elected.is_set() or not thread.is_alive(), timeout=sync_timeout,
                     interval=0.01, message="manager started")
        except TimeoutError:
            raise AssertionError(f"not synced: {', '.join(manager.not_synced())}") from None
        assert manager.elected.is_set(), f"manager ended early with exit code {result}"
        yield manager
    finally:
        manager.stop()
        thread.join(drain_timeout + EVENTUALLY)


@contextlib.contextmanager
def running(informers: Sequence[Informer], controllers: Sequence[Controller], *,
            zookeeper: ZooKeeperAdapter | None = None, on_new_session: Sequence[Callable[[], None]] = (),
            sync_timeout: float = EVENTUALLY) -> Iterator[Manager]:
    """Run ``informers`` (every replica) and ``controllers`` (leader) as a builder's parts in ``zkop run``.

    See :func:`running_manager`; stops with a 2 s drain.
    """

    def setup(manager: Manager) -> None:
        for informer in informers:
            manager.add(informer, needs_leader=False)
        for controller in controllers:
            manager.add(controller, needs_leader=True)

    with running_manager(setup, zookeeper=zookeeper, on_new_session=on_new_session,
                         sync_timeout=sync_timeout) as manager:
        yield manager
