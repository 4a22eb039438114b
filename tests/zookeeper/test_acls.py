"""ACL semantics replayed client-side (:mod:`zkop.zookeeper.acls`; pure, no server).

Each row follows the ZooKeeper 3.8 server: ``ZooKeeperServer.checkACL`` (world:anyone, matching
identities of the same scheme), ``PrepRequestProcessor.fixupACL`` (``auth`` becomes the writer's
authenticated ids), ``IPAuthenticationProvider.matches`` (address/prefix),
``DigestAuthenticationProvider.generateDigest`` (``user:base64(sha1(user:password))``) and the
getACL redaction for callers without ADMIN (ZOOKEEPER-1392). The same evaluation is checked
against a real server in ``test_acls_match_the_server``.
"""

from __future__ import annotations

import uuid

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import ACL, Id, make_digest_acl_credential
from zkop_testing.waiting import EVENTUALLY
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.zookeeper.acls import (
    ADMIN,
    CREATE,
    DELETE,
    READ,
    WRITE,
    AclId,
    expand_auth,
    granted,
    identities,
    is_redacted,
    lockout,
    valid_digest_id,
)
from zkop.zookeeper.actions import AclEntry

#: Runs on every ZooKeeper line under test (ZKOP_ZOOKEEPER_LINES, tests/conftest.py).
pytestmark = pytest.mark.zookeeper_semantics

OPS = make_digest_acl_credential("ops", "ops-pw")
#: The classic: the credential file holds the hashed id instead of the password.
HASHED = identities([("digest", OPS)])
ZKOP = identities([("digest", "ops:ops-pw")], address="10.1.2.3")
ANON = identities(address="10.1.2.3")
ALL = READ | WRITE | CREATE | DELETE | ADMIN


def test_identities_are_what_the_server_computes() -> None:
    assert identities([("digest", "ops:ops-pw")]) == {AclId("digest", OPS)}
    assert identities(address="127.0.0.1", x509_subject="CN=zkop", sasl_principal="zkop") == {
        AclId("ip", "127.0.0.1"), AclId("x509", "CN=zkop"), AclId("sasl", "zkop")}
    assert identities() == frozenset()
    # A hashed credential authenticates as the hash of the hash, not as the id it names.
    assert {AclId("digest", OPS)} != HASHED


@pytest.mark.parametrize(
    ("rule", "acl", "ids", "mask"),
    [
        ("checkACL: an empty ACL allows everything", [], ANON, ALL),
        ("world:anyone grants its permissions to every session", [AclEntry("world", "anyone", READ)], ANON, READ),
        ("digest: equality of the generated id", [AclEntry("digest", OPS, ALL)], ZKOP, ALL),
        ("digest: a hashed credential never matches", [AclEntry("digest", OPS, ALL)], HASHED, 0),
        ("permissions of several matching entries add up",
         [AclEntry("world", "anyone", READ), AclEntry("digest", OPS, WRITE | ADMIN)], ZKOP, READ | WRITE | ADMIN),
        ("ip: address within the prefix", [AclEntry("ip", "10.1.0.0/16", ALL)], ANON, ALL),
        ("ip: address outside the prefix", [AclEntry("ip", "10.2.0.0/16", ALL)], ANON, 0),
        ("ip: exact address", [AclEntry("ip", "10.1.2.3", READ)], ANON, READ),
        ("auth: fixupACL substitutes the writer's authenticated ids", [AclEntry("auth", "", ALL)], ZKOP, ALL),
        ("auth: ip is not an authenticated identity", [AclEntry("auth", "", ALL)], ANON, 0),
        ("x509: subject equality", [AclEntry("x509", "CN=zkop", ALL)], identities(x509_subject="CN=zkop"), ALL),
        ("sasl: principal equality", [AclEntry("sasl", "other", ALL)], identities(sasl_principal="zkop"), 0),
        ("a scheme zkop holds no id of grants nothing", [AclEntry("digest", OPS, ALL)], ANON, 0),
    ],
)
def test_granted_follows_check_acl(rule: str, acl: list[AclEntry], ids: frozenset[AclId], mask: int) -> None:
    assert granted(acl, ids) == mask, rule


