"""A ZooKeeperConfigTree's pure rules: the expansion of its sources and the plan of a pass (table-tested)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from zkop.configtree.decide import (
    MAX_TRANSACTION_BYTES,
    ChildFacts,
    ExistingFacts,
    TreeFacts,
    decide,
    decide_delete,
)
from zkop.configtree.spec import Child, InvalidSpec, RefNotFound, expand, parse_spec
from zkop.feature.tenancy import Refusal
from zkop.ownership.declared import Declarer
from zkop.ownership.registry import OwnerStamp
from zkop.zookeeper.actions import CheckVersion, CreateNode, DeleteNode, Observed, SetData

OURS = OwnerStamp("default", "ns", "tree", "u1", "ZooKeeperConfigTree")
OTHER_CONFIG = OwnerStamp("default", "ns", "flag", "u2")


def obj(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": "tree"}, "spec": {"path": "/config/app", **spec}}


def children(spec: dict[str, Any], sources: dict[str, dict[str, Any]]) -> dict[str, bytes]:
    parsed = parse_spec(obj(**spec))
    return {c.path: c.data for c in expand(parsed, lambda ref: sources.get(f"{ref.kind}/{ref.name}"))}


def test_properties_follow_java_util_properties() -> None:
    text = "# comment\n! also\na=1\nb : two words\nc=first \\\n   second\nd\\ e=\\u0041\nempty\nx/y=seg\n"
    got = children({"from": [{"configMapRef": {"name": "cm"}, "key": "app.properties", "format": "properties"}]},
                   {"ConfigMap/cm": {"data": {"app.properties": text}}})
    assert got == {"/config/app/a": b"1", "/config/app/b": b"two words", "/config/app/c": b"first second",
                   "/config/app/d e": b"A", "/config/app/empty": b"", "/config/app/x/y": b"seg"}


def test_yaml_and_json_nest_keys_as_segments_and_keep_the_scalar_text() -> None:
    yaml_text = "server:\n  port: 8080\n  ratio: 1.50\nhosts:\n  - a\n  - b\nflag: yes\n"
    got = children({"from": [{"configMapRef": {"name": "cm"}, "key": "y", "format": "yaml", "prefix": "p"}]},
                   {"ConfigMap/cm": {"data": {"y": yaml_text}}})
    assert got == {"/config/app/p/server/port": b"8080", "/config/app/p/server/ratio": b"1.50",
                   "/config/app/p/hosts[0]": b"a", "/config/app/p/hosts[1]": b"b", "/config/app/p/flag": b"yes"}
    got = children({"from": [{"configMapRef": {"name": "cm"}, "key": "j", "format": "json"}]},
                   {"ConfigMap/cm": {"data": {"j": '{"a": {"b": 1.0, "c": true, "d": null}, "l": [1]}'}}})
    assert got == {"/config/app/a/b": b"1.0", "/config/app/a/c": b"true", "/config/app/a/d": b"",
                   "/config/app/l[0]": b"1"}


def test_keys_inline_entries_and_a_secret_with_an_acl() -> None:
    acl = [{"scheme": "world", "id": "anyone", "permissions": ["read"]}]
    got = children({"from": [{"configMapRef": {"name": "cm"}},
                             {"secretRef": {"name": "s"}, "acl": acl}],
                    "entries": [{"path": "inline", "data": base64.b64encode(b"\x00\x01").decode()}]},
                   {"ConfigMap/cm": {"data": {"k1": "v1"}, "binaryData": {"bin": base64.b64encode(b"\xff").decode()}},
                    "Secret/s": {"data": {"password": base64.b64encode(b"hunter2").decode()}}})
    assert got == {"/config/app/k1": b"v1", "/config/app/bin": b"\xff", "/config/app/password": b"hunter2",
                   "/config/app/inline": b"\x00\x01"}


@pytest.mark.parametrize(("spec", "sources", "error"), [
    ({"entries": [{"path": "../x", "stringData": "1"}]}, {}, InvalidSpec),
    ({"entries": [{"path": "/x", "stringData": "1"}]}, {}, InvalidSpec),
    ({"entries": [{"path": "a//b", "stringData": "1"}]}, {}, InvalidSpec),
    ({"from": [{"configMapRef": {"name": "cm"}, "key": "p", "format": "properties"}]},
     {"ConfigMap/cm": {"data": {"p": "../escape=1\n"}}}, InvalidSpec),
    ({"from": [{"configMapRef": {"name": "cm"}}], "entries": [{"path": "k", "stringData": "1"}]},
     {"ConfigMap/cm": {"data": {"k": "v"}}}, InvalidSpec),
    ({"from": [{"secretRef": {"name": "s"}}]}, {"Secret/s": {"data": {"k": "dg=="}}}, InvalidSpec),
    ({"from": [{"configMapRef": {"name": "cm"}, "key": "y", "format": "yaml"}]},
     {"ConfigMap/cm": {"data": {"y": "[1, 2]"}}}, InvalidSpec),
    ({"from": [{"configMapRef": {"name": "missing"}}]}, {}, RefNotFound),
    ({"from": [{"configMapRef": {"name": "cm"}, "key": "nope", "format": "json"}]},
     {"ConfigMap/cm": {"data": {}}}, RefNotFound),
])
def test_what_the_expansion_refuses(spec: dict[str, Any], sources: dict[str, dict[str, Any]],
                                    error: type[Exception]) -> None:
    """A child never lands outside the root, twice, or as a Secret's value readable by everyone."""
    with pytest.raises(error):
        children(spec, sources)


