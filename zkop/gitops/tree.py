"""Reading a whole znode subtree: data, stat and ACL of every node.

The reads are the adapter's (:meth:`ZooKeeperAdapter.walk` and :meth:`ZooKeeperAdapter.read_many`,
from :mod:`zkop.zookeeper.reads`): level by level, pipelined up to :data:`BATCH` nodes at a time,
so a tree of thousands of znodes costs a few round trips per level rather than three per node;
every request waits at most the session timeout, errors are mapped and requests timed. This
module turns what they read into the GitOps commands' :class:`Tree` of :class:`ZNode`.

The snapshot is not atomic: ZooKeeper has no multi-read, so a node changed
while the walk runs is seen either before or after the change.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from zkop.zookeeper.actions import AclEntry, Observed
from zkop.zookeeper.adapter import NodeNotFound, NodeSnapshot, ZooKeeperAdapter, ZooKeeperError
from zkop.zookeeper.paths import RESERVED_ROOT, is_within
from zkop.zookeeper.reads import BATCH

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

#: ZooKeeper names a sequential node by appending a 10-digit, zero-padded counter
#: (Programmer's Guide, "Sequence Nodes -- Unique Naming").
_SEQUENTIAL = re.compile(r"[0-9]{10}\Z")


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


def walk(zookeeper: ZooKeeperAdapter, root: str, *, skip: Callable[[str], bool] = lambda _: False,
         descend: Callable[[ZNode], bool] = lambda _: True,
         on_node: Callable[[], None] | None = None) -> Tree:
    """Read ``root`` and its subtree: data, stat, ACL and child names of every node.

    Args:
        root: absolute path to start at (``/`` allowed).
        skip: nodes (and their subtrees) not to read at all, e.g. :meth:`PathFilter.excluded`.
        descend: whether to read the children of a node that was read.
        on_node: called once per node read (progress).

    Returns:
        The tree; nodes that vanish during the walk are simply missing.

    Raises:
        NodeNotFound: ``root`` does not exist.
        ZooKeeperNoAuth: ``root`` itself is not readable.
        ZooKeeperUnavailable: connection or session lost, or a request unanswered for the session timeout.
    """
    found: list[ZNode] = []

    def visit(snapshot: NodeSnapshot) -> bool:
        seen = snapshot.observed  # a walk always reads the ACL
        node = ZNode(path=snapshot.path, data=seen.data, version=seen.version, acl_version=seen.acl_version,
                     ephemeral_owner=seen.ephemeral_owner, acl=seen.acl or (), children=snapshot.children)
        found.append(node)
        if on_node is not None:
            on_node()
        return descend(node)

    unreadable = zookeeper.walk(root, visit, skip=skip)
    tree = Tree(root)
    tree.nodes = {n.path: n for n in sorted(found, key=lambda n: path_key(n.path))}
    tree.unreadable = sorted((Unreadable(p, "not readable with the given credentials (NoAuth)") for p in unreadable),
                             key=lambda u: path_key(u.path))
    return tree


def read_nodes(zookeeper: ZooKeeperAdapter, paths: Sequence[str], *,
               on_node: Callable[[], None] | None = None) -> dict[str, Observed | ZooKeeperError | None]:
    """Read data, stat and ACL of many znodes, pipelined (:data:`BATCH` at a time).

    The same reads as ``ZooKeeperAdapter.read(path, expected_acl=None)``, without a
    round trip per node; writes planned from them stay safe because every write is
    conditional on the versions read.

    Returns:
        path → the znode (ACL always set), ``None`` if absent, or the per-node error:
        :class:`~zkop.zookeeper.errors.ZooKeeperNoAuth`, or
        :class:`~zkop.zookeeper.errors.ConcurrentModification` if it changed between the data and the ACL read.

    Raises:
        ZooKeeperUnavailable: connection or session lost, or a request unanswered for the session timeout.
    """
    return zookeeper.read_many(paths, on_node=on_node)
