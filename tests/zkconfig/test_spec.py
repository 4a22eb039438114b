"""Spec parsing and ZooKeeper path rules."""

from __future__ import annotations

import base64

import pytest

from zkop.zkconfig.spec import InvalidSpec, parse_spec
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