def test_auth_entries_expand_as_fixup_acl_stores_them() -> None:
    acl = [AclEntry("auth", "", ALL), AclEntry("world", "anyone", READ)]
    two = identities([("digest", "ops:ops-pw"), ("digest", "ci:ci-pw")], address="10.1.2.3")
    assert expand_auth(acl, two) == tuple(sorted({
        AclEntry("digest", OPS, ALL), AclEntry("digest", make_digest_acl_credential("ci", "ci-pw"), ALL),
        AclEntry("world", "anyone", READ)}))  # one entry per authenticated id; ip is not one
    assert expand_auth(acl, ANON) == tuple(sorted(acl))  # nothing to expand to: the server refuses it


def test_lockout_names_both_identities_and_the_hashed_credential() -> None:
    problem = lockout([AclEntry("digest", OPS, ALL)], HASHED, READ | WRITE | ADMIN)
    assert problem is not None
    assert f"the ACL grants digest:{OPS} read, write, create, delete, admin" in problem
    assert f"zkop authenticates as digest:{make_digest_acl_credential('ops', OPS.split(':')[1])}" in problem
    assert "is the hashed id itself" in problem and "must hold user:password" in problem
    wrong = lockout([AclEntry("digest", OPS, ALL)], identities([("digest", "ops:typo")]), READ)
    assert wrong is not None and "password for 'ops' does not produce the digest" in wrong
    assert lockout([AclEntry("digest", OPS, ALL)], ZKOP, READ | WRITE | ADMIN) is None
    partial = lockout([AclEntry("world", "anyone", READ)], ZKOP, READ | WRITE | ADMIN)
    assert partial is not None and "would deny zkop write, admin" in partial


def test_lockout_of_auth_without_identity_and_ip_before_connecting() -> None:
    problem = lockout([AclEntry("auth", "", ALL)], ANON, READ)
    assert problem is not None and "no authenticated identity" in problem and "InvalidACL" in problem
    # Before connecting the client address is unknown: ip entries get the benefit of the doubt.
    assert lockout([AclEntry("ip", "10.0.0.0/8", ALL)], frozenset(), READ, address_known=False) is None
    assert lockout([AclEntry("ip", "10.0.0.0/8", ALL)], frozenset(), READ) is not None


@pytest.mark.parametrize(
    ("entry", "redacted", "valid"),
    [
        (AclEntry("digest", "ops:x", 31), True, False),
        (AclEntry("digest", OPS, 31), False, True),
        (AclEntry("digest", "ops:ops-pw", 31), False, False),  # a password, not a hash
        (AclEntry("digest", "ops:" + "A" * 27 + "=", 31), False, True),
        (AclEntry("digest", "ops", 31), False, False),
        (AclEntry("world", "x:x", 31), False, False),
    ],
)
def test_redaction_markers_and_digest_ids(entry: AclEntry, redacted: bool, valid: bool) -> None:
    assert is_redacted(entry) == redacted
    assert valid_digest_id(entry.id) == valid or entry.scheme != "digest"


def test_acls_match_the_server(zk_server: ZooKeeperServer, zk: KazooClient, zk_base: str) -> None:
    """The evaluation agrees with a real server (each line under test) for the digest, world, ip and auth rows."""
    session = KazooClient(hosts=zk_server.hosts, auth_data=[("digest", "ops:ops-pw")])
    session.start(timeout=EVENTUALLY)
    made: list[str] = []
    try:
        address = session._connection._socket.getsockname()[0]
        ids = identities([("digest", "ops:ops-pw")], address=address)
        cases = [
            [ACL(READ, Id("digest", OPS))],
            [ACL(READ, Id("digest", make_digest_acl_credential("ops", OPS)))],  # hashed credential's id
            [ACL(READ, Id("ip", f"{address}/32"))],
            [ACL(READ, Id("ip", "10.255.255.0/24"))],
            [ACL(READ, Id("auth", ""))],
            [ACL(WRITE, Id("world", "anyone"))],
        ]
        for acl in cases:
            path = f"{zk_base}/{uuid.uuid4().hex}"
            session.create(path, b"x", acl=acl)
            made.append(path)
            expected = bool(granted([AclEntry(a.id.scheme, a.id.id, a.perms) for a in acl], ids) & READ)
            try:
                session.get(path)
                readable = True
            except NoAuthError:
                readable = False
            assert readable == expected, acl
    finally:
        for path in made:  # the parent is open: DELETE is checked there, so no lock-out here
            session.delete(path)
        session.stop()
        session.close()
