"""Flags like controller-runtime's: each surprise of issue #16 ("Flags surprise people") has a test here.

- durations were plain seconds → :func:`test_durations_are_go_durations_and_bare_numbers_stay_seconds`,
  :func:`test_help_prints_defaults_as_durations`;
- ``--log-level verbose`` printed a traceback → :func:`test_bad_log_level_is_one_line_exit_2_no_traceback`;
- zkop's own checks exited 1 where argparse exits 2 → :func:`test_zkops_own_checks_are_usage_errors_like_argparse`;
  the docs gave 2 another meaning → :func:`test_exit_codes_are_documented_once_with_2_for_usage`;
- ``--namespace NAMESPACES`` → :func:`test_metavars_read_well`;
- ``export --help`` listed ``--zk-parent-acl`` → :func:`test_each_subcommand_shows_only_the_flags_it_uses`;
- ``zkop export -o json`` wrote a directory named ``json`` →
  :func:`test_dash_o_is_the_output_format_for_every_gitops_command`,
  :func:`test_export_dash_o_json_prints_json_and_writes_into_dash_d`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from kazoo.client import KazooClient
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.cmd.main import build_parser, main

REPO = Path(__file__).resolve().parents[2]
GITOPS_COMMANDS = ("export", "diff", "validate", "sync")


def _subcommand(command: str) -> argparse.ArgumentParser:
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    parser: argparse.ArgumentParser = sub.choices[command]
    return parser


def _subcommand_help(command: str) -> str:
    return _subcommand(command).format_help()


def _option_strings(command: str) -> set[str]:
    return {s for action in _subcommand(command)._actions for s in action.option_strings}


def test_durations_are_go_durations_and_bare_numbers_stay_seconds() -> None:
    args = build_parser().parse_args([
        "run", "--leader-election-lease-duration", "15s", "--leader-election-renew-deadline", "1.5s",
        "--leader-election-retry-period", "500ms", "--sync-period", "1h30m", "--zk-session-timeout", "10s",
        "--graceful-shutdown-timeout", "1.5h", "--service-bridge-endpoints-debounce", "2m"])
    assert (args.leader_election_lease_duration, args.leader_election_renew_deadline,
            args.leader_election_retry_period) == (15.0, 1.5, 0.5)
    assert (args.sync_period, args.zk_session_timeout, args.graceful_shutdown_timeout) == (5400.0, 10.0, 5400.0)
    assert args.service_bridge_endpoints_debounce == 120.0
    # Manifests written before durations keep working.
    legacy = build_parser().parse_args(["run", "--sync-period", "600", "--leader-election-lease-duration", "15"])
    assert (legacy.sync_period, legacy.leader_election_lease_duration) == (600.0, 15.0)


def test_help_prints_defaults_as_durations() -> None:
    text = " ".join(_subcommand_help("run").split())
    for flag, default in (("--leader-election-lease-duration", "15s"), ("--leader-election-renew-deadline", "10s"),
                          ("--leader-election-retry-period", "2s"), ("--sync-period", "10m"),
                          ("--zk-session-timeout", "10s"), ("--graceful-shutdown-timeout", "20s"),
                          ("--service-bridge-endpoints-debounce", "5s")):
        assert re.search(rf"{flag} DURATION [^()]*\(default {default}[);]", text), flag


@pytest.mark.parametrize(("argv", "qps", "burst"), [
    ([], 50.0, 100),
    (["--kube-api-qps", "20", "--kube-api-burst", "30"], 20.0, 30),
    (["--kube-api-qps", "12.5"], 12.5, 100),
    # controller-runtime's -1, with or without '=' (Go's flag takes the next argument whatever it is).
    (["--kube-api-qps", "-1"], -1.0, 100),
    (["--kube-api-qps=-1", "--kube-api-burst=1"], -1.0, 1),
    (["--kube-api-qps", "-0.5"], -1.0, 100),  # client-go: any negative QPS is "no limiter"
])
def test_kube_api_qps_and_burst(argv: list[str], qps: float, burst: int) -> None:
    args = build_parser().parse_args(["run", *argv])
    assert (args.kube_api_qps, args.kube_api_burst) == (qps, burst)


def test_kube_api_flags_help_says_what_they_do() -> None:
    text = " ".join(_subcommand_help("run").split())
    assert re.search(r"--kube-api-qps QPS requests per second to the API server, on average; -1 \(any negative "
                     r"value\) turns the client-side limiter off and leaves it to the server's API Priority and "
                     r"Fairness \(controller-runtime's default\)\. The default is Flux's: [^()]*\(default 50\)", text)
    assert re.search(r"--kube-api-burst N requests that may go at once before --kube-api-qps paces them "
                     r"\(at least 1; default 100\)", text)
    assert "a request waits for a token, none is dropped" in text
    assert "Answers 429 or 5xx with Retry-After are retried after that many seconds, up to 10 times" in text


def test_only_run_talks_to_the_api_server_so_only_run_has_the_kube_api_flags() -> None:
    assert {"--kube-api-qps", "--kube-api-burst"} <= _option_strings("run")
    for command in GITOPS_COMMANDS:
        assert not {"--kube-api-qps", "--kube-api-burst", "--kubeconfig"} & _option_strings(command), command


def test_bad_log_level_is_one_line_exit_2_no_traceback(tmp_path: Path) -> None:
    env = {**os.environ, "KUBECONFIG": str(tmp_path / "absent")}
    run = subprocess.run([sys.executable, "-m", "zkop", "run", "--log-level", "verbose"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr and len(run.stderr.splitlines()) == 1, run.stderr
    assert run.stderr.startswith("zkop run: error: argument --log-level: unknown log level 'verbose'")
    # The environment fallback is checked the same way.
    env["ZKOP_LOG_LEVEL"] = "loud"
    run = subprocess.run([sys.executable, "-m", "zkop", "run"], capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 2 and "unknown log level 'loud'" in run.stderr and "Traceback" not in run.stderr


def _directory_auth_file(tmp_path: Path) -> str:
    return str(tmp_path)  # exists, cannot be read as a file


def _malformed_auth_file(tmp_path: Path) -> str:
    path = tmp_path / "credentials"
    path.write_text("no-colon\n")
    return str(path)


@pytest.mark.parametrize(("argv", "message"), [
    (["--workers", "0"], "argument --workers: must be at least 1"),
    (["--workers", "many"], "argument --workers: 'many' is not a whole number"),
    (["--zk-parent-acl", "world:anyone"], "argument --zk-parent-acl: ACL entry 'world:anyone'"),
    (["--zk-parent-acl", "world:anyone:rx"], "permissions are letters from 'crwda'"),
    (["--zk-auth-file", _directory_auth_file], "--zk-auth-file"),
    (["--zk-auth-file", _malformed_auth_file], "expected 'user:password'"),
    (["--metrics-bind-address", "8080"], "argument --metrics-bind-address: invalid bind address '8080'"),
    (["--health-probe-bind-address", ":99999"], "port out of range"),
    (["--sync-period", "10 minutes"], "argument --sync-period: unknown unit"),
    (["--sync-period=-10m"], "must not be negative"),
    # Without '=' too, as Go's flag package takes the next argument: argparse alone said "expected one argument".
    (["--sync-period", "-5s"], "argument --sync-period: duration '-5s' must not be negative"),
    (["--acl-check-period", "-.5h", "--workers", "2"], "argument --acl-check-period: duration '-.5h' must not be"),
    (["--workers", "-2s"], "argument --workers: '-2s' is not a whole number"),
    (["--zk-session-timeout", "0"], "must be more than 0"),
    (["--leader-elect", "--leader-election-lease-duration", "5"],
     "--leader-election-lease-duration (5s) must be longer than --leader-election-renew-deadline (10s)"),
    (["--leader-elect", "--leader-election-renew-deadline", "2"], "must be longer than 1.2 × --leader-election-retry"),
    (["--namespace", "Team_A"], "argument --namespace: 'Team_A' is not a valid namespace name"),
    (["--service-bridge", "--service-bridge-workers", "0"], "argument --service-bridge-workers: must be at least 1"),
    (["--service-bridge", "--service-bridge-root", "relative"], "argument --service-bridge-root: path must be"),
    (["--import-services", "--import-max-deletes", "-1"], "argument --import-max-deletes: must be 0 or more"),
    (["--import-services", "--import-namespace", "Not_A_Namespace"], "argument --import-namespace:"),
    # client-go reads a QPS of 0 as its default 5 and a burst of 0 as 10; zkop asks for what is meant.
    (["--kube-api-qps", "0"], "argument --kube-api-qps: must be more than 0, or -1 to turn the client-side limiter"),
    (["--kube-api-qps", "fast"], "argument --kube-api-qps: 'fast' is not a number"),
    (["--kube-api-qps", "inf"], "argument --kube-api-qps: 'inf' is not a finite number; use -1"),
    (["--kube-api-qps", "nan"], "argument --kube-api-qps: 'nan' is not a finite number"),
    (["--kube-api-burst", "0"], "argument --kube-api-burst: must be at least 1, got 0"),
    # component-base ValidateClientConnectionConfiguration: "must be non-negative".
    (["--kube-api-burst", "-1"], "argument --kube-api-burst: must be at least 1, got -1"),
    (["--kube-api-burst", "1.5"], "argument --kube-api-burst: '1.5' is not a whole number"),
    # No prefix matching, as in Go's flag and pflag: argparse alone took '--sync-per' as --sync-period.
    (["--sync-per", "5s"], "unrecognized arguments: --sync-per 5s"),
    (["--worker=2"], "unrecognized arguments: --worker=2"),
])
def test_zkops_own_checks_are_usage_errors_like_argparse(
    argv: list[object], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On main these exited 1 (``SystemExit("...")``) or with a traceback, unlike argparse's 2."""
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))  # never reach a real cluster
    monkeypatch.delenv("ZOOKEEPER_AUTH_FILE", raising=False)
    resolved = [a(tmp_path) if callable(a) else str(a) for a in argv]
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--kubeconfig", str(tmp_path / "absent"), *resolved])
    err = capsys.readouterr().err
    assert exit_.value.code == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("zkop run: error: "), err
    assert message in err


