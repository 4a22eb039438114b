"""Stakater Reloader (github.com/stakater/Reloader) on a :class:`~zkop_testing.controlplane.ControlPlane`, as a
platform team runs it: its own RBAC, watching every namespace.

* :func:`reloader_binaries`: ``hack/build-reloader.sh`` builds Reloader from the Go module proxy at the release
  pinned in ``hack/reloader/go.mod`` (a version-keyed cache outside the repository) and copies its rendered install
  (``deployments/kubernetes/reloader.yaml``) beside it.
* :class:`Reloader`: that install applied but for its Deployment (no kubelet here): the ServiceAccount
  ``default/reloader-reloader``, its ClusterRole (read ConfigMaps and Secrets, patch Deployments, DaemonSets and
  StatefulSets in every namespace) and its Role for the meta-info ConfigMap; then the binary as a process with a
  bound token of that ServiceAccount (``KUBECONFIG``: Reloader's ``pkg/kube/client.go`` reads it before the
  in-cluster configuration), ``RELOADER_NAMESPACE`` as the Deployment's ``fieldRef`` would set it. Reloader serves
  ``/metrics`` on ``:9090``, a constant of its source (``constants.DefaultHttpListenAddr``), so one runs at a time
  on a machine; :meth:`Reloader.start` fails clearly when the port is taken.

Nothing of it ships in zkop. The log and kubeconfig live in one directory, removed by :meth:`Reloader.stop`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import urllib.request
import weakref
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import yaml
from prometheus_client.parser import text_string_to_metric_families

from zkop.kube.client import ApiException, KubeClient
from zkop_testing.builds import run_build_script
from zkop_testing.controlplane import REPO, ControlPlane
from zkop_testing.waiting import EVENTUALLY, wait_for

__all__ = ["METRICS_PORT", "Reloader", "ReloaderError", "reloader_binaries"]

BUILD_SCRIPT = REPO / "hack" / "build-reloader.sh"
#: Reloader's fixed HTTP port (``/metrics``, ``/live``).
METRICS_PORT = 9090
#: Where Reloader's install puts its ServiceAccount (``reloader.yaml``: ``namespace: default``).
NAMESPACE = "default"
_BUILD_ERROR: list[str] = []
#: The path of each kind of Reloader's install on the API (core and RBAC kinds only: the Deployment is left out).
_PATHS = {
    "ServiceAccount": "/api/v1/namespaces/{namespace}/serviceaccounts",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings",
}


class ReloaderError(RuntimeError):
    """Reloader could not be built or started; the message carries the build output or the log tail."""


def reloader_binaries() -> Path:
    """The directory with ``reloader`` and ``reloader.yaml``, built if missing.

    Raises:
        ReloaderError: the build failed (once per session: later callers get the first failure).
    """
    return run_build_script(BUILD_SCRIPT, error=ReloaderError, failures=_BUILD_ERROR)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def _port_taken(port: int) -> bool:
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Go's net.Listen: TIME_WAIT is no clash
        try:
            probe.bind(("::", port))
        except OSError:
            return True
    return False


class Reloader:
    """Reloader on ``plane`` under its own RBAC, every namespace watched (its default: ``KUBERNETES_NAMESPACE``
    unset), reload strategy ``env-vars`` (its default: a ``STAKATER_<NAME>_CONFIGMAP`` variable with the
    ConfigMap's SHA-1 in the workload's containers, so the pod template changes).

    Use as a context manager or call :meth:`start` and :meth:`stop`. Not thread-safe.
    """

    def __init__(self, plane: ControlPlane, *args: str) -> None:
        self.plane = plane
        self.args = list(args)
        self.directory = Path(tempfile.mkdtemp(prefix="zkop-reloader-"))
        self.log = self.directory / "reloader.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None

    def start(self, timeout: float = EVENTUALLY) -> Self:
        """Apply Reloader's install (but its Deployment), start it, and wait until its ConfigMap informer has listed
        (``reloader_events_received_total{event_type="add",resource_type="configmaps"}`` above zero: every
        namespace has ``kube-root-ca.crt``), so that an update from then on reaches it as an update.

        Raises:
            ReloaderError: the build failed, port 9090 is taken, Reloader exited, or it was not ready in time.
        """
        bin_dir = reloader_binaries()
        if _port_taken(METRICS_PORT):
            raise ReloaderError(f"port {METRICS_PORT} is taken: Reloader always listens there "
                                "(constants.DefaultHttpListenAddr); is another Reloader running on this machine?")
        with self.plane.admin() as kube:
            self._apply_install(kube, bin_dir / "reloader.yaml")
        kubeconfig = self.plane.service_account_kubeconfig(self.directory / "reloader.kubeconfig", NAMESPACE,
                                                           "reloader-reloader")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.directory),
               "KUBECONFIG": str(kubeconfig), "RELOADER_NAMESPACE": NAMESPACE,
               "RELOADER_DEPLOYMENT_NAME": "reloader-reloader"}
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen([str(bin_dir / "reloader"), *self.args], stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=subprocess.STDOUT, cwd=self.directory, env=env,
                                         start_new_session=True, close_fds=True)
        self._finalizer = weakref.finalize(self, _kill, self.proc)

        def listed() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise ReloaderError(f"reloader exited with {self.proc.returncode}\n{self.log_tail()}")
            try:
                return self.metric("reloader_events_received_total", event_type="add",
                                   resource_type="configmaps") > 0
            except OSError:
                return False

        try:
            wait_for(listed, timeout=timeout, interval=0.1, message="Reloader's ConfigMap informer listed")
        except TimeoutError as err:
            raise ReloaderError(f"{err}\n{self.log_tail()}") from None
        return self

    def stop(self) -> None:
        """Stop Reloader (SIGTERM, then SIGKILL after 20 s) and remove its files; its install stays with the
        session's control plane."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                _kill(self.proc)
        if self._finalizer is not None:
            self._finalizer.detach()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def metric(self, name: str, **labels: str) -> float:
        """The sum of the samples of ``name`` on Reloader's ``/metrics`` whose labels include ``labels``.

        Raises:
            OSError: ``/metrics`` does not answer (``urllib.error.URLError`` is one).
        """
        with urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=5) as answer:
            text = answer.read().decode()
        return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
                   if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()))

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` of Reloader's log, for failure messages."""
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return ""

    @staticmethod
    def _apply_install(kube: KubeClient, manifest: Path) -> None:
        """Create the ServiceAccount and RBAC objects of ``reloader.yaml`` (a 409 leaves one already there)."""
        for obj in yaml.safe_load_all(manifest.read_text(encoding="utf-8")):
            if not obj or obj["kind"] not in _PATHS:
                continue
            path = _PATHS[obj["kind"]].format(namespace=obj["metadata"].get("namespace", NAMESPACE))
            try:
                kube.request("POST", path, body=obj)
            except ApiException as err:
                if err.status != 409:
                    raise
