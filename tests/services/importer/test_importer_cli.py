"""The importer's ``zkop run`` flags, and their wiring into ``zkop run``."""

from __future__ import annotations

import argparse

import pytest

from zkop.cmd.import_flags import add_flags, options_from_args
from zkop.cmd.main import build_parser
from zkop.services.importer.options import ImportOptions


def parse(*argv: str) -> ImportOptions | None:
    parser = argparse.ArgumentParser()
    add_flags(parser)
    return options_from_args(parser.parse_args(list(argv)))


def test_off_by_default() -> None:
    assert parse() is None
    assert parse("--import-root", "/x") is None


def test_defaults() -> None:
    assert parse("--import-services") == ImportOptions()
    assert ImportOptions() == ImportOptions(namespace="default", format="curator", root="/services", prefix="",
                                            max_deletes=10, workers=2)


def test_the_default_root_follows_the_format() -> None:
    assert (parse("--import-services", "--import-format", "dubbo") or ImportOptions()).root == "/dubbo"
    assert (parse("--import-services", "--import-format", "json") or ImportOptions()).root == "/kubernetes/services"


def test_every_flag() -> None:
    options = parse("--import-services", "--import-format", "dubbo", "--import-root", "/registry/dubbo/",
                    "--import-namespace", "legacy", "--import-prefix", "zk-", "--import-max-deletes", "0",
                    "--import-workers", "3")
    assert options == ImportOptions(namespace="legacy", format="dubbo", root="/registry/dubbo", prefix="zk-",
                                    max_deletes=0, workers=3)


@pytest.mark.parametrize(("argv", "message"), [
    (["--import-root", "relative"], "--import-root"),
    (["--import-namespace", "Not_A_Namespace"], "--import-namespace"),
    (["--import-max-deletes", "-1"], "--import-max-deletes"),
    (["--import-workers", "0"], "--import-workers"),
])
def test_invalid_values_name_the_flag(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Checked while parsing, so ``zkop run`` reports them as usage errors (exit 2)."""
    with pytest.raises(SystemExit) as exit_:
        parse("--import-services", *argv)
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_zkop_run_knows_the_flags() -> None:
    args = build_parser().parse_args(["run", "--import-services", "--import-namespace", "legacy",
                                      "--service-bridge"])
    assert options_from_args(args) == ImportOptions(namespace="legacy")
    assert build_parser().parse_args(["run"]).import_services is False


def test_allowed_cidrs_repeatable_or_comma_separated() -> None:
    options = parse("--import-services", "--import-allowed-cidrs", "10.1.0.0/16, 192.0.2.7",
                    "--import-allowed-cidrs", "2001:db8::/32")
    assert options is not None
    assert options.allowed_cidrs == ("10.1.0.0/16", "192.0.2.7/32", "2001:db8::/32")
    with pytest.raises(SystemExit, match=r"--import-allowed-cidrs: '10\.1\.0\.1/16' is not a CIDR"):
        parse("--import-services", "--import-allowed-cidrs", "10.1.0.1/16")
