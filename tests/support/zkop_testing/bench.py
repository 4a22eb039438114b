"""Running ``python -m hack.bench --smoke --scenario <name>`` from a test: its report, its workdir in the test's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["REPO", "run_smoke_scenario"]

REPO = Path(__file__).resolve().parents[3]


def run_smoke_scenario(tmp_path: Path, scenario: str, *args: str, timeout: float = 150) -> dict[str, Any]:
    """Run scenario ``scenario`` at smoke size with ``args`` (its workdir and zkop's files under ``tmp_path``, so
    nothing is left in ``/tmp``); the JSON report it wrote with ``--output``, which must be what it printed.

    Raises:
        AssertionError: the bench exited non-zero (its stderr's end in the message) or printed another report.
        subprocess.TimeoutExpired: it ran longer than ``timeout`` seconds.
    """
    out = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "hack.bench", "--smoke", "--scenario", scenario, *args,
                           "--output", str(out)], cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          check=False, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-5000:]
    report: dict[str, Any] = json.loads(out.read_text())
    assert json.loads(proc.stdout) == report
    return report
