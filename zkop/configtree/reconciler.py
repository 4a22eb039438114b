"""Reconcile one ZooKeeperConfigTree: pre-check, gather, decide once (:mod:`zkop.configtree.decide`), apply.

1. the object from the informer cache; the spec parsed and its sources expanded from the ConfigMap/Secret caches;
   its ensemble's side (:class:`TreeSide`: the flags' ensemble, or the running ZooKeeperEnsemble ``spec.ensembleRef``
   names, with that ensemble's adapter, admission gate and ownership registry); an invalid spec, an ensemble that
   does not run (``EnsembleNotFound``/``EnsembleNotUsable``) or a root the admission gate refuses for reading reads
   nothing;
2. each child passes the gate (write) before anything is read or written for it; the admitted paths are declared
   in the ensemble's :class:`~zkop.ownership.declared.DeclaredPaths` and the oldest declarer of each, of either kind,
   is looked up;
3. gather, pipelined and answered from the watch-validated cache while the tree's persistent recursive watch holds:
   every kept child's ownership record and znode, the listing of the subtree (remembered until a child watch
   fires) and, for each znode no child declares, its record and znode;
4. :func:`~zkop.configtree.decide.decide`, then apply through the writer: the finalizer, each batch in one
   ``multi`` (one for the whole generation where it fits), the ACLs; a concurrent change gathers and decides again
   (:func:`~zkop.zookeeper.replan.with_replans`);
5. status only when it changes; one Event per pass that changed something, one Warning when the problems change.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from zkop.configtree.decide import (
    MAX_PROBLEMS_IN_STATUS,
    ChildFacts,
    ExistingFacts,
    Plan,
    Problem,
    TreeFacts,
    decide,
    decide_delete,
)
from zkop.configtree.options import DEFAULT_MAX_ZNODES
from zkop.configtree.spec import FINALIZER, KIND, Child, InvalidSpec, RefNotFound, SourceRef, expand, parse_spec
from zkop.configtree.writer import DRY_RUN_REASON, ApiWriter
from zkop.feature.ensemble_lookup import EnsembleLookup, EnsembleMissing, ensembles_off
from zkop.feature.ensemble_ref import DEFAULT_ENSEMBLE
from zkop.feature.gate import Gate
from zkop.feature.session import resync_on_new_session
from zkop.kube.client import JSON
from zkop.kube.events import now_rfc3339
from zkop.ownership.declared import DeclaredPaths, Declarer, EnsembleDeclarations
from zkop.ownership.oldest import creation_seconds
from zkop.ownership.registry import OwnershipRegistry, OwnerStamp
from zkop.runtime.cache import Indexer, meta_namespace_key
from zkop.runtime.conditions import condition
from zkop.runtime.controller import Result
from zkop.runtime.retry import RetryBoundary
from zkop.zookeeper.adapter import Listing, Observed, PendingRead, ZooKeeperAdapter, ZooKeeperError, ZooKeeperNoAuth
from zkop.zookeeper.listings import WatchedListings
from zkop.zookeeper.replan import with_replans

__all__ = ["DEFAULT_MAX_ZNODES", "ENSEMBLE_INDEX", "ENSEMBLE_STARTING_RECHECK", "TreeDeclarations", "TreeReconciler",
           "TreeSide", "desired_status"]

log = logging.getLogger(__name__)

#: The watch owner of every tree's root (:meth:`ZooKeeperAdapter.watch_subtrees`).
WATCH_OWNER = "zookeeper-config-tree"
#: Informer index: the ZooKeeperEnsemble a tree names (``""``: the flags' ensemble).
ENSEMBLE_INDEX = "ensemble"
#: Seconds before a tree whose ZooKeeperEnsemble is starting is looked at again (its runtime also enqueues it).
ENSEMBLE_STARTING_RECHECK = 5.0
#: Children whose reads (record and znode) are in flight at once: a window, not the whole tree, so a cold sync of
#: 10,000 children does not hold 20,000 pending requests and their answers at the same time (its memory peak).
READ_WINDOW = 512


class TreeDeclarations:
    """The admitted child paths each tree declares: this kind's source for :class:`DeclaredPaths` (thread-safe)."""

    def __init__(self, declared: DeclaredPaths) -> None:
        self.declared = declared
        self._lock = threading.Lock()
        self._by_path: dict[str, dict[str, Declarer]] = {}
        self._by_key: dict[str, frozenset[str]] = {}
        declared.add_source(self.declarers)

    def declarers(self, path: str) -> list[Declarer]:
        """The trees declaring ``path``."""
        with self._lock:
            return list((self._by_path.get(path) or {}).values())

    def declare(self, declarer: Declarer, paths: frozenset[str]) -> None:
        """Tree ``declarer`` now declares exactly ``paths``; the paths that changed are reported to
        :meth:`DeclaredPaths.changed` (the other kinds' objects declaring them are reconciled again)."""
        with self._lock:
            old = self._by_key.get(declarer.key, frozenset())
            if old == paths:
                return
            for path in old - paths:
                holders = self._by_path.get(path)
                if holders is not None:
                    holders.pop(declarer.key, None)
                    if not holders:
                        del self._by_path[path]
            for path in paths:
                self._by_path.setdefault(path, {})[declarer.key] = declarer
            if paths:
                self._by_key[declarer.key] = paths
            else:
                self._by_key.pop(declarer.key, None)
        self.declared.changed(old ^ paths)

    def forget(self, key: str) -> None:
        """Tree ``key`` declares nothing any more."""
        self.declare(Declarer(math.inf, KIND, key), frozenset())


