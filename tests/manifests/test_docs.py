"""``docs/operations.md`` stays complete: every ``zkop run`` flag and every exported metric is documented."""

from __future__ import annotations

import argparse
import re

from prometheus_client import Counter, Gauge, Histogram
from zkop_testing.kustomize import REPO

from zkop.cmd.main import build_parser
from zkop.runtime import metrics

OPERATIONS = REPO / "docs" / "operations.md"


def _run_parser() -> argparse.ArgumentParser:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    run: argparse.ArgumentParser = sub.choices["run"]
    return run


def _long_flags(parser: argparse.ArgumentParser) -> set[str]:
    return {opt for action in parser._actions for opt in action.option_strings
            if opt.startswith("--") and opt != "--help"}


def _documented() -> set[str]:
    return set(re.findall(r"`(--[a-z0-9-]+)", OPERATIONS.read_text(encoding="utf-8")))


def test_every_zkop_run_flag_is_documented() -> None:
    flags = _long_flags(_run_parser())
    assert "--leader-elect" in flags
    missing = sorted(flags - _documented())
    assert not missing, f"docs/operations.md does not document {missing}"


def test_every_service_bridge_flag_is_documented() -> None:
    from zkop.cmd.bridge_flags import add_flags

    parser = argparse.ArgumentParser()
    add_flags(parser)
    flags = _long_flags(parser)
    assert {"--service-bridge", "--service-bridge-root", "--dry-run"} <= flags
    missing = sorted(flags - _documented())
    assert not missing, f"docs/operations.md does not document {missing}"


def test_documented_flags_exist() -> None:
    from zkop.cmd.bridge_flags import add_flags

    parser = argparse.ArgumentParser()
    add_flags(parser)
    known = _long_flags(_run_parser()) | _long_flags(parser)
    # kubectl's own flags that the guide's commands use
    kubectl_flags = {"--from-literal", "--previous", "--field-selector"}
    assert sorted(_documented() - known - kubectl_flags) == [], "docs/operations.md names flags zkop does not have"


def test_every_metric_is_documented() -> None:
    text = OPERATIONS.read_text(encoding="utf-8")
    names = set()
    for value in vars(metrics).values():
        if isinstance(value, Counter):
            names.add(f"{value._name}_total")
        elif isinstance(value, (Gauge, Histogram)):
            names.add(value._name)
    names |= {"workqueue_unfinished_work_seconds", "workqueue_longest_running_processor_seconds"}
    assert len(names) > 20
    missing = sorted(n for n in names if f"`{n}`" not in text)
    assert not missing, f"docs/operations.md does not list {missing}"
