"""Flux's own source-controller and kustomize-controller on a :class:`~zkop_testing.controlplane.ControlPlane`,
fed by a Git repository served over HTTP by the real ``git http-backend``.

* :func:`flux_binaries`: ``hack/control-plane/build-flux.sh`` builds both controllers from the Go module
  proxy at the releases pinned in ``hack/control-plane/flux/*/go.mod`` (a version-keyed cache outside
  the repository; a cold build takes about half an hour on two cores) and copies their CRDs
  (``config/crd/bases`` of the same module sources) beside them.
* :class:`GitServer`: a bare repository per test under one directory, served read-only over smart HTTP:
  every request runs ``git http-backend`` as a CGI program (``git help http-backend``), as a web server
  in front of Git does. :class:`GitWorkTree` is a clone the test commits to and pushes from with the
  ``git`` CLI (a local push: the HTTP side is fetch-only, as Flux needs).
* :class:`Flux`: both controllers as processes out of cluster, as their ``main.go`` reads flags:
  the admin kubeconfig (``KUBECONFIG``; they run as ``system:masters``, where an install binds
  kustomize-controller's ServiceAccount to ``cluster-admin``), ``RUNTIME_NAMESPACE=flux-system``,
  metrics and health probes on free loopback ports, leader election off (the default of
  ``pkg/runtime/leaderelection/leaderelection.go``, passed anyway), no ``--events-addr`` (Kubernetes
  Events only). source-controller's artifact storage is a directory of the harness, its file server
  listens on loopback and is advertised there (``--storage-path``, ``--storage-addr``,
  ``--storage-adv-addr``: ``pkg/artifact/config/flags.go``), so kustomize-controller downloads
  artifacts as it does from the ``source-controller`` Service.

Every file (repositories, artifacts, logs, the controllers' ``TMPDIR``) lives in one directory, removed
by :meth:`Flux.stop` / :meth:`GitServer.stop`. The controllers run in their own process groups and are
killed when their handle is collected or the interpreter exits, as the control plane's processes are.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import urllib.error
import urllib.request
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import yaml

from zkop.kube.client import MERGE_PATCH, ApiException, KubeClient, resource_path
from zkop_testing.builds import run_build_script
from zkop_testing.controlplane import REPO, ControlPlane
from zkop_testing.crds import crd_established
from zkop_testing.server_errors import QuietDisconnects
from zkop_testing.waiting import EVENTUALLY, wait_for
from zkop_testing.zookeeper import LOOPBACK, free_port

__all__ = [
    "FLUX_NAMESPACE",
    "GITREPOSITORY",
    "KUSTOMIZATION",
    "Flux",
    "FluxError",
    "GitServer",
    "GitWorkTree",
    "flux_binaries",
]

BUILD_SCRIPT = REPO / "hack" / "control-plane" / "build-flux.sh"
#: Where the controllers run and their objects live, as ``flux install`` puts them.
FLUX_NAMESPACE = "flux-system"
#: (group, version, plural) of the two Flux kinds the story uses.
GITREPOSITORY = ("source.toolkit.fluxcd.io", "v1", "gitrepositories")
KUSTOMIZATION = ("kustomize.toolkit.fluxcd.io", "v1", "kustomizations")
#: The annotation ``flux reconcile`` sets to ask for a reconcile now (``pkg/apis/meta/annotations.go``).
REQUESTED_AT = "reconcile.fluxcd.io/requestedAt"


class FluxError(RuntimeError):
    """Flux's controllers could not be built or started; the message carries the build output or log tail."""


def flux_binaries() -> Path:
    """The directory with ``source-controller``, ``kustomize-controller`` and ``crds/``, built if missing.

    Raises:
        FluxError: the build failed (its output is in the message).
    """
    return run_build_script(BUILD_SCRIPT, error=FluxError)


# ---------------------------------------------------------------------- Git over smart HTTP

