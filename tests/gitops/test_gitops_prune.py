"""``sync --prune`` / ``diff --prune``: only undeclared, persistent znodes below an explicit root, leaves first."""

from __future__ import annotations

from pathlib import Path

from gitops_support import Cli, write_manifests, zkc
from kazoo.client import KazooClient
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.gitops.prune import plan_prune
from zkop.gitops.sync import prune_znodes
from zkop.gitops.tree import PathFilter, walk
from zkop.zookeeper.adapter import ConnectionOptions, ZooKeeperAdapter


def build(zk: KazooClient, base: str, tmp_path: Path) -> Path:
    for path, data in {
        "/cfg/kept": b"declared",
        "/cfg/parent/child": b"declared below an undeclared parent",
        "/cfg/stale": b"old",
        "/cfg/stale-dir/a/b": b"old too",
        "/cfg/services/api": b"",
        "/cfg/tmp/scratch": b"excluded",
        "/zkop/owners/cfg/kept": b'{"managedBy":"zkop"}',
        "/elsewhere/untouched": b"outside the prune root",
    }.items():
        zk.create(base + path, data, makepath=True)
    zk.create(base + "/cfg/services/api/instance-", b"10.0.0.1", ephemeral=True, sequence=True)
    zk.create(base + "/cfg/queue/item-", b"job", sequence=True, makepath=True)
    return write_manifests(tmp_path / "m.yaml", zkc("/cfg/kept", "kept", stringData="declared"),
                           zkc("/cfg/parent/child", "child", stringData="declared below an undeclared parent"))


def test_prune_deletes_only_undeclared_persistent_znodes_leaves_first(cli: Cli, zk_server: ZooKeeperServer,
                                                                      zk_base: str, zk: KazooClient,
                                                                      tmp_path: Path) -> None:
    manifest = build(zk, zk_base, tmp_path)
    flags = ["--zk-hosts", f"{zk_server.hosts}{zk_base}", "-f", str(manifest)]
    prune = ["--prune", "--prune-root", "/cfg", "--exclude", "tmp"]

    diff = cli("diff", *flags, *prune, "--output", "json")
    assert diff.code == 1
    deletions = [r["path"] for r in diff.json()["results"] if r["changes"] == ["delete"]]
    expected = ["/cfg/stale-dir/a/b", "/cfg/stale-dir/a", "/cfg/stale", "/cfg/stale-dir"]
    assert sorted(deletions) == sorted(expected)

    dry = cli("sync", *flags, *prune, "--dry-run")
    assert dry.code == 0 and dry.out.count("would prune") == 4
    assert zk.exists(zk_base + "/cfg/stale") is not None

    run = cli("sync", *flags, *prune, "--output", "json")
    assert run.code == 0, run.err
    pruned = [r["path"] for r in run.json()["results"] if r["result"] == "pruned"]
    assert pruned.index("/cfg/stale-dir/a/b") < pruned.index("/cfg/stale-dir/a") < pruned.index("/cfg/stale-dir")
    assert sorted(zk.get_children(zk_base + "/cfg")) == ["kept", "parent", "queue", "services", "tmp"]
    assert zk.get_children(zk_base + "/cfg/services/api")  # the ephemeral child keeps its parent
    assert zk.get_children(zk_base + "/cfg/queue") == ["item-0000000000"]  # sequential: a client's
    assert zk.exists(zk_base + "/cfg/tmp/scratch") is not None  # excluded
    assert zk.exists(zk_base + "/elsewhere/untouched") is not None  # outside the root
    assert zk.exists(zk_base + "/zkop/owners/cfg/kept") is not None
    assert cli("diff", *flags, *prune).code == 0


def test_prune_refuses_unsafe_or_unjustified_roots(cli: Cli, zk_server: ZooKeeperServer, zk_base: str,
                                                   zk: KazooClient, tmp_path: Path) -> None:
    manifest = build(zk, zk_base, tmp_path)
    flags = ["--zk-hosts", f"{zk_server.hosts}{zk_base}", "-f", str(manifest)]
    cases = {
        ("--prune",): "--prune needs at least one --prune-root",
        ("--prune-root", "/cfg"): "--prune-root needs --prune",
        ("--prune", "--prune-root", "/"): "the root znode '/' cannot be managed",
        ("--prune", "--prune-root", "/zookeeper"): "reserved",
        ("--prune", "--prune-root", "/zkop/owners/cfg"): "reserved subtree",
        ("--prune", "--prune-root", "/elsewhere"): "no manifest declares a path under it",
    }
    for extra, message in cases.items():
        run = cli("sync", *flags, *extra)
        assert run.code == 2, extra
        assert message in run.err, (extra, run.err)
    assert zk.exists(zk_base + "/elsewhere/untouched") is not None
    assert zk.exists(zk_base + "/cfg/stale") is not None  # refused before anything was written
    assert zk.exists(zk_base + "/cfg/kept") is not None


def test_prune_never_deletes_a_znode_that_gained_a_child(zk_server: ZooKeeperServer, zk_base: str,
                                                          zk: KazooClient, tmp_path: Path) -> None:
    build(zk, zk_base, tmp_path)
    adapter = ZooKeeperAdapter(ConnectionOptions(hosts=f"{zk_server.hosts}{zk_base}", connect_timeout=10))
    adapter.start()
    try:
        tree = walk(adapter, "/cfg", skip=PathFilter(["tmp"]).excluded)
        candidates = plan_prune(tree, {"/cfg/kept", "/cfg/parent/child"})
        zk.create(zk_base + "/cfg/stale-dir/a/new-child", b"appeared after the walk")
        results = {r.path: r for r in prune_znodes(adapter, candidates)}
    finally:
        adapter.stop()
    assert results["/cfg/stale-dir/a/b"].result == "pruned"
    assert results["/cfg/stale-dir/a"].result == "error"
    assert "never deletes recursively" in results["/cfg/stale-dir/a"].message
    assert results["/cfg/stale-dir"].result == "error"
    assert zk.get_children(zk_base + "/cfg/stale-dir/a") == ["new-child"]
