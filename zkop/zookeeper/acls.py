"""ZooKeeper ACL semantics, replayed client-side so zkop never writes an ACL that locks itself out.

The ZooKeeper 3.8 server's rules:

* **Identities** (:class:`AclId`, :func:`identities`): ``digest`` as
  ``DigestAuthenticationProvider.generateDigest``; ``ip:<client address>`` on every connection
  (``NIOServerCnxn``/``NettyServerCnxn``); ``x509`` (``X509AuthenticationProvider``) and ``sasl``
  (``SASLAuthenticationProvider``) passed in by the connection options.
* **Evaluation** (:func:`granted`): ``ZooKeeperServer.checkACL``, with ``auth`` entries expanded to
  every authenticated identity as ``PrepRequestProcessor.fixupACL`` does (``InvalidACL`` without one).
* **Redaction**: ``getACL`` without ADMIN rewrites digest ids to ``user:x`` (ZOOKEEPER-1392,
  ``FinalRequestProcessor``); such a marker is never a real id (:func:`is_redacted`,
  :func:`valid_digest_id`).

Not modelled: a ``super`` identity or ``skipACL=yes``, which a client cannot see; zkop then refuses
ACLs the server would let it manage (the safe side).
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from kazoo.security import make_digest_acl_credential

from zkop.zookeeper.actions import PERMISSIONS, AclEntry

__all__ = [
    "ADMIN",
    "CREATE",
    "DELETE",
    "READ",
    "WRITE",
    "AclId",
    "acl_from_spec",
    "authenticated",
    "describe_perms",
    "expand_auth",
    "granted",
    "identities",
    "is_redacted",
    "lockout",
    "valid_digest_id",
    "world_readable",
]

READ, WRITE, CREATE, DELETE, ADMIN = (PERMISSIONS[n] for n in ("read", "write", "create", "delete", "admin"))

#: Schemes whose identities ``fixupACL`` substitutes for an ``auth`` entry (``isAuthenticated()``).
AUTHENTICATED_SCHEMES = frozenset({"digest", "x509", "sasl"})


@dataclass(frozen=True, order=True)
class AclId:
    """One identity a session holds (ZooKeeper's ``Id``): ``scheme`` and ``id``, e.g. ``ip``/``127.0.0.1``."""

    scheme: str
    id: str

    def __str__(self) -> str:
        return f"{self.scheme}:{self.id}"


def identities(auth: Iterable[tuple[str, str]] = (), *, address: str | None = None,
               x509_subject: str | None = None, sasl_principal: str | None = None) -> frozenset[AclId]:
    """The identities a session with these credentials holds on the server.

    Args:
        auth: ``(scheme, credential)`` pairs as sent with ``addauth`` (``ConnectionOptions.auth``):
            ``("digest", "user:password")`` becomes ``digest:user:<base64 sha1>``; other schemes
            are taken as naming their id directly.
        address: the client address the server sees (``ip`` scheme), if known; behind NAT it is
            not the local socket's.
        x509_subject: the subject DN of the TLS client certificate (``x509`` scheme).
        sasl_principal: the SASL principal after the server's realm/host stripping (``sasl`` scheme).

    Returns:
        The set of :class:`AclId`; empty for an anonymous session whose address is unknown.
    """
    ids: set[AclId] = set()
    for scheme, credential in auth:
        if scheme == "digest":
            user, _, password = credential.partition(":")
            ids.add(AclId("digest", make_digest_acl_credential(user, password)))
        else:
            ids.add(AclId(scheme, credential))
    if address:
        ids.add(AclId("ip", address))
    if x509_subject:
        ids.add(AclId("x509", x509_subject))
    if sasl_principal:
        ids.add(AclId("sasl", sasl_principal))
    return frozenset(ids)


def _ip_matches(address: str, expression: str) -> bool:
    """``IPAuthenticationProvider.matches``: ``address`` within ``addr[/bits]`` (comma lists allowed)."""
    try:
        client = ipaddress.ip_address(address)
    except ValueError:
        return False
    for part in expression.split(","):
        try:
            if client in ipaddress.ip_network(part.strip(), strict=False):
                return True
        except ValueError:
            continue
    return False


def _matches(entry: AclEntry, who: AclId) -> bool:
    if entry.scheme != who.scheme:
        return False
    if entry.scheme == "ip":
        return _ip_matches(who.id, entry.id)
    return entry.id == who.id  # digest, x509, sasl: ServerAuthenticationProvider.matches is equality


def granted(acl: Iterable[AclEntry], ids: Iterable[AclId]) -> int:
    """The permission bits ``acl`` grants a session holding ``ids`` (``ZooKeeperServer.checkACL``).

    An ``auth`` entry grants its permissions when the session has an authenticated identity
    (it becomes those identities when the ACL is written, ``fixupACL``). An empty ACL grants
    everything (``checkACL`` returns at once).

    Returns:
        Bitmask READ=1, WRITE=2, CREATE=4, DELETE=8, ADMIN=16.
    """
    entries, held = list(acl), frozenset(ids)
    if not entries:
        return sum(PERMISSIONS.values())
    authenticated = any(i.scheme in AUTHENTICATED_SCHEMES for i in held)
    mask = 0
    for entry in entries:
        if entry.scheme == "world" and entry.id == "anyone":
            mask |= entry.perms
        elif entry.scheme == "auth":
            mask |= entry.perms if authenticated else 0
        elif any(_matches(entry, who) for who in held):
            mask |= entry.perms
    return mask


def authenticated(ids: Iterable[AclId]) -> bool:
    """True if ``ids`` hold an identity an ``auth`` ACL entry resolves to (digest, x509, sasl; not ``ip``)."""
    return any(i.scheme in AUTHENTICATED_SCHEMES for i in ids)


def world_readable(acl: Iterable[AclEntry]) -> bool:
    """True if ``acl`` lets any client read the znode: ``world:anyone`` with READ (``checkACL`` for a
    session holding no identity at all). ``ip`` ranges do not count, however wide."""
    return bool(granted(acl, ()) & READ)


def expand_auth(acl: Iterable[AclEntry], ids: Iterable[AclId]) -> tuple[AclEntry, ...]:
    """The ACL as ZooKeeper stores it when a session holding ``ids`` writes ``acl`` (``fixupACL``).

    Every ``auth`` entry becomes one entry per authenticated identity (digest, x509, sasl) with
    its permissions; identical entries collapse (``removeDuplicates``). Without an authenticated
    identity the ``auth`` entries stay (the server refuses them, :func:`lockout` says so). So a
    ``spec.acl`` with ``auth`` compares equal to what ``getACL`` reads back, instead of looking
    drifted forever.

    Returns:
        Sorted entries.
    """
    held = sorted(i for i in ids if i.scheme in AUTHENTICATED_SCHEMES)
    out: set[AclEntry] = set()
    for entry in acl:
        if entry.scheme == "auth" and held:
            out.update(AclEntry(who.scheme, who.id, entry.perms) for who in held)
        else:
            out.add(entry)
    return tuple(sorted(out))


def describe_perms(mask: int) -> str:
    """``read, write, admin`` for a bitmask (ZooKeeper's names, lower case); ``none`` for 0."""
    return ", ".join(name for name, bit in PERMISSIONS.items() if mask & bit) or "none"


def lockout(acl: Iterable[AclEntry], ids: Iterable[AclId], needs: int, *, address_known: bool = True) -> str | None:
    """Why ``acl`` would deny a session holding ``ids`` some of ``needs``, or ``None`` if it does not.

    The sentence names the identities zkop has and the ones the ACL names, and points at the
    classic mistake: a digest credential given in its hashed form (``user:HASH`` instead of
    ``user:password``), which authenticates as ``digest:user:sha1(user:HASH)``.

    Args:
        acl: the ACL to be written.
        ids: zkop's identities (:func:`identities`).
        needs: permission bits zkop needs on the node.
        address_known: ``False`` when zkop's client address is not known yet (before it
            connects): then ``ip`` entries are given the benefit of the doubt (the check is
            repeated once connected).
    """
    entries, held = list(acl), frozenset(ids)
    if any(e.scheme == "auth" for e in entries) and not any(i.scheme in AUTHENTICATED_SCHEMES for i in held):
        return ("the ACL has an 'auth' entry but zkop has no authenticated identity (digest, x509 or sasl), "
                "so ZooKeeper would refuse it (InvalidACL); give zkop credentials or name ids explicitly")
    mask = granted(entries, held)
    if not address_known:
        mask |= sum(e.perms for e in entries if e.scheme == "ip")
    missing = needs & ~mask
    if not missing:
        return None
    has = ", ".join(map(str, sorted(held))) or "no identity (anonymous)"
    named = "; ".join(f"{e.scheme}:{e.id} {describe_perms(e.perms)}" for e in entries)
    message = (f"the ACL would deny zkop {describe_perms(missing)} (it needs {describe_perms(needs)}): "
               f"zkop authenticates as {has}; the ACL grants {named}")
    hashed = _hashed_credential_hint(entries, held)
    return f"{message}; {hashed}" if hashed else message


def _hashed_credential_hint(entries: list[AclEntry], held: frozenset[AclId]) -> str:
    """A hint when zkop's digest credential looks like the hashed id the ACL names."""
    for entry in entries:
        if entry.scheme != "digest":
            continue
        user, _, digest = entry.id.partition(":")
        for who in held:
            if who.scheme != "digest" or who.id.partition(":")[0] != user or who.id == entry.id:
                continue
            if who.id == make_digest_acl_credential(user, digest):
                return (f"zkop's credential for {user!r} is the hashed id itself ({user}:{digest}); "
                        "the credential file must hold user:password, the ACL the hash")
            return f"zkop's password for {user!r} does not produce the digest the ACL names"
    return ""


def is_redacted(entry: AclEntry) -> bool:
    """True for a digest id as ZooKeeper shows it to a caller without ADMIN: ``user:x`` (ZOOKEEPER-1392)."""
    return entry.scheme == "digest" and entry.id.partition(":")[2] == "x"


def valid_digest_id(ident: str) -> bool:
    """True if ``ident`` is ``user:base64(sha1(user:password))`` — a hash, not a redaction marker or a password.

    ZooKeeper itself accepts any ``a:b`` (``DigestAuthenticationProvider.isValid``); zkop is
    stricter so that a redacted ``user:x`` or a plain password is never written as an ACL.
    """
    user, sep, digest = ident.partition(":")
    if not user or not sep or len(digest) != 28:
        return False
    try:
        return len(base64.b64decode(digest, validate=True)) == 20
    except (binascii.Error, ValueError):
        return False


def acl_from_spec(entries: list[dict[str, object]]) -> tuple[AclEntry, ...]:
    """Turn ``spec.acl`` (``[{scheme, id, permissions: [...]}]``) into sorted entries.

    Raises:
        ValueError: an unknown permission, an empty list, or a missing scheme/id.
    """
    result = []
    for index, entry in enumerate(entries):
        scheme, ident, perms = entry.get("scheme"), entry.get("id"), entry.get("permissions")
        if not isinstance(scheme, str) or not scheme or not isinstance(ident, str):
            raise ValueError(f"acl[{index}] needs a scheme and an id")
        if not isinstance(perms, list) or not perms:
            raise ValueError(f"acl[{index}].permissions must list at least one of {', '.join(PERMISSIONS)}")
        if scheme == "world" and ident != "anyone":
            raise ValueError(f"acl[{index}]: the world scheme has the one id 'anyone', not {ident!r}")
        if scheme == "digest" and not valid_digest_id(ident):
            if is_redacted(AclEntry(scheme, ident, 0)):
                raise ValueError(
                    f"acl[{index}]: digest id {ident!r} is a redaction marker, not an id: ZooKeeper shows every "
                    "digest as user:x to a client without ADMIN on the znode; export again with credentials "
                    "that have ADMIN on it, or give user:base64(sha1(user:password))")
            raise ValueError(f"acl[{index}]: digest id {ident!r} is not user:base64(sha1(user:password)) "
                             "(28 characters after the colon; kazoo's make_digest_acl_credential makes one)")
        mask = 0
        for name in perms:
            if name not in PERMISSIONS:
                raise ValueError(f"acl[{index}].permissions: unknown permission {name!r}")
            mask |= PERMISSIONS[str(name)]
        result.append(AclEntry(scheme, ident, mask))
    if not result:
        raise ValueError("acl must not be empty (omit it for the open ACL)")
    return tuple(sorted(set(result)))
