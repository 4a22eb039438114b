"""``zkop run --tenancy-policy-file``: the default ensemble's tenancy rules and adoption mode, checked at start-up."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from zkop.cmd.flags import UsageError
from zkop.cmd.main import build_parser, read_tenancy_policy
from zkop.feature.tenancy import TenancyPolicy
from zkop.zkconfig.controller import ZooKeeperConfigOptions

POLICY = """\
tenancy:
  rules:
    - namespaces: [team-a]
      pathPrefixes: [/config/team-a/]
    - namespaceSelector:
        matchExpressions: [{key: zkop.example.com/tenant, operator: In, values: [payments]}]
      pathPrefixes: [/config/payments]
adoption: IfRequested
"""


def test_the_file_is_read_by_the_ensembles_parser(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    args = build_parser().parse_args(["run", "--tenancy-policy-file", str(path)])
    policy = read_tenancy_policy(args.tenancy_policy_file)
    assert policy is not None
    assert policy.adoption == "IfRequested"
    assert policy.admit("team-a", {}, "/config/team-a/db") is None
    assert policy.admit("shop", {"zkop.example.com/tenant": "payments"}, "/config/payments/x") is None
    refusal = policy.admit("shop", {}, "/config/payments/x")
    assert refusal is not None and refusal.reason == "NamespaceNotAllowed"
    # Only a namespaceSelector makes zkop watch Namespaces (and need list/watch on them).
    assert ZooKeeperConfigOptions(tenancy=policy).needs_namespaces() is True
    plain = TenancyPolicy.from_spec({"tenancy": {"rules": [{"namespaces": ["a"], "pathPrefixes": ["/a"]}]}})
    assert ZooKeeperConfigOptions(tenancy=plain).needs_namespaces() is False


def test_without_the_flag_nothing_changes() -> None:
    """No policy: the controller is set up exactly as before tenancy existed (no policy, no Namespace informer)."""
    assert build_parser().parse_args(["run"]).tenancy_policy_file is None
    assert read_tenancy_policy(None) is None
    assert ZooKeeperConfigOptions().needs_namespaces() is False


@pytest.mark.parametrize(("content", "message"), [
    ("adoption: Maybe\n", "adoption: must be one of Always, IfRequested, Never, not 'Maybe'"),
    ("tenancy:\n  rules:\n    - pathPrefixes: [/a]\n",
     "tenancy.rules[0]: give namespaces or a namespaceSelector (namespaceSelector: {} selects every namespace)"),
    ("tenancy:\n  rules:\n    - namespaces: [a]\n      pathPrefixes: [a/b]\n",
     "tenancy.rules[0].pathPrefixes[0]: path must be absolute (start with '/'): 'a/b'"),
    ("tenancy: [\n", "not YAML: "),
    ("- a list\n", "the policy must be a mapping with tenancy and adoption"),
])
def test_a_bad_file_is_a_usage_error_naming_the_field(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(content)
    with pytest.raises(UsageError) as raised:
        read_tenancy_policy(str(path))
    assert str(raised.value).startswith(f"--tenancy-policy-file {path}: {message}")


def test_zkop_run_refuses_a_bad_or_missing_file_before_starting(tmp_path: Path) -> None:
    """One line on stderr, exit status 2, before any connection is tried (the kubeconfig does not even exist)."""
    bad = tmp_path / "policy.yaml"
    bad.write_text("tenancy:\n  rules:\n    - namespaces: [a]\n")
    for path, message in ((bad, "tenancy.rules[0].pathPrefixes: must name at least one prefix"),
                          (tmp_path / "absent.yaml", "cannot read it: No such file or directory")):
        run = subprocess.run([sys.executable, "-m", "zkop", "run", "--kubeconfig", str(tmp_path / "none"),
                              "--zk-hosts", "127.0.0.1:1", "--tenancy-policy-file", str(path)],
                             capture_output=True, text=True, timeout=60)
        assert run.returncode == 2, run.stderr
        (line,) = run.stderr.strip().splitlines()
        assert line.startswith(f"zkop run: error: --tenancy-policy-file {path}: {message}"), line
