"""Reads of many znodes at once, pipelined and uncached: the ACL check, the tree walk and ``read_many``.

ZooKeeper answers one session's requests in the order they were sent (Programmer's Guide,
"ZooKeeper guarantees": sequential consistency), so :class:`BulkReads` keeps :data:`BATCH`
nodes' requests in flight together: a tree of thousands of znodes costs a few round trips per
level rather than a few per node. These reads go to the server every time (they serve the
periodic ACL check and the GitOps tree reads of :mod:`zkop.gitops.tree`, which must see what is
there, not what a watch last saw); each waits at most the session timeout inside
:meth:`~zkop.zookeeper.session.Session.mapped`. They are not atomic: ZooKeeper has no
multi-read, so a node changed while they run is seen either before or after the change.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import NoNodeError

from zkop.zookeeper.actions import AclEntry, Observed
from zkop.zookeeper.errors import ConcurrentModification, NodeNotFound, ZooKeeperError, ZooKeeperNoAuth
from zkop.zookeeper.frozen import fast_init
from zkop.zookeeper.reads import BATCH, from_kazoo_acl, join_path, to_observed
from zkop.zookeeper.session import Session

__all__ = ["AclRead", "BulkReads", "NodeSnapshot"]


@fast_init
@dataclass(frozen=True)
class AclRead:
    """A node's ACL as ``getACL`` returned it (digests redacted to ``user:x`` without ADMIN) and ``Stat.aversion``."""

    acl: tuple[AclEntry, ...]
    acl_version: int



@fast_init
@dataclass(frozen=True)
class NodeSnapshot:
    """A node read by :meth:`BulkReads.walk`: its :class:`Observed` (ACL always read) and child names, sorted."""

    path: str
    observed: Observed
    children: tuple[str, ...]


