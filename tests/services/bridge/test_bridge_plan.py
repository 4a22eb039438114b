"""Pure planning: the per-Service table, garbage collection, the circuit breaker, policies."""

from __future__ import annotations

from zkop.services.bridge.formats import DesiredNode, Owner, container_stamp
from zkop.services.bridge.options import Policy
from zkop.services.bridge.plan import ObservedNode, Protection, describe, is_protected, plan_service, plan_sweep
from zkop.zookeeper.actions import CreateNode, DeleteNode, SetData

ROOT = "/kubernetes/services"
ME = "prod"


def ours(path: str, uid: str | None = "u", data: bytes = b"old", version: int = 3, children: int = 0) -> ObservedNode:
    return ObservedNode(path, data, version, children, owner=Owner("zkop", ME, uid))


def foreign(path: str, data: bytes = b'{"clusterIP":"10.0.0.1"}', children: int = 0) -> ObservedNode:
    return ObservedNode(path, data, 0, children, owner=None)


# --- plan_service -----------------------------------------------------------------------------


def test_absent_nodes_are_created_parents_first() -> None:
    desired = [DesiredNode(f"{ROOT}/ns", b"c", container=True), DesiredNode(f"{ROOT}/ns/web", b"r")]
    plan = plan_service(desired, {}, [], cluster_id=ME, policy="sync")
    assert plan.actions == (CreateNode(f"{ROOT}/ns", b"c"), CreateNode(f"{ROOT}/ns/web", b"r"))
    assert plan.created == (f"{ROOT}/ns/web",)


def test_same_bytes_means_no_write_and_other_bytes_a_compare_and_set() -> None:
    path = f"{ROOT}/default-web"
    same = plan_service([DesiredNode(path, b"new")], {path: ours(path, data=b"new")}, [], cluster_id=ME, policy="sync")
    assert same.actions == ()
    changed = plan_service([DesiredNode(path, b"new")], {path: ours(path)}, [], cluster_id=ME, policy="sync")
    assert changed.actions == (SetData(path, b"new", 3),)
    # A record of an older incarnation (other uid) of the same name is ours too: rewritten.
    recreated = plan_service([DesiredNode(path, b"new")], {path: ours(path, uid="old-uid")}, [],
                             cluster_id=ME, policy="sync")
    assert recreated.actions == (SetData(path, b"new", 3),)


def test_foreign_and_other_cluster_nodes_are_never_touched() -> None:
    path = f"{ROOT}/default-web"
    for node in (foreign(path), ObservedNode(path, b"x", 0, owner=Owner("zkop", "staging", "u")),
                 ObservedNode(path, b"x", 0, ephemeral=True, owner=Owner("zkop", ME, "u"))):
        plan = plan_service([DesiredNode(path, b"new")], {path: node}, [], cluster_id=ME, policy="sync")
        assert plan.actions == () and plan.foreign == (path,)


def test_records_go_into_a_foreign_container_but_not_below_an_ephemeral_one() -> None:
    key = f"{ROOT}/default-web"
    desired = [DesiredNode(key, container_stamp(ME), container=True), DesiredNode(f"{key}/10.0.0.1", b"i")]
    # A Curator consumer created the service node (empty data) before we wrote anything.
    plan = plan_service(desired, {key: foreign(key, b"")}, [], cluster_id=ME, policy="sync")
    assert plan.actions == (CreateNode(f"{key}/10.0.0.1", b"i"),) and plan.foreign == ()
    ephemeral = ObservedNode(key, b"", 0, ephemeral=True)
    plan = plan_service(desired, {key: ephemeral}, [], cluster_id=ME, policy="sync")
    assert plan.actions == () and plan.foreign == (key, f"{key}/10.0.0.1")


def test_stale_children_of_the_key_are_deleted_only_if_ours_and_only_with_sync() -> None:
    key = f"{ROOT}/default-web"
    desired = [DesiredNode(key, b"c", container=True), DesiredNode(f"{key}/10.0.0.2", b"i")]
    observed = {key: ours(key, uid=None, data=b"c")}
    children = [ours(f"{key}/10.0.0.1"), foreign(f"{key}/vm-1"), ours(f"{key}/10.0.0.9", children=1)]
    plan = plan_service(desired, observed, children, cluster_id=ME, policy="sync")
    assert plan.actions == (CreateNode(f"{key}/10.0.0.2", b"i"), DeleteNode(f"{key}/10.0.0.1", 3))
    upsert = plan_service(desired, observed, children, cluster_id=ME, policy="upsert-only")
    assert upsert.actions == (CreateNode(f"{key}/10.0.0.2", b"i"),)
    assert upsert.suppressed == (f"delete {key}/10.0.0.1 (policy upsert-only)",)


def test_create_only_creates_but_never_updates() -> None:
    path = f"{ROOT}/default-web"
    assert plan_service([DesiredNode(path, b"new")], {}, [], cluster_id=ME, policy="create-only").actions == (
        CreateNode(path, b"new"),)
    plan = plan_service([DesiredNode(path, b"new")], {path: ours(path)}, [], cluster_id=ME, policy="create-only")
    assert plan.actions == () and plan.suppressed == (f"update {path} (policy create-only)",)


def test_describe() -> None:
    assert describe(CreateNode("/a", b"xyz")) == "create /a (3 bytes)"
    assert describe(SetData("/a", b"x", 4)) == "update /a (version 4, 1 byte)"
    assert describe(DeleteNode("/a", 2)) == "delete /a (version 2)"


# --- plan_sweep -------------------------------------------------------------------------------