def _git_env(**extra: str) -> dict[str, str]:
    """The environment for ``git``: no user or system configuration, a fixed identity."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", GIT_AUTHOR_NAME="zkop tests",
               GIT_AUTHOR_EMAIL="tests@zkop.invalid", GIT_COMMITTER_NAME="zkop tests",
               GIT_COMMITTER_EMAIL="tests@zkop.invalid", GIT_TERMINAL_PROMPT="0")
    env.update(extra)
    return env


def git(*args: str, cwd: Path) -> str:
    """Run the ``git`` CLI in ``cwd``; its stdout.

    Raises:
        subprocess.CalledProcessError: git failed (stderr in the exception's ``stderr``).
    """
    return subprocess.run(["git", *args], cwd=cwd, env=_git_env(), capture_output=True, text=True, check=True,
                          timeout=60).stdout


class _GitHTTPServer(QuietDisconnects, ThreadingHTTPServer):
    """The HTTP side of :class:`GitServer`: one thread a request, what was served kept; a handler's exception
    fails the test (:mod:`zkop_testing.server_errors`), a client that hung up does not."""

    daemon_threads = True

    def __init__(self, root: Path) -> None:
        self.root = root
        self.requests: list[tuple[str, str, int]] = []
        super().__init__((LOOPBACK, 0), _GitHandler)


class _GitHandler(BaseHTTPRequestHandler):
    """Runs ``git http-backend`` for each request, with the CGI meta-variables it reads (RFC 3875)."""

    server: _GitHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default stderr access log (:attr:`GitServer.requests` keeps what was asked)."""

    def _body(self) -> bytes:
        """The request body, whether sent with a ``Content-Length`` or chunked (RFC 9112, section 7.1)."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _backend(self) -> None:
        """Answer with what ``git http-backend`` writes: CGI headers (``Status`` among them), then the body."""
        path, _, query = self.path.partition("?")
        body = self._body() if self.command == "POST" else b""
        env = _git_env(GIT_PROJECT_ROOT=str(self.server.root), GIT_HTTP_EXPORT_ALL="1",
                       REQUEST_METHOD=self.command, PATH_INFO=path, QUERY_STRING=query,
                       CONTENT_TYPE=self.headers.get("Content-Type", ""), CONTENT_LENGTH=str(len(body)),
                       REMOTE_ADDR=self.client_address[0], SERVER_PROTOCOL=self.request_version,
                       GATEWAY_INTERFACE="CGI/1.1")
        for header, variable in (("Git-Protocol", "GIT_PROTOCOL"), ("Content-Encoding", "HTTP_CONTENT_ENCODING")):
            if header in self.headers:
                env[variable] = self.headers[header]
        done = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True, check=False,
                              timeout=60)
        head, sep, payload = done.stdout.partition(b"\r\n\r\n")
        if not sep:
            head, sep, payload = done.stdout.partition(b"\n\n")
        status, headers = 200, []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value.strip()))
        if done.returncode != 0 and not sep:
            status, headers, payload = 500, [("Content-Type", "text/plain")], done.stderr
        self.server.requests.append((self.command, self.path, status))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _backend


class GitServer:
    """Bare Git repositories under one directory, served over smart HTTP on loopback by ``git http-backend``.

    Args:
        directory: where the repositories go; a private temporary directory (removed on stop) if ``None``.
    """

    def __init__(self, directory: Path | None = None) -> None:
        self._own_directory = directory is None
        self.directory = directory or Path(tempfile.mkdtemp(prefix="zkop-git-"))
        self._server: _GitHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port the server listens on (after :meth:`start`)."""
        assert self._server is not None, "GitServer not started"
        return int(self._server.server_address[1])

    @property
    def requests(self) -> list[tuple[str, str, int]]:
        """Every request served so far: (method, path with query, status)."""
        return list(self._server.requests) if self._server is not None else []

    def url(self, name: str) -> str:
        """The clone URL of repository ``name`` (``http://127.0.0.1:<port>/<name>.git``)."""
        return f"http://{LOOPBACK}:{self.port}/{name}.git"

    def start(self) -> Self:
        """Listen on a free loopback port and serve on a daemon thread."""
        self._server = _GitHTTPServer(self.directory)
        self._thread = threading.Thread(target=self._server.serve_forever, name="git-http-backend", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and remove the repositories (if the directory was ours)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        if self._own_directory:
            shutil.rmtree(self.directory, ignore_errors=True)

    def create(self, name: str, branch: str = "main") -> GitWorkTree:
        """A new bare repository ``name`` with ``branch`` as its HEAD, and a work tree cloned from it.

        The work tree lives beside the bare repository and goes with it on :meth:`stop`.
        """
        bare = self.directory / f"{name}.git"
        git("init", "--quiet", "--bare", f"--initial-branch={branch}", str(bare), cwd=self.directory)
        work = self.directory / f"{name}.work"
        git("clone", "--quiet", str(bare), str(work), cwd=self.directory)
        git("checkout", "--quiet", "-b", branch, cwd=work)
        return GitWorkTree(work, branch, self.url(name))

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


@dataclass
class GitWorkTree:
    """A clone of one of :class:`GitServer`'s repositories that the test commits to with the ``git`` CLI."""

    path: Path
    branch: str
    #: The URL the repository is served at (for a GitRepository's ``spec.url``).
    url: str

    def commit(self, message: str, files: Mapping[str, str | None]) -> str:
        """Write (text) or remove (``None``) ``files`` (paths relative to the work tree), commit them with
        ``message`` and push the branch; the new commit's SHA-1.

        Raises:
            subprocess.CalledProcessError: a git command failed (nothing to commit, say).
        """
        for name, text in files.items():
            target = self.path / name
            if text is None:
                git("rm", "--quiet", "--", name, cwd=self.path)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            git("add", "--", name, cwd=self.path)
        git("commit", "--quiet", "-m", message, cwd=self.path)
        git("push", "--quiet", "origin", f"HEAD:refs/heads/{self.branch}", cwd=self.path)
        return git("rev-parse", "HEAD", cwd=self.path).strip()

    def revision(self, sha: str) -> str:
        """How Flux names commit ``sha`` of this branch in ``status.artifact.revision`` (``<branch>@sha1:<sha>``)."""
        return f"{self.branch}@sha1:{sha}"


# ---------------------------------------------------------------------- the controllers

@dataclass
class _Controller:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    health_port: int
    finalizer: weakref.finalize[Any, Any]


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


class Flux:
    """source-controller and kustomize-controller on ``plane``, with their CRDs installed.

    Args:
        plane: a started control plane; the controllers use its admin kubeconfig.
        directory: where every file goes; a private temporary directory (removed on stop) if ``None``.

    Use as a context manager or call :meth:`start` and :meth:`stop`. Not thread-safe.
    """

    def __init__(self, plane: ControlPlane, directory: Path | None = None) -> None:
        self.plane = plane
        self._own_directory = directory is None
        self.directory = directory or Path(tempfile.mkdtemp(prefix="zkop-flux-"))
        self.storage_port = 0
        self._controllers: list[_Controller] = []
        self.crds: list[str] = []

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout: float = 2 * EVENTUALLY) -> Self:
        """Build what is missing, install the CRDs and the namespace, start both controllers, wait for ``/readyz``.

        Raises:
            FluxError: the build failed, a controller exited, or one was not ready within ``timeout`` seconds.
        """
        bin_dir = flux_binaries()
        with self.plane.admin() as kube:
            self.crds = self._install_crds(kube, bin_dir / "crds")
            with contextlib.suppress(ApiException):  # 409: a plane reused by `hack/control-plane.sh up`
                kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": FLUX_NAMESPACE}})
        storage = self.directory / "storage"
        storage.mkdir(parents=True, exist_ok=True)
        self.storage_port = free_port()
        storage_address = f"{LOOPBACK}:{self.storage_port}"
        self._spawn("source-controller", bin_dir, [
            f"--storage-path={storage}", f"--storage-addr={storage_address}",
            f"--storage-adv-addr={storage_address}",
        ])
        self._spawn("kustomize-controller", bin_dir, [])
        for controller in self._controllers:
            self._wait(functools.partial(self._ready, controller), timeout, f"{controller.name} /readyz")
        return self

    def stop(self) -> None:
        """Stop both controllers (SIGTERM, then SIGKILL after 20 s) and remove the files (if the directory was ours).

        The CRDs and the objects stay: the control plane is the session's and goes with it.
        """
        for controller in reversed(self._controllers):
            if controller.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(controller.proc.pid, signal.SIGTERM)
                try:
                    controller.proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    _kill(controller.proc)
            controller.finalizer.detach()
        self._controllers.clear()
        if self._own_directory:
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

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` of each controller's log (JSON lines), for failure messages."""
        parts = []
        for controller in self._controllers:
            with contextlib.suppress(OSError):
                text = controller.log.read_text(errors="replace")
                parts.append(f"--- {controller.name}\n" + "\n".join(text.splitlines()[-lines:]))
        return "\n".join(parts)

    # ------------------------------------------------------------------ objects
    @staticmethod
    def git_repository(name: str, url: str, branch: str = "main", interval: str = "10m") -> dict[str, Any]:
        """A GitRepository in ``flux-system`` following ``branch`` of ``url``.

        The interval is long: the tests ask for each fetch (:meth:`reconcile`), as ``flux reconcile source git``.
        """
        return {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
                "metadata": {"name": name, "namespace": FLUX_NAMESPACE},
                "spec": {"url": url, "ref": {"branch": branch}, "interval": interval, "timeout": "60s"}}

    @staticmethod
    def kustomization(name: str, source: str, path: str, target_namespace: str, *, timeout: str = "2m",
                      **spec: Any) -> dict[str, Any]:
        """A Kustomization in ``flux-system`` applying ``path`` of GitRepository ``source`` into
        ``target_namespace``, with ``prune`` and ``wait`` (kstatus health checks of everything it applied).

        ``retryInterval`` is short so that a failed health check is tried again soon; a new source revision
        reconciles at once anyway (kustomize-controller watches its source's artifact).
        """
        body: dict[str, Any] = {
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": name, "namespace": FLUX_NAMESPACE},
            "spec": {"sourceRef": {"kind": "GitRepository", "name": source}, "path": path,
                     "targetNamespace": target_namespace, "prune": True, "wait": True, "interval": "10m",
                     "retryInterval": "5s", "timeout": timeout, **spec},
        }
        return body

    @staticmethod
    def create(kube: KubeClient, body: dict[str, Any]) -> dict[str, Any]:
        """Create a Flux object (a GitRepository or a Kustomization) in ``flux-system``."""
        group, version = body["apiVersion"].split("/")
        plural = {"GitRepository": GITREPOSITORY[2], "Kustomization": KUSTOMIZATION[2]}[body["kind"]]
        return kube.request("POST", resource_path(group, version, plural, FLUX_NAMESPACE), body=body)

    @staticmethod
    def get(kube: KubeClient, kind: tuple[str, str, str], name: str) -> dict[str, Any] | None:
        """A Flux object in ``flux-system``, or ``None`` if there is none."""
        try:
            return kube.request("GET", resource_path(*kind, FLUX_NAMESPACE, name))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    @staticmethod
    def delete(kube: KubeClient, kind: tuple[str, str, str], name: str) -> None:
        """Delete a Flux object in ``flux-system`` and wait until its finalizer has run (gone or never there)."""
        with contextlib.suppress(ApiException):
            kube.request("DELETE", resource_path(*kind, FLUX_NAMESPACE, name))
        wait_for(lambda: Flux.get(kube, kind, name) is None, message=f"{kind[2]}/{name} deleted")

    @staticmethod
    def reconcile(kube: KubeClient, kind: tuple[str, str, str], name: str) -> str:
        """Ask for a reconcile now, as ``flux reconcile`` does: a new ``reconcile.fluxcd.io/requestedAt``; its value.

        The controller answers by setting ``status.lastHandledReconcileAt`` to it.
        """
        token = datetime.datetime.now(datetime.UTC).isoformat()
        kube.request("PATCH", resource_path(*kind, FLUX_NAMESPACE, name),
                     body={"metadata": {"annotations": {REQUESTED_AT: token}}}, content_type=MERGE_PATCH)
        return token

    # ------------------------------------------------------------------ internals
    def _install_crds(self, kube: KubeClient, crd_dir: Path) -> list[str]:
        """Create every CRD in ``crd_dir`` (left as it is if it exists) and wait until each is Established."""
        names = []
        crds = resource_path("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        for path in sorted(crd_dir.glob("*.yaml")):
            crd = yaml.safe_load(path.read_text(encoding="utf-8"))
            try:
                kube.request("POST", crds, body=crd)
            except ApiException as exc:
                if exc.status != 409:
                    raise
            names.append(crd["metadata"]["name"])

        for name in names:  # a CRD just created may have ``status.conditions: null``
            wait_for(functools.partial(crd_established, kube, name), message=f"CRD {name} established")
        return names

    def _spawn(self, name: str, bin_dir: Path, args: list[str]) -> None:
        metrics_port, health_port = free_port(), free_port()
        tmp = self.directory / "tmp" / name
        tmp.mkdir(parents=True, exist_ok=True)
        log = self.directory / f"{name}.log"
        command = [str(bin_dir / name), f"--metrics-addr={LOOPBACK}:{metrics_port}",
                   f"--health-addr={LOOPBACK}:{health_port}", "--enable-leader-election=false",
                   "--log-level=info", *args]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp), "TMPDIR": str(tmp),
               "KUBECONFIG": str(self.plane.kubeconfig), "RUNTIME_NAMESPACE": FLUX_NAMESPACE}
        prefix: list[str] = []
        setpriv = shutil.which("setpriv")
        if setpriv is not None and threading.current_thread() is threading.main_thread():
            prefix = [setpriv, "--pdeathsig", "KILL"]
        with log.open("ab") as out:
            proc = subprocess.Popen([*prefix, *command], stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, cwd=self.directory, env=env, start_new_session=True,
                                    close_fds=True)
        self._controllers.append(_Controller(name, proc, log, health_port, weakref.finalize(self, _kill, proc)))

    @staticmethod
    def _ready(controller: _Controller) -> bool:
        """``/readyz`` of the controller's health endpoint (controller-runtime's probes) answers 200."""
        try:
            with urllib.request.urlopen(f"http://{LOOPBACK}:{controller.health_port}/readyz", timeout=5) as answer:
                return bool(answer.status == 200)
        except OSError:  # refused while it starts; urllib.error.HTTPError (a 500) is an OSError too
            return False

    def _wait(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        def ready() -> bool:
            for controller in self._controllers:
                if controller.proc.poll() is not None:
                    raise FluxError(f"{controller.name} exited with {controller.proc.returncode} while waiting for "
                                    f"{what}\n{self.log_tail()}")
            return bool(predicate())

        try:
            wait_for(ready, timeout=timeout, interval=0.1, message=what)
        except TimeoutError as err:
            raise FluxError(f"{err}\n{self.log_tail()}") from None


def condition(obj: Mapping[str, Any] | None, kind: str = "Ready") -> dict[str, Any]:
    """The condition ``kind`` of a Flux (or any kstatus) object; ``{}`` if it has none."""
    for found in ((obj or {}).get("status") or {}).get("conditions") or []:
        if found.get("type") == kind:
            return dict(found)
    return {}


def iter_inventory(kustomization: Mapping[str, Any]) -> Iterator[str]:
    """The ids in a Kustomization's ``status.inventory`` (``<namespace>_<name>_<group>_<kind>``)."""
    for entry in kustomization.get("status", {}).get("inventory", {}).get("entries", []) or []:
        yield entry["id"]
