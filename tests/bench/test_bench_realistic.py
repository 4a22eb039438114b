"""``python -m hack.bench --smoke --scenario realistic`` runs and reports the real-cluster footprint.

Figures are not judged (shared machines), except the one that is not noise: zkop lists no
Secret or ConfigMap that no ZooKeeperConfig references.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(120)
def test_realistic_scenario_reports_rss_and_list_load() -> None:
    proc = subprocess.run([sys.executable, "-m", "hack.bench", "--smoke", "--scenario", "realistic"], cwd=REPO,
                          capture_output=True, text=True, timeout=100, check=False)
    assert proc.returncode == 0, proc.stderr[-5000:]
    report: dict[str, Any] = json.loads(proc.stdout)
    (name,) = report["scenarios"]
    result = report["scenarios"][name]
    assert name == "realistic" and result["params"]["secrets"] == 20 and result["params"]["managed_fields"]
    assert result["seeded"]["helm_secrets"] == 20 and result["seeded"]["root_ca_configmaps"] == 7
    assert isinstance(result["rss_mb"], float)
    assert set(result["list"]) == {"services", "zookeeperconfigs"}  # never configmaps or secrets
    assert result["get"]["secrets"]["requests"] >= 5 and result["get"]["configmaps"]["requests"] >= 5
    assert result["configmaps_secrets_listed_unreferenced"] == 0
    assert report["targets"]["realistic_no_unreferenced_list"]["met"] is True
