"""Ownership registry: which installation and which object own a managed znode.

The owner of ``/app/x`` is the stamp in ``<root>/app/x`` (default root ``/zkop/owners``), JSON
``{"clusterId", "managedBy": "zkop", "name", "namespace", "uid"}`` (external-dns's TXT registry,
kept in ZooKeeper). A ZooKeeperConfig's stamp has no ``kind`` (every stamp written before other
controllers claimed paths is one); any other controller's owner says its kind, e.g. the service
bridge's ``{"clusterId", "kind": "Service", ...}``. :class:`OwnershipRegistry` only reads and writes
records through the adapter.

Claim rules (:func:`plan_claim`, pure):

* no record, or an empty one (a registry parent, or released) → claim it (an existing znode is
  thereby *adopted*);
* our record (same cluster id, namespace and name) → nothing, or refresh the uid of a re-created object;
* a record of our cluster for an object of our kind that no longer exists → take it over;
* anything else (another cluster, another kind, another live object, unreadable data) → conflict,
  write nothing.

A write under a claim that writes no record checks the record's version in the same ``multi``
(:func:`claim_requires`). Release (:func:`plan_release`): only our own record; a record that is
also the parent of other records is emptied, not deleted.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii

from zkop.zookeeper.actions import Action, CheckVersion, CreateNode, DeleteNode, Observed, SetData
from zkop.zookeeper.adapter import PendingRead, ZooKeeperAdapter
from zkop.zookeeper.frozen import fast_init
from zkop.zookeeper.paths import is_within

__all__ = [
    "DEFAULT_REGISTRY_ROOT",
    "Claim",
    "OwnerStamp",
    "OwnershipRegistry",
    "claim_requires",
    "plan_claim",
    "plan_release",
    "record_owner",
]

DEFAULT_REGISTRY_ROOT = "/zkop/owners"

#: A ``str`` as a JSON string, ASCII only: the function ``json.dumps`` itself uses by default.
_json_str = encode_basestring_ascii


@fast_init
@dataclass(frozen=True)
class OwnerStamp:
    """Who owns a znode.

    Attributes:
        cluster_id: the installation (``--cluster-id``).
        namespace, name, uid: the owning object.
        kind: the owning object's kind; ``""`` for a ZooKeeperConfig (its stamp has no ``kind`` key, as
            every stamp of an older zkop), ``"Service"`` for the service bridge's records.
    """

    cluster_id: str
    namespace: str
    name: str
    uid: str
    kind: str = ""

    def to_bytes(self) -> bytes:
        """Canonical JSON bytes (sorted keys), so an unchanged stamp is byte-identical.

        Exactly ``json.dumps({...}, sort_keys=True, separators=(",", ":")).encode()`` (the keys
        written in sorted order, each value escaped by the encoder ``json.dumps`` uses with
        ``ensure_ascii``), without building a dict and an encoder twice per reconcile.
        """
        kind = f'"kind":{_json_str(self.kind)},' if self.kind else ""
        return (f'{{"clusterId":{_json_str(self.cluster_id)},{kind}"managedBy":"zkop","name":{_json_str(self.name)},'
                f'"namespace":{_json_str(self.namespace)},"uid":{_json_str(self.uid)}}}').encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> OwnerStamp | None:
        """Parse a stamp; ``None`` if the bytes are not a zkop stamp."""
        try:
            raw = json.loads(data)
        except (ValueError, UnicodeDecodeError):
            return None
        if not isinstance(raw, dict) or raw.get("managedBy") != "zkop":
            return None
        try:
            return cls(str(raw["clusterId"]), str(raw["namespace"]), str(raw["name"]), str(raw.get("uid", "")),
                       str(raw.get("kind", "")))
        except KeyError:
            return None

    def same_object(self, other: OwnerStamp) -> bool:
        """Same installation, kind and namespace/name (uid may differ after re-creation)."""
        return ((self.cluster_id, self.kind, self.namespace, self.name)
                == (other.cluster_id, other.kind, other.namespace, other.name))

    def describe(self) -> str:
        """``namespace/name in cluster <id>``, led by the kind for any owner but a ZooKeeperConfig."""
        kind = f"{self.kind} " if self.kind else ""
        return f"{kind}{self.namespace}/{self.name} in cluster {self.cluster_id!r}"


@fast_init
@dataclass(frozen=True)
class Claim:
    """Outcome of :func:`plan_claim`.

    Attributes:
        actions: writes to the registry record.
        conflict: the other owner's stamp (``None`` if the claim is ours), or a placeholder for unreadable data.
        new: the record did not exist before (adoption of a pre-existing znode, if it exists).
    """

    actions: tuple[Action, ...]
    conflict: OwnerStamp | None = None
    new: bool = False


def plan_claim(record_path: str, ours: OwnerStamp, record: Observed | None,
               owner_exists: Callable[[OwnerStamp], bool]) -> Claim:
    """Decide how to claim ``record_path`` for ``ours`` given the current record (pure).

    Args:
        record_path: the registry znode.
        ours: our stamp.
        record: the registry znode as read, or ``None``.
        owner_exists: whether an object of *our* cluster and kind named in a stamp still exists (from the cache).
    """
    if record is None:
        return Claim((CreateNode(record_path, ours.to_bytes()),), new=True)
    if record.data == b"":
        # An empty record is a registry parent or a released record: nobody owns the path.
        return Claim((SetData(record_path, ours.to_bytes(), record.version),), new=True)
    theirs = OwnerStamp.from_bytes(record.data)
    if theirs is None:
        return Claim((), conflict=OwnerStamp("?", "?", "unreadable ownership record", ""))
    if theirs.same_object(ours):
        if theirs == ours:
            return Claim(())
        return Claim((SetData(record_path, ours.to_bytes(), record.version),))
    if theirs.cluster_id == ours.cluster_id and theirs.kind == ours.kind and not owner_exists(theirs):
        return Claim((SetData(record_path, ours.to_bytes(), record.version),))
    return Claim((), conflict=theirs)


def claim_requires(record_path: str, claim: Claim, record: Observed | None) -> tuple[CheckVersion, ...]:
    """Preconditions for writing a managed znode under ``claim`` (for ``execute(require=…)``; pure).

    A claim that writes the record is conditional by itself (create, or set at a
    version); otherwise the record as read must still be at its version, so a write
    planned from a record that changed meanwhile fails as a whole (ZooKeeper ``check``
    inside the ``multi``) and is planned again.
    """
    if claim.actions or record is None:
        return ()
    return (CheckVersion(record_path, record.version),)


def record_owner(record: Observed | None) -> OwnerStamp | None:
    """The stamp in a record as read; ``None`` for no record, an empty one, or unreadable data (pure)."""
    return OwnerStamp.from_bytes(record.data) if record is not None and record.data else None


def plan_release(record_path: str, ours: OwnerStamp, record: Observed | None) -> Action | None:
    """The write that releases ``record_path`` for ``ours``, or ``None`` if it is not ours to release (pure).

    Only a record of the same object (:meth:`OwnerStamp.same_object`) is released:
    deleted at its version, or emptied (set to ``b""`` at its version) if it has children,
    because it is then also the parent of other paths' records.
    """
    if record is None:
        return None
    theirs = OwnerStamp.from_bytes(record.data)
    if theirs is None or not theirs.same_object(ours):
        return None
    if record.num_children:
        return SetData(record_path, b"", record.version)
    return DeleteNode(record_path, record.version)


class OwnershipRegistry:
    """Reads and writes ownership records through the adapter.

    Records are read with a watch, so a record changed or released behind zkop's back wakes the
    objects declaring the path at once. The watch is kept although every managed write also checks
    the record's version (:func:`claim_requires`): the version alone cannot tell a record deleted
    and re-created at version 0 from the one read.

    Args:
        root: registry root, e.g. ``/zkop/owners``.
    """

    def __init__(self, adapter: ZooKeeperAdapter, root: str = DEFAULT_REGISTRY_ROOT) -> None:
        self.adapter = adapter
        self.root = root.rstrip("/")

    def record_path(self, path: str) -> str:
        """Registry znode for a managed path: ``/app/x`` → ``/zkop/owners/app/x``."""
        return self.root + path

    def managed_path(self, record_path: str) -> str | None:
        """Inverse of :meth:`record_path`; ``None`` if ``record_path`` is not a record."""
        if record_path != self.root and is_within(record_path, self.root):
            return record_path[len(self.root):]
        return None

    def is_registry_path(self, path: str) -> bool:
        """True for paths inside the registry (they can never be managed znodes)."""
        return is_within(path, self.root)

    def owner(self, path: str) -> OwnerStamp | None:
        """The stamp in the record of ``path``, or ``None`` (no record, empty, or unreadable).

        A watched read, trusted until its watch fires.

        Raises:
            ZooKeeperError: the read failed.
        """
        return record_owner(self.adapter.read(self.record_path(path), watch=True, max_age=math.inf))

    def read_record_async(self, path: str) -> PendingRead:
        """Start the watched read of the record of ``path`` (see :meth:`ZooKeeperAdapter.read_async`).

        Records change only through data writes, which fire the watch, so a remembered
        record is trusted until its watch fires, not for a bounded age. An absent record
        arms no watch: the claim creates it and arms one then (``execute(arm_watches=True)``).

        Raises:
            ZooKeeperUnavailable: not connected.
        """
        return self.adapter.read_async(self.record_path(path), watch=True, max_age=math.inf, watch_absent=False)

    def release(self, path: str, ours: OwnerStamp) -> None:
        """Release the record of ``path`` if it is ours (:func:`plan_release`); anything else is left alone.

        Raises:
            ZooKeeperError: the read or the write failed (ConcurrentModification if the record changed).
        """
        record_path = self.record_path(path)
        action = plan_release(record_path, ours, self.adapter.read(record_path, watch=True, max_age=math.inf))
        if action is not None:
            self.adapter.execute([action])