def record(stamp: OwnerStamp, version: int = 0) -> Observed:
    return Observed(stamp.to_bytes(), version)


def facts(cfs: list[ChildFacts], existing: tuple[ExistingFacts, ...] = (), **spec: Any) -> TreeFacts:
    return TreeFacts(OURS, parse_spec(obj(**spec)), tuple(cfs), existing)


def reg(path: str) -> str:
    return "/zkop/owners" + path


def test_only_what_changed_is_written_in_one_multi_with_its_claims() -> None:
    a, b, c = (Child(f"/config/app/{n}", n.encode()) for n in "abc")
    plan = decide(facts([
        ChildFacts(a, record=record(OURS, 3), znode=Observed(b"a", 1)),        # unchanged: nothing
        ChildFacts(b, record=record(OURS, 4), znode=Observed(b"old", 7)),      # changed: one setData
        ChildFacts(c),                                                          # new: claim + create
    ]), reg)
    assert len(plan.batches) == 1
    assert plan.batches[0].actions == (SetData("/config/app/b", b"b", 7), CreateNode(reg("/config/app/c"),
                                       OURS.to_bytes()), CreateNode("/config/app/c", b"c"))
    assert plan.batches[0].require == (CheckVersion(reg("/config/app/b"), 4),)
    assert (plan.declared, plan.synced, plan.updated, plan.created) == (3, 3, ("/config/app/b",), ("/config/app/c",))


def test_refused_and_conflicted_children_are_named_and_never_written() -> None:
    a, b, c = (Child(f"/config/app/{n}", b"x") for n in "abc")
    plan = decide(facts([
        ChildFacts(a, refusal=Refusal("ReservedPath", "reserved")),
        ChildFacts(b, owner=Declarer(1.0, "ZooKeeperConfig", "ns/flag")),
        ChildFacts(c, record=record(OTHER_CONFIG), znode=Observed(b"theirs", 0)),
    ]), reg)
    assert plan.batches == ()
    assert [(p.path, p.reason) for p in plan.refused] == [("/config/app/a", "ReservedPath")]
    assert [(p.path, p.message) for p in plan.conflicted] == [
        ("/config/app/b", "owned by ZooKeeperConfig ns/flag (older object in this cluster)"),
        ("/config/app/c", "owned by ns/flag in cluster 'default'")]


def test_prune_deletes_only_what_the_registry_says_is_ours() -> None:
    existing = (ExistingFacts("/config/app/gone", Observed(b"x", 2), record(OURS, 5)),
                ExistingFacts("/config/app/foreign", Observed(b"x", 0), record(OTHER_CONFIG)),
                ExistingFacts("/config/app/unowned", Observed(b"x", 0), None))
    plan = decide(facts([], existing), reg)
    assert plan.deleted == ("/config/app/gone",)
    assert plan.batches[0].actions == (DeleteNode("/config/app/gone", 2), DeleteNode(reg("/config/app/gone"), 5))
    assert decide(facts([], existing, prune=False), reg).batches == ()
    assert decide_delete(OURS, existing, delete=False, registry_path=reg)[0].actions == (
        DeleteNode(reg("/config/app/gone"), 5),)


def test_a_change_larger_than_one_request_is_split_in_order() -> None:
    big = b"x" * 400_000
    cfs = [ChildFacts(Child(f"/config/app/k{i}", big), record=record(OURS), znode=Observed(b"old", 0))
           for i in range(4)]
    existing = (ExistingFacts("/config/app/z/gone", Observed(b"x", 0), record(OURS)),)
    plan = decide(facts(cfs, existing), reg)
    assert len(plan.batches) == 2  # k0 + k1 (800 kB), then k2 + k3 and the deletion
    assert all(sum(len(a.data) for a in b.actions if isinstance(a, SetData)) <= MAX_TRANSACTION_BYTES
               for b in plan.batches)
    flat = [a for b in plan.batches for a in b.actions]
    assert [a.path for a in flat] == ["/config/app/k0", "/config/app/k1", "/config/app/k2", "/config/app/k3",
                                      "/config/app/z/gone", reg("/config/app/z/gone")]