def test_gitops_usage_errors_are_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["validate", "-f", str(tmp_path), "--log-level", "verbose"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and len(err.splitlines()) == 1 and err.startswith("zkop validate: error: ")


def test_exit_codes_are_documented_once_with_2_for_usage() -> None:
    operations = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
    section = operations.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    rows = {line.split("|")[1].strip(): line for line in section.splitlines() if line.startswith("| `")}
    assert set(rows) == {"`0`", "`1`", "`2`"}
    assert "usage" in rows["`2`"] and "differences" in rows["`1`"] and "no differences" in rows["`0`"]
    assert "lost" in rows["`1`"]  # zkop run: a lost Lease
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "docs/operations.md#exit-codes" in readme
    # Exit code 2 has one meaning: nowhere is it only "the probe failed".
    assert "exit code 2\n  means that probe failed" not in operations


def test_metavars_read_well() -> None:
    run = _subcommand_help("run")
    for expected in ("--namespace NAMESPACE\n", "--zk-hosts HOST:PORT[,...][/CHROOT]", "--kubeconfig FILE",
                     "--zk-auth-file FILE", "--workers N", "--sync-period DURATION", "--max-data-bytes BYTES",
                     "--metrics-bind-address [HOST]:PORT", "--leader-election-namespace NAMESPACE",
                     "--log-level {debug,info,warning,error}", "--service-bridge-endpoints-debounce DURATION"):
        assert expected in run, expected
    assert "NAMESPACES" not in run and "SECONDS" not in run
    for command in GITOPS_COMMANDS:
        assert "-o {text,json,yaml}, --output {text,json,yaml}" in _subcommand_help(command), command


def test_each_subcommand_shows_only_the_flags_it_uses() -> None:
    # --zk-parent-acl: the ACL of parents zkop creates; only run and sync create znodes.
    assert "--zk-parent-acl" in _option_strings("run") and "--zk-parent-acl" in _option_strings("sync")
    for command in ("export", "diff"):
        assert "--zk-parent-acl" not in _option_strings(command), command
        assert "--zk-parent-acl" not in _subcommand_help(command), command
    # validate is offline: no ZooKeeper flags at all.
    assert not {s for s in _option_strings("validate") if s.startswith("--zk-")}
    # Only run has operator and service flags; only export and the pruning commands have --exclude.
    for command in GITOPS_COMMANDS:
        options = _option_strings(command)
        assert not {"--workers", "--leader-elect", "--service-bridge", "--import-services"} & options, command
        assert ("--prune" in options) == (command in ("diff", "sync")), command


@pytest.mark.parametrize("command", GITOPS_COMMANDS)
def test_dash_o_is_the_output_format_for_every_gitops_command(command: str) -> None:
    extra = ["-d", "configs"] if command == "export" else ["-f", "configs"]
    for fmt in ("text", "json", "yaml"):
        args = build_parser().parse_args([command, *extra, "-o", fmt])
        assert args.output == fmt
    if command == "export":
        assert args.dir == "configs"


def test_export_dash_o_with_a_directory_says_where_the_directory_went(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["export", "-d", "configs", "-o", "configs/"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "unknown output format 'configs/'" in err and "-d/--dir" in err


def test_export_dash_o_json_prints_json_and_writes_into_dash_d(
    zk_server: ZooKeeperServer, zk_base: str, zk: KazooClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    zk.create(f"{zk_base}/app/config", b"x=1", makepath=True)
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    code = main(["export", "--zk-hosts", zk_server.hosts, "--path", f"{zk_base}/app", "-o", "json", "-d", "out"])
    out = capsys.readouterr().out
    assert code == 0
    report = json.loads(out)
    assert report["directory"] == "out" and [e["path"] for e in report["exported"]] == [f"{zk_base}/app/config"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no directory named "json"
    assert (tmp_path / "out" / "kustomization.yaml").exists()


def test_validate_yaml_output_is_the_json_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text("apiVersion: platform.example.com/v1alpha1\nkind: ZooKeeperConfig\nmetadata: {name: a}\n"
                        "spec: {path: /app/a, stringData: x}\n")
    capsys.readouterr()
    assert main(["validate", "-f", str(manifest), "-o", "json"]) == 0
    as_json = json.loads(capsys.readouterr().out)
    assert main(["validate", "-f", str(manifest), "-o", "yaml"]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == as_json
    assert as_json["valid"] == 1
