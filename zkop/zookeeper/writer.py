"""Writes: plan actions executed with compare-and-set, atomically (``multi``) or one by one.

Every write is conditional on the version it was planned from (Programmer's Guide, "Conditional
updates") and idempotent when retried after a lost reply (a create that finds the intended bytes, a
delete that finds nothing, succeed). Missing parents are created with
``ConnectionOptions.parent_acl``; :class:`~zkop.zookeeper.actions.CheckVersion` preconditions ride
in the same ``multi`` (ZooKeeper's ``check``).

Not obvious from a single function:

* a missing parent costs one create whatever the number of workers racing for it
  (:class:`~zkop.zookeeper.parents.Parents`): a create under a parent the cold start learned absent
  creates the parents first instead of failing first, and parents known to exist are never asked for;

* a create that zkop then cannot read (``NoAuth``) is undone, with the parents that step created,
  so nothing is left that only a superuser could remove; a redaction marker
  (:func:`~zkop.zookeeper.acls.is_redacted`) is never sent;
* :attr:`Writer.refuse_writes` (``--dry-run``) raises :class:`~zkop.zookeeper.errors.WriteRefused`
  for any batch with a write: the net under a code path that forgot to ask;
* under persistent watches each write first registers the notification it will cause
  (:meth:`WatchCache.expect`), so the cache is filled with what was written instead of read back,
  while anyone else's change to the path still invalidates it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from kazoo.exceptions import (
    BadVersionError,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
)
from kazoo.protocol.paths import _prefix_root
from kazoo.protocol.serialization import CheckVersion as KazooCheckVersion
from kazoo.protocol.serialization import Create as KazooCreate
from kazoo.protocol.serialization import Delete as KazooDelete
from kazoo.protocol.serialization import SetData as KazooSetData
from kazoo.protocol.serialization import Transaction
from kazoo.security import ACL, Id

from zkop.zookeeper.acls import is_redacted
from zkop.zookeeper.actions import (
    OPEN_ACL,
    AclEntry,
    Action,
    CheckVersion,
    CreateNode,
    DeleteNode,
    Observed,
    SetAcl,
    SetData,
    describe,
)
from zkop.zookeeper.cache import NO_FILL, Expectation, WatchCache
from zkop.zookeeper.errors import ConcurrentModification, WriteRefused, ZooKeeperError, ZooKeeperNoAuth
from zkop.zookeeper.parents import Parents
from zkop.zookeeper.paths import parent_paths
from zkop.zookeeper.reads import PendingRead, Reads
from zkop.zookeeper.session import Session
from zkop.zookeeper.watches import NODE_CREATED, NODE_DATA_CHANGED, NODE_DELETED

__all__ = ["Writer", "multi_request", "to_kazoo_acl"]

log = logging.getLogger(__name__)

#: The notification each write causes on a watched path (``DataTree.createNode``/``setData``/``deleteNode``).
_EVENT_OF: dict[type, int] = {CreateNode: NODE_CREATED, SetData: NODE_DATA_CHANGED, DeleteNode: NODE_DELETED}


def to_kazoo_acl(acl: Sequence[AclEntry]) -> tuple[ACL, ...]:
    """Convert entries to kazoo's ``ACL`` objects (a tuple: kazoo takes a tuple as well as a list).

    The open ACL, which nearly every write carries, is converted once (:data:`_OPEN_KAZOO_ACL`).
    """
    if acl is OPEN_ACL or acl == OPEN_ACL:
        return _OPEN_KAZOO_ACL
    return tuple(ACL(entry.perms, Id(entry.scheme, entry.id)) for entry in acl)


#: The open ACL as kazoo's (immutable) objects.
_OPEN_KAZOO_ACL: tuple[ACL, ...] = tuple(ACL(entry.perms, Id(entry.scheme, entry.id)) for entry in OPEN_ACL)


def multi_request(chroot: str, actions: Sequence[Action], require: Sequence[CheckVersion] = ()) -> Transaction:
    """kazoo's ``multi`` request for the ``require`` checks, then ``actions``, on a client rooted at ``chroot``.

    The request kazoo's ``TransactionRequest`` builds, without its per-operation work (argument type
    checks, a log call, normalising each path): every ``multi`` of a cold sync carries two creates.
    Send it with the client's ``_call``, as ``TransactionRequest.commit_async`` does.

    Raises:
        TypeError: an action that cannot run in a ``multi`` (:class:`SetAcl`).
    """
    operations: list[Any] = [KazooCheckVersion(_rooted(chroot, c.path), c.version) for c in require]
    for action in actions:
        if isinstance(action, CreateNode):
            operations.append(KazooCreate(_rooted(chroot, action.path), action.data, to_kazoo_acl(action.acl), 0))
        elif isinstance(action, SetData):
            operations.append(KazooSetData(_rooted(chroot, action.path), action.data, action.expected_version))
        elif isinstance(action, DeleteNode):
            operations.append(KazooDelete(_rooted(chroot, action.path), action.expected_version))
        else:
            raise TypeError(f"{action!r} cannot run in a multi")
    return Transaction(operations)


def _rooted(chroot: str, path: str) -> str:
    """``path`` under kazoo's (normalised) ``chroot``, as kazoo's ``_prefix_root`` writes it: a plain
    concatenation when ``path`` is already normal (absolute, no empty or dot segment, no trailing slash)."""
    if path.startswith("/") and "//" not in path and "/." not in path and not path.endswith("/"):
        return chroot + path
    rooted: str = _prefix_root(chroot, path)
    return rooted


class Writer:
    """Executes plan actions on ``session``; forgets what ``cache`` knows of every path written.

    Attributes:
        refuse_writes: why writes are refused (e.g. ``"zkop run --dry-run"``), or ``None`` to write.
    """

    def __init__(self, session: Session, cache: WatchCache, reads: Reads, parents: Parents | None = None) -> None:
        self.session = session
        self.cache = cache
        self.reads = reads
        self.refuse_writes: str | None = None
        #: What is known of parent znodes, shared by every worker (and told by ``reads`` what it learns).
        self.parents = parents or Parents()

    def execute(self, actions: Sequence[Action], *, atomic: bool = False, arm_watches: bool = False,
                require: Sequence[CheckVersion] = ()) -> None:
        """Execute plan actions in order; see ``ZooKeeperAdapter.execute`` for the arguments.

        Raises:
            ConcurrentModification: the node changed since it was read; read and plan again.
            ZooKeeperUnavailable: not connected (SUSPENDED/LOST) or the request failed in transit.
            ZooKeeperNoAuth: the ACL forbids the write.
            WriteRefused: writes are refused (:attr:`refuse_writes`); nothing was sent.
        """
        if not actions:
            return
        self._refuse_if_told(actions)
        for action in actions:
            if isinstance(action, CreateNode | SetAcl) and any(is_redacted(e) for e in action.acl):
                raise ValueError(f"refusing to write the ACL of {action.path}: it holds a redacted digest id "
                                 "(user:x, as ZooKeeper shows it to a client without ADMIN)")
        session = self.session
        has_acl = any(isinstance(a, SetAcl) for a in actions)
        if (require or (atomic and len(actions) > 1)) and not has_acl:
            session.require_connected("writes")
            for action in actions:
                self.cache.forget(action.path)
            self._commit(actions, arm_watches, require)
            return
        for check in require:
            session.require_connected("writes")
            with session.mapped("exists", check.path):
                stat = session.wait(session.client.exists_async(check.path))
            if stat is None or stat.version != check.version:
                raise ConcurrentModification(f"znode {check.path} changed (version is no longer {check.version})")
        for action in actions:
            session.require_connected("writes")
            self.cache.forget(action.path)
            expected = self._expect([action])
            result: Any = None
            try:
                if isinstance(action, CreateNode):
                    self._create(action)
                elif isinstance(action, SetData):
                    result = self._set(action)
                elif isinstance(action, SetAcl):
                    self._set_acl(action)
                elif isinstance(action, DeleteNode):
                    self._delete(action)
                else:  # pragma: no cover - exhaustive
                    raise TypeError(f"unknown action {action!r}")
            except BaseException:
                self._settle_failed(expected)
                raise
            self._settle(expected, {id(action): result})
        if arm_watches:
            # Nodes remembered from the write itself (persistent watches) need no read.
            reads = [self.reads.read_async(a.path, a.acl, watch=True) for a in actions
                     if isinstance(a, CreateNode) and a.path not in self.cache]
            self.reads.settle(reads)
            for pending in reads:
                pending.result()

    # --- persistent watches: own notifications, the cache filled from the write ----------------------

    def _expect(self, actions: Sequence[Action]) -> list[tuple[Action, Expectation]]:
        """Register the notification each write of a covered path will cause (see the module)."""
        watches = self.reads.watches
        if watches is None or not watches.enabled:
            return []
        expected = []
        for action in actions:
            event = _EVENT_OF.get(type(action))
            if event is None:
                continue
            expectation = self.cache.expect(action.path, event)  # before covers(): see Reads.read_async
            if watches.covers(action.path):
                expected.append((action, expectation))
            else:
                self.cache.settle(expectation)
        return expected

    def _settle(self, expected: Sequence[tuple[Action, Expectation]], results: Mapping[int, Any]) -> None:
        """The writes succeeded: remember what each left (``results``: ``id(action)`` → its reply)."""
        for action, expectation in expected:
            value: Any = NO_FILL
            if isinstance(action, CreateNode):
                value = Observed(action.data, 0) if action.acl == OPEN_ACL else NO_FILL  # the read-back has it
            elif isinstance(action, SetData):
                stat = results.get(id(action))
                if stat is not None and hasattr(stat, "aversion"):
                    value = Observed(action.data, stat.version, stat.numChildren, stat.ephemeralOwner,
                                     stat.aversion)
            elif isinstance(action, DeleteNode):
                value = None
            self.cache.settle(expectation, value)

    def _settle_failed(self, expected: Sequence[tuple[Action, Expectation]]) -> None:
        """The writes failed: a notification taken as theirs was someone else's; wake the listeners."""
        for _, expectation in expected:
            if self.cache.settle(expectation):
                self.cache.notify(expectation.path)

    def _read_back(self, creates: Sequence[CreateNode], arm_watches: bool) -> list[PendingRead]:
        """Reads sent right behind ``creates``: watched ones (``arm_watches``), else plain reads of the
        nodes created with an ACL other than the open one (could zkop lock itself out?)."""
        if arm_watches:
            return [self.reads.read_async(a.path, a.acl, watch=True) for a in creates]
        return [self.reads.read_async(a.path, None) for a in creates if a.acl != OPEN_ACL]

    def _check_readable(self, reads: Sequence[PendingRead], created: Sequence[str]) -> None:
        """Finish the read-backs; on ``NoAuth`` delete ``created`` (deepest first) and raise.

        Raises:
            ZooKeeperNoAuth: a node just created cannot be read with zkop's credentials.
        """
        if not reads:
            return
        locked: ZooKeeperNoAuth | None = None
        for pending in reads:
            try:
                pending.result()
            except ZooKeeperNoAuth as err:
                locked = locked or err
        if locked is None:
            return
        removed = self._undo_creates(created)
        raise ZooKeeperNoAuth(
            f"created {reads[0].path} but cannot read it back with zkop's credentials (NoAuth): its ACL does not "
            f"grant zkop's identity READ; deleted what this write created ({', '.join(removed) or 'nothing'})"
        ) from locked

    def _undo_creates(self, created: Sequence[str]) -> list[str]:
        """Delete ``created`` deepest first (best effort: a node changed or given children meanwhile stays)."""
        session, removed = self.session, []
        for path in sorted(set(created), key=lambda p: (-p.count("/"), p)):
            self.cache.forget(path)
            try:
                with session.mapped("delete", path):
                    session.wait(session.client.delete_async(path, version=0))
                removed.append(path)
            except (NoNodeError, NotEmptyError, BadVersionError, ZooKeeperError):
                continue
        self.parents.forget(removed)
        return removed

    def create_parents(self, paths: Sequence[str], made: list[str] | None = None) -> list[str]:
        """Create each of ``paths`` (outermost first) empty with the parent ACL; existing ones are fine.

        Args:
            paths: the parents, outermost first.
            made: where to append each parent as it is created (so a caller knows them even
                when a later one fails).

        Returns:
            ``made``: the parents this call created.

        A parent :attr:`parents` knows to exist is not asked for; one another worker is creating is
        waited for, not created twice (:meth:`~zkop.zookeeper.parents.Parents.ensure`).

        Raises:
            ZooKeeperNoAuth, ZooKeeperUnavailable: as a create.
            WriteRefused: writes are refused (:attr:`refuse_writes`); nothing was sent.
        """
        session = self.session
        self._refuse_if_told([CreateNode(parent, b"", session.options.parent_acl) for parent in paths])
        parent_acl = to_kazoo_acl(session.options.parent_acl)
        made = [] if made is None else made

        def create(parent: str) -> bool:
            with session.mapped("create", parent):
                try:
                    session.wait(session.client.create_async(parent, b"", acl=parent_acl))
                except NodeExistsError:
                    return False
            made.append(parent)
            return True

        try:
            self.parents.ensure(paths, create, session.options.session_timeout)
        except NoNodeError:
            # An ancestor believed to exist is gone (deleted behind zkop): forget them all, create from the top.
            self.parents.forget(paths)
            self.parents.ensure(paths, create, session.options.session_timeout)
        return made

    def _refuse_if_told(self, actions: Sequence[Action]) -> None:
        """Raise :class:`WriteRefused` (logged at ERROR) if writes are refused and ``actions`` is not empty."""
        if self.refuse_writes is None or not actions:
            return
        planned = "; ".join(describe(action) for action in actions)
        log.error("REFUSED a ZooKeeper write (%s): %s; a code path ignored the dry run, nothing was sent",
                  self.refuse_writes, planned)
        raise WriteRefused(f"ZooKeeper writes are refused ({self.refuse_writes}): {planned}")

    def _commit(self, actions: Sequence[Action], arm_watches: bool, require: Sequence[CheckVersion] = ()) -> None:
        """Run ``require`` checks and ``actions`` as one ``multi``; see :meth:`execute`."""
        session = self.session
        actions = _inner_parents(actions, session.options.parent_acl)
        creates = [a for a in actions if isinstance(a, CreateNode)]
        created = {a.path for a in creates}
        parents = sorted({p for a in creates for p in parent_paths(a.path)} - created, key=len)
        made_parents: list[str] = []
        if parents and self.parents.missing_known(parents):
            made_parents = self.create_parents(parents)  # known missing: no failed multi first
        for attempt in range(2):
            relied_on = self.parents.known_of(parents)
            transaction = multi_request(session.client.chroot, actions, require)
            expected = self._expect(actions)
            filled = {a.path for a, _ in expected if isinstance(a, CreateNode) and a.acl == OPEN_ACL}
            started = time.monotonic()
            failed: tuple[CheckVersion | Action, Exception] | None
            try:
                request = session.client.handler.async_result()
                session.client._call(transaction, request)  # what kazoo's TransactionRequest.commit_async sends
                # Sent behind the multi on the same session, so answered after it (in order).
                reads = self._read_back([a for a in creates if a.path not in filled], arm_watches)
                self.reads.settle(reads)
                try:
                    with session.mapped("multi", actions[0].path, started=started):
                        results = list(session.wait(request))
                    failed = next(((a, r) for a, r in zip([*require, *actions], results, strict=False)
                                   if isinstance(r, Exception) and not isinstance(r, RolledBackError)), None)
                except (NoNodeError, NodeExistsError, BadVersionError, NotEmptyError) as err:
                    # A server that reports the failure in the reply header names no operation: a NoNode
                    # is taken as a missing parent when there are creates, as ZooKeeper 3.8 would say.
                    failed = (creates[0] if isinstance(err, NoNodeError) and creates else actions[0], err)
            except BaseException:
                self._settle_failed(expected)
                raise
            if failed is None:
                self._settle(expected, {id(a): r for a, r in zip(actions, results[len(require):], strict=False)})
                self.parents.exist(parents)
                self._check_readable(reads, [*made_parents, *(a.path for a in creates)])
                return
            self._settle_failed(expected)
            step, error = failed
            for pending in reads:
                self.cache.forget(pending.path)  # what the reads saw belongs to no write of ours
            if isinstance(error, NoNodeError) and isinstance(step, CreateNode) and not attempt:
                if relied_on == set(parents):
                    self.parents.forget(relied_on)  # all believed to exist when sent: someone deleted one
                made_parents += self.create_parents(parents)
                continue
            if isinstance(error, NoAuthError):
                raise ZooKeeperNoAuth(f"ZooKeeper refused the write of {step.path}: not authorised (NoAuth)")
            raise ConcurrentModification(
                f"znode {step.path} changed since it was read ({type(error).__name__}); nothing was written"
            )
        raise ConcurrentModification(f"a parent of {creates[0].path} vanished during create")  # pragma: no cover

    def _create(self, action: CreateNode) -> None:
        session = self.session
        made_parents: list[str] = []
        parents = parent_paths(action.path)
        if parents and self.parents.missing_known(parents):
            made_parents = self.create_parents(parents)
        # Try the node itself first: when its parents exist (the common case) that is one round trip.
        for attempt in range(2):
            relied_on = self.parents.known_of(parents)
            with session.mapped("create", action.path):
                try:
                    session.wait(session.client.create_async(action.path, action.data,
                                                             acl=to_kazoo_acl(action.acl)))
                    self.parents.exist(parents)
                    if action.acl != OPEN_ACL:
                        self._check_readable(self._read_back([action], False), [*made_parents, action.path])
                    return
                except NodeExistsError:
                    break
                except NoNodeError:
                    if attempt:
                        raise ConcurrentModification(f"a parent of {action.path} vanished during create") from None
            if relied_on == set(parents):
                self.parents.forget(relied_on)
            made_parents += self.create_parents(parents)
        current = self.reads.read_async(action.path).result()
        if current is not None and current.data == action.data and not current.ephemeral_owner:
            return  # our earlier create whose reply was lost, or someone wrote the same bytes
        raise ConcurrentModification(f"znode {action.path} appeared with other data before it could be created")

    def _set(self, action: SetData) -> Any:
        """Set the data; the new ``Stat``, or ``None`` when an earlier attempt's lost reply did it."""
        session = self.session
        with session.mapped("set", action.path):
            try:
                return session.wait(session.client.set_async(action.path, action.data,
                                                             version=action.expected_version))
            except BadVersionError:
                pass
            except NoNodeError:
                raise ConcurrentModification(f"znode {action.path} was deleted before it could be updated") from None
        current = self.reads.read_async(action.path).result()
        if current is not None and current.data == action.data:
            return None  # the write went through and the reply was lost
        raise ConcurrentModification(f"znode {action.path} changed (version is no longer {action.expected_version})")

    def _set_acl(self, action: SetAcl) -> None:
        session = self.session
        with session.mapped("set_acls", action.path):
            try:
                acl = to_kazoo_acl(action.acl)
                session.wait(session.client.set_acls_async(action.path, acl, version=action.expected_acl_version))
            except BadVersionError:
                raise ConcurrentModification(f"ACL of znode {action.path} changed meanwhile") from None
            except NoNodeError:
                raise ConcurrentModification(f"znode {action.path} was deleted before its ACL was set") from None

    def _delete(self, action: DeleteNode) -> None:
        session = self.session
        with session.mapped("delete", action.path):
            try:
                session.wait(session.client.delete_async(action.path, version=action.expected_version))
            except NoNodeError:
                return
            except BadVersionError:
                raise ConcurrentModification(
                    f"znode {action.path} changed (version is no longer {action.expected_version})"
                ) from None
            except NotEmptyError:
                raise ConcurrentModification(f"znode {action.path} has children; not deleted") from None


def _inner_parents(actions: Sequence[Action], parent_acl: tuple[AclEntry, ...]) -> list[Action]:
    """``actions`` with a create (empty, ``parent_acl``) of every missing parent that lies below a node the same
    ``multi`` creates, just before the first create under it (pure).

    Such a parent cannot exist yet, and creating it beforehand, outside the transaction, would fail (its own
    parent is not there) or, for the node the multi creates itself, write it outside the transaction (a tree's
    ``config`` before ``config/url``): a reader would see the node half-made and the multi would then fail.
    """
    creates = [a for a in actions if isinstance(a, CreateNode)]
    created = {a.path for a in creates}
    # A parent lies below a created node when one of its own ancestors is created: O(depth) a parent, so a
    # tree's 10,000 children are not 10,000² prefix tests.
    inner = {p for a in creates for p in parent_paths(a.path)
             if p not in created and any(q in created for q in parent_paths(p))}
    if not inner:
        return list(actions)
    out: list[Action] = []
    for action in actions:
        if isinstance(action, CreateNode):
            for parent in parent_paths(action.path):
                if parent in inner:
                    inner.discard(parent)
                    out.append(CreateNode(parent, b"", parent_acl))
        out.append(action)
    return out
