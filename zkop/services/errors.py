"""How the service reconcilers turn ZooKeeper errors into controller outcomes — in this one place.

Both directions map every :class:`~zkop.zookeeper.errors.ZooKeeperError` (session unavailable,
NoAuth, a conflict that persisted) to :class:`~zkop.runtime.controller.RetryableError`: the
controller requeues the key with backoff and logs it without a traceback. kazoo's own exceptions
never reach the services: the ZooKeeper layer maps them once (``zkop.zookeeper.errors.map_kazoo_error``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from zkop.runtime.controller import RetryableError
from zkop.zookeeper.errors import ZooKeeperError

__all__ = ["retry_on_zookeeper_errors"]


@contextmanager
def retry_on_zookeeper_errors(key: str) -> Iterator[None]:
    """Run the body; a :class:`ZooKeeperError` leaves it as ``RetryableError("<key>: <error>")``.

    Raises:
        RetryableError: chained to the ZooKeeper error.
    """
    try:
        yield
    except ZooKeeperError as err:
        raise RetryableError(f"{key}: {err}") from err
