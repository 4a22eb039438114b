"""The bridge's ``zkop run`` flags."""

from __future__ import annotations

import argparse

import pytest

from zkop.cmd.bridge_flags import add_flags, options_from_args
from zkop.services.bridge.options import BridgeOptions


def parse(*argv: str) -> BridgeOptions | None:
    parser = argparse.ArgumentParser()
    add_flags(parser)
    parser.add_argument("--dry-run", action="store_true")  # a ``zkop run`` flag (zkop.cmd.main) since 0.2
    return options_from_args(parser.parse_args(list(argv)))


def test_off_by_default() -> None:
    assert parse() is None
    assert parse("--service-bridge-root", "/x") is None


def test_defaults_match_the_documented_ones() -> None:
    assert parse("--service-bridge") == BridgeOptions()


def test_every_flag() -> None:
    options = parse(
        "--service-bridge", "--service-bridge-root", "/svc/", "--service-bridge-default-sync=false",
        "--service-bridge-namespace", "a", "--service-bridge-namespace", "b", "--service-bridge-namespace", "a",
        "--service-bridge-exclude-namespace", "b", "--service-bridge-type", "LoadBalancer",
        "--service-bridge-label", "app", "--service-bridge-layout", "nested", "--service-bridge-format", "curator",
        "--service-bridge-policy", "upsert-only", "--service-bridge-max-deletes", "0",
        "--service-bridge-endpoints", "--service-bridge-endpoints-debounce", "2", "--service-bridge-workers", "3",
        "--dry-run",
    )
    assert options == BridgeOptions(
        root="/svc", default_sync=False, namespaces=("a", "b"), exclude_namespaces=("b",), types=("LoadBalancer",),
        labels=("app",), layout="nested", format="curator", policy="upsert-only", max_deletes=0,
        endpoints=True, endpoints_debounce=2.0, endpoints_max_delay=12.0, workers=3,
    )


def test_an_empty_exclude_value_clears_the_default() -> None:
    options = parse("--service-bridge", "--service-bridge-exclude-namespace", "")
    assert options is not None and options.exclude_namespaces == ()


@pytest.mark.parametrize(("argv", "message"), [
    (["--service-bridge-root", "relative"], "--service-bridge-root: path must be absolute"),
    (["--service-bridge-root", "/zookeeper/x"], "--service-bridge-root: paths under /zookeeper are reserved"),
    (["--service-bridge-max-deletes", "-1"], "--service-bridge-max-deletes: must be 0"),
    (["--service-bridge-workers", "0"], "--service-bridge-workers: must be at least 1"),
    (["--service-bridge-endpoints-debounce=-1s"], "--service-bridge-endpoints-debounce: duration '-1s' must not"),
])
def test_invalid_values_name_the_flag(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Checked while parsing, so ``zkop run`` reports them as usage errors (exit 2)."""
    with pytest.raises(SystemExit) as exit_:
        parse("--service-bridge", *argv)
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_bad_choices_are_argparse_errors(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--service-bridge-type", "Headless"], ["--service-bridge-default-sync=maybe"],
                 ["--service-bridge-format", "etcd"]):
        with pytest.raises(SystemExit):
            parse("--service-bridge", *argv)
    assert "invalid" in capsys.readouterr().err


def test_the_dubbo_services_root_is_a_flag_apart_from_the_other_roots() -> None:
    options = parse("--service-bridge", "--service-bridge-dubbo-services-root", "/apps/")
    assert options is not None and options.dubbo_services_root == "/apps"
    for argv in (["--service-bridge-dubbo-services-root", "/dubbo/services"],
                 ["--service-bridge-dubbo-services-root", "/kubernetes"]):
        with pytest.raises(SystemExit, match="must not contain one another"):
            parse("--service-bridge", *argv)
