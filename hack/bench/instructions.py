"""Scenario ``instructions`` (``--scenario instructions``): instruction counts under callgrind.

CPU seconds on a shared machine move by ±10–25 % between runs of the same commit; the number of
instructions a process executes moves by about 1 %. So issue #17's CPU figure is compared in
instructions too: each of these runs under ``valgrind --tool=callgrind`` (whole process, user
space only), at two sizes N1 < N2 (``--instructions-n``, default 100,600):

* ``zkop``: a cold sync -- ``zkop run --workers W`` spawned on a fresh API server holding N
  ZooKeeperConfigs and its own chroot, stopped with SIGTERM once every object is ``Synced``;
* ``floor``: the floor client (:func:`hack.bench.floor.floor_client`) on N objects;
* ``controller_floor``: the same with its informer (``"informer": true``).

What does not grow with N (the interpreter, imports, connections, shutdown) cancels out of the
marginal figure, (I(N2) − I(N1)) / (N2 − N1) instructions per object; the ratios of the marginal
figures are the ones to compare with ``cpu_per_object_vs_floor``. Under callgrind everything is
about 50 times slower: every wait scales with N accordingly.
"""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
import time
from dataclasses import replace
from pathlib import Path

from .floor import floor_once
from .harness import Harness
from .measure import zk_client
from .params import JSON

log = logging.getLogger("bench")

#: The default sizes of ``--instructions-n``.
DEFAULT_SIZES = (100, 600)
#: Waits under callgrind: this many seconds, plus PER_OBJECT_S for each object.
BASE_TIMEOUT_S = 600.0
PER_OBJECT_S = 2.0
#: How long a SIGTERMed zkop under callgrind may take to exit (and write its counts).
STOP_TIMEOUT_S = 300.0
_TOTALS = re.compile(rb"^(?:summary|totals):\s*(\d+)")


class ValgrindMissing(RuntimeError):
    """``valgrind`` is not on the PATH."""


def valgrind_version() -> str:
    """``valgrind --version`` (``valgrind-3.19.0``).

    Raises:
        ValgrindMissing: not installed.
    """
    exe = shutil.which("valgrind")
    if exe is None:
        raise ValgrindMissing("valgrind is not installed (apt-get install valgrind): "
                              "--scenario instructions runs every process under callgrind")
    return subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30,
                          check=True).stdout.strip()


def callgrind(out: Path) -> list[str]:
    """The command prefix that runs a process under callgrind, its counts to ``out``."""
    return ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]


def read_instructions(out: Path) -> int:
    """Total instructions (``Ir``) of a callgrind output file: its ``summary:`` (or ``totals:``) line.

    Raises:
        RuntimeError: no such file (the process did not exit normally) or no such line.
    """
    try:
        with out.open("rb") as f:
            for line in f:
                if m := _TOTALS.match(line):
                    return int(m.group(1))
    except OSError as err:
        raise RuntimeError(f"no callgrind output {out}: {err}") from None
    raise RuntimeError(f"no summary: or totals: line in {out}")


def parse_sizes(text: str) -> tuple[int, int]:
    """``"100,600"`` → ``(100, 600)``.

    Raises:
        ValueError: not two sizes, or not 1 ≤ N1 < N2.
    """
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise ValueError(f"--instructions-n wants two sizes N1,N2, got {text!r}")
    small, large = int(parts[0]), int(parts[1])
    if not 1 <= small < large:
        raise ValueError(f"--instructions-n wants 1 <= N1 < N2, got {text!r}")
    return small, large


