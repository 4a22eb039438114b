"""ZooKeeperConfigTrees in ``zkop export --tree``, ``validate``, ``diff`` and ``sync``, against a real ZooKeeper."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml
from gitops_support import ALICE_ALL, EPHEMERAL, LEGACY, SEQUENTIAL, Cli, Legacy, write_manifests
from kazoo.client import KazooClient

from zkop.gitops.schema import SchemaChecker, load_tree_crd_schema
from zkop.gitops.tree import Tree, ZNode
from zkop.gitops.tree_export import plan_tree_export
from zkop.zookeeper.actions import OPEN_ACL

#: LEGACY's paths a tree of /app declares (/app/locked, alice-only, is excluded: its value never goes to a file).
TREE_PATHS = frozenset(p for p in LEGACY if p != "/app/locked")


def zkt(root: str, name: str = "app", /, **spec: Any) -> dict[str, Any]:
    """A ZooKeeperConfigTree object."""
    return {"apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperConfigTree",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"path": root, **spec}}


def snapshot(zk: KazooClient, base: str) -> dict[str, tuple[bytes, list[tuple[int, str, str]]]]:
    """Data and ACL of every znode below ``base`` (relative paths), ephemeral and sequential ones aside."""
    found = {}
    pending = [base]
    while pending:
        path = pending.pop()
        data, stat = zk.get(path)
        acl, _ = zk.get_acls(path)
        if not stat.ephemeralOwner and not path.endswith("0000000000"):
            found[path[len(base):] or "/"] = (data, sorted((a.perms, a.id.scheme, a.id.id) for a in acl))
        pending.extend(f"{path}/{c}" for c in zk.get_children(path))
    return found


def export_tree(cli: Cli, legacy: Legacy, out: Path) -> Any:
    run = cli("export", *legacy.flags(), "--tree", "/app", "--exclude", "/app/locked", "-d", str(out), "-o", "json")
    assert run.code == 0, run.err
    return run.json()


def test_export_tree_applies_byte_for_byte_into_a_fresh_chroot(cli: Cli, legacy: Legacy, tmp_path: Path) -> None:
    out = tmp_path / "export"
    report = export_tree(cli, legacy, out)
    assert report["exported"] == [{"path": "/app", "name": "app", "file": "app.yaml"}]
    assert {s["path"] for s in report["skipped"]} == {EPHEMERAL, SEQUENTIAL} and report["problems"] == []
    doc = yaml.safe_load((out / "app.yaml").read_text(encoding="utf-8"))
    assert doc["kind"] == "ZooKeeperConfigTree" and "acl" not in doc["spec"]
    entries = {e["path"]: e for e in doc["spec"]["entries"]}
    assert set(entries) == {p[len("/app/"):] for p in TREE_PATHS}  # /app/svc: a leaf once its session nodes go
    assert entries["text"] == {"path": "text", "stringData": LEGACY["/app/text"][0].decode()}
    assert entries["bin"] == {"path": "bin", "data": base64.b64encode(bytes(range(256))).decode()}
    assert entries["config/crlf"]["stringData"] == "a\r\nb\r\n"
    assert entries["secure"]["acl"][0]["id"] == ALICE_ALL.id.id
    assert cli("validate", "-f", str(out)).code == 0

    # Applied into a fresh chroot with zkop sync: every znode byte-identical, ACLs too; one multi for the tree.
    copy = legacy.base + "/copy"
    legacy.zk.ensure_path(copy)
    copy_flags = ["--zk-hosts", legacy.hosts.rsplit(legacy.base, 1)[0] + copy, "--zk-auth-file", legacy.auth_file]
    assert cli("diff", *copy_flags, "-f", str(out)).code == 1
    run = cli("sync", *copy_flags, "-f", str(out), "-o", "json")
    assert run.code == 0, run.err
    assert run.json()["summary"] == {"created": len(TREE_PATHS)}, run.out
    original = {p: v for p, v in snapshot(legacy.zk, legacy.base + "/app").items() if p not in ("/locked",)}
    assert snapshot(legacy.zk, copy + "/app") == original
    created = {legacy.zk.exists(copy + p).czxid for p in TREE_PATHS}
    assert len(created) == 1  # every child in one transaction
    assert cli("diff", *copy_flags, "-f", str(out)).code == 0
    again = cli("sync", *copy_flags, "-f", str(out))
    assert again.out.endswith(f"sync: {len(TREE_PATHS)} unchanged\n"), again.out

    # Stable: the same subtree exports the same file.
    assert export_tree(cli, legacy, tmp_path / "again")["problems"] == []
    assert (tmp_path / "again" / "app.yaml").read_text() == (out / "app.yaml").read_text()


def test_export_tree_refuses_what_a_tree_cannot_hold(cli: Cli, legacy: Legacy, tmp_path: Path) -> None:
    # The alice-only value would land in a file: a problem, and no tree written.
    run = cli("export", *legacy.flags(), "--tree", "/app", "-d", str(tmp_path / "a"), "-o", "json")
    assert run.code == 1
    assert [p["path"] for p in run.json()["problems"]] == ["/app/locked"]
    assert not (tmp_path / "a" / "app.yaml").exists()
    # A root holding data is never written by a tree.
    run = cli("export", *legacy.flags(), "--tree", "/app/config", "-d", str(tmp_path / "b"), "-o", "json")
    assert run.code == 1 and run.json()["problems"][0]["path"] == "/app/config"
    for bad, message in ((["--tree", "/app", "--path", "/app"], "cannot be combined"),
                         (["--tree", "/app", "--tree", "/app/config"], "lies inside"),
                         (["--tree", "/zookeeper/x"], "reserved"),
                         (["--tree", "/zkop/owners"], "reserved")):
        run = cli("export", *legacy.flags(), *bad, "-d", str(tmp_path / "c"))
        assert run.code == 2 and message in run.err, run.err


def test_export_tree_past_the_crds_entry_limit_is_a_problem() -> None:
    root = ZNode("/big", b"", 0, 0, 0, OPEN_ACL, tuple(f"k{i}" for i in range(5001)))
    nodes = {"/big": root, **{f"/big/k{i}": ZNode(f"/big/k{i}", b"v", 0, 0, 0, OPEN_ACL, ()) for i in range(5001)}}
    export = plan_tree_export(Tree("/big", nodes), SchemaChecker(load_tree_crd_schema()))
    assert export.znodes == [] and "spec.entries" in export.problems[0].reason


def test_diff_and_sync_of_a_tree_go_through_the_operators_planner(cli: Cli, legacy: Legacy, tmp_path: Path) -> None:
    out = tmp_path / "export"
    export_tree(cli, legacy, out)
    zk, base = legacy.zk, legacy.base
    zk.set(base + "/app/features/new-engine/enabled", b"false")
    zk.set(base + "/app/bin", bytes(range(255)))
    zk.set_acls(base + "/app/secure", [ALICE_ALL])
    zk.delete(base + "/app/config/yes")

    diff = cli("diff", *legacy.flags(), "-f", str(out), "-o", "json")
    assert diff.code == 1
    changed = {r["path"]: r["changes"] for r in diff.json()["results"] if r["status"] == "differs"}
    assert changed == {"/app/features/new-engine/enabled": ["data"], "/app/bin": ["data"],
                       "/app/secure": ["acl"], "/app/config/yes": ["create"]}
    text = cli("diff", *legacy.flags(), "-f", str(out)).out
    assert "-false\n\\ No newline at end of file\n+true\n\\ No newline at end of file\n" in text
    assert "Binary znode zk:/app/bin differs: live 255 bytes, manifest 256 bytes" in text

    dry = cli("sync", *legacy.flags(), "-f", str(out), "--dry-run")
    assert "would create /app/config/yes: create /app/config/yes (3 bytes)" in dry.out
    assert zk.exists(base + "/app/config/yes") is None
    run = cli("sync", *legacy.flags(), "-f", str(out), "-o", "json")
    assert run.json()["summary"] == {"created": 1, "updated": 3, "unchanged": len(TREE_PATHS) - 4}
    assert len({zk.exists(base + p).mzxid for p in ("/app/features/new-engine/enabled", "/app/bin",
                                                     "/app/config/yes")}) == 1  # one multi
    assert zk.get(base + "/app/bin")[0] == bytes(range(256))
    assert cli("diff", *legacy.flags(), "-f", str(out)).code == 0


def test_sync_applies_a_properties_configmap_and_prunes_only_with_prune_roots(
        cli: Cli, legacy: Legacy, tmp_path: Path) -> None:
    zk, base = legacy.zk, legacy.base
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "props", "namespace": "default"},
          "data": {"application.properties": "a.b=1\nc\\:d = two words\nunicode=\\u00fc\n"}}
    file = write_manifests(tmp_path / "tree.yaml", cm, zkt("/conf/orders", **{
        "from": [{"configMapRef": {"name": "props"}, "key": "application.properties", "format": "properties"}],
        "entries": [{"path": "raw", "stringData": "x"}]}))
    assert cli("validate", "-f", str(file)).code == 0
    run = cli("sync", *legacy.flags(), "-f", str(file))
    assert run.code == 0 and run.out.endswith("sync: 4 created\n"), run.out
    assert {c: zk.get(f"{base}/conf/orders/{c}")[0] for c in zk.get_children(base + "/conf/orders")} == {
        "a.b": b"1", "c:d": b"two words", "unicode": "ü".encode(), "raw": b"x"}

    # Without --prune nothing is deleted; with it, only what no object declares.
    zk.create(base + "/conf/orders/stale", b"old")
    assert cli("sync", *legacy.flags(), "-f", str(file)).code == 0
    assert zk.exists(base + "/conf/orders/stale") is not None
    pruned = cli("sync", *legacy.flags(), "-f", str(file), "--prune", "--prune-root", "/conf")
    assert "pruned /conf/orders/stale" in pruned.out, pruned.out
    assert zk.exists(base + "/conf/orders/stale") is None and zk.exists(base + "/conf/orders/raw") is not None

    # createOnly: a hand edit is reported, not rewritten.
    only = write_manifests(tmp_path / "only.yaml", zkt("/conf/orders", syncPolicy="createOnly",
                                                       entries=[{"path": "raw", "stringData": "y"}]))
    result = cli("sync", *legacy.flags(), "-f", str(only), "-o", "json").json()["results"]
    assert result == [{"path": "/conf/orders/raw", "result": "outOfSync", "object": f"{only}:1 ZooKeeperConfigTree "
                       "default/app", "message": result[0]["message"], "actions": []}]
    assert zk.get(base + "/conf/orders/raw")[0] == b"x"


def test_a_tree_reading_a_secret_is_skipped_and_shields_its_root_from_prune(
        cli: Cli, legacy: Legacy, tmp_path: Path) -> None:
    zk, base = legacy.zk, legacy.base
    zk.ensure_path(base + "/conf/secret/kept")
    file = write_manifests(tmp_path / "t.yaml", zkt("/conf/secret", acl=[{"scheme": "world", "id": "anyone",
                                                                         "permissions": ["read"]}],
                                                    **{"from": [{"secretRef": {"name": "creds"}}]}),
                           zkt("/conf/plain", "plain", entries=[{"path": "k", "stringData": "v"}]))
    run = cli("sync", *legacy.flags(), "-f", str(file), "--prune", "--prune-root", "/conf")
    assert run.code == 0, run.err
    assert "skipped /conf/secret: the tree reads Secret creds" in run.out
    assert zk.exists(base + "/conf/secret/kept") is not None  # its children are unknown offline: never pruned


def test_validate_names_the_tree_rules(cli: Cli, tmp_path: Path) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "props", "namespace": "default"},
          "data": {"application.properties": "../escape=1\n", "dup": "x"}}
    cases = {
        "dotdot": ([cm, zkt("/conf/a", **{"from": [{"configMapRef": {"name": "props"},
                                                    "key": "application.properties", "format": "properties"}]})],
                   "'..' segment"),
        "reserved": ([zkt("/zkop/owners/x", entries=[{"path": "k", "stringData": "v"}])], "reserved"),
        "duplicate-in-tree": ([cm, zkt("/conf/a", **{"from": [{"configMapRef": {"name": "props"}, "key": "dup"}],
                                                     "entries": [{"path": "dup", "stringData": "y"}]})],
                              "declared twice"),
        "duplicate-with-config": ([zkt("/conf/a", entries=[{"path": "k", "stringData": "v"}]),
                                   {"apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperConfig",
                                    "metadata": {"name": "k", "namespace": "default"},
                                    "spec": {"path": "/conf/a/k", "stringData": "w"}}], "duplicate path /conf/a/k"),
        "two-trees": ([zkt("/conf/a", entries=[{"path": "b/k", "stringData": "v"}]),
                       zkt("/conf/a/b", "b", entries=[{"path": "k", "stringData": "v"}])],
                      "duplicate path /conf/a/b/k"),
        "same-ensemble": ([zkt("/conf/a", ensembleRef={"name": "other"}, entries=[{"path": "k", "stringData": "v"}]),
                           {"apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperConfig",
                            "metadata": {"name": "k", "namespace": "default"},
                            "spec": {"path": "/conf/a/k", "stringData": "w", "ensembleRef": {"name": "other"}}}],
                          "duplicate path /conf/a/k"),
        "schema": ([zkt("/conf/a", entries=[{"path": "k", "stringData": "v", "data": "eA=="}])],
                   "exactly one of data and stringData"),
        "unknown-field": ([zkt("/conf/a", entries=[{"path": "k", "stringData": "v"}], extra=1)], "unknown field"),
    }
    for name, (objects, rule) in cases.items():
        file = write_manifests(tmp_path / f"{name}.yaml", *objects)
        run = cli("validate", "-f", str(file))
        assert run.code == 1 and rule in run.out, (name, run.out)


def test_validate_accepts_a_tree_on_another_ensemble_declaring_a_path_of_the_flags_one(
        cli: Cli, tmp_path: Path) -> None:
    """The same path on two ensembles is two znodes: a tree naming a ZooKeeperEnsemble and a ZooKeeperConfig on the
    flags' ensemble do not conflict."""
    file = write_manifests(tmp_path / "two.yaml",
                           zkt("/conf/a", ensembleRef={"name": "other"}, entries=[{"path": "k", "stringData": "v"}]),
                           {"apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperConfig",
                            "metadata": {"name": "k", "namespace": "default"},
                            "spec": {"path": "/conf/a/k", "stringData": "w"}})
    run = cli("validate", "-f", str(file))
    assert run.code == 0, run.out + run.err
