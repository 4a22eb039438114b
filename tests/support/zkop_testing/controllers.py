"""Test support: run informers and controllers in-process the way the manager does."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

from zkop.runtime.controller import Controller
from zkop.runtime.informer import Informer

__all__ = ["running"]


@contextlib.contextmanager
def running(informers: Sequence[Informer], controllers: Sequence[Controller], *,
            sync_timeout: float = 10.0) -> Iterator[None]:
    """Start ``informers``, wait for their first LIST (``sync_timeout`` seconds each), start ``controllers``;
    on exit stop the controllers (2 s drain), then the informers.

    Raises:
        AssertionError: an informer did not sync in time.
    """
    for informer in informers:
        informer.start()
    try:
        for informer in informers:
            assert informer.wait_for_sync(sync_timeout), f"{informer.name} did not sync"
        for controller in controllers:
            controller.start()
        yield
    finally:
        for controller in controllers:
            controller.stop(2.0)
        for informer in informers:
            informer.stop(1.0)
