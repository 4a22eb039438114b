"""``python -m hack.bench --smoke --scenario tree``: one ZooKeeperConfigTree of N properties beside N
ZooKeeperConfigs (issue #39, item 5).

N = 50 on the in-memory API server and on the real control plane: the report has every figure docs/performance.md
("Config trees") reads, and the exact facts behind them hold -- every znode holds its bytes in both runs, a one-line
change is one ``setData`` of that znode in both, the tree's cold sync writes one object's finalizer and status
where the ZooKeeperConfigs write N of each. The figures themselves (seconds, CPU, RSS) are never asserted: on
shared machines they are noise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from zkop_testing.bench import run_smoke_scenario
from zkop_testing.controlplane import NEWEST, binaries

N = 50
FIGURES = ("cold_sync_seconds", "ready_seconds", "cpu_s", "cpu_ms_per_item", "cpu_after_ready_s",
           "cpu_after_ready_ms_per_item", "rss_synced_mb", "rss_peak_mb")


def run_bench(tmp_path: Path, *args: str) -> dict[str, Any]:
    """Run the scenario with ``args``; its JSON report (written with ``--output``)."""
    return run_smoke_scenario(tmp_path, "tree", *args)


def check_report(report: dict[str, Any], plane: str) -> None:
    """Every figure present; the exact facts true."""
    assert report["params"]["control_plane"] == plane and report["params"]["n"] == N
    scenario = report["scenarios"]["tree"]
    tree, configs = scenario["tree"], scenario["configs"]
    for run, prefix in ((tree, "/tree-run/bench/tree/prop."), (configs, "/configs-run/bench/app/cr-")):
        assert run["items"] == N and run["znodes_wrong"] == 0
        for name in FIGURES:
            assert isinstance(run[name], int | float) and run[name] >= 0, name
        assert run["rss_peak_mb"] >= run["rss_synced_mb"] > 0
        cold = run["cold_sync_zookeeper"]
        # N znodes and N ownership records, and their parents, besides the start-up probe.
        assert cold["zookeeper_writes_by_area"]["managed_znodes"] >= N
        assert cold["zookeeper_writes_by_area"]["ownership_registry"] >= N
        change = run["one_line_change"]
        assert change["latency_ms"] is not None and change["latency_ms"] > 0
        assert change["zookeeper"]["zookeeper_writes_list"] == [f"setData {prefix}{N // 2:06d}"]
        assert set(scenario["tree_vs_configs"]) >= {"cold_sync_seconds", "cpu_ms_per_item", "rss_peak_mb",
                                                    "zookeeper_writes", "api_writes"}
    # The tree: one finalizer and one status write for its N children; the ZooKeeperConfigs: N of each.
    tree_kinds, config_kinds = tree["cold_sync_api"]["api_requests_by_kind"], configs["cold_sync_api"][
        "api_requests_by_kind"]
    assert tree_kinds.get("patch zookeeperconfigtrees") == 1
    assert tree_kinds.get("patch zookeeperconfigtrees/status") == 1
    assert config_kinds.get("patch zookeeperconfigs") == N
    assert config_kinds.get("patch zookeeperconfigs/status") == N
    # A generation's creates go in a few multi requests, not one transaction per child.
    assert tree["cold_sync_zookeeper"]["zookeeper_write_transactions_per_item"] < 0.5
    assert configs["cold_sync_zookeeper"]["zookeeper_write_transactions_per_item"] >= 1


@pytest.mark.timeout(180)
def test_the_tree_scenario_on_the_double_reports_every_figure(tmp_path: Path) -> None:
    check_report(run_bench(tmp_path, "--control-plane", "double"), "double")


@pytest.mark.timeout(180)
def test_the_tree_scenario_on_the_real_control_plane(tmp_path: Path) -> None:
    binaries(NEWEST)  # built (or found in its cache) as for tests/cluster; the bench itself never builds
    report = run_bench(tmp_path, "--control-plane", "real", "--k8s-version", NEWEST)
    assert report["params"]["k8s_minor"] == NEWEST
    check_report(report, "real")
