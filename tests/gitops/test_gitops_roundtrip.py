"""export → validate → diff → sync against a real ZooKeeper, through ``zkop.cmd.main.main``."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from gitops_support import ALICE_ALL, EPHEMERAL, EXPORTED, LEGACY, SEQUENTIAL, Cli, Legacy, files_under

from zkop.gitops.names import is_dns1123_subdomain


def export(cli: Cli, legacy: Legacy, out: Path, *extra: str) -> Any:
    """Export /app (chrooted) with alice's credentials; return the JSON report."""
    run = cli("export", *legacy.flags(), "--path", "/app", "-d", str(out), "-o", "json", *extra)
    assert run.code == 0, run.err
    return run.json()


def test_export_validate_diff_round_trip(cli: Cli, legacy: Legacy, tmp_path: Path) -> None:
    out = tmp_path / "export"
    report = export(cli, legacy, out)
    exported = report["exported"]
    assert {e["path"] for e in exported} == EXPORTED
    assert report["problems"] == []
    assert {s["path"] for s in report["skipped"]} == {EPHEMERAL, SEQUENTIAL}

    # Names: valid DNS-1123 subdomains, unique; files mirror the tree; the kustomization lists them all.
    names = [e["name"] for e in exported]
    assert all(is_dns1123_subdomain(n) for n in names) and len(set(names)) == len(names)
    by_path = {e["path"]: e for e in exported}
    assert by_path["/app/features/new-engine/enabled"]["name"] == "app.features.new-engine.enabled"
    assert by_path["/app/features/new-engine/enabled"]["file"] == "app/features/new-engine/enabled.yaml"
    assert by_path["/app/MixedCase/Some.Dotted.Name"]["file"] == "app/MixedCase/Some.Dotted.Name.yaml"
    assert by_path["/app/unicode-ünïcode"]["file"] == "app/unicode-%C3%BCn%C3%AFcode.yaml"
    kustomization = yaml.safe_load((out / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == sorted(e["file"] for e in exported)
    assert set(files_under(out)) == {e["file"] for e in exported} | {"kustomization.yaml"}

    # Plain CR YAML: text as stringData, bytes as base64 data, digest ACLs as spec.acl.
    def doc(path: str) -> Any:
        return yaml.safe_load((out / by_path[path]["file"]).read_text(encoding="utf-8"))

    assert doc("/app/text")["spec"] == {"path": "/app/text", "stringData": LEGACY["/app/text"][0].decode()}
    assert doc("/app/features/empty-leaf")["spec"] == {"path": "/app/features/empty-leaf", "stringData": ""}
    binary = doc("/app/bin")["spec"]
    assert binary == {"path": "/app/bin", "data": base64.b64encode(bytes(range(256))).decode(), "encoding": "binary"}
    locked = doc("/app/locked")  # alice-only: its value is withheld, read from a Secret to create
    assert locked["metadata"] == {"name": "app.locked"}
    assert locked["spec"] == {
        "path": "/app/locked", "dataFrom": {"secretKeyRef": {"name": "app.locked", "key": "value"}},
        "encoding": "binary",
        "acl": [{"scheme": "digest", "id": ALICE_ALL.id.id,
                 "permissions": ["read", "write", "create", "delete", "admin"]}]}
    assert report["withheld"] == [{"path": "/app/locked", "secret": "app.locked", "key": "value"}]
    assert "acl" not in doc("/app/config")["spec"]

    validate = cli("validate", "-f", str(out))
    assert (validate.code, validate.out) == (0, ""), validate.out + validate.err

    diff = cli("diff", *legacy.flags(), "-f", str(out))
    assert (diff.code, diff.out) == (0, ""), diff.out + diff.err
    assert "0 of 14 znode(s) differ" in diff.err

    # Stable: the same tree exports byte-identical files.
    again = tmp_path / "again"
    export(cli, legacy, again)
    assert files_under(again) == files_under(out)


def test_hand_edits_make_diff_exit_1_naming_the_path(cli: Cli, legacy: Legacy, tmp_path: Path) -> None:
    out = tmp_path / "export"
    export(cli, legacy, out)
    legacy.zk.set(legacy.base + "/app/features/new-engine/enabled", b"false")
    legacy.zk.set(legacy.base + "/app/bin", bytes(range(255)))
    legacy.zk.set_acls(legacy.base + "/app/secure", [ALICE_ALL])
    legacy.zk.delete(legacy.base + "/app/config/yes")

    diff = cli("diff", *legacy.flags(), "-f", str(out))
    assert diff.code == 1, diff.err
    assert "--- zk:/app/features/new-engine/enabled\tlive, version 1\n" in diff.out
    assert "-false\n\\ No newline at end of file\n+true\n\\ No newline at end of file\n" in diff.out
    assert ("Binary znode zk:/app/bin differs: live 255 bytes, manifest 256 bytes, first difference at byte 255"
            in diff.out)
    assert "+world:anyone read\n" in diff.out  # the ACL entry the hand edit removed
    assert "--- zk:/app/config/yes\tabsent\n" in diff.out and "+yes\n" in diff.out
    assert "4 of 14 znode(s) differ" in diff.err

    report = cli("diff", *legacy.flags(), "-f", str(out), "--output", "json").json()
    changed = {r["path"]: r["changes"] for r in report["results"] if r["status"] == "differs"}
    assert changed == {"/app/features/new-engine/enabled": ["data"], "/app/bin": ["data"],
                       "/app/secure": ["acl"], "/app/config/yes": ["create"]}


def test_sync_dry_run_writes_nothing_and_sync_restores_byte_for_byte(cli: Cli, legacy: Legacy,
                                                                      tmp_path: Path) -> None:
    out = tmp_path / "export"
    export(cli, legacy, out)
    before = legacy.snapshot()
    zk, base = legacy.zk, legacy.base
    zk.delete(base + "/app/config", recursive=True)
    zk.delete(base + "/app/bin")
    zk.set(base + "/app/text", b"hand edit")
    text_version = zk.exists(base + "/app/text").version

    dry = cli("sync", *legacy.flags(), "-f", str(out), "--dry-run")
    assert dry.code == 0, dry.err
    assert "would create /app/config/db/url: create /app/config/db/url (29 bytes)" in dry.out
    assert "would update /app/text: set /app/text (" in dry.out
    assert "skipped /app/locked: data from Secret 'app.locked' key 'value'" in dry.out  # withheld by export
    assert "dry run, nothing written" in dry.out
    assert zk.exists(base + "/app/config") is None and zk.exists(base + "/app/bin") is None
    assert zk.exists(base + "/app/text").version == text_version

    run = cli("sync", *legacy.flags(), "-f", str(out), "--output", "json")
    assert run.code == 0, run.err
    summary = run.json()["summary"]
    assert summary == {"created": 6, "updated": 1, "unchanged": 6, "skipped": 1}
    assert legacy.snapshot() == before
    assert cli("diff", *legacy.flags(), "-f", str(out)).code == 0
    again = cli("sync", *legacy.flags(), "-f", str(out))
    assert again.code == 0 and again.out.endswith("sync: 1 skipped, 13 unchanged\n"), again.out


def test_export_refuses_to_overwrite_without_force(cli: Cli, legacy: Legacy, tmp_path: Path) -> None:
    out = tmp_path / "export"
    export(cli, legacy, out)
    edited = out / "app" / "text.yaml"
    edited.write_text("# my edit\n")
    run = cli("export", *legacy.flags(), "--path", "/app", "-d", str(out))
    assert run.code == 2
    assert "already exist" in run.err and "--force" in run.err
    assert edited.read_text() == "# my edit\n"
    # A file that is not one of the export's targets is never touched, even with --force.
    (out / "notes.txt").write_text("keep")
    forced = cli("export", *legacy.flags(), "--path", "/app", "-d", str(out), "--force")
    assert forced.code == 0, forced.err
    assert "stringData" in edited.read_text()
    assert (out / "notes.txt").read_text() == "keep"


def test_export_without_credentials_reports_unreadable_znodes(cli: Cli, legacy: Legacy, tmp_path: Path) -> None:
    out = tmp_path / "export"
    run = cli("export", *legacy.flags(auth=False), "--path", "/app", "-d", str(out))
    assert run.code == 1
    assert "error: /app/locked: not readable with the given credentials (NoAuth)" in run.err
    assert "skipped: /app/svc/instance-1: ephemeral node" in run.err
    assert "skipped: /app/svc/lock-0000000000: sequential node" in run.err
    assert not (out / "app" / "locked.yaml").exists()
    # World-readable, digest-writable: readable, but without ADMIN ZooKeeper shows the digest as
    # alice:x (ZOOKEEPER-1392). A manifest with that fake id would lock alice out once synced.
    assert ("error: /app/secure: ACL redacted by ZooKeeper (digest:alice:x" in run.err
            and "credentials that have ADMIN on /app/secure" in run.err), run.err
    assert not (out / "app" / "secure.yaml").exists()
    assert "alice:x" not in "".join(p.read_text() for p in out.rglob("*.yaml"))


def test_diff_and_sync_without_admin_cannot_compare_a_redacted_acl(cli: Cli, legacy: Legacy,
                                                                   tmp_path: Path) -> None:
    out = tmp_path / "export"
    export(cli, legacy, out)  # with alice's credentials: the real digest
    secure = str(out / "app" / "secure.yaml")
    before = legacy.zk.get_acls(legacy.base + "/app/secure")
    diff = cli("diff", *legacy.flags(auth=False), "-f", secure)
    assert diff.code == 2, diff.out + diff.err
    assert "error: /app/secure: cannot compare the ACL of znode /app/secure" in diff.err
    assert "ADMIN" in diff.err
    sync = cli("sync", *legacy.flags(auth=False), "-f", secure)
    # Without alice's credential sync could not manage that ACL at all: refused before reading.
    assert sync.code == 1 and "error /app/secure: spec.acl: would lock zkop out" in sync.out, sync.out + sync.err
    assert "zkop authenticates as ip:127.0.0.1; the ACL grants digest:alice:" in sync.out
    assert legacy.zk.get_acls(legacy.base + "/app/secure") == before


def test_a_redaction_marker_is_never_written_as_an_acl(cli: Cli, legacy: Legacy, tmp_path: Path) -> None:
    manifest = tmp_path / "fake.yaml"
    manifest.write_text(
        "apiVersion: platform.example.com/v1alpha1\nkind: ZooKeeperConfig\nmetadata: {name: fake}\n"
        "spec:\n  path: /app/fake\n  stringData: x\n"
        "  acl: [{scheme: digest, id: 'alice:x', permissions: [read, write, create, delete, admin]}]\n")
    validate = cli("validate", "-f", str(manifest))
    assert validate.code == 1 and "digest id 'alice:x' is a redaction marker" in validate.out + validate.err
    sync = cli("sync", *legacy.flags(), "-f", str(manifest))
    assert sync.code == 2, sync.out + sync.err
    assert legacy.zk.exists(legacy.base + "/app/fake") is None


def test_export_exclude_include_empty_and_namespace(cli: Cli, legacy: Legacy, tmp_path: Path) -> None:
    report = export(cli, legacy, tmp_path / "a", "--exclude", "/app/config*", "--exclude", "Mixed*",
                    "--include-empty", "--namespace", "legacy")
    paths = {e["path"] for e in report["exported"]}
    assert not any(p.startswith(("/app/config", "/app/MixedCase")) for p in paths)
    assert {"/app", "/app/features", "/app/features/new-engine"} <= paths
    app = yaml.safe_load((tmp_path / "a" / "app.yaml").read_text())
    assert app["metadata"] == {"name": "app", "namespace": "legacy"}


def test_diff_and_sync_skip_datafrom_without_printing_secret_bytes(cli: Cli, legacy: Legacy,
                                                                    tmp_path: Path) -> None:
    legacy.zk.create(legacy.base + "/app/password", b"s3cr3t-value")
    manifest = tmp_path / "secret.yaml"
    manifest.write_text(
        "apiVersion: platform.example.com/v1alpha1\nkind: ZooKeeperConfig\nmetadata: {name: pw}\n"
        "spec:\n  path: /app/password\n  dataFrom: {secretKeyRef: {name: db, key: password}}\n")
    for command in (["diff"], ["sync"], ["sync", "--dry-run"]):
        for output in ("text", "json", "yaml"):
            run = cli(*command, *legacy.flags(), "-f", str(manifest), "--output", output)
            assert run.code == 0, run.err
            assert "s3cr3t" not in run.out + run.err
            assert "Secret 'db' key 'password' cannot be resolved without a cluster; skipped (redacted)" in (
                run.out + run.err)
    assert legacy.zk.get(legacy.base + "/app/password")[0] == b"s3cr3t-value"


def test_create_only_drift_is_reported_but_not_a_difference(cli: Cli, legacy: Legacy, tmp_path: Path) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        "apiVersion: platform.example.com/v1alpha1\nkind: ZooKeeperConfig\nmetadata: {name: e}\n"
        "spec: {path: /app/features/new-engine/enabled, stringData: 'false', syncPolicy: createOnly}\n")
    diff = cli("diff", *legacy.flags(), "-f", str(manifest))
    assert diff.code == 0
    assert "outOfSync: /app/features/new-engine/enabled: " in diff.err
    sync = cli("sync", *legacy.flags(), "-f", str(manifest))
    assert sync.code == 0 and "outOfSync /app/features/new-engine/enabled" in sync.out
    assert legacy.zk.get(legacy.base + "/app/features/new-engine/enabled")[0] == b"true"


def test_invalid_input_is_an_error_before_zookeeper_is_touched(cli: Cli, legacy: Legacy, tmp_path: Path) -> None:
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(
        "apiVersion: platform.example.com/v1alpha1\nkind: ZooKeeperConfig\nmetadata: {name: ok}\n"
        "spec: {path: /app/new, stringData: fine}\n---\n"
        "apiVersion: platform.example.com/v1alpha1\nkind: ZooKeeperConfig\nmetadata: {name: bad}\n"
        "spec: {path: /app/x/../y, stringData: nope}\n")
    for command in ("diff", "sync"):
        run = cli(command, *legacy.flags(), "-f", str(manifest))
        assert run.code == 2
        assert f"{manifest}:6: ZooKeeperConfig bad: spec.path: path contains a relative segment" in run.err
    assert legacy.zk.exists(legacy.base + "/app/new") is None


def test_diff_exit_status_through_python_m_zkop(legacy: Legacy, tmp_path: Path) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        "apiVersion: platform.example.com/v1alpha1\nkind: ZooKeeperConfig\nmetadata: {name: e}\n"
        "spec: {path: /app/features/new-engine/enabled, stringData: 'false'}\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    command = [sys.executable, "-m", "zkop", "diff", *legacy.flags(), "-f", "-"]
    done = subprocess.run(command, input=manifest.read_text(), capture_output=True, text=True, env=env,
                          timeout=60, check=False)
    assert done.returncode == 1, done.stderr
    assert "+false" in done.stdout and "-true" in done.stdout
    unreachable = subprocess.run(
        [sys.executable, "-m", "zkop", "diff", "--zk-hosts", f"{legacy.hosts}-missing", "-f", str(manifest)],
        capture_output=True, text=True, env=env, timeout=60, check=False)
    assert unreachable.returncode == 2
    assert "does not exist" in unreachable.stderr


def test_znodes_that_cannot_be_converged_are_errors_and_the_rest_still_syncs(cli: Cli, legacy: Legacy,
                                                                               tmp_path: Path) -> None:
    out = tmp_path / "export"
    export(cli, legacy, out)
    zk, base = legacy.zk, legacy.base
    zk.set(base + "/app/secure", b"edited by alice")  # world may read it, only alice may write
    zk.set(base + "/app/text", b"edited by anyone")
    (out / "ephemeral.yaml").write_text(
        "apiVersion: platform.example.com/v1alpha1\nkind: ZooKeeperConfig\nmetadata: {name: eph}\n"
        f"spec: {{path: '{EPHEMERAL}', stringData: x}}\n")
    kustomization = yaml.safe_load((out / "kustomization.yaml").read_text())
    kustomization["resources"].append("ephemeral.yaml")  # what Flux builds is what the kustomization lists
    (out / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))

    diff = cli("diff", *legacy.flags(auth=False), "-f", str(out), "--output", "json")
    assert diff.code == 2  # an error outranks differences
    statuses = {r["path"]: r["status"] for r in diff.json()["results"]}
    assert statuses["/app/locked"] == "skipped" and statuses[EPHEMERAL] == "error"  # locked: withheld, a Secret
    assert statuses["/app/text"] == "differs"
    # Without ADMIN the digest of /app/secure comes back redacted: it cannot be compared.
    assert statuses["/app/secure"] == "error"

    sync = cli("sync", *legacy.flags(auth=False), "-f", str(out))
    assert sync.code == 1
    assert "error /app/secure: spec.acl: would lock zkop out of /app/secure" in sync.out
    assert "skipped /app/locked: data from Secret 'app.locked'" in sync.out
    assert f"error {EPHEMERAL}: znode {EPHEMERAL} is an ephemeral node owned by session" in sync.out
    assert "updated /app/text" in sync.out
    assert zk.get(base + "/app/text")[0] == LEGACY["/app/text"][0]
    assert zk.get(base + "/app/secure")[0] == b"edited by alice"


