"""``hack/control-plane.sh`` as README shows it: ``up`` prints ``export KUBECONFIG=…`` last, ``down`` removes it all."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from zkop_testing.controlplane import NEWEST
from zkop_testing.crds import crd_established
from zkop_testing.waiting import EVENTUALLY

from zkop.kube.client import KubeClient, load_api_client

SCRIPT = Path(__file__).resolve().parents[2] / "hack" / "control-plane.sh"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in (Path(f"/proc/{pid}/stat").read_text().split()[2])


# The id names the minor so that the suite's conftest builds its control plane before the tests start.
@pytest.mark.parametrize("minor", [NEWEST], ids=[f"k8s-{NEWEST}"])
def test_up_prints_a_kubeconfig_and_down_removes_everything(tmp_path: Path, minor: str) -> None:
    directory = tmp_path / "plane"
    env = {**os.environ, "ZKOP_CONTROL_PLANE_DIR": str(directory)}
    up = subprocess.run([str(SCRIPT), "up", "--version", minor], env=env, capture_output=True, text=True,
                        timeout=3 * EVENTUALLY, check=False)
    try:
        assert up.returncode == 0, up.stderr
        last = up.stdout.strip().splitlines()[-1]
        assert last == f"export KUBECONFIG={directory / 'admin.kubeconfig'}", up.stdout
        kube = KubeClient(load_api_client(last.removeprefix("export KUBECONFIG=")), default_timeout=30)
        try:
            assert kube.request("GET", "/version")["gitVersion"].startswith(f"v{minor}.")
            assert crd_established(kube)
        finally:
            kube.close()
        # A second `up` finds the running plane instead of starting another.
        again = subprocess.run([str(SCRIPT), "up", "--version", minor], env=env, capture_output=True, text=True,
                               timeout=EVENTUALLY, check=False)
        assert again.returncode == 0 and again.stdout.strip().splitlines()[-1] == last, again.stderr
        pids = list(json.loads((directory / "state.json").read_text())["pids"].values())
        assert len(pids) == 3 and all(_alive(pid) for pid in pids)
    finally:
        down = subprocess.run([str(SCRIPT), "down"], env=env, capture_output=True, text=True, timeout=EVENTUALLY,
                              check=False)
    assert down.returncode == 0 and down.stdout.strip() == "control plane stopped", down.stderr
    assert not directory.exists()
    assert not [pid for pid in pids if _alive(pid)]
