"""The ZooKeeper operations a plan may contain, as plain values.

Planning functions return these; :class:`zkop.zookeeper.adapter.ZooKeeperAdapter`
is the only code that executes them. Every write is conditional (ZooKeeper
Programmer's Guide, "Conditional updates"): ``expected_version`` is the
``Stat.version`` the plan was made from, so a concurrent hand edit turns into
``BadVersion`` and a re-plan instead of a lost update.
"""

from __future__ import annotations

from dataclasses import dataclass

from zkop.zookeeper.frozen import fast_init

__all__ = [
    "CREATOR_ALL_ACL",
    "OPEN_ACL",
    "PERMISSIONS",
    "AclEntry",
    "Action",
    "CheckVersion",
    "CreateNode",
    "DeleteNode",
    "Observed",
    "SetAcl",
    "SetData",
    "acl_matches",
    "describe",
    "describe_acl",
    "describe_acl_entry",
    "operation",
    "size",
]

#: ZooKeeper's permissions (``org.apache.zookeeper.ZooDefs.Perms``) by lower-case name.
PERMISSIONS = {"read": 1, "write": 2, "create": 4, "delete": 8, "admin": 16}


@fast_init
@dataclass(frozen=True, order=True)
class AclEntry:
    """One ZooKeeper ACL entry (Programmer's Guide, "ZooKeeper access control using ACLs").

    Attributes:
        scheme: ``world``, ``auth``, ``digest``, ``ip``, ``x509``, ``sasl``.
        id: scheme-specific id, e.g. ``anyone`` or ``user:base64(sha1(user:password))``.
        perms: bitmask READ=1, WRITE=2, CREATE=4, DELETE=8, ADMIN=16.
    """

    scheme: str
    id: str
    perms: int

    def permission_names(self) -> list[str]:
        """ZooKeeper's permission names (``ZooDefs.Perms``, lower case) in :attr:`perms`: ``["read", …]``."""
        return [name for name, bit in PERMISSIONS.items() if self.perms & bit]


#: ZooKeeper's ``OPEN_ACL_UNSAFE``: world:anyone with every permission.
OPEN_ACL: tuple[AclEntry, ...] = (AclEntry("world", "anyone", 31),)

#: ZooKeeper's ``CREATOR_ALL_ACL``: every permission for the writing session's authenticated identities
#: (an ``auth`` entry; the server stores it as those identities, ``PrepRequestProcessor.fixupACL``).
CREATOR_ALL_ACL: tuple[AclEntry, ...] = (AclEntry("auth", "", 31),)


def acl_matches(observed: tuple[AclEntry, ...], desired: tuple[AclEntry, ...]) -> bool:
    """True if an ACL read from ZooKeeper equals the desired one (as sets of entries).

    Exact: a digest id ZooKeeper redacted to ``user:x`` (``getACL`` from a client without
    ADMIN, ZOOKEEPER-1392) never matches a real one — zkop cannot tell whether it is the same
    hash, so it never takes such an ACL for the desired one
    (:func:`zkop.zookeeper.acls.is_redacted`).
    """
    return sorted(set(observed)) == sorted(set(desired))


@fast_init
@dataclass(frozen=True)
class Observed:
    """A znode as read from ZooKeeper.

    Attributes:
        data: the znode's bytes.
        version: ``Stat.version`` (data version), used for compare-and-set.
        num_children: ``Stat.numChildren``.
        ephemeral_owner: ``Stat.ephemeralOwner`` session id, 0 for a persistent node.
        acl_version: ``Stat.aversion``; 0 means the ACL is the one set at creation.
        acl: the node's ACL if it was read (``None`` if not needed, see the adapter).
    """

    data: bytes
    version: int
    num_children: int = 0
    ephemeral_owner: int = 0
    acl_version: int = 0
    acl: tuple[AclEntry, ...] | None = None


@fast_init
@dataclass(frozen=True)
class CreateNode:
    """Create a persistent znode holding ``data``; parents that are missing are created empty."""

    path: str
    data: bytes
    acl: tuple[AclEntry, ...] = OPEN_ACL


@fast_init
@dataclass(frozen=True)
class SetData:
    """Replace the data of ``path`` if its version is still ``expected_version``."""

    path: str
    data: bytes
    expected_version: int


