"""Spec parsing and ZooKeeper path rules."""

from __future__ import annotations

import base64

import pytest

from zkop.zkconfig.spec import InvalidSpec, parse_spec
from zkop.zookeeper.actions import OPEN_ACL
from zkop.zookeeper.paths import InvalidPath, parent_paths, validate_path


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_prototype_manifest_parses_unchanged() -> None:
    desired = parse_spec({"path": "/app/features/new-recommendation-engine/enabled", "data": "dHJ1ZQ=="})
    assert desired.data == b"true"
    assert desired.sync_policy == "createOrUpdate"
    assert desired.deletion_policy == "Delete"


def test_string_data_is_utf8() -> None:
    assert parse_spec({"path": "/a", "stringData": "grüße"}).data == "grüße".encode()


@pytest.mark.parametrize(
    ("spec", "field", "fragment"),
    [
        ({"path": "/a", "data": "dHJ1ZQ=!"}, "spec.data", "base64"),
        ({"path": "/a", "data": "dHJ1 ZQ=="}, "spec.data", "base64"),
        ({"path": "/a", "data": "dHJ1ZQ"}, "spec.data", "base64"),
        ({"path": "/a", "data": b64(b"\xff\xfe")}, "spec.data", "UTF-8"),
        ({"path": "/a"}, "spec", "exactly one"),
        ({"path": "/a", "data": "", "stringData": "x"}, "spec", "exactly one"),
        ({"path": "a", "data": ""}, "spec.path", "absolute"),
        ({"path": "/a/", "data": ""}, "spec.path", "end with"),
        ({"path": "/a//b", "data": ""}, "spec.path", "empty segment"),
        ({"path": "/a/../b", "data": ""}, "spec.path", "relative"),
        ({"path": "/zookeeper/quota", "data": ""}, "spec.path", "reserved"),
        ({"path": "/a", "data": "", "syncPolicy": "always"}, "spec.syncPolicy", "createOnly"),
        ({"path": "/a", "data": "", "encoding": "latin1"}, "spec.encoding", "binary"),
        # A digest id as ZooKeeper shows it without ADMIN (ZOOKEEPER-1392) is never written.
        ({"path": "/a", "data": "", "acl": [{"scheme": "digest", "id": "ops:x", "permissions": ["read"]}]},
         "spec.acl", "'ops:x' is a redaction marker"),
        ({"path": "/a", "data": "", "acl": [{"scheme": "digest", "id": "ops:ops-pw", "permissions": ["read"]}]},
         "spec.acl", "not user:base64(sha1(user:password))"),
        ({"path": "/a", "data": "", "acl": [{"scheme": "world", "id": "everyone", "permissions": ["read"]}]},
         "spec.acl", "the one id 'anyone'"),
    ],
)
def test_invalid_specs_name_the_rule(spec: dict[str, object], field: str, fragment: str) -> None:
    with pytest.raises(InvalidSpec) as info:
        parse_spec(spec)
    assert info.value.field == field
    assert fragment in str(info.value)


def test_binary_encoding_accepts_every_byte() -> None:
    data = bytes(range(256))
    assert parse_spec({"path": "/b", "data": b64(data), "encoding": "binary"}).data == data


def test_size_limit() -> None:
    parse_spec({"path": "/a", "data": b64(b"x" * 100)}, max_data_bytes=100)
    with pytest.raises(InvalidSpec, match="101 bytes"):
        parse_spec({"path": "/a", "data": b64(b"x" * 101)}, max_data_bytes=100)


@pytest.mark.parametrize(
    "path",
    ["/a\x00b", "/a\x01", "/a\x1f", "/a\x7f", "/a\x9f", "/a\ud800", "/a\uf8ff", "/a\ufff0", "/a\uffff", "/a\U0001f600"],
)
def test_forbidden_code_points(path: str) -> None:
    with pytest.raises(InvalidPath, match="forbidden character"):
        validate_path(path)