def _digest(children: list[Child]) -> str:
    """A digest of the declared paths and bytes: unchanged while the spec and its sources are (drift detection)."""
    h = hashlib.sha256()
    for child in children:
        h.update(child.path.encode() + b"\0" + child.data + b"\0")
    return h.hexdigest()[:32]


def _names(paths: tuple[str, ...] | list[str], limit: int = 3) -> str:
    shown = ", ".join(paths[:limit])
    return f"{shown} and {len(paths) - limit} more" if len(paths) > limit else shown


def desired_status(old: JSON, generation: int, *, ready: bool, reason: str, message: str, stalled: bool,
                   now: str, counts: Mapping[str, Any] | None = None,
                   problems: list[Problem] | None = None, transactions: int | None = None) -> JSON:
    """The tree's status: counts, the first problems, ``Ready`` (and ``Stalled`` when retrying cannot help,
    ``Atomic=False`` when the last change did not fit in one ``multi``)."""
    conditions = old.get("conditions") or []
    new: JSON = {"observedGeneration": generation, **(counts or {}),
                 "problems": [{"path": p.path, "reason": p.reason, "message": p.message}
                              for p in (problems or [])[:MAX_PROBLEMS_IN_STATUS]],
                 "conditions": [condition(conditions, "Ready", "True" if ready else "False", reason, message,
                                          generation, now)]}
    if stalled:
        new["conditions"].append(condition(conditions, "Stalled", "True", reason, message, generation, now))
    if transactions is not None:
        new["transactions"] = transactions
        if transactions > 1:
            new["conditions"].append(condition(
                conditions, "Atomic", "False", "SplitTransactions",
                f"the last change did not fit in one ZooKeeper request: written in {transactions} multi requests, "
                "creates and updates by path first, then deletions deepest first", generation, now))
    return new


def _same(old: JSON, new: JSON) -> bool:
    """Whether ``new`` says what ``old`` says (conditions compared without their transition times)."""
    def strip(status: JSON) -> JSON:
        return {**status, "conditions": [{k: v for k, v in c.items() if k != "lastTransitionTime"}
                                          for c in status.get("conditions") or [] if isinstance(c, dict)]}
    keys = set(new) | {"transactions"}
    return strip({k: old.get(k) for k in keys if k in old}) == strip({k: new.get(k) for k in keys if k in new})


class LimitExceeded(Exception):
    """More znodes below a tree's root than one tree may have zkop list."""


