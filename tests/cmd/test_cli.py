"""Command-line plumbing: entry points, flag parsing, logging formats."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from zkop_testing.zookeeper import free_port

from zkop.cmd.flags import UsageError
from zkop.cmd.logging_setup import JsonFormatter, configure_logging
from zkop.cmd.main import build_parser, connection_options, main, parse_acl_entry
from zkop.zookeeper.actions import OPEN_ACL, AclEntry


def test_console_script_and_module_agree() -> None:
    out = subprocess.run([sys.executable, "-m", "zkop", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("zkop ")
    script = Path(sys.executable).parent / "zkop"
    assert subprocess.run([str(script), "--version"], capture_output=True, text=True, check=True).stdout == out.stdout


LOADED = """
import json, sys
from zkop.cmd.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""


@pytest.mark.parametrize(("argv", "commands_loaded"), [(["run", "--help"], False), (["export", "--help"], True),
                                                       (["--help"], True)])
def test_zkop_run_does_not_load_the_other_commands_modules(argv: list[str], commands_loaded: bool) -> None:
    done = subprocess.run([sys.executable, "-c", LOADED, *argv], capture_output=True, text=True, check=True)
    help_text, loaded = done.stdout.rsplit("\n", 2)[0], set(json.loads(done.stdout.rsplit("\n", 2)[1]))
    for module in ("zkop.cmd.gitops", "zkop.cmd.fetch", "zkop.gitops.sync", "jinja2"):
        assert (module in loaded) == commands_loaded, module
    if argv == ["--help"]:
        for command in ("run", "export", "diff", "validate", "sync", "fetch"):
            assert f"    {command}" in help_text, command


def test_run_flags_follow_controller_runtime_and_env_fallbacks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZOOKEEPER_HOSTS", "zk-0:2181,zk-1:2181/chroot")
    args = build_parser().parse_args(["run", "--leader-elect", "--metrics-bind-address", "0",
                                      "--health-probe-bind-address", ":9443", "--namespace", "a", "--namespace", "b"])
    assert args.leader_elect and args.metrics_bind_address == "0" and args.health_probe_bind_address == ":9443"
    assert args.namespaces == ["a", "b"] and args.workers == 4 and args.leader_election_id == "zkop-leader"
    assert args.zk_hosts == "zk-0:2181,zk-1:2181/chroot"
    assert (args.leader_election_lease_duration, args.leader_election_renew_deadline,
            args.leader_election_retry_period) == (15.0, 10.0, 2.0)


def test_auth_file(tmp_path: Path) -> None:
    good = tmp_path / "credentials"
    good.write_text("ops:secret\n")
    options = connection_options(build_parser().parse_args(["run", "--zk-auth-file", str(good)]))
    assert options.auth == (("digest", "ops:secret"),)
    missing = connection_options(build_parser().parse_args(["run", "--zk-auth-file", str(tmp_path / "none")]))
    assert missing.auth == ()  # an optional Secret volume that is not there: no auth
    bad = tmp_path / "bad"
    bad.write_text("no-colon")
    with pytest.raises(UsageError, match="user:password"):
        connection_options(build_parser().parse_args(["run", "--zk-auth-file", str(bad)]))