class BulkReads:
    """Pipelined reads of many znodes over one :class:`Session`; nothing cached, nothing watched."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def _pipelined(self, paths: Sequence[str], *, children: bool) -> Iterator[tuple[str, list[Any]]]:
        """Per path, in order: the answers to ``get``, ``get_acls`` (and ``get_children``).

        Requests are sent :data:`BATCH` paths at a time; each answer is the value, or the
        ``NoNodeError`` or :class:`ZooKeeperNoAuth` the request met.

        Raises:
            ZooKeeperUnavailable: connection or session lost, or a request unanswered for the session timeout.
        """
        session, client = self.session, self.session.client
        width = 3 if children else 2
        for start in range(0, len(paths), BATCH):
            chunk = paths[start : start + BATCH]
            issued: list[tuple[str, str, float, Any]] = []
            for path in chunk:
                now = time.monotonic()
                issued += [("get", path, now, client.get_async(path)),
                           ("get_acls", path, now, client.get_acls_async(path))]
                if children:
                    issued.append(("get_children", path, now, client.get_children_async(path)))
            answers: list[Any] = []
            for operation, path, started, request in issued:
                try:
                    with session.mapped(operation, path, started=started):
                        answers.append(session.wait(request))
                except (NoNodeError, ZooKeeperNoAuth) as err:
                    answers.append(err)
            for index, path in enumerate(chunk):
                yield path, answers[width * index : width * (index + 1)]

    def read_acls(self, paths: Sequence[str]) -> dict[str, AclRead | ZooKeeperNoAuth | None]:
        """``getACL`` of many znodes, pipelined (:data:`BATCH` in flight): one request per node, no data.

        ZooKeeper fires no watch on ``setACL`` (Programmer's Guide, "ZooKeeper Watches": only
        getData, exists and getChildren set watches), so a periodic check of this kind is the
        only way to notice a hand ``setAcl``. ``getACL`` needs READ or ADMIN on the node.

        Returns:
            path → the ACL and its version, ``None`` if the node is absent, or the ``NoAuth`` met.

        Raises:
            ZooKeeperUnavailable: not connected, or a request unanswered for the session timeout.
        """
        session, client = self.session, self.session.client
        result: dict[str, AclRead | ZooKeeperNoAuth | None] = {}
        for start in range(0, len(paths), BATCH):
            session.require_connected("read")
            issued = [(path, time.monotonic(), client.get_acls_async(path)) for path in paths[start : start + BATCH]]
            for path, started, request in issued:
                try:
                    with session.mapped("get_acls", path, started=started):
                        acl, stat = session.wait(request)
                    result[path] = AclRead(from_kazoo_acl(acl), int(stat.aversion))
                except NoNodeError:
                    result[path] = None
                except ZooKeeperNoAuth as err:
                    result[path] = err
        return result

    def walk(self, root: str, visit: Callable[[NodeSnapshot], bool], *,
             skip: Callable[[str], bool] = lambda _: False) -> list[str]:
        """Read ``root`` and its subtree level by level: data, stat, ACL and child names of every node.

        Requests are pipelined, :data:`BATCH` nodes at a time (three requests each), so a tree
        of thousands of znodes costs a few round trips per level rather than three per node.
        Requests sent while the connection is down are queued by kazoo and sent when it is
        back; none waits longer than the session timeout.

        Args:
            root: absolute path to start at (``/`` allowed).
            visit: called with every node read, parents before children; returns whether to
                read its children.
            skip: nodes (and their subtrees) not to read at all.

        Returns:
            The paths that could not be read (``NoAuth``; their subtrees are unknown), in read
            order. Nodes that vanish during the walk are simply not visited.

        Raises:
            NodeNotFound: ``root`` does not exist.
            ZooKeeperNoAuth: ``root`` itself is not readable.
            ZooKeeperUnavailable: connection or session lost, or a request unanswered for the session timeout.
        """
        unreadable: list[str] = []
        level = [root]
        while level:
            upcoming: list[str] = []
            for path, answers in self._pipelined(level, children=True):
                failed = next((a for a in answers if isinstance(a, Exception)), None)
                if isinstance(failed, NoNodeError):
                    if path == root:
                        raise NodeNotFound(f"znode {root} does not exist")
                    continue
                if failed is not None:
                    if path == root:
                        raise ZooKeeperNoAuth(f"ZooKeeper refused to read {root}: not authorised (NoAuth)")
                    unreadable.append(path)
                    continue
                (data, stat), (acls, _), children = answers
                names = tuple(sorted(children))
                if visit(NodeSnapshot(path, to_observed(data, stat, from_kazoo_acl(acls)), names)):
                    upcoming.extend(p for p in (join_path(path, c) for c in names) if not skip(p))
            level = upcoming
        return unreadable

    def read_many(self, paths: Sequence[str], *,
                  on_node: Callable[[], None] | None = None) -> dict[str, Observed | ZooKeeperError | None]:
        """Read data, stat and ACL of many znodes, pipelined (:data:`BATCH` at a time).

        The same reads as ``read(path, expected_acl=None)``, without a round trip per node.

        Returns:
            path → the znode (ACL always set), ``None`` if absent, or the per-node error:
            :class:`ZooKeeperNoAuth`, or :class:`ConcurrentModification` if it changed
            between the data and the ACL read. ``on_node()`` is called once per path.

        Raises:
            ZooKeeperUnavailable: connection or session lost, or a request unanswered for the session timeout.
        """
        result: dict[str, Observed | ZooKeeperError | None] = {}
        for path, answers in self._pipelined(paths, children=False):
            failed = next((a for a in answers if isinstance(a, Exception)), None)
            if isinstance(failed, NoNodeError):
                result[path] = None
            elif failed is not None:
                result[path] = ZooKeeperNoAuth(f"ZooKeeper refused get on {path}: not authorised (NoAuth)")
            else:
                (data, stat), (acl, acl_stat) = answers
                if acl_stat.version != stat.version or acl_stat.aversion != stat.aversion:
                    result[path] = ConcurrentModification(f"znode {path} changed while being read")
                else:
                    result[path] = to_observed(data, stat, from_kazoo_acl(acl))
            if on_node is not None:
                on_node()
        return result
