"""``python -m hack.bench.request_cost``: per-request CPU of zkop's API client beside urllib3 and http.client.

At 20 requests per variant on the real control plane: every variant's requests are answered (a refused one fails
the measurement) and the report has a CPU and a wall time per request for each. The figures are never asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from zkop_testing.controlplane import NEWEST, binaries

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(300)
def test_the_request_cost_report_has_each_variant(tmp_path: Path) -> None:
    binaries(NEWEST)  # built (or found in its cache) as for tests/cluster
    proc = subprocess.run([sys.executable, "-m", "hack.bench.request_cost", "--n", "20", "--rounds", "1"], cwd=REPO,
                          capture_output=True, text=True, timeout=240, check=False,
                          env={**os.environ, "TMPDIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-5000:]
    report = json.loads(proc.stdout)
    assert sorted(report) == ["http.client", "kube", "urllib3"]
    for runs in report.values():
        [run] = runs
        assert run["cpu_us_per_request"] > 0 and run["wall_us_per_request"] > 0
    assert list(tmp_path.iterdir()) == []  # the control plane's directory is gone