def test_a_missing_auth_file_is_a_warning_for_commands_a_person_types(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """``zkop run`` treats a missing file as an optional Secret volume (INFO); ``diff`` and friends
    warn, naming the file: a typo would otherwise surface as an authorisation error."""
    missing = str(tmp_path / "credential")
    with caplog.at_level(logging.INFO, logger="zkop"):
        connection_options(build_parser().parse_args(["run", "--zk-auth-file", missing]))
        assert [r.levelno for r in caplog.records] == [logging.INFO]
        caplog.clear()
        options = connection_options(build_parser().parse_args(
            ["diff", "--zk-hosts", "127.0.0.1:1", "--zk-auth-file", missing, "-f", str(tmp_path)]))
    assert options.auth == ()
    assert [(r.levelno, missing in r.getMessage()) for r in caplog.records] == [(logging.WARNING, True)]


def test_parent_acl_uses_zkcli_notation() -> None:
    assert parse_acl_entry("world:anyone:cdrwa") == OPEN_ACL[0]
    assert parse_acl_entry("digest:ops:abc=:r") == AclEntry("digest", "ops:abc=", 1)
    with pytest.raises(ValueError):
        parse_acl_entry("world:anyone:rx")
    with pytest.raises(SystemExit):  # an argparse type: a usage error while parsing
        build_parser().parse_args(["run", "--zk-parent-acl", "nonsense"])
    # (anonymous zkop needs read, create, delete on its parents: world grants them here)
    args = build_parser().parse_args(["run", "--zk-parent-acl", "world:anyone:rcd",
                                      "--zk-parent-acl", "digest:a:b:cdrwa"])
    assert connection_options(args).parent_acl == (AclEntry("digest", "a:b", 31), AclEntry("world", "anyone", 13))


def test_json_log_lines() -> None:
    record = logging.LogRecord("zkop.test", logging.WARNING, __file__, 1, "hello %s", ("world",), None)
    entry = json.loads(JsonFormatter().format(record))
    assert entry["level"] == "warning" and entry["msg"] == "hello world" and entry["logger"] == "zkop.test"
    with pytest.raises(ValueError):
        configure_logging("loud")
    with pytest.raises(ValueError):
        configure_logging("info", "xml")


def _record_origin(logger: logging.Logger) -> tuple[str, int]:
    """Log one record through ``logger`` and return the file name and line it was attributed to."""
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    handler = Keep()
    logger.addHandler(handler)
    try:
        logger.warning("where am I")
    finally:
        logger.removeHandler(handler)
    return seen[0].filename, seen[0].lineno


def test_configure_logging_skips_caller_lookups_until_restored() -> None:
    logger = logging.getLogger("zkop.test.origin")
    logger.propagate = False  # the record goes to the handler above, not to stderr
    root = logging.getLogger()
    before = (list(root.handlers), root.level, logging.getLogger("kazoo").level)
    try:
        assert _record_origin(logger)[0] == "test_cli.py"
        restore = configure_logging("debug", "json")
        try:
            assert _record_origin(logger) == ("(unknown file)", 0)  # the operator's saving: no lookup
            assert root.level == logging.DEBUG and root.handlers != before[0]
        finally:
            restore()
        assert _record_origin(logger)[0] == "test_cli.py"
        assert (list(root.handlers), root.level, logging.getLogger("kazoo").level) == before
    finally:
        logger.propagate = True


def test_main_in_process_leaves_logging_as_it_found_it(tmp_path: Path) -> None:
    root = logging.getLogger()
    before = (list(root.handlers), root.level)
    (tmp_path / "a.yaml").write_text("")
    assert main(["validate", "-f", str(tmp_path / "a.yaml"), "--log-level", "debug"]) == 0
    assert (list(root.handlers), root.level) == before
    logger = logging.getLogger("zkop.test.origin")
    logger.propagate = False
    try:
        assert _record_origin(logger)[0] == "test_cli.py"
    finally:
        logger.propagate = True


def test_a_parent_acl_that_excludes_zkop_is_a_usage_error(tmp_path: Path) -> None:
    """The classic: the credential file holds the hashed id the ACL names, not the password."""
    from kazoo.security import make_digest_acl_credential

    ops_id = make_digest_acl_credential("ops", "ops-password")
    hashed = tmp_path / "credentials"
    hashed.write_text(ops_id + "\n")
    run = subprocess.run([sys.executable, "-m", "zkop", "run", "--kubeconfig", str(tmp_path / "none"),
                          "--zk-hosts", "127.0.0.1:1", "--zk-auth-file", str(hashed),
                          "--zk-parent-acl", f"digest:{ops_id}:cdrwa", "--zk-parent-acl", "world:anyone:r"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("zkop run: error: --zk-parent-acl the ACL would deny zkop create, delete")
    assert f"zkop authenticates as digest:{make_digest_acl_credential('ops', ops_id.split(':')[1])}" in lines[0]
    assert f"the ACL grants digest:{ops_id} read, write, create, delete, admin; world:anyone read" in lines[0]
    assert "is the hashed id itself" in lines[0]
    # With the password in the file the same ACL is fine.
    hashed.write_text("ops:ops-password\n")
    options = connection_options(build_parser().parse_args(
        ["run", "--zk-auth-file", str(hashed), "--zk-parent-acl", f"digest:{ops_id}:cdrwa"]))
    assert options.parent_acl == (AclEntry("digest", ops_id, 31),)


@pytest.mark.parametrize(("text", "seconds"), [("60s", 60.0), ("90", 90.0), ("1m30s", 90.0), ("250ms", 0.25),
                                               ("0", 0.0)])
def test_acl_check_period_takes_a_go_duration_or_seconds(text: str, seconds: float) -> None:
    assert build_parser().parse_args(["run", "--acl-check-period", text]).acl_check_period == seconds
    assert build_parser().parse_args(["run"]).acl_check_period == 60.0


def test_a_bad_acl_check_period_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["run", "--acl-check-period", "soon"])
    assert info.value.code == 2
    assert "argument --acl-check-period: invalid duration 'soon'" in capsys.readouterr().err


@pytest.mark.parametrize(("flag", "server"), [("--metrics-bind-address", "metrics"),
                                              ("--health-probe-bind-address", "health probes")])
def test_an_address_in_use_is_named_in_the_error(flag: str, server: str, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"  # never contacted: the servers bind before anything else starts
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}], "users": [{"name": "u", "user": {}}]}))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        # The other server's address is free: neither may be listening when the error is reported.
        others = {"--metrics-bind-address": f"127.0.0.1:{free_port()}",
                  "--health-probe-bind-address": f"127.0.0.1:{free_port()}", flag: address}
        run = subprocess.run([sys.executable, "-m", "zkop", "run", "--kubeconfig", str(kubeconfig),
                              "--zk-hosts", "127.0.0.1:1", *[x for item in others.items() for x in item]],
                             capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run.stderr
    # docs/operations.md, "Exit codes": a usage error, nothing started — the one line and nothing logged before it.
    assert run.stderr.splitlines() == [
        f"zkop run: error: cannot serve {server} on {address}: Address already in use (see 'zkop run --help')"]


@pytest.mark.parametrize(("flags", "expected"), [
    ([], (50.0, 100)), (["--kube-api-qps", "7", "--kube-api-burst", "3"], (7.0, 3)), (["--kube-api-qps", "-1"], None),
])
def test_the_operator_client_gets_the_kube_api_bucket(
    flags: list[str], expected: tuple[float, int] | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``zkop run``'s flags reach the one client every controller, informer, the Lease and Events share."""
    from zkop.cmd import main as cli
    from zkop.operator.options import OperatorOptions
    from zkop.operator.run import Operator

    kubeconfig = tmp_path / "kubeconfig"  # never contacted: the operator is built, not run
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}], "users": [{"name": "u", "user": {}}]}))
    built: list[Operator] = []

    class Built(Operator):
        def __init__(self, options: OperatorOptions) -> None:
            super().__init__(options)
            built.append(self)

        def run(self) -> int:
            return 0

    monkeypatch.setattr("zkop.operator.run.Operator", Built)
    monkeypatch.setattr("signal.signal", lambda *args: None)  # _run's SIGTERM handler is not the test process's
    assert cli.main(["run", "--kubeconfig", str(kubeconfig), "--zk-hosts", "127.0.0.1:1", *flags]) == 0
    (operator,) = built
    limiter = operator.client.rate_limiter
    assert (None if limiter is None else (limiter.qps, limiter.burst)) == expected
    assert operator.recorder.client is operator.client and operator.manager.client is operator.client
