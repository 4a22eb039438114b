"""The mirror's pure rules: the path → key mapping and decide over complete facts, one row per rule."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from zkop.mirror.decide import (
    MAX_CONFIGMAP_BYTES,
    MirrorSpec,
    SpecError,
    contents,
    decide,
    desired_config_map,
    parse_spec,
)
from zkop.mirror.keys import key_for, key_problem
from zkop.mirror.tree import Snapshot, Znode

MIRROR: dict[str, Any] = {"metadata": {"name": "legacy", "namespace": "ns", "uid": "u-1"},
                          "spec": {"path": "/legacy/app", "recursive": True}}
SPEC = MirrorSpec("/legacy/app", True, "legacy")


def tree(*nodes: tuple[str, bytes], unreadable: tuple[str, ...] = ()) -> Snapshot:
    return Snapshot(True, tuple(Znode(f"/legacy/app/{rel}", rel, data) for rel, data in nodes), unreadable)


@pytest.mark.parametrize(("relative", "key"), [
    ("db", "db"),
    ("db/url", "db.url"),
    ("app.properties", "app.properties"),
    ("with space", "with_20space"),
    ("under_score", "under_5Fscore"),
    ("grüße", "gr_C3_BC_C3_9Fe"),
    ("a:b/c", "a_3Ab.c"),
])
def test_key_mapping_is_the_documented_one(relative: str, key: str) -> None:
    assert key_for(relative) == key
    assert key_problem(key) is None


@pytest.mark.parametrize(("key", "problem"), [
    ("x" * 254, "254 characters"), ("..x", "starts with '..'"), (".", "'.'"), ("", "empty")])
def test_keys_kube_apiserver_refuses_are_named(key: str, problem: str) -> None:
    assert problem in (key_problem(key) or "")


def test_utf8_values_go_to_data_other_bytes_to_binary_data() -> None:
    wanted = contents(SPEC, tree(("text", "héllo".encode()), ("bin", b"\xff\x00")))
    assert wanted.data == {"text": "héllo"}
    assert wanted.binary_data == {"bin": base64.b64encode(b"\xff\x00").decode()}
    assert wanted.count == 2 and not wanted.skipped


def test_a_collision_is_reported_and_neither_path_mirrored() -> None:
    wanted = contents(SPEC, tree(("a/b", b"1"), ("a.b", b"2"), ("c", b"3")))
    assert wanted.data == {"c": "3"}
    assert sorted((s.path, s.reason) for s in wanted.skipped) == [
        ("/legacy/app/a.b", "KeyCollision"), ("/legacy/app/a/b", "KeyCollision")]


def test_what_exceeds_one_mebibyte_is_left_out_in_key_order_and_the_rest_mirrored() -> None:
    big = b"x" * (MAX_CONFIGMAP_BYTES // 2)
    wanted = contents(SPEC, tree(("a", big), ("b", big), ("c", b"small")))
    assert set(wanted.data) == {"a", "c"}
    assert [(s.path, s.reason) for s in wanted.skipped] == [("/legacy/app/b", "TooLarge")]


def test_an_unreadable_znode_is_reported_and_the_rest_mirrored() -> None:
    wanted = contents(SPEC, tree(("open", b"1"), unreadable=("/legacy/app/secret",)))
    assert wanted.data == {"open": "1"}
    assert [(s.path, s.reason) for s in wanted.skipped] == [("/legacy/app/secret", "NoAuth")]


def test_a_single_znode_is_named_by_its_last_name_or_spec_key() -> None:
    one = Snapshot(True, (Znode("/legacy/app", "", b"v"),))
    assert contents(MirrorSpec("/legacy/app", False, "cm"), one).data == {"app": "v"}
    assert contents(MirrorSpec("/legacy/app", False, "cm", "app.conf"), one).data == {"app.conf": "v"}


@pytest.mark.parametrize(("spec", "error"), [
    ({"path": "relative"}, "absolute"), ({"path": "/a/"}, "trailing"),
    ({"path": "/a", "recursive": True, "key": "k"}, "recursive: false"), ({"path": "/a", "key": "..k"}, "'..'")])
def test_invalid_specs_are_refused(spec: dict[str, Any], error: str) -> None:
    with pytest.raises(SpecError, match=error):
        parse_spec({"metadata": {"name": "m"}, "spec": spec})


def test_rule_invalid_spec_writes_nothing_and_stalls() -> None:
    decision = decide(MIRROR, SpecError("spec.path: bad"), None, None)
    assert decision.write is None and decision.stalled and decision.reason == "InvalidSpec" and decision.warnings


def test_rule_a_foreign_configmap_is_never_written() -> None:
    foreign = {"metadata": {"name": "legacy", "resourceVersion": "1"}, "data": {"mine": "yes"}}
    decision = decide(MIRROR, SPEC, tree(("a", b"1")), foreign)
    assert decision.write is None and decision.stalled and decision.reason == "ConfigMapConflict"


def test_rule_first_pass_creates_an_owned_configmap() -> None:
    decision = decide(MIRROR, SPEC, tree(("a", b"1")), None)
    assert decision.write is not None and decision.write[0] == "create"
    body = decision.write[1]
    assert body["data"] == {"a": "1"}
    assert body["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert body["metadata"]["annotations"]["platform.example.com/mirrored-from"] == "/legacy/app"
    assert decision.reason == "Mirrored" and decision.mirrored == 1 and decision.changed


def test_rule_unchanged_contents_write_nothing_and_a_deleted_znode_is_removed() -> None:
    owned = desired_config_map(MIRROR, SPEC, contents(SPEC, tree(("a", b"1"), ("b", b"2"))))
    owned["metadata"]["resourceVersion"] = "7"
    assert decide(MIRROR, SPEC, tree(("a", b"1"), ("b", b"2")), owned).write is None
    decision = decide(MIRROR, SPEC, tree(("a", b"1")), owned)
    assert decision.write == ("patch", {"data": {"b": None, "a": "1"}, "metadata": {"resourceVersion": "7"}})
    assert decision.changed


def test_rule_partial_mirror_is_ready_with_a_warning() -> None:
    decision = decide(MIRROR, SPEC, tree(("a", b"1"), unreadable=("/legacy/app/x",)), None)
    assert decision.ready and decision.reason == "PartiallyMirrored" and decision.mirrored == 1
    assert decision.warnings and "NoAuth" in decision.message


def test_rule_a_missing_root_mirrors_nothing() -> None:
    decision = decide(MIRROR, SPEC, Snapshot(False, ()), None)
    assert decision.reason == "RootNotFound" and decision.write is not None and decision.write[1]["data"] == {}


def test_the_loop_check_reads_the_annotations_the_mirror_writes() -> None:
    from zkop.mirror import decide as mirror_decide
    from zkop.zkconfig import refs

    assert (refs.MIRRORED_FROM, refs.MIRRORED_RECURSIVE) == (mirror_decide.ANNOTATION_PATH,
                                                             mirror_decide.ANNOTATION_RECURSIVE)


@pytest.mark.parametrize(("recursive", "path", "loop"), [
    (True, "/legacy/app/db", True), (True, "/legacy/app", True), (True, "/legacy/other", False),
    (False, "/legacy/app", True), (False, "/legacy/app/db", False), (True, "/legacy/application", False)])
def test_a_zookeeperconfig_written_from_a_mirror_of_its_own_path_is_refused(recursive: bool, path: str,
                                                                             loop: bool) -> None:
    from zkop.zkconfig.refs import ref_data
    from zkop.zkconfig.spec import DataRef, InvalidSpec

    spec = MirrorSpec("/legacy/app", recursive, "legacy")
    config_map = desired_config_map(MIRROR, spec, contents(spec, tree(("db", b"1"))))
    ref = DataRef("ConfigMap", "legacy", "db")
    if loop:
        with pytest.raises(InvalidSpec, match="loop"):
            ref_data(config_map, ref, writes_to=path)
    else:
        assert ref_data(config_map, ref, writes_to=path) == (b"1" if recursive else None)
    assert ref_data({"data": {"db": "1"}}, ref, writes_to=path) == b"1"  # not a mirror's: no loop
