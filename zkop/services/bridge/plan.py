"""Pure planning for the service bridge: desired nodes + observed nodes → actions (external-dns's plan step).

* :func:`plan_service` — one Service's containers, records and key-path children: creates what is
  missing, rewrites *our* nodes whose bytes differ, deletes *our* children no longer wanted, never
  touches a foreign node.
* :func:`plan_sweep` — garbage collection under the root: an orphan is ours, outside every desired
  key path and no ancestor of one; deleted deepest first, never recursively. The delete circuit
  breaker counts the Services (owner uids) whose records would go, leaving out those still
  published (being moved); above ``max_deletes`` the sweep deletes nothing.

Each planner's :class:`~zkop.services.policy.Changes` go through the policy (external-dns
``plan/policy.go``): ``sync``, ``upsert-only`` (no deletes) or ``create-only``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field

from zkop.kube.types import JSON
from zkop.runtime.cache.keys import meta_namespace_key
from zkop.services.bridge.formats import DesiredNode, Owner, RecordFormat, format_for
from zkop.services.bridge.naming import winner
from zkop.services.bridge.options import BridgeOptions, Policy
from zkop.services.bridge.records import is_selected
from zkop.services.fullsync import breaker_trips
from zkop.services.policy import Changes, Kind, apply_policy
from zkop.zookeeper.actions import Action, CreateNode, DeleteNode, SetData, describe
from zkop.zookeeper.paths import parent_paths

__all__ = [
    "Collision",
    "DesiredSet",
    "ObservedNode",
    "Protection",
    "ServicePlan",
    "SweepPlan",
    "describe",
    "desired_set",
    "is_protected",
    "plan_service",
    "plan_sweep",
]


@dataclass(frozen=True)
class ObservedNode:
    """A znode as read, with its owner stamp parsed.

    Attributes:
        path: absolute path (as the adapter sees it, i.e. inside any chroot).
        data: the bytes.
        version: ``Stat.version``, for compare-and-set.
        num_children: ``Stat.numChildren``.
        ephemeral: ``Stat.ephemeralOwner != 0``; an ephemeral node is never ours.
        owner: the parsed stamp, ``None`` if the node has none.
    """

    path: str
    data: bytes
    version: int
    num_children: int = 0
    ephemeral: bool = False
    owner: Owner | None = None

    def ours(self, cluster_id: str) -> bool:
        """True if this installation may change or delete the node."""
        return not self.ephemeral and self.owner is not None and self.owner.is_ours(cluster_id)

    @property
    def is_record(self) -> bool:
        """True for a record (stamp with a Service uid), False for containers and unstamped nodes."""
        return self.owner is not None and self.owner.uid is not None


# --- the desired set ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Collision:
    """Two selected Services mapping to one key path; ``loser`` is not published."""

    key_path: str
    winner: str
    loser: str
    loser_uid: str


@dataclass(frozen=True)
class DesiredSet:
    """What the whole cache wants, for garbage collection.

    Attributes:
        keys: key paths of every selected Service (collisions count once).
        live_uids: uids of the Services that are published (collision winners).
        collisions: every loser, with its winner.
    """

    keys: frozenset[str]
    live_uids: frozenset[str]
    collisions: tuple[Collision, ...] = ()


def desired_set(services: Iterable[JSON], options: BridgeOptions, fmt: RecordFormat) -> DesiredSet:
    """Compute the :class:`DesiredSet` of the cached ``services`` (filters and the collision rule applied).

    ``fmt`` is the default format; a Service's format annotation may name another
    (:func:`~zkop.services.bridge.formats.format_for`). A Service has one key path per Dubbo interface.
    """
    by_key: dict[str, list[JSON]] = {}
    for obj in services:
        if not is_selected(obj, options):
            continue
        for key in format_for(obj, fmt).locate(obj, options).keys:
            by_key.setdefault(key, []).append(obj)
    live: set[str] = set()
    collisions: list[Collision] = []
    for key, candidates in sorted(by_key.items()):
        best = winner(candidates)
        assert best is not None
        live.add(str((best.get("metadata") or {}).get("uid") or ""))
        for obj in candidates:
            if obj is not best:
                collisions.append(Collision(key, meta_namespace_key(best), meta_namespace_key(obj),
                                            str((obj.get("metadata") or {}).get("uid") or "")))
    return DesiredSet(frozenset(by_key), frozenset(live), tuple(collisions))


# --- one Service -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServicePlan:
    """The result of :func:`plan_service`.

    Attributes:
        actions: to execute in order (containers, then records, then deletions).
        foreign: desired paths held by foreign nodes, left alone.
        suppressed: changes the policy forbade, described.
        created: record paths this plan creates.
    """

    actions: tuple[Action, ...]
    foreign: tuple[str, ...] = ()
    suppressed: tuple[str, ...] = ()
    created: tuple[str, ...] = field(default=())


def plan_service(
    desired: Sequence[DesiredNode], observed: Mapping[str, ObservedNode], children: Sequence[ObservedNode],
    *, cluster_id: str, policy: Policy,
) -> ServicePlan:
    """Plan one Service's nodes.

    Args:
        desired: containers then records, parents first (:meth:`RecordFormat.nodes`).
        observed: the existing nodes among the desired paths, by path (absent paths are missing).
        children: the existing children of the key path.
        cluster_id: this installation's ``--cluster-id``.
        policy: ``sync`` | ``upsert-only`` | ``create-only``.

    Table (per desired node):

    ===================  ===========================  ==================================
    observed             record                       container
    ===================  ===========================  ==================================
    absent               create                       create
    ours, same bytes     nothing                      nothing
    ours, other bytes    set (CAS) unless create-only set (CAS) unless create-only
    foreign              left alone, reported         left alone (records go inside)
    ephemeral            left alone, reported         left alone, records below skipped
    ===================  ===========================  ==================================

    Children of the key path that are ours and not desired are deleted (``sync`` only).
    """
    planned: list[tuple[Kind, Action]] = []
    foreign: list[str] = []
    created: list[str] = []
    blocked: list[str] = []
    wanted = {node.path for node in desired}
    for node in desired:
        if any(node.path.startswith(b + "/") for b in blocked):
            foreign.append(node.path)
            continue
        current = observed.get(node.path)
        if current is None:
            planned.append(("create", CreateNode(node.path, node.data)))
            if not node.container:
                created.append(node.path)
            continue
        if not current.ours(cluster_id):
            if current.ephemeral:
                blocked.append(node.path)
            if not node.container or current.ephemeral:
                foreign.append(node.path)
            continue
        if current.data == node.data:
            continue
        planned.append(("update", SetData(node.path, node.data, current.version)))
    for child in sorted(children, key=lambda c: c.path):
        if child.path in wanted or not child.ours(cluster_id):
            continue
        if child.num_children:
            continue  # never recursive; the sweep collects what is below first
        planned.append(("delete", DeleteNode(child.path, child.version)))
    kept, dropped = apply_policy(policy, Changes.of(planned))
    suppressed = [f"{verb} {action.path} (policy {policy})" for verb, action in dropped.order]
    return ServicePlan(kept.ordered(), tuple(foreign), tuple(suppressed), tuple(created))


# --- garbage collection ------------------------------------------------------------------------


@dataclass(frozen=True)
class SweepPlan:
    """The result of :func:`plan_sweep`.

    Attributes:
        actions: deletions, deepest first; empty when the breaker is open or the policy forbids.
        orphans: every path that garbage collection wants gone (before breaker and policy).
        counted_uids: the Services (uids) whose records would go, as the breaker counts them.
        breaker_open: more than ``max_deletes`` Services would lose their records; nothing deleted.
        suppressed: the policy forbids deletion; nothing deleted.
        foreign: foreign nodes under the root that hold none of ours below them.
        published: distinct Services (uids) with at least one of our records within a desired key.
    """

    actions: tuple[DeleteNode, ...]
    orphans: tuple[str, ...] = ()
    counted_uids: frozenset[str] = frozenset()
    breaker_open: bool = False
    suppressed: bool = False
    foreign: int = 0
    published: int = 0


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


class Protection:
    """:func:`is_protected` for many paths against one desired set: the set and its keys' ancestors are
    indexed once, so each question costs O(depth of the path), not O(number of desired keys).

    Args:
        desired_keys: key paths of all selected Services.
    """

    def __init__(self, desired_keys: Set[str]) -> None:
        self.keys = frozenset(desired_keys)
        self.ancestors = frozenset(a for key in self.keys for a in parent_paths(key))
        self._any_absolute = any(key.startswith("/") for key in self.keys)

    def covers(self, path: str) -> bool:
        """Same answer as ``is_protected(path, desired_keys)`` (for normalized key paths, as
        :meth:`RecordFormat.locate` makes them)."""
        if path in self.keys or any(p in self.keys for p in parent_paths(path)):
            return True
        stem = path.rstrip("/")
        return self._any_absolute if not stem else stem in self.ancestors


def is_protected(path: str, desired_keys: Set[str]) -> bool:
    """True if garbage collection must keep ``path``: it is a desired key, lies below one, or is an ancestor of one."""
    if path in desired_keys or any(p in desired_keys for p in parent_paths(path)):
        return True
    prefix = path.rstrip("/") + "/"
    return any(key.startswith(prefix) for key in desired_keys)


def plan_sweep(
    scan: Sequence[ObservedNode], *, desired_keys: Set[str], cluster_id: str, policy: Policy,
    max_deletes: int, live_uids: Set[str] = frozenset(),
) -> SweepPlan:
    """Plan garbage collection over every node found under the root.

    Args:
        scan: the nodes under the root (the root itself excluded), any order.
        desired_keys: key paths of all selected Services (from a *synced* cache).
        cluster_id: this installation's ``--cluster-id``; only its nodes are candidates.
        policy: anything but ``sync`` deletes nothing.
        max_deletes: the circuit breaker's limit on Services per sweep; ``0`` disables it.
        live_uids: uids of published Services; their leftovers do not count for the breaker.

    A node is protected (never an orphan) when its path is a desired key, lies below one, or
    is an ancestor of one.
    """
    ancestors: set[str] = set()
    for key in desired_keys:
        ancestors.update(parent_paths(key))

    def protected(path: str) -> bool:
        return path in ancestors or path in desired_keys or any(p in desired_keys for p in parent_paths(path))

    children: dict[str, list[ObservedNode]] = {}
    for node in scan:
        children.setdefault(_parent(node.path), []).append(node)
    deleted: set[str] = set()
    actions: list[DeleteNode] = []
    uids: set[str] = set()
    for node in sorted(scan, key=lambda n: (-n.path.count("/"), n.path)):
        if not node.ours(cluster_id) or protected(node.path):
            continue
        below = children.get(node.path, [])
        if node.num_children != len(below) or any(c.path not in deleted for c in below):
            continue  # holds something we do not delete (or did not scan)
        deleted.add(node.path)
        actions.append(DeleteNode(node.path, node.version))
        if node.is_record and node.owner is not None and node.owner.uid not in live_uids:
            uids.add(str(node.owner.uid))
    owned_ancestors: set[str] = set()
    published: set[str] = set()
    for node in scan:
        if node.ours(cluster_id):
            owned_ancestors.update(parent_paths(node.path))
            if node.is_record and protected(node.path) and node.owner is not None:
                published.add(str(node.owner.uid))
    foreign = sum(1 for n in scan if not n.ours(cluster_id) and n.path not in owned_ancestors)
    orphans = tuple(a.path for a in actions)
    breaker = breaker_trips(len(uids), max_deletes)
    kept, dropped = apply_policy(policy, Changes.of(("delete", a) for a in actions))
    final = () if breaker else kept.deletes
    return SweepPlan(final, orphans, frozenset(uids), breaker, bool(dropped.deletes), foreign, len(published))
