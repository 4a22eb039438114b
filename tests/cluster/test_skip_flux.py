"""``ZKOP_SKIP_FLUX`` (README, "Running the tests"): the tests that run Flux's controllers skip with its reason,
and nothing builds Flux (a cold ``.ci/run`` sets it while it builds Flux in the background for the next run)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from zkop_testing.controlplane import NEWEST, REPO


def test_zkop_skip_flux_skips_every_flux_test_with_its_reason() -> None:
    reason = "the reason .ci/run gives"
    env = {**os.environ, "ZKOP_SKIP_FLUX": reason, "ZKOP_K8S_MINORS": NEWEST}
    # The Flux stories of both modules.
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs",
         "tests/cluster/test_flux.py", "tests/cluster/test_install.py::test_flux_installs_zkop_from_git_and_prunes_it",
         "tests/cluster/test_install.py::test_flux_prune_of_the_install_first_leaves_the_objects_in_place"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    skipped = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]  # -rs groups alike skips
    counts = [re.match(r"SKIPPED \[(\d+)\]", line) for line in skipped]
    assert sum(int(m[1]) for m in counts if m is not None) == 3, done.stdout
    assert all(f"ZKOP_SKIP_FLUX: {reason}" in line for line in skipped), done.stdout
    assert "3 skipped" in done.stdout.splitlines()[-1], done.stdout
