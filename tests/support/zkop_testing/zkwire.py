"""ZooKeeper's wire format, as much as :meth:`zkop_testing.tcpproxy.TcpProxy.cut_after` needs to pick a write.

Every frame after a connection's first (``ConnectRequest`` from the client, ``ConnectResponse``
from the server) starts with a header: a request's ``RequestHeader`` is ``xid`` and ``type``
(int32 each, ``zookeeper.jute``), a reply's ``ReplyHeader`` is ``xid`` (int32), ``zxid`` (int64)
and ``err`` (int32). A reply carries its request's ``xid``; watch notifications use ``-1``, pings
``-2``. Operation codes are ``ZooDefs.OpCode``.
"""

from __future__ import annotations

import struct

__all__ = ["WRITE_OPS", "reply_error", "reply_to", "write_request"]

#: ``ZooDefs.OpCode`` of the requests that change the tree: create, delete, setData, setACL, multi,
#: create2, createContainer, deleteContainer, createTTL.
WRITE_OPS = frozenset({1, 2, 5, 7, 14, 15, 19, 20, 21})


def write_request(index: int, payload: bytes) -> int | None:
    """The ``xid`` of a client frame that is a write request (:data:`WRITE_OPS`), else ``None``.

    ``index`` 0 is the connection's ``ConnectRequest``, which has no header.
    """
    if index == 0 or len(payload) < 8:
        return None
    xid, op = struct.unpack(">ii", payload[:8])
    return xid if op in WRITE_OPS else None


def reply_to(index: int, payload: bytes, xid: object) -> bool:
    """True if the server frame is the reply to the request ``xid`` (index 0 is the ``ConnectResponse``)."""
    return index > 0 and len(payload) >= 4 and struct.unpack(">i", payload[:4])[0] == xid


def reply_error(payload: bytes) -> int:
    """The ``err`` of a reply frame's ``ReplyHeader``: 0 when the server carried the request out."""
    return int(struct.unpack(">i", payload[12:16])[0])
