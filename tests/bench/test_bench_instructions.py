"""``python -m hack.bench --scenario instructions``: instruction counts under callgrind (docs/performance.md).

The run itself is opt-in (``ZKOP_BENCH_INSTRUCTIONS=1``, and valgrind installed): six processes
under callgrind take about 20 s each even at 5 and 10 objects (the interpreter and its imports are
2.4 G instructions), well over two minutes in all. It checks the report's shape and that its figures are
consistent with each other, never their values. The rest runs everywhere and fast.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
RUNS = ("zkop", "floor", "controller_floor")
RATIOS = {"zkop_vs_floor": ("zkop", "floor"), "controller_floor_vs_floor": ("controller_floor", "floor"),
          "zkop_vs_controller_floor": ("zkop", "controller_floor")}


def _skip_reason() -> str | None:
    if os.environ.get("ZKOP_BENCH_INSTRUCTIONS") != "1":
        return "the callgrind run is opt-in: ZKOP_BENCH_INSTRUCTIONS=1 (over two minutes)"
    if shutil.which("valgrind") is None:
        return "valgrind is not installed (apt-get install valgrind)"
    return None


@pytest.mark.timeout(600)
def test_instructions_scenario_reports_counts_marginals_and_ratios(tmp_path: Path) -> None:
    reason = _skip_reason()
    if reason is not None:
        pytest.skip(reason)
    out = tmp_path / "report.json"
    proc = subprocess.Popen([sys.executable, "-m", "hack.bench", "--scenario", "instructions",
                             "--instructions-n", "5,10", "--output", str(out)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = proc.communicate(timeout=540)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)  # the bench stops its valgrind'ed processes and removes its workdir
        stdout, stderr = proc.communicate(timeout=60)
        pytest.fail(f"no report after 540 s:\n{stderr[-5000:]}")
    assert proc.returncode == 0, stderr[-5000:]
    report: dict[str, Any] = json.loads(stdout)
    assert json.loads(out.read_text()) == report

    params = report["params"]
    assert params["instructions_n"] == [5, 10]
    assert params["valgrind"].startswith("valgrind-")
    assert set(params["git"]) == {"commit", "zkop_dirty"} and params["git"]["commit"]
    assert list(report["scenarios"]) == ["instructions"] and report["targets"] == {}
    result = report["scenarios"]["instructions"]
    assert result["params"]["sizes"] == [5, 10] and result["params"]["workers"] == 8

    runs, marginal, ratios = result["runs"], result["marginal_instructions_per_object"], result["ratios"]
    assert set(runs) == set(RUNS) == set(marginal)
    for name in RUNS:
        assert set(runs[name]) == {"5", "10"}, name
        small, large = runs[name]["5"]["instructions"], runs[name]["10"]["instructions"]
        assert isinstance(small, int) and isinstance(large, int) and 0 < small < large, name
        assert marginal[name] > 0 and marginal[name] == round((large - small) / 5), name
    assert set(ratios) == set(RATIOS)
    for key, (a, b) in RATIOS.items():
        assert ratios[key] == pytest.approx(marginal[a] / marginal[b], abs=0.0005), key


def test_without_valgrind_it_exits_2_with_one_line(tmp_path: Path) -> None:
    # An empty PATH: no valgrind (the bench finds its interpreter by sys.executable).
    env = {**os.environ, "PATH": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "hack.bench", "--scenario", "instructions"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stdout == ""
    (line,) = proc.stderr.strip().splitlines()
    assert "valgrind is not installed" in line


def test_bad_sizes_exit_2() -> None:
    proc = subprocess.run([sys.executable, "-m", "hack.bench", "--scenario", "instructions", "--instructions-n",
                           "600,100"], cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2 and "N1 < N2" in proc.stderr


def test_instruction_total_is_read_from_the_summary_or_totals_line(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO))
    try:
        from hack.bench.instructions import parse_sizes, read_instructions
    finally:
        sys.path.remove(str(REPO))
    out = tmp_path / "callgrind.out"
    out.write_text("# callgrind format\nversion: 1\ncmd: python\nevents: Ir\nsummary: 2502631518\n\nfn=(1) x\n3 7\n")
    assert read_instructions(out) == 2502631518
    out.write_text("events: Ir\nfn=(1) x\n3 7\ntotals: 12345\n")
    assert read_instructions(out) == 12345
    out.write_text("events: Ir\n")
    with pytest.raises(RuntimeError, match="no summary"):
        read_instructions(out)
    with pytest.raises(RuntimeError, match="no callgrind output"):
        read_instructions(tmp_path / "missing.out")
    assert parse_sizes("100,600") == (100, 600) and parse_sizes(" 5, 10") == (5, 10)
    for bad in ("100", "600,100", "0,5", "a,b", "1,2,3"):
        with pytest.raises(ValueError):
            parse_sizes(bad)
