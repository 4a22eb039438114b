"""``python -m hack.bench --smoke --scenario realistic`` runs and reports the real-cluster footprint.

On the in-memory API server and on a real control plane (etcd + kube-apiserver + kube-controller-manager,
built as tests/cluster builds it), where the cluster is seeded through kube-apiserver by server-side apply.
Figures are not judged (shared machines), except the one that is not noise: zkop lists no Secret or
ConfigMap that no ZooKeeperConfig references.
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


@pytest.mark.timeout(180)
@pytest.mark.parametrize("plane", ["double", "real"])
def test_realistic_scenario_reports_rss_and_list_load(plane: str) -> None:
    if plane == "real":
        binaries(NEWEST)  # built (or found in its cache) as for tests/cluster; the bench itself never builds
    proc = subprocess.run([sys.executable, "-m", "hack.bench", "--smoke", "--scenario", "realistic",
                           "--control-plane", plane], cwd=REPO, capture_output=True, text=True, timeout=160,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-5000:]
    report: dict[str, Any] = json.loads(proc.stdout)
    assert report["params"]["control_plane"] == plane
    assert {"load_1m", "uptime"} <= set(report["params"]["machine_load"]["start"])
    (name,) = report["scenarios"]
    result = report["scenarios"][name]
    assert name == "realistic" and result["params"]["secrets"] == 20 and result["params"]["managed_fields"]
    assert result["seeded"]["helm_secrets"] == 20 and result["seeded"]["root_ca_configmaps"] == 7
    assert isinstance(result["rss_mb"], float)
    assert set(result["list"]) == {"services", "zookeeperconfigs"}  # never configmaps or secrets
    # Every ZooKeeperConfig (50) and Service (20, and the plane's `kubernetes`) came in zkop's LISTs.
    assert result["list"]["zookeeperconfigs"]["objects"] == 50 and result["list"]["services"]["objects"] == 21
    assert result["list"]["zookeeperconfigs"]["bytes"] > 0
    assert result["get"]["secrets"]["requests"] >= 5 and result["get"]["configmaps"]["requests"] >= 5
    assert result["configmaps_secrets_listed_unreferenced"] == 0
    assert report["targets"]["realistic_no_unreferenced_list"]["met"] is True
    if plane == "real":
        # Seeded by server-side apply: the real field manager recorded the GitOps tool's apply, and zkop's
        # own writes (finalizer, status) beside it.
        managers = result["managed_fields_sample"]
        assert {"manager": "kustomize-controller", "operation": "Apply", "subresource": None} in managers
        assert any(m["operation"] == "Update" and m["subresource"] == "status" for m in managers), managers
        assert result["cluster"]["etcd_puts"] >= 2 * 50 and result["cluster"]["apiserver_cpu_s"] > 0
