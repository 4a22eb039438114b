"""zkop's ZooKeeper errors, and the one mapping from kazoo's exceptions to them.

Callers above this package see four outcomes of a ZooKeeper request besides success:

* :class:`ZooKeeperUnavailable` — no usable session: the connection was lost, the session
  expired, the request timed out (kazoo's ``ConnectionLoss``, ``SessionExpiredError``,
  ``OperationTimeoutError``, ``KazooTimeoutError``); retry later;
* :class:`ZooKeeperNoAuth` — the server refused for lack of permission (``NoAuth``) or
  rejected the credentials (``AuthFailed``);
* :class:`ConcurrentModification` — the znode changed between read and write (``BadVersion``,
  ``NodeExists``, ``NotEmpty``, or a ``NoNode`` where the node was just seen); read and plan again;
* :class:`NodeNotFound` — a walk's root does not exist.

:class:`WriteRefused` is not a ZooKeeper outcome but a bug caught: a write attempted through an
adapter that refuses writes (``--dry-run``); not a :class:`ZooKeeperError`, so no caller handles
it quietly as a conflict or an outage.

Codes follow ``org.apache.zookeeper.KeeperException.Code`` (ZooKeeper 3.8) as kazoo names them.
"""

from __future__ import annotations

from kazoo.exceptions import (
    AuthFailedError,
    BadVersionError,
    ConnectionLoss,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError

__all__ = [
    "CONFLICTS",
    "UNAVAILABLE",
    "ConcurrentModification",
    "NodeNotFound",
    "WriteRefused",
    "ZooKeeperError",
    "ZooKeeperNoAuth",
    "ZooKeeperUnavailable",
    "map_kazoo_error",
]


class ZooKeeperError(Exception):
    """Base of the ZooKeeper layer's errors."""


class ZooKeeperUnavailable(ZooKeeperError):
    """No usable session: connection lost, session expired, request timed out, or chroot missing."""


class ZooKeeperNoAuth(ZooKeeperError):
    """The server refused the operation for lack of permission (``NoAuth``) or the auth data was rejected."""


class ConcurrentModification(ZooKeeperError):
    """The znode changed between read and write (``BadVersion``, ``NodeExists``, ``NotEmpty``); re-plan."""


class NodeNotFound(ZooKeeperError):
    """The root of a walk does not exist."""


class WriteRefused(RuntimeError):
    """A write reached an adapter that refuses writes (dry run); nothing was sent to ZooKeeper."""


#: kazoo's exceptions meaning "no usable session right now" (``ConnectionClosedError`` is a
#: ``SessionExpiredError``).
UNAVAILABLE: tuple[type[Exception], ...] = (ConnectionLoss, SessionExpiredError, OperationTimeoutError,
                                            KazooTimeoutError)
#: kazoo's exceptions a conditional request is expected to meet; the caller decides what they mean.
CONFLICTS: tuple[type[Exception], ...] = (NoNodeError, NodeExistsError, BadVersionError, NotEmptyError)


def map_kazoo_error(err: BaseException, operation: str, path: str) -> ZooKeeperError | None:
    """The zkop error for kazoo's ``err`` raised by ``operation`` (``get``, ``set``, …) on ``path``.

    Returns:
        :class:`ZooKeeperUnavailable` for :data:`UNAVAILABLE`, :class:`ZooKeeperNoAuth` for
        ``NoAuthError`` and ``AuthFailedError``; ``None`` for anything else — the
        :data:`CONFLICTS`, whose meaning depends on the request, and any other kazoo error,
        which the caller re-raises as it is.
    """
    if isinstance(err, UNAVAILABLE):
        return ZooKeeperUnavailable(f"ZooKeeper {operation} {path} failed: {type(err).__name__}")
    if isinstance(err, NoAuthError):
        return ZooKeeperNoAuth(f"ZooKeeper refused {operation} on {path}: not authorised (NoAuth)")
    if isinstance(err, AuthFailedError):
        return ZooKeeperNoAuth(f"ZooKeeper rejected the credentials: {err!r}")
    return None