@dataclass
class _Listings:
    """Children of the znodes below the roots, remembered until their child watch fires (then re-listed)."""

    zookeeper: ZooKeeperAdapter
    on_change: Callable[[str], None]

    def __post_init__(self) -> None:
        self._watched = WatchedListings(self.zookeeper, self.on_change)

    def forget_all(self) -> None:
        """A new session: every watch is gone."""
        self._watched.forget_all()

    def listing(self, path: str) -> Listing | None:
        """The watched listing of ``path`` (``None``: absent)."""
        return self._watched.listing(path)

    def below(self, root: str, skip: Callable[[str], bool], limit: int) -> list[str]:
        """Every path strictly below ``root`` but those ``skip`` says (and their subtrees).

        Raises:
            LimitExceeded: more than ``limit`` znodes (``0``: no limit).
        """
        found: list[str] = []
        top = self.listing(root)
        pending = [f"{root.rstrip('/')}/{c}" for c in (top.children if top is not None else ())]
        while pending:
            path = pending.pop()
            if skip(path):
                continue
            try:
                listing = self.listing(path)
            except ZooKeeperNoAuth:
                continue
            if listing is None:
                continue
            found.append(path)
            if limit and len(found) > limit:
                raise LimitExceeded(f"more than {limit} znodes below {root} (--config-tree-max-znodes)")
            pending.extend(f"{path}/{c}" for c in listing.children)
        return found


