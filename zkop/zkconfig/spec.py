"""ZooKeeperConfig: the resource's identity and the parsing of its ``spec``.

A ZooKeeperConfig (``platform.example.com/v1alpha1``, short name ``zkc``)
declares one znode. :func:`parse_spec` turns the ``spec`` dict of a custom
resource into a :class:`DesiredZnode`, so a bad object is refused before ZooKeeper is
called. It enforces every rule of the CRD's CEL validation rules again (kube-apiserver
refuses those at apply time, but an object stored before the CRD had them still reaches
zkop, and ``zkop validate`` has no API server), with the same words, plus what the CRD
cannot know or does not refuse: UTF-8 of the decoded bytes, ``--max-data-bytes``, base64
padding, zkop's identities for the ACL lockout check.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from zkop.zookeeper.acls import (
    ADMIN,
    READ,
    WRITE,
    AclId,
    acl_from_spec,
    authenticated,
    expand_auth,
    lockout,
)
from zkop.zookeeper.actions import CREATOR_ALL_ACL, OPEN_ACL, AclEntry
from zkop.zookeeper.frozen import fast_init
from zkop.zookeeper.paths import InvalidPath, validate_path

__all__ = [
    "FINALIZER",
    "GROUP",
    "KIND",
    "PLURAL",
    "VERSION",
    "ZNODE_NEEDS",
    "DataRef",
    "DesiredZnode",
    "InvalidSpec",
    "RefNotFound",
    "SecretNeedsAcl",
    "acl_from_spec",
    "check_lockout",
    "parse_spec",
]

GROUP = "platform.example.com"
VERSION = "v1alpha1"
KIND = "ZooKeeperConfig"
PLURAL = "zookeeperconfigs"
FINALIZER = "zookeeperconfigs.platform.example.com/finalizer"

#: Default cap on decoded data, bytes. ZooKeeper's ``jute.maxbuffer`` is
#: 1 MiB (1,048,575 bytes) for a whole packet; the server answers an oversize
#: request by closing the session, so zkop never sends one.
DEFAULT_MAX_DATA_BYTES = 1_000_000

SyncPolicy = Literal["createOrUpdate", "createOnly"]
DeletionPolicy = Literal["Delete", "Orphan"]

#: What zkop needs on a managed znode whose ACL it manages: read it (and arm its watch), restore
#: its data, restore its ACL (``setACL`` needs ADMIN, ``PrepRequestProcessor`` ``OpCode.setACL``).
ZNODE_NEEDS = READ | WRITE | ADMIN
Encoding = Literal["utf-8", "binary"]


class InvalidSpec(ValueError):
    """The spec breaks a rule; retrying cannot help until the spec changes.

    Attributes:
        field: the offending field, e.g. ``spec.path``.
        rule: a human sentence naming the rule.
    """

    def __init__(self, field: str, rule: str) -> None:
        super().__init__(f"{field}: {rule}")
        self.field = field
        self.rule = rule


class SecretNeedsAcl(InvalidSpec):
    """The value comes from a Secret and ``spec.acl`` is not set, but zkop holds no authenticated identity
    (digest, x509, sasl) to make it readable by zkop alone (:data:`~zkop.zookeeper.actions.CREATOR_ALL_ACL`);
    nothing is written until ``spec.acl`` is set or zkop is given credentials."""

    def __init__(self, ref: DataRef, path: str, ids: frozenset[AclId]) -> None:
        held = ", ".join(map(str, sorted(ids))) or "no identity (anonymous)"
        super().__init__(
            "spec.acl",
            f"znode {path} would hold the value of Secret {ref.name} key {ref.key}, which zkop writes readable "
            f"only by its own authenticated identities when spec.acl is not set; zkop holds none (it authenticates "
            f"as {held}), so the value would be readable by anyone who reaches ZooKeeper. Set spec.acl (granting "
            "world read only if that is meant), or give zkop credentials (--zk-auth-file, a TLS client "
            "certificate, SASL)")


@fast_init
@dataclass(frozen=True)
class DataRef:
    """``spec.dataFrom``: a key of a ConfigMap or Secret in the object's namespace.

    Attributes:
        kind: ``ConfigMap`` or ``Secret``.
        name, key: the object and the key in it.
    """

    kind: Literal["ConfigMap", "Secret"]
    name: str
    key: str

    @property
    def secret(self) -> bool:
        """True if the bytes come from a Secret (never log, print or report them)."""
        return self.kind == "Secret"


class RefNotFound(Exception):
    """``spec.dataFrom`` names a ConfigMap/Secret or key that does not exist (yet); not a spec error.

    The object is reconciled again when the referenced object appears.
    """

    def __init__(self, ref: DataRef) -> None:
        super().__init__(f"{ref.kind} {ref.name!r} has no key {ref.key!r} (or does not exist)")
        self.ref = ref


#: Looks up ``(kind, name, key)`` in the object's namespace; returns the bytes or ``None``.
RefLookup = Callable[[DataRef], bytes | None]


@fast_init
@dataclass(frozen=True)
class DesiredZnode:
    """What a ZooKeeperConfig asks for.

    Attributes:
        path: validated absolute znode path.
        data: the exact bytes the znode must hold.
        sync_policy: ``createOrUpdate`` restores drift; ``createOnly`` never overwrites.
        deletion_policy: ``Delete`` removes the znode with the CR; ``Orphan`` leaves it.
        encoding: ``utf-8`` (data is text) or ``binary``.
        acl: the znode's ACL, sorted: ``spec.acl`` if set; else for a value from a Secret
            :data:`~zkop.zookeeper.actions.CREATOR_ALL_ACL` (zkop's own authenticated identities once expanded
            by :func:`parse_spec`), for any other value ZooKeeper's open ACL.
        source: the ConfigMap/Secret key the data comes from (``spec.dataFrom``), if any.
    """

    path: str
    data: bytes
    sync_policy: SyncPolicy = "createOrUpdate"
    deletion_policy: DeletionPolicy = "Delete"
    encoding: Encoding = "utf-8"
    acl: tuple[AclEntry, ...] = OPEN_ACL
    source: DataRef | None = None


def check_lockout(desired: DesiredZnode, ids: frozenset[AclId], *, address_known: bool = True) -> None:
    """Refuse a ``spec.acl`` that would deny zkop what it needs to manage the znode (:data:`ZNODE_NEEDS`).

    Evaluated as ZooKeeper 3.8 would (:func:`zkop.zookeeper.acls.granted`: ``ZooKeeperServer.checkACL``,
    ``fixupACL`` for ``auth``). The open ACL always passes.

    Raises:
        InvalidSpec: naming the identities zkop has and the ones the ACL names.
    """
    if desired.acl == OPEN_ACL:
        return
    problem = lockout(desired.acl, ids, ZNODE_NEEDS, address_known=address_known)
    if problem is not None:
        raise InvalidSpec("spec.acl", f"would lock zkop out of {desired.path}: {problem}")


def strict_b64decode(value: str) -> bytes:
    """Decode standard base64 (RFC 4648 §4), refusing anything but the alphabet and padding.

    Python's default decoder silently skips junk characters; Kubernetes' ``format: byte``
    does not, so neither does zkop.

    Raises:
        binascii.Error: the text is not strict base64.
    """
    return base64.b64decode(value, validate=True)


def parse_data_ref(value: Any) -> DataRef:
    """Parse ``spec.dataFrom`` (``{configMapKeyRef: {name, key}}`` or ``{secretKeyRef: {name, key}}``).

    Raises:
        InvalidSpec: not exactly one reference, or a missing name/key.
    """
    if not isinstance(value, dict):
        raise InvalidSpec("spec.dataFrom", "must be an object")
    refs = [k for k in ("configMapKeyRef", "secretKeyRef") if value.get(k) is not None]
    if len(refs) != 1:
        raise InvalidSpec("spec.dataFrom", "exactly one of configMapKeyRef and secretKeyRef must be set")
    ref = value[refs[0]]
    if not isinstance(ref, dict) or not ref.get("name") or not ref.get("key"):
        raise InvalidSpec(f"spec.dataFrom.{refs[0]}", "needs a name and a key")
    kind: Literal["ConfigMap", "Secret"] = "ConfigMap" if refs[0] == "configMapKeyRef" else "Secret"
    return DataRef(kind, str(ref["name"]), str(ref["key"]))


def parse_spec(
    spec: Any, *, max_data_bytes: int = DEFAULT_MAX_DATA_BYTES, lookup: RefLookup | None = None,
    identities: Callable[[], frozenset[AclId]] | None = None,
) -> DesiredZnode:
    """Validate a ZooKeeperConfig ``spec`` and return the znode it declares.

    Args:
        spec: the ``spec`` mapping of the custom resource (after CRD defaulting).
        max_data_bytes: largest decoded value allowed, bytes.
        lookup: resolves ``spec.dataFrom`` from the informer caches; without it a
            ``dataFrom`` spec raises :class:`RefNotFound`.
        identities: returns zkop's identities on the ensemble (reading them may read certificate
            and credentials files); if given, a ``spec.acl`` that would lock zkop out is refused
            (:func:`check_lockout`), and ``auth`` entries are expanded to zkop's authenticated ids
            as the server stores them. ``None`` (offline validation) skips both. It is called only
            for a declared ``spec.acl`` and for a value from a Secret without one (which gets
            :data:`~zkop.zookeeper.actions.CREATOR_ALL_ACL`, never the open ACL): the open ACL passes the
            check and has no ``auth`` entry.

    Raises:
        InvalidSpec: naming the field and the rule (path rules, strict base64,
            UTF-8 for ``encoding: utf-8``, size, exactly one data source, enums, ACL ids,
            an ACL locking zkop out).
        SecretNeedsAcl: a value from a Secret, no ``spec.acl``, and ``identities`` hold no
            authenticated identity (an :class:`InvalidSpec` too).
        RefNotFound: the ConfigMap/Secret key of ``spec.dataFrom`` is missing.
    """
    if not isinstance(spec, dict):
        raise InvalidSpec("spec", "must be an object")
    path = spec.get("path")
    if not isinstance(path, str):
        raise InvalidSpec("spec.path", "must be a string")
    try:
        validate_path(path)
    except InvalidPath as err:
        raise InvalidSpec("spec.path", str(err)) from None

    encoding = spec.get("encoding", "utf-8")
    if encoding not in ("utf-8", "binary"):
        raise InvalidSpec("spec.encoding", f"must be 'utf-8' or 'binary', not {encoding!r}")
    sync_policy = spec.get("syncPolicy", "createOrUpdate")
    if sync_policy not in ("createOrUpdate", "createOnly"):
        raise InvalidSpec("spec.syncPolicy", f"must be 'createOrUpdate' or 'createOnly', not {sync_policy!r}")
    deletion_policy = spec.get("deletionPolicy", "Delete")
    if deletion_policy not in ("Delete", "Orphan"):
        raise InvalidSpec("spec.deletionPolicy", f"must be 'Delete' or 'Orphan', not {deletion_policy!r}")

    sources = [name for name in ("data", "stringData", "dataFrom") if spec.get(name) is not None]
    if len(sources) != 1:
        raise InvalidSpec("spec", "exactly one of spec.data, spec.stringData and spec.dataFrom must be set")
    source: DataRef | None = None
    if sources[0] == "dataFrom":
        source = parse_data_ref(spec["dataFrom"])
        found = lookup(source) if lookup is not None else None
        if found is None:
            raise RefNotFound(source)
        data = found
    elif sources[0] == "data":
        raw = spec["data"]
        if not isinstance(raw, str):
            raise InvalidSpec("spec.data", "must be a base64 string")
        try:
            data = strict_b64decode(raw)
        except (binascii.Error, ValueError):
            raise InvalidSpec("spec.data", "is not valid base64 (RFC 4648, standard alphabet, padded)") from None
    else:
        text = spec["stringData"]
        if not isinstance(text, str):
            raise InvalidSpec("spec.stringData", "must be a string")
        data = text.encode("utf-8", errors="surrogatepass")
    if encoding == "utf-8":
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as err:
            raise InvalidSpec(
                f"spec.{sources[0]}",
                f"is not valid UTF-8 at byte {err.start}; set spec.encoding: binary for binary data",
            ) from None
    if len(data) > max_data_bytes:
        raise InvalidSpec(
            f"spec.{sources[0]}", f"decodes to {len(data)} bytes, more than the limit of {max_data_bytes} bytes"
        )
    acl = OPEN_ACL
    secret_default = False  # a Secret's value never gets the open ACL unless spec.acl says so
    if spec.get("acl") is not None:
        if not isinstance(spec["acl"], list):
            raise InvalidSpec("spec.acl", "must be a list of {scheme, id, permissions}")
        try:
            acl = acl_from_spec(spec["acl"])
        except ValueError as err:
            raise InvalidSpec("spec.acl", str(err)) from None
    elif source is not None and source.secret:
        acl, secret_default = CREATOR_ALL_ACL, True
    desired = DesiredZnode(
        path=path, data=data, sync_policy=sync_policy, deletion_policy=deletion_policy, encoding=encoding, acl=acl,
        source=source,
    )
    if identities is not None and acl is not OPEN_ACL:  # the open ACL passes and has no auth entry
        ids = identities()
        if secret_default and not authenticated(ids):
            assert source is not None
            raise SecretNeedsAcl(source, path, ids)
        check_lockout(desired, ids, address_known=any(i.scheme == "ip" for i in ids))
        # ``auth`` entries are stored as zkop's own ids (fixupACL): desire what getACL will show.
        desired = dataclasses.replace(desired, acl=expand_auth(desired.acl, ids))
    return desired
