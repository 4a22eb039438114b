"""Sizes and counts in action descriptions and status messages read as English ("1 byte")."""

from __future__ import annotations

from zkop.zookeeper.actions import OPEN_ACL, CreateNode, SetAcl, SetData, describe, size


def test_size_is_singular_for_one_byte_only() -> None:
    assert [size(b""), size(b"x"), size(b"xy"), size(1), size(48)] == ["0 bytes", "1 byte", "2 bytes", "1 byte",
                                                                       "48 bytes"]


def test_descriptions_count_in_english() -> None:
    assert describe(CreateNode("/a", b"1", OPEN_ACL)) == "create /a (1 byte)"
    assert describe(SetData("/a", b"10", 3)) == "update /a (version 3, 2 bytes)"
    assert describe(SetData("/a", b"1", 3), zkcli=True) == "set /a (1 byte, if version 3)"
    assert describe(SetAcl("/a", OPEN_ACL, 0)) == "set the ACL of /a (aversion 0, 1 entry)"
    assert describe(SetAcl("/a", OPEN_ACL + OPEN_ACL, 0)) == "set the ACL of /a (aversion 0, 2 entries)"