def instructions(h: Harness, sizes: tuple[int, int]) -> JSON:
    """The scenario (``h``'s ZooKeeper started): six runs under callgrind, their counts and ratios."""
    runs: dict[str, dict[str, JSON]] = {"zkop": {}, "floor": {}, "controller_floor": {}}
    for n in sizes:
        runs["zkop"][str(n)] = _zkop_cold_sync(h, n)
    for k, n in enumerate(sizes):
        runs["floor"][str(n)] = _floor(h, n, k, informer=False)
        runs["controller_floor"][str(n)] = _floor(h, n, k, informer=True)
    small, large = sizes
    marginal = {name: round((by_n[str(large)]["instructions"] - by_n[str(small)]["instructions"]) / (large - small))
                for name, by_n in runs.items()}

    def ratio(a: str, b: str) -> float | None:
        return round(marginal[a] / marginal[b], 3) if marginal[b] > 0 else None

    return {
        "params": {"sizes": list(sizes), "workers": h.p.workers, "floor_threads": h.p.floor_threads,
                   "tool": "valgrind --tool=callgrind (whole process, user space)",
                   "marginal": "(instructions(N2) - instructions(N1)) / (N2 - N1)"},
        "runs": runs,
        "marginal_instructions_per_object": marginal,
        "ratios": {"zkop_vs_floor": ratio("zkop", "floor"),
                   "controller_floor_vs_floor": ratio("controller_floor", "floor"),
                   "zkop_vs_controller_floor": ratio("zkop", "controller_floor")},
    }


def _zkop_cold_sync(h: Harness, n: int) -> JSON:
    """zkop under callgrind: spawn on a fresh API server with ``n`` objects and chroot ``/instructions-<n>``,
    SIGTERM once all are Synced; its instruction count."""
    sub = h.child(replace(h.p, n=n), f"/instructions-{n}")
    out = h.workdir / f"callgrind-zkop-{n}.out"
    with zk_client(h.server) as zk:
        zk.ensure_path(sub.chroot)
    sub.api, sub.kubeconfig = sub.new_api(f"instructions-{n}")
    try:
        operator = sub.new_operator(["--workers", str(sub.p.workers)], f"instructions-{n}",
                                    command_prefix=callgrind(out))
        timeout = sub.scaled_timeout(BASE_TIMEOUT_S, PER_OBJECT_S)
        started = time.monotonic()
        try:
            operator.start(wait_ready=False)
            assert operator.proc is not None
            while (synced := sub.states(sub.api).get("Synced", 0)) < n:
                if operator.proc.poll() is not None:
                    raise RuntimeError(f"zkop under callgrind exited with {operator.proc.returncode} "
                                       f"({synced} of {n} Synced):\n{operator.log_tail(30)}")
                if time.monotonic() - started > timeout:
                    raise TimeoutError(f"zkop under callgrind: {synced} of {n} Synced after {timeout:.0f} s\n"
                                       f"{operator.log_tail(30)}")
                time.sleep(0.2)
            seconds = time.monotonic() - started
            time.sleep(0.5)
        finally:
            code = operator.stop(timeout=STOP_TIMEOUT_S)
        if code != 0:
            raise RuntimeError(f"zkop under callgrind exited with {code} after SIGTERM:\n{operator.log_tail(30)}")
    finally:
        sub.api.stop()
    count = read_instructions(out)
    out.unlink()
    log.info("instructions: zkop cold sync of %d: %d instructions (%.0f s under callgrind)", n, count, seconds)
    return {"instructions": count, "seconds_to_synced": round(seconds, 1)}


def _floor(h: Harness, n: int, k: int, *, informer: bool) -> JSON:
    """The floor client (the controller floor with ``informer``) under callgrind on ``n`` objects."""
    name = "controller-floor" if informer else "floor"
    sub = h.child(replace(h.p, n=n), h.chroot)
    out = h.workdir / f"callgrind-{name}-{n}.out"
    started = time.monotonic()
    result = floor_once(sub, k, informer=informer, command_prefix=callgrind(out),
                        timeout=sub.timeout_for(PER_OBJECT_S, n, floor=BASE_TIMEOUT_S))
    seconds = time.monotonic() - started
    count = read_instructions(out)
    out.unlink()
    log.info("instructions: %s of %d: %d instructions (%.0f s under callgrind)", name, n, count, seconds)
    return {"instructions": count, "seconds": round(seconds, 1), "client_seconds": result["seconds"]}