def test_orphans_are_ours_and_outside_every_desired_key() -> None:
    scan = [ours(f"{ROOT}/default-web", uid="u1"), ours(f"{ROOT}/default-gone", uid="u2"),
            foreign(f"{ROOT}/legacy-thing"), ObservedNode(f"{ROOT}/staging-x", b"{}", 0,
                                                           owner=Owner("zkop", "staging", "u3"))]
    plan = plan_sweep(scan, desired_keys={f"{ROOT}/default-web"}, cluster_id=ME, policy="sync", max_deletes=10)
    assert plan.actions == (DeleteNode(f"{ROOT}/default-gone", 3),)
    assert plan.counted_uids == {"u2"}
    assert plan.foreign == 2 and plan.published == 1 and not plan.breaker_open


def test_containers_go_after_their_children_and_never_with_foreign_content() -> None:
    ns = f"{ROOT}/gone-ns"
    scan = [ours(ns, uid=None, children=2), ours(f"{ns}/a", uid="u1"), ours(f"{ns}/b", uid="u2"),
            ours(f"{ROOT}/mixed", uid=None, children=2), ours(f"{ROOT}/mixed/c", uid="u3"),
            foreign(f"{ROOT}/mixed/vm")]
    plan = plan_sweep(scan, desired_keys=set(), cluster_id=ME, policy="sync", max_deletes=0)
    assert [a.path for a in plan.actions] == [f"{ns}/a", f"{ns}/b", f"{ROOT}/mixed/c", ns]
    assert plan.counted_uids == {"u1", "u2", "u3"}


def test_nodes_with_unscanned_children_are_kept() -> None:
    deep = f"{ROOT}/a/b/c"
    scan = [ours(f"{ROOT}/a", uid=None, children=1), ours(f"{ROOT}/a/b", uid=None, children=1),
            ours(deep, uid="u", children=4)]
    assert plan_sweep(scan, desired_keys=set(), cluster_id=ME, policy="sync", max_deletes=0).actions == ()


def test_desired_keys_protect_themselves_their_children_and_their_ancestors() -> None:
    key = f"{ROOT}/team-a/web"
    scan = [ours(f"{ROOT}/team-a", uid=None, children=1), ours(key, uid=None, children=1),
            ours(f"{key}/10.0.0.1", uid="u-old")]
    assert plan_sweep(scan, desired_keys={key}, cluster_id=ME, policy="sync", max_deletes=10).actions == ()
    assert is_protected(f"{ROOT}/team-a", {key}) and is_protected(f"{key}/x", {key})
    assert not is_protected(f"{ROOT}/team-b", {key}) and not is_protected(f"{ROOT}/team-a-web", {key})


def test_protection_answers_as_is_protected() -> None:
    keys = {f"{ROOT}/team-a/web", f"{ROOT}/default-api", f"{ROOT}/x/y/z"}
    paths = [f"{ROOT}/team-a", f"{ROOT}/team-a/", f"{ROOT}/team-a/web", f"{ROOT}/team-a/web/10.0.0.1",
             f"{ROOT}/team-a-web", f"{ROOT}/team-b", f"{ROOT}/default-api", f"{ROOT}/default-ap",
             f"{ROOT}/default-api/x", ROOT, "/kubernetes", "/", f"{ROOT}/x", f"{ROOT}/x/y", f"{ROOT}/x/y/z/w",
             f"{ROOT}/x/yy", "/other"]
    for desired in (keys, set(), {f"{ROOT}/default-api"}):
        protection = Protection(desired)
        assert [protection.covers(p) for p in paths] == [is_protected(p, desired) for p in paths], desired


def test_breaker_counts_services_not_nodes_and_holds_everything() -> None:
    scan = [ours(f"{ROOT}/s{i}", uid=None, children=3) for i in range(3)]
    scan += [ours(f"{ROOT}/s{i}/10.0.0.{j}", uid=f"u{i}") for i in range(3) for j in range(3)]
    ok = plan_sweep(scan, desired_keys=set(), cluster_id=ME, policy="sync", max_deletes=3)
    assert len(ok.actions) == 12 and ok.counted_uids == {"u0", "u1", "u2"} and not ok.breaker_open
    held = plan_sweep(scan, desired_keys=set(), cluster_id=ME, policy="sync", max_deletes=2)
    assert held.breaker_open and held.actions == () and len(held.orphans) == 12
    unlimited = plan_sweep(scan, desired_keys=set(), cluster_id=ME, policy="sync", max_deletes=0)
    assert len(unlimited.actions) == 12


def test_leftovers_of_still_published_services_do_not_count_for_the_breaker() -> None:
    # A layout change: the flat records of live Services are orphans, but the Services are not lost.
    scan = [ours(f"{ROOT}/default-s{i}", uid=f"u{i}") for i in range(5)]
    plan = plan_sweep(scan, desired_keys={f"{ROOT}/default/s{i}" for i in range(5)}, cluster_id=ME, policy="sync",
                      max_deletes=1, live_uids={f"u{i}" for i in range(5)})
    assert len(plan.actions) == 5 and plan.counted_uids == set() and not plan.breaker_open


def test_policies_other_than_sync_delete_nothing() -> None:
    scan = [ours(f"{ROOT}/default-gone", uid="u2")]
    policies: tuple[Policy, ...] = ("upsert-only", "create-only")
    for policy in policies:
        plan = plan_sweep(scan, desired_keys=set(), cluster_id=ME, policy=policy, max_deletes=10)
        assert plan.actions == () and plan.suppressed and plan.orphans == (f"{ROOT}/default-gone",)