@pytest.mark.parametrize("path", ["/a", "/a.b/c-d_e", "/ünïcode/ok", "/a/.../b", "/zookeeperx", "/a/\u00a0"])
def test_valid_paths(path: str) -> None:
    assert validate_path(path) == path


def test_parent_paths() -> None:
    assert parent_paths("/a/b/c") == ["/a", "/a/b"]
    assert parent_paths("/a") == []


OPS = "ops:Rmvt8l8VUbmpurbNUjest0kMlgU="  # make_digest_acl_credential("ops", "ops-password")
ALL = ["read", "write", "create", "delete", "admin"]


@pytest.mark.parametrize(
    ("rule", "acl", "auth", "refused"),
    [
        ("no spec.acl: the open ACL", None, [], None),
        ("digest with zkop's own credential", [{"scheme": "digest", "id": OPS, "permissions": ALL}],
         [("digest", "ops:ops-password")], None),
        ("the classic: credential given in its hashed form", [{"scheme": "digest", "id": OPS, "permissions": ALL}],
         [("digest", OPS)], "is the hashed id itself"),
        ("read-only for everyone, nothing for zkop", [{"scheme": "world", "id": "anyone", "permissions": ["read"]}],
         [], "would deny zkop write, admin"),
        ("zkop may write but not restore the ACL",
         [{"scheme": "world", "id": "anyone", "permissions": ["read", "write"]}], [], "would deny zkop admin"),
        ("auth: the writer's own identities (fixupACL)", [{"scheme": "auth", "id": "", "permissions": ALL}],
         [("digest", "ops:ops-password")], None),
        ("auth without credentials: InvalidACL on the server", [{"scheme": "auth", "id": "", "permissions": ALL}],
         [], "no authenticated identity"),
        ("ip of zkop's connection", [{"scheme": "ip", "id": "10.0.0.0/8", "permissions": ALL}], [], None),
        ("ip of another network", [{"scheme": "ip", "id": "192.168.0.0/16", "permissions": ALL}], [],
         "zkop authenticates as ip:10.0.0.5"),
    ],
)
def test_an_acl_locking_zkop_out_is_refused(rule: str, acl: list[dict[str, object]] | None,
                                            auth: list[tuple[str, str]], refused: str | None) -> None:
    from zkop.zookeeper.acls import identities

    spec: dict[str, object] = {"path": "/a", "stringData": "x"}
    if acl is not None:
        spec["acl"] = acl
    ids = identities(auth, address="10.0.0.5")
    parse_spec(spec)  # offline (zkop validate): no identities, no lock-out check
    if refused is None:
        parse_spec(spec, identities=lambda: ids)
        return
    with pytest.raises(InvalidSpec) as info:
        parse_spec(spec, identities=lambda: ids)
    assert info.value.field == "spec.acl" and "would lock zkop out of /a" in str(info.value)
    assert refused in str(info.value), rule


@pytest.mark.parametrize("acl", [None, [{"scheme": "world", "id": "anyone", "permissions": ALL}]])
def test_the_open_acl_needs_no_identities(acl: list[dict[str, object]] | None) -> None:
    # The reconciler reads zkop's identities (files, socket) only for a spec.acl: the open ACL,
    # omitted or spelled out, parses the same with and without them.
    from zkop.zookeeper.acls import AclId, identities

    spec: dict[str, object] = {"path": "/a", "stringData": "x"}
    if acl is not None:
        spec["acl"] = acl
    ids = identities([("digest", "ops:ops-password")], address="10.0.0.5")
    asked: list[bool] = []

    def read_identities() -> frozenset[AclId]:
        asked.append(True)
        return ids

    assert parse_spec(spec, identities=read_identities) == parse_spec(spec) and parse_spec(spec).acl == OPEN_ACL
    assert asked == ([] if acl is None else [True])  # read for a declared spec.acl only
