"""``docs/operations.md`` stays complete: every ``zkop run`` flag and every exported metric is documented."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import re

from prometheus_client import REGISTRY, CollectorRegistry
from zkop_testing.kustomize import REPO

import zkop
from zkop.cmd.main import build_parser
from zkop.runtime.cache import Indexer
from zkop.zkconfig.status_metrics import ZooKeeperConfigStatusCollector

OPERATIONS = REPO / "docs" / "operations.md"


def _run_parser() -> argparse.ArgumentParser:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    run: argparse.ArgumentParser = sub.choices["run"]
    return run


def _fetch_parser() -> argparse.ArgumentParser:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    fetch: argparse.ArgumentParser = sub.choices["fetch"]
    return fetch


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
    assert {"--service-bridge", "--service-bridge-root"} <= flags
    assert "--dry-run" in _long_flags(_run_parser())  # every controller's, so a ``zkop run`` flag
    missing = sorted(flags - _documented())
    assert not missing, f"docs/operations.md does not document {missing}"


def test_zkop_fetch_flags_of_its_own_are_documented() -> None:
    own = {"--path", "--dir", "--recursive", "--key", "--watch", "--debounce", "--out", "--format", "--template",
           "--wait", "--exec", "--exec-timeout", "--signal", "--pid-file", "--process-name", "--notify-url",
           "--notify-timeout", "--hook-attempts", "--hook-backoff"}
    assert own <= _long_flags(_fetch_parser())
    assert sorted(own - _documented() - {"--key"}) == []


def test_documented_flags_exist() -> None:
    from zkop.cmd.bridge_flags import add_flags

    parser = argparse.ArgumentParser()
    add_flags(parser)
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    gitops = set().union(*(_long_flags(sub.choices[verb]) for verb in ("export", "diff", "validate", "sync")))
    known = _long_flags(_run_parser()) | _long_flags(parser) | _long_flags(_fetch_parser()) | gitops
    # kubectl's own flags that the guide's commands use
    kubectl_flags = {"--from-literal", "--previous", "--field-selector", "--cascade"}
    # helm upgrade's, named where the guide says how to keep values (tests/cluster/test_install.py runs them)
    helm_flags = {"--reset-then-reuse-values", "--reuse-values", "--set"}
    assert sorted(_documented() - known - kubectl_flags - helm_flags) == [], \
        "docs/operations.md names flags zkop does not have"


def _exported_metric_names() -> set[str]:
    """Every series family zkop can export: each zkop module imported, then the default registry read.

    Collectors that exist only at run time (the ZooKeeperConfig status collector over the informer
    cache) are collected over an empty cache.
    """
    for module in pkgutil.walk_packages(zkop.__path__, "zkop."):
        importlib.import_module(module.name)
    registry = CollectorRegistry(auto_describe=True)
    registry.register(ZooKeeperConfigStatusCollector(Indexer()))
    names: set[str] = set()
    for family in [*REGISTRY.collect(), *registry.collect()]:
        if family.name.startswith(("python_", "process_")):
            continue  # prometheus-client's default collectors
        names.add(f"{family.name}_total" if family.type == "counter" else family.name)
    return names


def test_every_metric_is_documented() -> None:
    text = OPERATIONS.read_text(encoding="utf-8")
    names = _exported_metric_names()
    # one family from each package that defines metrics: a module left out of the scan fails here
    assert {"workqueue_depth", "controller_runtime_reconcile_total", "rest_client_requests_total",
            "zkop_zookeeper_connected", "zkop_drift_corrections_total", "zkop_zookeeperconfigs",
            "zkop_service_bridge_writes_total", "zkop_service_import_writes_total"} <= names
    missing = sorted(n for n in names if f"`{n}`" not in text)
    assert not missing, f"docs/operations.md does not list {missing}"
