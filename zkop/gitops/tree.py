"""Reading a whole znode subtree: data, stat and ACL of every node.

This is a read-only addition on top of the adapter's kazoo session
(``ZooKeeperAdapter.client``); writes still go through the adapter only. The
walk goes level by level and pipelines its requests (kazoo's ``*_async``
calls, up to :data:`BATCH` nodes at a time), so a tree of thousands of znodes
costs a few round trips per level rather than three per node.

The snapshot is not atomic: ZooKeeper has no multi-read, so a node changed
while the walk runs is seen either before or after the change.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    ConnectionLoss,
    NoAuthError,
    NoNodeError,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError

from zkop.zookeeper.actions import AclEntry, Observed
from zkop.zookeeper.adapter import (
    ConcurrentModification,
    ZooKeeperError,
    ZooKeeperNoAuth,
    ZooKeeperUnavailable,
    from_kazoo_acl,
)
from zkop.zookeeper.paths import RESERVED_ROOT, is_within

__all__ = [
    "BATCH",
    "NodeNotFound",
    "PathFilter",
    "Tree",
    "Unreadable",
    "ZNode",
    "child_path",
    "is_sequential_name",
    "path_key",
    "read_nodes",
    "walk",
]

#: Nodes whose requests are in flight together.
BATCH = 256
#: ZooKeeper names a sequential node by appending a 10-digit, zero-padded counter
#: (Programmer's Guide, "Sequence Nodes -- Unique Naming").
_SEQUENTIAL = re.compile(r"[0-9]{10}\Z")
_UNAVAILABLE = (ConnectionLoss, SessionExpiredError, OperationTimeoutError, KazooTimeoutError)


class NodeNotFound(ZooKeeperError):
    """The root of a walk does not exist."""


@dataclass(frozen=True)
class ZNode:
    """A znode as read by :func:`walk`.

    Attributes:
        path: absolute path (relative to the connect string's chroot).
        data: the bytes.
        version, acl_version: ``Stat.version`` and ``Stat.aversion``.
        ephemeral_owner: ``Stat.ephemeralOwner``; non-zero for ephemeral nodes.
        acl: the ACL, sorted.
        children: child names, sorted (all of them, walked or not).
    """

    path: str
    data: bytes
    version: int
    acl_version: int
    ephemeral_owner: int
    acl: tuple[AclEntry, ...]
    children: tuple[str, ...]

    @property
    def name(self) -> str:
        """The last path segment (``""`` for the root)."""
        return self.path.rsplit("/", 1)[-1]

    def observed(self) -> Observed:
        """The node as the planning functions take it."""
        return Observed(data=self.data, version=self.version, num_children=len(self.children),
                        ephemeral_owner=self.ephemeral_owner, acl_version=self.acl_version, acl=self.acl)


@dataclass(frozen=True)
class Unreadable:
    """A node the walk could not read (``NoAuth``); its subtree is unknown."""

    path: str
    reason: str


@dataclass
class Tree:
    """The result of :func:`walk`.

    Attributes:
        root: the path walked.
        nodes: path → node, sorted by :func:`path_key` (parents before children).
        unreadable: nodes that could not be read.
    """

    root: str
    nodes: dict[str, ZNode] = field(default_factory=dict)
    unreadable: list[Unreadable] = field(default_factory=list)

    def children(self, node: ZNode) -> list[ZNode]:
        """The walked children of ``node`` (excluded or unreadable ones are missing)."""
        return [self.nodes[p] for p in (child_path(node.path, c) for c in node.children) if p in self.nodes]


def path_key(path: str) -> tuple[str, ...]:
    """Sort key: segment-wise, so ``/a`` < ``/a/b`` < ``/a-b`` (parents first)."""
    return tuple(path.strip("/").split("/")) if path != "/" else ()


def child_path(parent: str, name: str) -> str:
    """``/a`` + ``b`` → ``/a/b``; ``/`` + ``b`` → ``/b``."""
    return f"{parent.rstrip('/')}/{name}"


def is_sequential_name(name: str) -> bool:
    """True if ``name`` ends like a sequential node's (10 digits, e.g. ``lock-0000000012``)."""
    return _SEQUENTIAL.search(name) is not None


class PathFilter:
    """Which subtrees a command leaves alone: reserved roots and ``--exclude`` globs.

    A glob containing ``/`` is matched against the whole absolute path; one without
    ``/`` against the node's name (as in ``.gitignore``). Matching is
    :func:`fnmatch.fnmatchcase` (``*`` also matches ``/``). An excluded node's
    whole subtree is excluded.

    Args:
        globs: ``--exclude`` patterns.
        reserved: roots always excluded (``/zookeeper``, zkop's ownership registry).
    """

    def __init__(self, globs: Sequence[str] = (), reserved: Iterable[str] = (RESERVED_ROOT,)) -> None:
        self.globs = tuple(globs)
        self.reserved = tuple(reserved)

    def reserved_path(self, path: str) -> bool:
        """True if ``path`` is a reserved root or below one."""
        return any(is_within(path, root) for root in self.reserved)

    def excluded(self, path: str) -> bool:
        """True if ``path`` itself is reserved or matches a glob (ancestors are not checked)."""
        if path == "/":
            return False
        if self.reserved_path(path):
            return True
        name = path.rsplit("/", 1)[-1]
        return any(fnmatchcase(path if "/" in glob else name, glob) for glob in self.globs)


def _wait(result: Any, path: str, what: str) -> Any:
    try:
        return result.get()
    except _UNAVAILABLE as err:
        raise ZooKeeperUnavailable(f"ZooKeeper {what} {path} failed: {type(err).__name__}") from err


def walk(client: KazooClient, root: str, *, skip: Callable[[str], bool] = lambda _: False,
         descend: Callable[[ZNode], bool] = lambda _: True,
         on_node: Callable[[], None] | None = None) -> Tree:
    """Read ``root`` and its subtree: data, stat, ACL and child names of every node.

    Args:
        client: a started kazoo client (``ZooKeeperAdapter.client``).
        root: absolute path to start at (``/`` allowed).
        skip: nodes (and their subtrees) not to read at all, e.g. :meth:`PathFilter.excluded`.
        descend: whether to read the children of a node that was read.
        on_node: called once per node read (progress).

    Returns:
        The tree; nodes that vanish during the walk are simply missing.

    Raises:
        NodeNotFound: ``root`` does not exist.
        ZooKeeperNoAuth: ``root`` itself is not readable.
        ZooKeeperUnavailable: connection or session lost.
    """
    tree = Tree(root)
    level = [root]
    found: list[ZNode] = []
    while level:
        upcoming: list[str] = []
        for start in range(0, len(level), BATCH):
            chunk = level[start : start + BATCH]
            pending = [(p, client.get_async(p), client.get_acls_async(p), client.get_children_async(p))
                       for p in chunk]
            for path, data_result, acl_result, children_result in pending:
                try:
                    data, stat = _wait(data_result, path, "get")
                    acls, _ = _wait(acl_result, path, "get_acls")
                    children = _wait(children_result, path, "get_children")
                except NoNodeError:
                    if path == root:
                        raise NodeNotFound(f"znode {root} does not exist") from None
                    continue
                except NoAuthError:
                    if path == root:
                        raise ZooKeeperNoAuth(f"ZooKeeper refused to read {root}: not authorised (NoAuth)") from None
                    tree.unreadable.append(Unreadable(path, "not readable with the given credentials (NoAuth)"))
                    continue
                node = ZNode(path=path, data=data or b"", version=stat.version, acl_version=stat.aversion,
                             ephemeral_owner=stat.ephemeralOwner, acl=from_kazoo_acl(acls),
                             children=tuple(sorted(children)))
                found.append(node)
                if on_node is not None:
                    on_node()
                if descend(node):
                    upcoming.extend(p for p in (child_path(path, c) for c in node.children) if not skip(p))
        level = upcoming
    tree.nodes = {n.path: n for n in sorted(found, key=lambda n: path_key(n.path))}
    tree.unreadable.sort(key=lambda u: path_key(u.path))
    return tree


def read_nodes(client: KazooClient, paths: Sequence[str], *,
               on_node: Callable[[], None] | None = None) -> dict[str, Observed | ZooKeeperError | None]:
    """Read data, stat and ACL of many znodes, pipelined (:data:`BATCH` at a time).

    The same reads as ``ZooKeeperAdapter.read(path, expected_acl=None)``, without a
    round trip per node; writes planned from them stay safe because every write is
    conditional on the versions read.

    Returns:
        path → the znode (ACL always set), ``None`` if absent, or the per-node error:
        :class:`ZooKeeperNoAuth`, or :class:`ConcurrentModification` if it changed
        between the data and the ACL read.

    Raises:
        ZooKeeperUnavailable: connection or session lost.
    """
    result: dict[str, Observed | ZooKeeperError | None] = {}
    for start in range(0, len(paths), BATCH):
        chunk = paths[start : start + BATCH]
        pending = [(p, client.get_async(p), client.get_acls_async(p)) for p in chunk]
        for path, data_result, acl_result in pending:
            try:
                data, stat = _wait(data_result, path, "get")
                acls, acl_stat = _wait(acl_result, path, "get_acls")
            except NoNodeError:
                result[path] = None
            except NoAuthError:
                result[path] = ZooKeeperNoAuth(f"ZooKeeper refused get on {path}: not authorised (NoAuth)")
            else:
                if acl_stat.version != stat.version or acl_stat.aversion != stat.aversion:
                    result[path] = ConcurrentModification(f"znode {path} changed while being read")
                else:
                    result[path] = Observed(data=data or b"", version=stat.version, num_children=stat.numChildren,
                                            ephemeral_owner=stat.ephemeralOwner, acl_version=stat.aversion,
                                            acl=from_kazoo_acl(acls))
            if on_node is not None:
                on_node()
    return result