def test_export_and_diff_never_print_a_value_kept_from_other_readers(cli: Cli, legacy: Legacy,
                                                                    tmp_path: Path) -> None:
    """docs/security.md, a Secret's value: a znode whose ACL does not grant world:anyone read (as zkop writes a
    Secret's value) is exported without its value, and diff shows only that it differs, never the live bytes."""
    value = LEGACY["/app/locked"][0].decode()
    out = tmp_path / "export"
    runs = [cli("export", *legacy.flags(), "--path", "/app", "-d", str(out), *extra)
            for extra in ((), ("--force", "-o", "json"), ("--force", "-o", "yaml"))]
    assert all(run.code == 0 for run in runs), runs
    assert "withheld: /app/locked: its ACL does not grant world:anyone read" in runs[0].err
    assert "Secret app.locked key value" in runs[0].err
    written = "".join(p.read_text(encoding="utf-8") for p in out.rglob("*.yaml"))
    assert value not in written + "".join(run.out + run.err for run in runs)

    manifest = tmp_path / "locked.yaml"
    manifest.write_text(
        "apiVersion: platform.example.com/v1alpha1\nkind: ZooKeeperConfig\nmetadata: {name: locked}\n"
        f"spec:\n  path: /app/locked\n  stringData: new\n"
        f"  acl: [{{scheme: digest, id: '{ALICE_ALL.id.id}', permissions: [read, write, create, delete, admin]}}]\n")
    diffs = [cli("diff", *legacy.flags(), "-f", str(manifest), "-o", output) for output in ("text", "json", "yaml")]
    diffs.append(cli("diff", *legacy.flags(), "-f", str(manifest), "--prune", "--prune-root", "/app/locked"))
    features = tmp_path / "features.yaml"
    features.write_text("apiVersion: platform.example.com/v1alpha1\nkind: ZooKeeperConfig\nmetadata: {name: f}\n"
                        "spec: {path: /app/features/new-engine/enabled, stringData: 'true'}\n")
    diffs.append(cli("diff", *legacy.flags(), "-f", str(features), "--prune", "--prune-root", "/app"))
    assert [d.code for d in diffs] == [1, 1, 1, 1, 1], diffs
    assert "Protected znode zk:/app/locked differs: live 10 bytes (not shown" in diffs[0].out
    assert "Protected znode zk:/app/locked differs: live 10 bytes" in diffs[-1].out  # the prune's deletion
    assert value not in "".join(d.out + d.err for d in diffs)
