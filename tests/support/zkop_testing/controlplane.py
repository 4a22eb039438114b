"""A real Kubernetes control plane for tests: etcd, kube-apiserver and kube-controller-manager built from source.

What controller-runtime's envtest starts (``pkg/internal/testing/controlplane``: ``etcd.go``,
``apiserver.go``, ``auth.go``), plus what envtest leaves out and zkop's behaviour depends on:

* **etcd** on a free loopback port, data in the plane's directory, ``--unsafe-no-fsync`` as envtest
  passes it.
* **kube-apiserver** with secure serving on a free loopback port (a throw-away CA signs its
  certificate), client-certificate authentication (``CN`` = user, ``O`` = group), ``RBAC``
  authorization, service-account tokens signed by a key of the plane's own, and the default
  admission chain untouched (envtest turns ``ServiceAccount`` off because nothing creates the
  ``default`` ServiceAccounts; here kube-controller-manager does). An audit policy at ``Metadata``
  level logs every request, so a test can compare what an identity asked for with what RBAC grants.
* **kube-controller-manager** with the controllers named in :data:`CONTROLLERS`: namespace deletion,
  garbage collection, ServiceAccounts and their tokens, the ``kube-root-ca.crt`` ConfigMap and the
  EndpointSlice mirroring of selector-less Services, ClusterRole aggregation (the tenant roles into
  ``admin``, ``edit`` and ``view``), the Deployment controller (a changed pod template makes a new
  ReplicaSet: the rolling restart of tests/cluster/test_reloader.py; without a kubelet no Pod runs), each
  controller under its own ServiceAccount
  (``--use-service-account-credentials``) as in a cluster.

The binaries come from ``hack/control-plane/build.sh`` (a version-keyed cache outside the repository;
the first build of a minor takes about 15 minutes). Every file the plane writes (certificates, etcd's
data, logs, kubeconfigs) lives in one directory, removed by :meth:`ControlPlane.stop` unless the caller
gave it. Processes run in their own process groups and are killed when their handle is collected or
the interpreter exits, as :mod:`zkop_testing.zookeeper` does for its JVMs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import kubernetes
import yaml

from zkop.kube.client import ApiException, KubeClient
from zkop_testing.builds import run_build_script
from zkop_testing.waiting import EVENTUALLY, wait_for
from zkop_testing.zookeeper import LOOPBACK, free_port
from zkop_testing.zookeeper_secure import TestCA

__all__ = [
    "CONTROLLERS",
    "MINORS",
    "NEWEST",
    "REPO",
    "ControlPlane",
    "ControlPlaneError",
    "binaries",
    "fresh_namespace",
    "minors_under_test",
]

REPO = Path(__file__).resolve().parents[3]
BUILD_SCRIPT = REPO / "hack" / "control-plane" / "build.sh"
#: The Kubernetes minors the project tests, newest first: the oldest and the newest in upstream support.
MINORS: tuple[str, ...] = ("1.37", "1.35")
NEWEST = MINORS[0]
#: kube-controller-manager's controllers the plane runs (canonical names, ``cmd/kube-controller-manager/names``).
CONTROLLERS: tuple[str, ...] = (
    "namespace-controller",
    "garbage-collector-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "endpointslice-mirroring-controller",
    "clusterrole-aggregation-controller",
    "deployment-controller",
)
#: Dual-stack, IPv4 primary: a Service gets a ClusterIP from the first range, a ``RequireDualStack`` one from both.
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24,fd00:10:96::/112"
#: ``--audit-log-maxsize`` (MB): 1 TB, so the audit log is never rotated while a test or the benchmark reads it.
AUDIT_LOG_MAX_MB = 1 << 20
_AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata"}],
}


class ControlPlaneError(RuntimeError):
    """The control plane could not be built or started; the message carries the log tail."""


def minors_under_test() -> tuple[str, ...]:
    """The minors a test run covers: ``ZKOP_K8S_MINORS`` (comma-separated, e.g. ``1.37``), else :data:`MINORS`."""
    raw = os.environ.get("ZKOP_K8S_MINORS", "")
    chosen = tuple(m.strip() for m in raw.split(",") if m.strip())
    unknown = [m for m in chosen if m not in MINORS]
    if unknown:
        raise ControlPlaneError(f"ZKOP_K8S_MINORS names {unknown}; the project tests {list(MINORS)}")
    return chosen or MINORS


def binaries(minor: str = NEWEST) -> Path:
    """The directory with ``etcd``, ``kube-apiserver`` and ``kube-controller-manager`` for ``minor``, built if missing.

    Raises:
        ControlPlaneError: the build failed (its output is in the message).
    """
    return run_build_script(BUILD_SCRIPT, "--version", minor, error=ControlPlaneError)


@dataclass
class _Process:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    finalizer: weakref.finalize[Any, Any] | None


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def _tail(path: Path, lines: int = 40) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


class ControlPlane:
    """etcd + kube-apiserver + kube-controller-manager of one Kubernetes minor on loopback.

    Args:
        minor: a Kubernetes minor of :data:`MINORS`.
        directory: where every file goes; a private temporary directory (removed on stop) if ``None``.
        detached: start the processes so that they outlive this Python process (``hack/control-plane.sh up``);
            otherwise they are killed with it.
        apiserver_args: more kube-apiserver flags (``--max-requests-inflight=…`` for flow-control tests).

    Use as a context manager or call :meth:`start` and :meth:`stop`. Not thread-safe.
    """

    def __init__(self, minor: str = NEWEST, *, directory: Path | None = None, detached: bool = False,
                 apiserver_args: Sequence[str] = ()) -> None:
        if minor not in MINORS:
            raise ControlPlaneError(f"Kubernetes {minor} is not one of the tested minors {list(MINORS)}")
        self.minor = minor
        self._own_directory = directory is None
        self.directory = directory or Path(tempfile.mkdtemp(prefix="zkop-control-plane-"))
        self.detached = detached
        self.apiserver_args = tuple(apiserver_args)
        self.port = 0
        self.etcd_port = 0
        self._processes: list[_Process] = []
        self.startup_seconds = 0.0

    # ------------------------------------------------------------------ paths
    @property
    def url(self) -> str:
        """The API server's URL (``https://127.0.0.1:<port>``)."""
        return f"https://{LOOPBACK}:{self.port}"

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig (user ``admin`` in ``system:masters``)."""
        return self.directory / "admin.kubeconfig"

    @property
    def ca_file(self) -> Path:
        """The CA that signed the API server's serving certificate."""
        return self.directory / "pki" / "server-ca.pem"

    @property
    def audit_log(self) -> Path:
        """The API server's audit log (JSON lines, ``Metadata`` level)."""
        return self.directory / "audit.log"

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout: float = 2 * EVENTUALLY) -> None:
        """Build what is missing, start the three processes and wait until the API server is ready.

        Ready means ``/readyz`` answers 200 to the admin, the ``default`` namespace exists and the
        ``default`` ServiceAccount in it (kube-controller-manager's first work) exists.

        Raises:
            ControlPlaneError: a process exited or the plane was not ready within ``timeout`` seconds.
        """
        started = time.monotonic()
        bin_dir = binaries(self.minor)
        pki = self.directory / "pki"
        self._make_pki(pki)
        self.etcd_port, peer_port = free_port(), free_port()
        self.port = free_port()
        etcd_url = f"http://{LOOPBACK}:{self.etcd_port}"
        peer_url = f"http://{LOOPBACK}:{peer_port}"
        self._spawn("etcd", [
            str(bin_dir / "etcd"), f"--data-dir={self.directory / 'etcd'}", "--name=default",
            f"--listen-client-urls={etcd_url}", f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}", f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=default={peer_url}", "--unsafe-no-fsync=true", "--log-level=warn",
        ])
        policy = self.directory / "audit-policy.yaml"
        policy.write_text(yaml.safe_dump(_AUDIT_POLICY))
        self._spawn("kube-apiserver", [
            str(bin_dir / "kube-apiserver"), f"--etcd-servers={etcd_url}",
            f"--secure-port={self.port}", f"--bind-address={LOOPBACK}", f"--advertise-address={LOOPBACK}",
            # The lease endpoint reconciler refuses a loopback address for the `kubernetes` Service's
            # endpoints (ValidateIP in pkg/controlplane/reconcilers/lease.go); nothing here dials it.
            "--endpoint-reconciler-type=none",
            f"--cert-dir={pki}", f"--tls-cert-file={pki / 'apiserver.pem'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}", f"--client-ca-file={pki / 'client-ca.pem'}",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}", "--allow-privileged=true",
            "--authorization-mode=RBAC",
            f"--service-account-issuer=https://{LOOPBACK}:{self.port}/",
            f"--service-account-key-file={pki / 'sa-signer.pem'}",
            f"--service-account-signing-key-file={pki / 'sa-signer.key'}",
            f"--audit-policy-file={policy}", f"--audit-log-path={self.audit_log}",
            # Never rotated: readers follow one file. With the default (0) lumberjack rotates at 100 MB, which a
            # plane of 50,000 objects (the benchmark's scale run) writes within minutes.
            f"--audit-log-maxsize={AUDIT_LOG_MAX_MB}",
            *self.apiserver_args,
        ])
        self._write_kubeconfig(self.kubeconfig, "admin", cert=pki / "admin.pem", key=pki / "admin.key")
        kcm_kubeconfig = self.directory / "kube-controller-manager.kubeconfig"
        self._write_kubeconfig(kcm_kubeconfig, "system:kube-controller-manager", cert=pki / "kcm.pem",
                               key=pki / "kcm.key")
        deadline = started + timeout
        self._wait(self._apiserver_ready, deadline, "kube-apiserver /readyz")
        self._spawn("kube-controller-manager", [
            str(bin_dir / "kube-controller-manager"), f"--kubeconfig={kcm_kubeconfig}",
            f"--controllers={','.join(CONTROLLERS)}",
            f"--service-account-private-key-file={pki / 'sa-signer.key'}",
            f"--root-ca-file={self.ca_file}", "--use-service-account-credentials=true",
            "--leader-elect=false", "--secure-port=0",
            # A Namespace holds its finalizer until every object in it is gone; the default 5 m
            # resync of the namespace controller is far longer than any test waits.
            "--concurrent-namespace-syncs=4",
        ])
        with self.admin() as kube:
            self._wait(lambda: _exists(kube, "/api/v1/namespaces/default/serviceaccounts/default"), deadline,
                       "the default ServiceAccount (kube-controller-manager running)")
        self.startup_seconds = time.monotonic() - started

    def stop(self) -> None:
        """Stop the processes (kube-controller-manager, kube-apiserver, etcd, in that order) and remove the files."""
        for process in reversed(self._processes):
            self._terminate(process)
        self._processes.clear()
        if self._own_directory:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # ------------------------------------------------------------------ clients
    def api_client(self, kubeconfig: Path | None = None) -> Any:
        """A new :class:`kubernetes.client.ApiClient` for ``kubeconfig`` (the admin one by default)."""
        configuration = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(kubeconfig or self.kubeconfig), client_configuration=configuration)
        return kubernetes.client.ApiClient(configuration)

    @contextlib.contextmanager
    def admin(self, timeout: float = 30) -> Iterator[KubeClient]:
        """A :class:`KubeClient` as the admin, closed on exit."""
        kube = KubeClient(self.api_client(), default_timeout=timeout)
        try:
            yield kube
        finally:
            kube.close()

    def write_kubeconfig(self, path: Path, *, namespace: str = "default") -> Path:
        """Write an admin kubeconfig whose context's namespace is ``namespace``; returns ``path``."""
        pki = self.directory / "pki"
        return self._write_kubeconfig(path, "admin", cert=pki / "admin.pem", key=pki / "admin.key",
                                      namespace=namespace)

    def service_account_kubeconfig(self, path: Path, namespace: str, name: str,
                                   expiration_seconds: int = 3600) -> Path:
        """Write a kubeconfig that authenticates as ServiceAccount ``namespace/name`` with a bound token.

        The token comes from the TokenRequest API (``serviceaccounts/<name>/token``), as the kubelet
        obtains a projected token for a Pod. Raises :class:`ApiException` if the ServiceAccount is missing.
        """
        with self.admin() as kube:
            answer = kube.request(
                "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
                body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                      "spec": {"expirationSeconds": expiration_seconds}})
        token = answer["status"]["token"]
        user = f"system:serviceaccount:{namespace}:{name}"
        return self._write_kubeconfig(path, user, token=token, namespace=namespace)

    def audit_events(self) -> list[dict[str, Any]]:
        """Every audit event logged so far (``ResponseComplete`` and ``Panic`` stages, ``Metadata`` level)."""
        events: list[dict[str, Any]] = []
        with contextlib.suppress(FileNotFoundError), self.audit_log.open(encoding="utf-8") as fh:
            for line in fh:
                with contextlib.suppress(json.JSONDecodeError):
                    events.append(json.loads(line))
        return events

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` of each process's log, for failure messages."""
        return "\n".join(f"--- {p.name} ({p.log})\n{_tail(p.log, lines)}" for p in self._processes)

    def state(self) -> dict[str, Any]:
        """What ``hack/control-plane.sh down`` needs: the directory and each process's pid."""
        return {"minor": self.minor, "directory": str(self.directory), "url": self.url,
                "kubeconfig": str(self.kubeconfig), "pids": {p.name: p.proc.pid for p in self._processes}}

    # ------------------------------------------------------------------ internals
    def _make_pki(self, pki: Path) -> None:
        server_ca = TestCA(pki / "server", "zkop control-plane server CA")
        served = server_ca.issue("kube-apiserver", dns=["localhost", "kubernetes", "kubernetes.default"],
                                 ips=[LOOPBACK, "10.0.0.1"], stem="apiserver")
        client_ca = TestCA(pki / "client", "zkop control-plane client CA")
        admin = client_ca.issue("admin", organizations=["system:masters"], stem="admin")
        kcm = client_ca.issue("system:kube-controller-manager", stem="kcm")
        signer = TestCA(pki / "sa", "zkop control-plane service-account signer")
        for source, target in ((server_ca.cert, "server-ca.pem"), (served.cert, "apiserver.pem"),
                               (served.key, "apiserver.key"), (client_ca.cert, "client-ca.pem"),
                               (admin.cert, "admin.pem"), (admin.key, "admin.key"), (kcm.cert, "kcm.pem"),
                               (kcm.key, "kcm.key"), (signer.cert, "sa-signer.pem"), (signer.key, "sa-signer.key")):
            shutil.copyfile(source, pki / target)

    def _write_kubeconfig(self, path: Path, user: str, *, cert: Path | None = None, key: Path | None = None,
                          token: str | None = None, namespace: str = "default") -> Path:
        credentials: dict[str, str] = {"token": token} if token else {
            "client-certificate": str(cert), "client-key": str(key)}
        config = {
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "zkop-control-plane",
                          "cluster": {"server": self.url, "certificate-authority": str(self.ca_file)}}],
            "users": [{"name": user, "user": credentials}],
            "contexts": [{"name": "zkop-control-plane",
                          "context": {"cluster": "zkop-control-plane", "user": user, "namespace": namespace}}],
            "current-context": "zkop-control-plane", "preferences": {},
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)
        return path

    def _spawn(self, name: str, command: list[str]) -> None:
        log = self.directory / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        prefix: list[str] = []
        setpriv = shutil.which("setpriv")
        if not self.detached and setpriv is not None and _on_main_thread():
            prefix = [setpriv, "--pdeathsig", "KILL"]
        with log.open("ab") as out:
            proc = subprocess.Popen([*prefix, *command], stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, cwd=self.directory, start_new_session=True,
                                    close_fds=True)
        finalizer = None if self.detached else weakref.finalize(self, _kill_group, proc)
        self._processes.append(_Process(name, proc, log, finalizer))

    def _terminate(self, process: _Process, timeout: float = 20) -> None:
        proc = process.proc
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
        if process.finalizer is not None:
            process.finalizer.detach()

    def admin_ssl_context(self) -> ssl.SSLContext:
        """A TLS context that trusts the API server and presents the admin's client certificate, for requests
        :class:`KubeClient` does not make (``/readyz``, ``/debug/pprof``)."""
        pki = self.directory / "pki"
        context = ssl.create_default_context(cafile=str(self.ca_file))
        context.load_cert_chain(str(pki / "admin.pem"), str(pki / "admin.key"))
        return context

    def _apiserver_ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/readyz", context=self.admin_ssl_context(), timeout=5) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def _wait(self, predicate: Any, deadline: float, what: str) -> None:
        def ready() -> bool:
            for process in self._processes:
                if process.proc.poll() is not None:
                    raise ControlPlaneError(f"{process.name} exited with {process.proc.returncode} while waiting "
                                            f"for {what}\n{self.log_tail()}")
            return bool(predicate())

        try:
            wait_for(ready, timeout=max(deadline - time.monotonic(), 0), interval=0.1, message=what,
                     ignore=(ApiException, OSError))
        except TimeoutError as err:
            raise ControlPlaneError(f"{err}\n{self.log_tail()}") from None


def fresh_namespace(plane: ControlPlane) -> Iterator[str]:
    """Create a namespace ``t-<hex>``, yield its name, then clear the ZooKeeperConfig finalizers in it (zkop has
    stopped by then) and delete it; kube-controller-manager's namespace controller removes what it held."""
    from zkop_testing.crds import release_finalizers

    name = f"t-{uuid.uuid4().hex[:10]}"
    with plane.admin() as kube:
        kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": name}})
    yield name
    with plane.admin() as kube:
        release_finalizers(kube, name)
        with contextlib.suppress(ApiException):
            kube.request("DELETE", f"/api/v1/namespaces/{name}")


def _exists(kube: KubeClient, path: str) -> bool:
    try:
        kube.request("GET", path)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def _on_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


# ---------------------------------------------------------------------- hack/control-plane.sh

def _state_dir() -> Path:
    return Path(os.environ.get("ZKOP_CONTROL_PLANE_DIR")
                or Path(tempfile.gettempdir()) / f"zkop-control-plane-{os.getuid()}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def up(minor: str = NEWEST) -> Path:
    """Start a detached control plane with zkop's CRD installed (or find the running one); its admin kubeconfig.

    The plane lives in ``$ZKOP_CONTROL_PLANE_DIR`` (default ``<tmp>/zkop-control-plane-<uid>``) until :func:`down`.

    Raises:
        ControlPlaneError: it could not be built or started, or one of another minor is running.
    """
    from zkop_testing.crds import crd_established, install_crds

    directory = _state_dir()
    state_file = directory / "state.json"
    if state_file.exists():
        state = json.loads(state_file.read_text())
        if all(_alive(pid) for pid in state["pids"].values()):
            if state["minor"] != minor:
                raise ControlPlaneError(f"a Kubernetes {state['minor']} control plane is running; "
                                        "hack/control-plane.sh down first")
            return Path(state["kubeconfig"])
        down()
    directory.mkdir(mode=0o700, parents=True, exist_ok=False)
    plane = ControlPlane(minor, directory=directory, detached=True)
    try:
        plane.start()
        with plane.admin() as kube:
            install_crds(kube)
            wait_for(lambda: crd_established(kube), message="zkop's CRD established")
    except BaseException:
        plane.stop()
        shutil.rmtree(directory, ignore_errors=True)
        raise
    state_file.write_text(json.dumps(plane.state(), indent=2))
    return plane.kubeconfig


def down() -> bool:
    """Stop the control plane :func:`up` started and remove its directory; False if none was running."""
    directory = _state_dir()
    state_file = directory / "state.json"
    if not state_file.exists():
        shutil.rmtree(directory, ignore_errors=True)
        return False
    pids = json.loads(state_file.read_text())["pids"]
    for name in ("kube-controller-manager", "kube-apiserver", "etcd"):
        pid = pids.get(name)
        if pid is None or not _alive(pid):
            continue
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        while _alive(pid) and time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            time.sleep(0.1)  # another process's child: no wait-for handle to block on
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    shutil.rmtree(directory, ignore_errors=True)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m zkop_testing.controlplane up [--version MINOR] | down | build [--version MINOR]``."""
    import argparse

    parser = argparse.ArgumentParser(prog="hack/control-plane.sh",
                                     description="A real Kubernetes control plane on loopback for zkop.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (("up", "build what is missing, start it with zkop's CRD, print `export KUBECONFIG=…`"),
                       ("build", "build (or find) the binaries and print their directory")):
        command = sub.add_parser(name, help=text)
        command.add_argument("--version", default=NEWEST, choices=MINORS, metavar="MINOR",
                             help=f"Kubernetes minor: {', '.join(MINORS)} (default {NEWEST})")
    sub.add_parser("down", help="stop it and remove what it wrote")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            print(binaries(args.version))
        elif args.command == "up":
            started = time.monotonic()
            kubeconfig = up(args.version)
            print(f"Kubernetes {args.version} control plane up in {time.monotonic() - started:.0f} s "
                  f"(etcd, kube-apiserver, kube-controller-manager; zkop's CRD installed)")
            print(f"export KUBECONFIG={kubeconfig}")
        else:
            print("control plane stopped" if down() else "no control plane was running")
    except ControlPlaneError as err:
        print(f"hack/control-plane.sh: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