@fast_init
@dataclass(frozen=True)
class DeleteNode:
    """Delete the (childless) znode ``path`` if its version is still ``expected_version``."""

    path: str
    expected_version: int


@fast_init
@dataclass(frozen=True)
class SetAcl:
    """Replace the ACL of ``path`` if its ACL version is still ``expected_acl_version``."""

    path: str
    acl: tuple[AclEntry, ...]
    expected_acl_version: int


Action = CreateNode | SetData | SetAcl | DeleteNode


@fast_init
@dataclass(frozen=True)
class CheckVersion:
    """A precondition, not a write: ``path`` must still be at data version ``version``.

    Sent in the same ZooKeeper ``multi`` as the writes it guards (the ``check`` operation),
    so they happen only while it holds — e.g. the ownership record a znode write relies on.
    """

    path: str
    version: int


def operation(action: Action) -> str:
    """What ``action`` does, in one word: ``create``, ``update``, ``update_acl`` or ``delete``."""
    if isinstance(action, CreateNode):
        return "create"
    if isinstance(action, SetData):
        return "update"
    if isinstance(action, SetAcl):
        return "update_acl"
    return "delete"


def describe_acl_entry(entry: AclEntry) -> str:
    """``digest:alice:HASH= read,write``: scheme, id and permissions in the CRD's words (``none`` for 0)."""
    return f"{entry.scheme}:{entry.id} {','.join(entry.permission_names()) or 'none'}"


def describe_acl(acl: tuple[AclEntry, ...]) -> str:
    """``world:anyone read,write,create,delete,admin; digest:u:h= read``: one line, entries in order."""
    return "; ".join(describe_acl_entry(e) for e in acl)


def describe(action: Action, *, zkcli: bool = False) -> str:
    """One line for an action: path, sizes and versions, never data.

    Two forms, one per audience:

    ========== =============================================== ==================================================
    action     default (operator logs, Events, dry-run status) ``zkcli=True`` (``zkop sync`` and its JSON)
    ========== =============================================== ==================================================
    create     ``create /a (5 bytes)``                         ``create /a (5 bytes, ACL digest:u:h= read)``
    data       ``update /a (version 2, 5 bytes)``              ``set /a (5 bytes, if version 2)``
    ACL        ``set the ACL of /a (aversion 1, 2 entries)``   ``setAcl /a (world:anyone read, if aversion 1)``
    delete     ``delete /a (version 3)``                       ``delete /a (if version 3)``
    ========== =============================================== ==================================================

    Args:
        zkcli: the form of ``zkop sync``, whose user wrote the manifests and knows ``zkCli.sh``:
            zkCli's verbs (``set``, ``setAcl``), the version as the write's condition, and the ACL
            entries (:func:`describe_acl`) of an ACL change and of a create whose ACL is not
            :data:`OPEN_ACL`.  The default counts ACL entries instead of naming them.
    """
    if isinstance(action, CreateNode):
        acl = f", ACL {describe_acl(action.acl)}" if zkcli and action.acl != OPEN_ACL else ""
        return f"create {action.path} ({size(action.data)}{acl})"
    if isinstance(action, SetData):
        if zkcli:
            return f"set {action.path} ({size(action.data)}, if version {action.expected_version})"
        return f"update {action.path} (version {action.expected_version}, {size(action.data)})"
    if isinstance(action, SetAcl):
        if zkcli:
            return f"setAcl {action.path} ({describe_acl(action.acl)}, if aversion {action.expected_acl_version})"
        entries = "1 entry" if len(action.acl) == 1 else f"{len(action.acl)} entries"
        return f"set the ACL of {action.path} (aversion {action.expected_acl_version}, {entries})"
    return f"delete {action.path} ({'if ' if zkcli else ''}version {action.expected_version})"


def size(data: bytes | int) -> str:
    """A znode value's size for a message: ``"1 byte"``, ``"0 bytes"``, ``"48 bytes"``.

    Args:
        data: the value, or its length in bytes.
    """
    n = data if isinstance(data, int) else len(data)
    return "1 byte" if n == 1 else f"{n} bytes"
