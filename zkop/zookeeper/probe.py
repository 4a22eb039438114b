"""Who zkop is on the ensemble, and whether it can use what it writes: identities, parent ACL, start-up probe.

ZooKeeper decides access by the identities a session holds (Programmer's Guide, "ZooKeeper access
control using ACLs"): its digest credentials, the ``x509`` subject of its client certificate, its
``sasl`` principal and its ``ip`` address. :func:`session_identities` lists them as zkop knows
them, :func:`parent_acl_problem` checks that ``--zk-parent-acl`` keeps zkop in, and
:func:`run_probe` writes, reads back and deletes a scratch znode before any managed one is
touched. :class:`~zkop.zookeeper.adapter.ZooKeeperAdapter` exposes them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import Any

from kazoo.exceptions import NoNodeError

from zkop.zookeeper.acls import CREATE, DELETE, READ, AclId, identities, lockout
from zkop.zookeeper.actions import Action, CreateNode, DeleteNode, Observed
from zkop.zookeeper.connection import ConnectionOptions
from zkop.zookeeper.errors import ZooKeeperError, ZooKeeperNoAuth
from zkop.zookeeper.paths import parent_paths
from zkop.zookeeper.security import sasl_principals, x509_subject

__all__ = ["PARENT_NEEDS", "client_address", "parent_acl_problem", "run_probe", "session_identities"]

#: What zkop needs on the parents it creates (``--zk-parent-acl``): create and delete the znodes
#: below (ZooKeeper checks CREATE/DELETE on the parent, ``PrepRequestProcessor``), list them.
PARENT_NEEDS = READ | CREATE | DELETE


def client_address(client: Any) -> str | None:
    """The local address of kazoo ``client``'s connection (what the server's ``ip`` scheme sees,
    unless NAT is in between), or ``None`` while not connected."""
    try:
        sock = client._connection._socket
        return str(sock.getsockname()[0]) if sock is not None else None
    except (AttributeError, OSError, IndexError):
        return None


def session_identities(options: ConnectionOptions, address: str | None) -> frozenset[AclId]:
    """The identities a session with ``options`` holds (:func:`zkop.zookeeper.acls.identities`): the
    digest ids of its credentials, the ``x509`` subject of its client certificate, its ``sasl``
    principal(s) (:func:`zkop.zookeeper.security.sasl_principals`) and ``ip:<address>`` if known.
    Read from the files each time: they may have been rotated."""
    ids = identities(options.auth, address=address, x509_subject=x509_subject(options.tls_cert_file))
    for principal in sasl_principals(options.sasl_mechanism, options.sasl_credentials_file, options.sasl_principal):
        ids |= identities(sasl_principal=principal)
    return ids


def parent_acl_problem(options: ConnectionOptions, ids: frozenset[AclId]) -> str | None:
    """Why ``options.parent_acl`` would lock a session holding ``ids`` out of the parents it creates, or ``None``.

    Needs :data:`PARENT_NEEDS`; ``ip`` entries count only once the session's address is known.
    """
    problem = lockout(options.parent_acl, ids, PARENT_NEEDS, address_known=any(i.scheme == "ip" for i in ids))
    return f"--zk-parent-acl {problem}" if problem else None


def run_probe(scratch_root: str, problem: str | None, *,
              create_parents: Callable[[Sequence[str], list[str]], object],
              execute: Callable[[Sequence[Action]], None], read: Callable[[str], Observed | None]) -> None:
    """Write, read back and delete a scratch znode under ``scratch_root`` (parents created).

    ``problem`` (from :func:`parent_acl_problem`) refuses the probe before anything is written. The
    writes go through ``create_parents(paths, made)`` (appending each parent it creates to
    ``made``) and ``execute(actions)``, the read through ``read(path)`` (open ACL expected). If a
    step is refused all the same, the parents the probe created are deleted again, so nothing is
    left that zkop cannot read.

    Raises:
        ZooKeeperNoAuth: ``problem`` is set, a step was refused, or the bytes read back differ.
        ZooKeeperUnavailable: the session failed meanwhile.
    """
    if problem is not None:
        raise ZooKeeperNoAuth(f"start-up probe: {problem}")
    path = f"{scratch_root.rstrip('/')}/{uuid.uuid4().hex}"
    payload = os.urandom(16)
    made: list[str] = []  # the parents this probe creates (not the ones that were there)
    try:
        create_parents(parent_paths(path), made)
        execute([CreateNode(path, payload)])
        try:
            observed = read(path)
            if observed is None or observed.data != payload:
                raise ZooKeeperNoAuth(f"start-up probe: {path} did not read back what was written")
        finally:
            with suppress(NoNodeError):
                execute([DeleteNode(path, 0)])
    except ZooKeeperNoAuth:
        for parent in reversed(made):  # deepest first; ones that were there before stay
            with suppress(ZooKeeperError, NoNodeError):
                execute([DeleteNode(parent, 0)])
        raise
