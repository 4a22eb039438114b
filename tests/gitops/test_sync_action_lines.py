"""The lines ``zkop sync`` prints for each action (the zkCli form of :func:`zkop.zookeeper.actions.describe`)."""

from __future__ import annotations

from zkop.zookeeper.actions import OPEN_ACL, AclEntry, CreateNode, DeleteNode, SetAcl, SetData, describe

ACL = (AclEntry("digest", "alice:h=", 31), AclEntry("world", "anyone", 1))


def test_sync_names_the_acl_the_operator_counts_it() -> None:
    assert describe(CreateNode("/a", b"hello"), zkcli=True) == "create /a (5 bytes)"
    assert describe(CreateNode("/a", b"hello", OPEN_ACL), zkcli=True) == "create /a (5 bytes)"
    assert describe(CreateNode("/a", b"hello", ACL), zkcli=True) == (
        "create /a (5 bytes, ACL digest:alice:h= read,write,create,delete,admin; world:anyone read)")
    assert describe(CreateNode("/a", b"hello", ACL)) == "create /a (5 bytes)"
    assert describe(SetData("/a", b"hello!", 2), zkcli=True) == "set /a (6 bytes, if version 2)"
    assert describe(SetAcl("/a", (AclEntry("ip", "10.0.0.1", 0),), 1), zkcli=True) == (
        "setAcl /a (ip:10.0.0.1 none, if aversion 1)")
    assert describe(SetAcl("/a", ACL, 1)) == "set the ACL of /a (aversion 1, 2 entries)"
    assert describe(DeleteNode("/a", 3), zkcli=True) == "delete /a (if version 3)"