@dataclass(eq=False)
class TreeSide:
    """One ensemble as the trees naming it see it: its adapter, admission gate (its tenancy rules), ownership
    registry, the trees' declarations there (shared with its ZooKeeperConfigs), watched listings, and the roots kept
    under a persistent recursive watch on it (``key`` → root). A ZooKeeperEnsemble whose session is made anew (a new
    adapter) gets a new side; its declarations carry over."""

    name: str
    zookeeper: ZooKeeperAdapter
    gate: Gate
    registry: OwnershipRegistry
    declarations: TreeDeclarations
    on_change: Callable[[str], None]
    roots: dict[str, str] = field(default_factory=dict)
    by_root: dict[str, set[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.listings = _Listings(self.zookeeper, self.on_change)
        self.lock = threading.Lock()

    def keys_for_path(self, path: str) -> list[str]:
        """The trees on this side whose root covers ``path`` (a znode, or the ownership record of one)."""
        if self.registry.is_registry_path(path):
            managed = self.registry.managed_path(path)
            if managed is None:
                return []
            path = managed
        keys: list[str] = []
        with self.lock:
            probe = path
            while probe:
                keys.extend(self.by_root.get(probe, ()))
                probe = probe.rsplit("/", 1)[0]
        return keys

    def watch_root(self, key: str, root: str | None) -> None:
        """Keep ``key``'s root under the persistent recursive watch here (``None``: none any more)."""
        with self.lock:
            old = self.roots.get(key)
            if old == root:
                return
            if old is not None:
                self.by_root.get(old, set()).discard(key)
                if not self.by_root.get(old):
                    self.by_root.pop(old, None)
                del self.roots[key]
            if root is not None:
                self.roots[key] = root
                self.by_root.setdefault(root, set()).add(key)
            roots = sorted(self.by_root)
        self.zookeeper.watch_subtrees(WATCH_OWNER, roots, whole=True)


class TreeReconciler:
    """Reconciles ZooKeeperConfigTrees (keys ``namespace/name``), each on the ensemble it names.

    Args:
        trees: the tree informer's indexer (with :data:`ENSEMBLE_INDEX`).
        lookup: a source's ConfigMap or Secret (``namespace`` given) from a cache; ``None``: it does not exist.
        zookeeper: the adapter on the flags' ensemble.
        writer: every write (the dry-run seam).
        gate: the flags' ensemble's admission gate (every child passes it for a write, the root for a read).
        declared: the paths every kind declares, per ensemble (a tree's children are this kind's declarations on
            the ensemble it names).
        cluster_id: this installation's id in ownership records.
        registry_root: where ownership records live (on each ensemble).
        max_znodes: znodes below one root zkop lists at most (``0``: no limit).
        enqueue: adds a tree's key to the work queue (watches, sessions, ensembles changing).
        ensembles: the running ZooKeeperEnsembles (``--zookeeper-ensembles``); ``None``: a tree naming one is told
            ``EnsembleNotFound``.
    """

    def __init__(self, trees: Indexer, lookup: Callable[[str, SourceRef], JSON | None], zookeeper: ZooKeeperAdapter,
                 writer: ApiWriter, *, gate: Gate, declared: EnsembleDeclarations, cluster_id: str = "default",
                 registry_root: str = "/zkop/owners", max_znodes: int = DEFAULT_MAX_ZNODES,
                 enqueue: Callable[[str], None] = lambda key: None,
                 ensembles: EnsembleLookup | None = None) -> None:
        self.trees, self.lookup, self.writer = trees, lookup, writer
        self.cluster_id, self.max_znodes, self.registry_root = cluster_id, max_znodes, registry_root
        self.declared, self.ensembles = declared, ensembles
        self.enqueue = enqueue
        self.retry = RetryBoundary(ZooKeeperError)
        self._lock = threading.Lock()
        self._declarations: dict[str, TreeDeclarations] = {}
        self._sides: dict[str, TreeSide] = {}
        self._placed: dict[str, TreeSide] = {}  # key → the side its root is watched on
        self.default = self._new_side(DEFAULT_ENSEMBLE, zookeeper, gate)

    # --- ensembles ----------------------------------------------------------------------------

    def _declarations_on(self, name: str) -> TreeDeclarations:
        with self._lock:
            found = self._declarations.get(name)
            if found is None:
                found = self._declarations[name] = TreeDeclarations(self.declared.of(name))
            return found

    def _new_side(self, name: str, zookeeper: ZooKeeperAdapter, gate: Gate) -> TreeSide:
        side: TreeSide

        def on_change(path: str) -> None:
            for key in side.keys_for_path(path):
                self.enqueue(key)

        side = TreeSide(name, zookeeper, gate, OwnershipRegistry(zookeeper, self.registry_root),
                        self._declarations_on(name), on_change)
        if name != DEFAULT_ENSEMBLE:  # the flags' adapter is hooked by the builder (and its session by the context)
            zookeeper.add_watch_listener(on_change)
            resync_on_new_session(zookeeper, [side.listings.forget_all])
            zookeeper.add_session_listener(lambda state: self.enqueue_naming(name) if state == "CONNECTED" else None)
        return side

    def side(self, name: str) -> TreeSide | EnsembleMissing:
        """The side of ensemble ``name`` (``""``: the flags'), made or made anew as needed, or why that ensemble
        does not run; reads only memory."""
        if name == DEFAULT_ENSEMBLE:
            return self.default
        if self.ensembles is None:
            return ensembles_off(name)
        found = self.ensembles.find(name)
        if isinstance(found, EnsembleMissing):
            with self._lock:
                self._sides.pop(name, None)  # its adapter is closed: nothing more is watched on it
            return found
        with self._lock:
            side = self._sides.get(name)
        if side is None or side.zookeeper is not found.adapter:
            side = self._new_side(name, found.adapter, found.gate)
            with self._lock:
                self._sides[name] = side
        side.gate = found.gate
        return side

    def keys_naming(self, name: str) -> list[str]:
        """The trees naming ensemble ``name``."""
        return self.trees.index_keys(ENSEMBLE_INDEX, name)

    def enqueue_naming(self, name: str) -> None:
        """Enqueue the trees naming ensemble ``name`` (it started, stopped, its tenancy or session changed)."""
        for key in self.keys_naming(name):
            self.enqueue(key)

    # --- watches (kazoo's thread: memory only) ------------------------------------------------

    def keys_for_path(self, path: str) -> list[str]:
        """The trees of the flags' ensemble whose root covers ``path`` (a znode, or the ownership record of one)."""
        return self.default.keys_for_path(path)

    def on_znode_changed(self, path: str) -> None:
        """The flags' adapter's watch listener: enqueue the trees there covering ``path``."""
        self.default.on_change(path)

    def _watch_root(self, key: str, side: TreeSide | None, root: str | None) -> None:
        """Keep ``key``'s root under the persistent recursive watch on ``side`` (``None``: none anywhere); a root
        watched on another side (the tree named another ensemble) is unwatched there while that side runs."""
        with self._lock:
            old = self._placed.get(key)
            live = old is not None and (old is self.default or self._sides.get(old.name) is old)
            if side is not None and root is not None:
                self._placed[key] = side
            else:
                self._placed.pop(key, None)
        if old is not None and old is not side and live:
            old.watch_root(key, None)
        if side is not None:
            side.watch_root(key, root)

    def _forget_declarations(self, key: str) -> None:
        """Tree ``key`` declares nothing on any ensemble."""
        with self._lock:
            everywhere = list(self._declarations.values())
        for declarations in everywhere:
            declarations.forget(key)

    def all_keys(self) -> list[str]:
        """Every tree in the cache."""
        return [meta_namespace_key(o) for o in self.trees.list()]

    def on_session_reconnected(self) -> None:
        """A new session on the flags' ensemble: forget its listings, reconcile every tree."""
        self.default.listings.forget_all()
        for key in self.all_keys():
            self.enqueue(key)

    # --- reconcile ----------------------------------------------------------------------------

    def reconcile(self, key: str) -> Result:
        """Reconcile the tree ``namespace/name``.

        Raises:
            RetryableError: ZooKeeper unavailable or refused, a conflict persisted, or the API server failed.
        """
        # The cache, or our own newer write of the tree where the cache has not caught up with it yet.
        obj = self.writer.own_writes.newest(key, lambda: self.trees.get(key))
        if obj is None:
            self.writer.own_writes.forget(key)
            self._forget_declarations(key)
            self._watch_root(key, None, None)
            return Result()
        with self.retry.retrying(key):
            return self._reconcile(key, obj)
        raise AssertionError("unreachable")  # pragma: no cover - retrying() raises or returns

    def _stamp(self, obj: JSON) -> OwnerStamp:
        meta = obj["metadata"]
        return OwnerStamp(self.cluster_id, str(meta.get("namespace")), str(meta["name"]), str(meta.get("uid")), KIND)

    def _owner_exists(self, stamp: OwnerStamp) -> bool:
        return self.trees.get(f"{stamp.namespace}/{stamp.name}") is not None

    def _report(self, obj: JSON, *, ready: bool, reason: str, message: str, stalled: bool, warn: bool,
                counts: Mapping[str, Any] | None = None, problems: list[Problem] | None = None,
                transactions: int | None = None) -> None:
        old = obj.get("status") or {}
        new = desired_status(old, int(obj["metadata"].get("generation") or 0), ready=ready, reason=reason,
                             message=message, stalled=stalled, now=now_rfc3339(), counts=counts, problems=problems,
                             transactions=transactions)
        if _same(old, new):
            return
        self.writer.patch_status(obj, new)
        if warn:
            self.writer.event(obj, "Warning", reason, message)

    def _reconcile(self, key: str, obj: JSON) -> Result:
        meta = obj["metadata"]
        deleting = bool(meta.get("deletionTimestamp"))
        try:
            spec = parse_spec(obj)
        except InvalidSpec as err:
            if deleting:
                return self._finish_delete(key, obj)
            self._report(obj, ready=False, reason="InvalidSpec", message=f"invalid spec: {err}", stalled=True,
                         warn=True)
            return Result()
        side = self.side(spec.ensemble)
        if isinstance(side, EnsembleMissing):
            return self._ensemble_missing(key, obj, side, deleting)
        for declarations in self._other_declarations(side.name):
            declarations.forget(key)  # it named another ensemble before
        refusal = side.gate.admit(obj, spec.root, "read")
        if refusal is not None:
            side.declarations.forget(key)
            self._watch_root(key, None, None)
            if deleting:
                return self._finish_delete(key, obj)
            self._report(obj, ready=False, reason=refusal.reason, stalled=True, warn=True,
                         message=f"{refusal.message}; nothing is read or written")
            return Result()
        self._watch_root(key, side, spec.root)
        stamp = self._stamp(obj)
        if deleting:
            if FINALIZER in (meta.get("finalizers") or []):
                with_replans(lambda n: self._delete(side, key, obj, spec.root, stamp,
                                                    spec.deletion_policy == "Delete"),
                             lambda n, err: self._forget(side))
            return self._finish_delete(key, obj)
        namespace = str(meta.get("namespace"))
        try:
            children = expand(spec, lambda source: self.lookup(namespace, source))
        except InvalidSpec as err:
            self._report(obj, ready=False, reason="InvalidSpec", message=f"invalid spec: {err}", stalled=True,
                         warn=True)
            return Result()
        except RefNotFound as err:
            self._report(obj, ready=False, reason="RefNotFound", message=str(err), stalled=False, warn=True)
            return Result()
        refusals = {c.path: side.gate.admit(obj, c.path, "write") for c in children}
        created = creation_seconds(obj)
        declarer = Declarer(math.inf if created is None else created, KIND, key)
        side.declarations.declare(declarer, frozenset(p for p, r in refusals.items() if r is None))
        if FINALIZER not in (meta.get("finalizers") or []):
            updated = self.writer.add_finalizer(obj)
            if updated is None:
                return Result()
            obj = updated
        digest = _digest(children)
        try:
            plan = with_replans(lambda n: self._sync(side, key, obj, spec, stamp, children, refusals),
                                lambda n, err: self._forget(side, children))
        except LimitExceeded as err:
            self._report(obj, ready=False, reason="LimitExceeded", message=f"{err}; nothing is written",
                         stalled=True, warn=True)
            return Result()
        self._announce(obj, plan, digest)
        problems = [*plan.refused, *plan.conflicted]
        counts = {"declared": plan.declared, "synced": plan.synced, "conflicted": len(plan.conflicted),
                  "refused": len(plan.refused), "contentDigest": digest}
        if not self.writer.writes and (plan.batches or plan.acl_writes):
            self._report(obj, ready=False, reason=DRY_RUN_REASON, stalled=False, warn=False, counts=counts,
                         problems=problems, message=f"dry run, nothing written: would make {plan.writes} writes")
            return Result()
        if plan.refused:
            reason, message = "ChildrenRefused", f"{len(plan.refused)} of {plan.declared} children refused: " \
                f"{_names([p.path for p in plan.refused])} ({plan.refused[0].reason}: {plan.refused[0].message})"
        elif plan.conflicted:
            reason, message = "PathConflict", f"{len(plan.conflicted)} of {plan.declared} children owned by " \
                f"another object: {plan.conflicted[0].path} {plan.conflicted[0].message}"
        else:
            reason, message = "Synced", f"{plan.synced} children synced"
        self._report(obj, ready=not problems, reason=reason, message=message, stalled=bool(problems),
                     warn=bool(problems), counts=counts, problems=problems,
                     transactions=len(plan.batches) if plan.batches else (obj.get("status") or {}).get("transactions"))
        return Result()

    def _announce(self, obj: JSON, plan: Plan, digest: str) -> None:
        """One Normal Event for what the pass changed (per tree, not per child)."""
        if not (plan.created or plan.updated or plan.deleted or plan.acl_writes):
            return
        status = obj.get("status") or {}
        drift = (status.get("contentDigest") == digest
                 and status.get("observedGeneration") == obj["metadata"].get("generation") and not plan.created)
        parts = [f"{len(names)} {verb} ({_names(names)})" for verb, names in
                 (("created", plan.created), ("updated", plan.updated), ("deleted", plan.deleted)) if names]
        if plan.acl_writes:
            parts.append(f"{len(plan.acl_writes)} ACLs restored")
        message = "; ".join(parts) + (f" in {len(plan.batches)} transactions" if len(plan.batches) > 1 else "")
        if drift:
            self.writer.event(obj, "Normal", "DriftCorrected", message)
        else:
            self.writer.event(obj, "Normal", "Synced", message)

    def _other_declarations(self, name: str) -> list[TreeDeclarations]:
        with self._lock:
            return [d for n, d in self._declarations.items() if n != name]

    def _ensemble_missing(self, key: str, obj: JSON, missing: EnsembleMissing, deleting: bool) -> Result:
        """A tree naming a ZooKeeperEnsemble that does not run: nothing is read or written; its status says why
        (not while the ensemble is merely starting). Being deleted, it keeps its finalizer while it has written
        (its children and records are on that ensemble: docs/operations.md, "An object whose ensemble is gone")."""
        self._watch_root(key, None, None)
        if missing.reason is None:
            return Result(requeue_after=ENSEMBLE_STARTING_RECHECK)  # its runtime enqueues the tree once it runs
        if deleting and FINALIZER not in (obj["metadata"].get("finalizers") or []):
            return self._finish_delete(key, obj)
        message = f"{missing.message}; nothing is read or written"
        if deleting:
            message += ("; its children cannot be deleted until the ensemble is back (docs/operations.md, "
                        "\"An object whose ensemble is gone\")")
        self._report(obj, ready=False, reason=missing.reason, message=message, stalled=False, warn=True)
        return Result()

    def _forget(self, side: TreeSide, children: list[Child] | None = None) -> None:
        """After a concurrent change: drop what is remembered of the tree's znodes and listings."""
        side.listings.forget_all()
        for child in children or ():
            side.zookeeper.forget(child.path)
            side.zookeeper.forget(side.registry.record_path(child.path))

    def _existing(self, side: TreeSide, obj: JSON, root: str, declared: set[str]) -> list[ExistingFacts]:
        """The znodes below ``root`` no child declares that the gate admits writing, with their records."""
        excluded = side.gate.excluded(root)

        def skip(path: str) -> bool:
            return any(path == e or path.startswith(e + "/") for e in excluded)

        paths = [p for p in side.listings.below(root, skip, self.max_znodes)
                 if p not in declared and side.gate.admit(obj, p, "write") is None]
        pending = [(p, side.zookeeper.read_async(p, watch=True), side.registry.read_record_async(p))
                   for p in paths]
        side.zookeeper.settle([r for _, z, rec in pending for r in (z, rec)])
        found = []
        for path, znode_read, record_read in pending:
            znode = _result(znode_read)
            if znode is not None:
                found.append(ExistingFacts(path, znode, _result(record_read)))
        return found

    def _sync(self, side: TreeSide, key: str, obj: JSON, spec: Any, stamp: OwnerStamp, children: list[Child],
              refusals: Mapping[str, Any]) -> Plan:
        facts: list[ChildFacts] = []
        reads: list[tuple[Child, PendingRead, PendingRead]] = []

        def gather() -> None:
            side.zookeeper.settle([r for _, rec, z in reads for r in (rec, z)])
            for child, record_read, znode_read in reads:
                facts.append(ChildFacts(child, record=record_read.result(), znode=znode_read.result()))
            reads.clear()

        for child in children:
            refusal = refusals[child.path]
            if refusal is not None:
                facts.append(ChildFacts(child, refusal=refusal))
                continue
            owner = side.declarations.declared.owner(child.path)
            if owner is not None and (owner.kind, owner.key) != (KIND, key):
                facts.append(ChildFacts(child, owner=owner))
                continue
            reads.append((child, side.registry.read_record_async(child.path),
                          side.zookeeper.read_async(child.path, child.acl, watch=True, watch_absent=False)))
            if len(reads) == READ_WINDOW:
                gather()
        gather()
        existing = self._existing(side, obj, spec.root, {c.path for c in children})
        adoption = side.gate.policy_for(obj).may_adopt(spec.adopt_existing)
        plan = decide(TreeFacts(stamp, spec, tuple(facts), tuple(existing), adoption, self._owner_exists),
                      side.registry.record_path)
        for batch in plan.batches:
            self.writer.execute(key, batch.actions, atomic=True, require=batch.require, zookeeper=side.zookeeper)
        if plan.acl_writes:
            self.writer.execute(key, plan.acl_writes, atomic=False, zookeeper=side.zookeeper)
        return plan

    def _delete(self, side: TreeSide, key: str, obj: JSON, root: str, stamp: OwnerStamp, delete: bool) -> None:
        existing = self._existing(side, obj, root, set())
        for batch in decide_delete(stamp, existing, delete=delete, registry_path=side.registry.record_path):
            self.writer.execute(key, batch.actions, atomic=True, require=batch.require, zookeeper=side.zookeeper)

    def _finish_delete(self, key: str, obj: JSON) -> Result:
        self._forget_declarations(key)
        self._watch_root(key, None, None)
        if FINALIZER in (obj["metadata"].get("finalizers") or []):
            self.writer.remove_finalizer(obj)
        return Result()


def _result(pending: PendingRead) -> Observed | None:
    """A read's result; a znode zkop may not read counts as absent for pruning (never deleted)."""
    try:
        return pending.result()
    except ZooKeeperNoAuth:
        return None
