"""``python -m hack.bench --smoke --scenario ensembles``: zkop with several ZooKeeperEnsembles (issue #25, item 8).

Two ZooKeeperEnsembles of five objects each, on real ZooKeeper servers, one ``zkop run --zookeeper-ensembles``:
the report has every figure docs/performance.md ("Several ensembles") reads, and the exact facts behind them
hold -- every object converged on its own ensemble's server, every ensemble Ready, the slopes computed from
the runs. The figures themselves (threads, RSS, CPU) are never asserted: on shared machines they are noise.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from zkop_testing.bench import run_smoke_scenario
from zkop_testing.controlplane import NEWEST, binaries

REPO = Path(__file__).resolve().parents[2]
FIGURES = ("cold_sync_seconds", "cold_sync_cpu_s", "cold_sync_cpu_ms_per_object", "threads_max", "threads_settled",
           "rss_synced_mb", "rss_peak_mb", "rss_settled_mb", "idle_seconds", "idle_cpu_s", "idle_cpu_percent",
           "idle_api_requests", "settle_seconds")


def run_bench(tmp_path: Path, *args: str) -> dict[str, Any]:
    """Run the scenario with ``args``; its JSON report (written with ``--output``)."""
    return run_smoke_scenario(tmp_path, "ensembles", *args)


def check_run(run: dict[str, Any], k: int, per: int) -> None:
    """One size's figures: present, and the exact facts true."""
    assert (run["ensembles"], run["objects"], run["sessions"]) == (k, k * per, k + 1)
    assert run["znodes_wrong"] == 0 and run["ensembles_ready"] == k
    for name in FIGURES:
        assert isinstance(run[name], int | float) and run[name] >= 0, name
    assert run["threads_settled"] > 0 and run["rss_settled_mb"] > 0 and run["cold_sync_cpu_s"] > 0
    assert run["rss_peak_mb"] >= run["rss_settled_mb"]
    assert run["idle_seconds"] >= 2.0
    # Every object's finalizer and its Synced status were written during the cold sync (the audit log on the
    # real plane, the request log on the double).
    assert run["cold_sync_api"]["api_writes_on_zookeeperconfigs_per_cr"] >= 2.0
    assert set(run["zkop_log"]) == {"tracebacks", "conflicts_409", "ensemble_not_usable_events",
                                    "connection_pool_full"}


@pytest.mark.timeout(180)
def test_two_sizes_on_the_double_report_every_figure_and_the_slopes(tmp_path: Path) -> None:
    report = run_bench(tmp_path, "--ensembles", "1,2", "--control-plane", "double")
    params = report["params"]
    assert params["control_plane"] == "double" and params["zkop_client_qps"] == "lifted (--kube-api-qps -1)"
    assert (params["ensembles"], params["objects_per_ensemble"]) == ([1, 2], 5)
    assert {"start", "end"} <= set(params["machine_load"])
    scenario = report["scenarios"]["ensembles"]
    assert scenario["params"]["workers_per_ensemble"] == 8
    one, two = scenario["runs"]
    check_run(one, 1, 5)
    check_run(two, 2, 5)
    slopes = scenario["per_ensemble"]
    assert slopes["between"] == [1, 2]
    assert slopes["threads_settled"] == two["threads_settled"] - one["threads_settled"]
    assert slopes["rss_settled_mb"] == round(two["rss_settled_mb"] - one["rss_settled_mb"], 2)
    assert slopes["cold_sync_cpu_ms_per_object"] == {"1": one["cold_sync_cpu_ms_per_object"],
                                                     "2": two["cold_sync_cpu_ms_per_object"]}


@pytest.mark.timeout(180)
def test_two_ensembles_of_five_on_the_real_control_plane(tmp_path: Path) -> None:
    binaries(NEWEST)  # built (or found in its cache) as for tests/cluster; the bench itself never builds
    report = run_bench(tmp_path, "--control-plane", "real", "--k8s-version", NEWEST)
    assert report["params"]["control_plane"] == "real" and report["params"]["k8s_minor"] == NEWEST
    scenario = report["scenarios"]["ensembles"]
    (run,) = scenario["runs"]
    check_run(run, 2, 5)
    assert scenario["per_ensemble"] == {}  # one size: no slope


def test_bad_sizes_are_a_usage_error() -> None:
    for args, message in ((["--ensembles", "0,5"], "positive"), (["--ensembles", "a"], "not a list"),
                          (["--objects-per-ensemble", "0"], "at least 1")):
        proc = subprocess.run([sys.executable, "-m", "hack.bench", "--scenario", "ensembles", *args], cwd=REPO,
                              capture_output=True, text=True, timeout=60, check=False)
        assert proc.returncode != 0 and message in proc.stderr, (args, proc.stderr[-2000:])
