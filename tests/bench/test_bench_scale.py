"""``python -m hack.bench --smoke --scale`` wires the scale run (issue #17) at smoke size, on the in-memory API
server and on a real control plane (seeded through kube-apiserver by server-side apply).

The scale run proper (N = 50,000, M = 20,000) takes far too long for CI; this checks that the flag
puts every scenario in the realistically seeded cluster, runs the reference cold sync its CPU
target is judged against, and reports every ``scale_*`` target beside its goal. Figures are never
asserted (shared machines); nor is ``met``, which is ``null`` below the scale run's size. The double's
run skips the floor (``--floor-runs 0``, as the real scale run may: its targets do not read the floor);
the real one runs it once.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from zkop_testing.controlplane import NEWEST, binaries

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = ("floor", "cpu_reference", "cold_sync", "warm_restart", "resync", "update_latency", "drift_latency",
             "bridge", "memory")
SCALE_TARGETS = ("scale_rss_mb", "scale_warm_restart_ready_s", "scale_resync_writes", "scale_update_p99_ms",
                 "scale_drift_p99_ms", "scale_cpu_per_object")


@pytest.mark.timeout(360)
@pytest.mark.parametrize("plane", ["double", "real"])
def test_scale_flag_runs_every_scenario_in_the_realistic_cluster(tmp_path: Path, plane: str) -> None:
    if plane == "real":
        binaries(NEWEST)  # built (or found in its cache) as for tests/cluster; the bench itself never builds
    out = tmp_path / "report.json"
    floor_runs = 0 if plane == "double" else 1
    proc = subprocess.run([sys.executable, "-m", "hack.bench", "--smoke", "--scale", "--control-plane", plane,
                           "--floor-runs", str(floor_runs), "--output", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=340, check=False)
    assert proc.returncode == 0, proc.stderr[-5000:]
    report: dict[str, Any] = json.loads(proc.stdout)
    assert json.loads(out.read_text()) == report

    params = report["params"]
    assert params["scale"] is True and params["realistic_cluster"] is True and params["smoke"] is True
    assert params["control_plane"] == plane
    assert (params["n"], params["m"], params["floor_runs"]) == (50, 20, floor_runs)
    assert params["cpu_reference_n"] == 25
    cluster = params["cluster"]
    assert cluster["helm_secrets"] == 20 and cluster["root_ca_configmaps"] == 7 and cluster["managed_fields"]
    assert {"load_1m", "uptime"} <= set(params["machine_load"]["start"])

    scenarios = report["scenarios"]
    # The real plane adds its idle windows: the plane alone before zkop, zkop idle after its cold sync.
    expected = SCENARIOS if plane == "double" else (*SCENARIOS[:2], "plane_idle", SCENARIOS[2], "zkop_idle",
                                                    *SCENARIOS[3:])
    assert list(scenarios) == list(expected)
    if plane == "real":
        assert "server-side apply" in cluster["how"]
        assert scenarios["cold_sync"]["cluster"]["etcd_puts"] >= 2 * 50
    if floor_runs == 0:
        assert scenarios["floor"] == {"skipped": "--floor-runs 0"}
        assert scenarios["cold_sync"]["ratio_to_floor"] is None
    else:
        assert scenarios["cold_sync"]["ratio_to_floor"] > 0 and scenarios["floor"]["controller_floor"]
    assert scenarios["cpu_reference"]["params"]["n"] == 25 and scenarios["cold_sync"]["params"]["n"] == 50
    assert "zkop_cpu_ms_per_cr" in scenarios["cpu_reference"] and "zookeeper_writes" in scenarios["cpu_reference"]
    assert "ready_seconds" in scenarios["warm_restart"]

    targets = report["targets"]
    assert set(SCALE_TARGETS) <= set(targets)
    for name in SCALE_TARGETS:
        assert {"target", "value", "met"} <= set(targets[name]), name
        assert targets[name]["met"] is None, name  # judged only at N = 50,000, M = 20,000
    assert targets["scale_cpu_per_object"]["value"]["reference_n"] == 25
    floor_targets = ("cold_sync_vs_floor", "cpu_per_object_vs_floor", "cpu_per_object_vs_controller_floor")
    if floor_runs == 0:  # nothing to read them against: not judged, and said so
        assert all(targets[name]["met"] is None for name in floor_targets)
        assert "--floor-runs 0" in targets["cold_sync_vs_floor"]["note"]
    else:
        assert all(isinstance(targets[name]["met"], bool) for name in floor_targets)
    assert set(targets["scale_warm_restart_ready_s"]["value"]) == {"ready_seconds", "writes"}


@pytest.mark.parametrize("scenario", ["cpu", "instructions"])
def test_floor_runs_0_is_refused_where_the_floor_is_the_point(scenario: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "hack.bench", "--smoke", "--scenario", scenario, "--floor-runs", "0",
                           "--control-plane", "double"], cwd=REPO, capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode != 0 and "--floor-runs must be at least 1" in proc.stderr


def test_scale_targets_are_judged_at_the_scale_size() -> None:
    sys.path.insert(0, str(REPO))
    try:
        from hack.bench.params import Params
        from hack.bench.report import scale_targets
    finally:
        sys.path.remove(str(REPO))
    scenarios: dict[str, Any] = {
        "cold_sync": {"zkop_cpu_ms_per_cr": 1.5},
        "cpu_reference": {"params": {"n": 2000}, "zkop_cpu_ms_per_cr": 2.0},
        "warm_restart": {"ready_seconds": 12.0, "api_writes": 0, "zookeeper_writes": 2,
                         "zookeeper_writes_excluding_startup_probe": 0},
        "resync": {"api_writes": 0, "zookeeper_writes": 0},
        "update_latency": {"p99_ms": 150.0, "not_observed": 0},
        "drift_latency": {"p99_ms": 20.0, "not_restored": 0},
        "memory": {"params": {"service_bridge": True}, "rss_mb": 390.0},
    }
    judged = scale_targets(scenarios, Params(n=50000, m=20000, realistic_cluster=True, scale=True))
    assert {k: v["met"] for k, v in judged.items()} == {
        "scale_rss_mb": True, "scale_warm_restart_ready_s": True, "scale_resync_writes": True,
        "scale_update_p99_ms": False, "scale_drift_p99_ms": True, "scale_cpu_per_object": True}
    small = scale_targets(scenarios, Params(n=2000, m=1000))
    assert all(v["met"] is None for v in small.values())
    # An empty cluster at full size is not the scale run either.
    assert all(v["met"] is None for v in scale_targets(scenarios, Params(n=50000, m=20000)).values())
