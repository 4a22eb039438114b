"""Run ``zkop run`` as a separate process for tests, the demo and benchmarks.

The operator is started exactly as users start it (``python -m zkop run …``)
with free loopback ports for ``/metrics`` and the probes, and its log captured
to a file so a failing test can show it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import ssl
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from zkop_testing.waiting import EVENTUALLY, wait_for
from zkop_testing.zookeeper import free_port

__all__ = ["OperatorProcess", "OperatorStartError", "OperatorStartTimeout"]


class OperatorStartError(RuntimeError):
    """``zkop run`` could not be started or exited before it was ready; the message has its output.

    Attributes:
        returncode: its exit code (``None`` if it never ran or was killed for being late).
        output: what it wrote to stdout and stderr.
    """

    def __init__(self, message: str, returncode: int | None, output: str) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.output = output


class OperatorStartTimeout(OperatorStartError, TimeoutError):
    """``zkop run`` did not answer ``/readyz`` 200 in time; it has been killed."""


class OperatorProcess:
    """One ``zkop run`` process.

    Args:
        kubeconfig: path of the kubeconfig to use.
        zk_hosts: ZooKeeper connect string.
        args: further command-line flags.
        env: extra environment variables.
        log_path: where stdout+stderr go. By default a temp file that :meth:`stop` reads into
            memory and removes (``log_tail`` still answers), so tests leave nothing in ``/tmp``.
        command_prefix: a command that runs zkop's (``python -m zkop run …``) as its arguments, for
            example ``["valgrind", "--tool=callgrind", "--callgrind-out-file=F"]``; signals go to it.
        module: the module ``python -m`` runs: ``zkop``, or a test wrapper around its ``main``
            such as :mod:`zkop_testing.faults`.
    """

    def __init__(self, kubeconfig: str, zk_hosts: str, args: Sequence[str] = (), *,
                 env: dict[str, str] | None = None, log_path: str | None = None,
                 command_prefix: Sequence[str] = (), module: str = "zkop") -> None:
        self.kubeconfig = kubeconfig
        self.zk_hosts = zk_hosts
        self.args = list(args)
        self.env = env or {}
        self.command_prefix = list(command_prefix)
        self.module = module
        #: ``--metrics-secure`` given (and not ``=false``): /metrics is HTTPS and needs a token.
        self.secure_metrics = any(a in ("--metrics-secure", "--metrics-secure=true") for a in self.args)
        self.metrics_port = free_port()
        self.health_port = free_port()
        self._owns_log = log_path is None
        if log_path is None:
            fd, log_path = tempfile.mkstemp(prefix="zkop-", suffix=".log")
            os.close(fd)
        self.log_path = Path(log_path)
        self._log_text: str | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, *, wait_ready: bool = True, timeout: float = EVENTUALLY) -> OperatorProcess:
        """Start the process; with ``wait_ready`` block until ``/readyz`` answers 200.

        The metrics and probe ports are picked free beforehand, but another process may take one
        before zkop binds it; zkop then exits 2 ("Address already in use") and, with
        ``wait_ready``, is started again on fresh ports (at most three times), like the ZooKeeper
        harness does. A start that fails leaves nothing behind: the process (group) is killed and
        the log file this object made removed (its text is in the error and in :meth:`log_tail`).

        Raises:
            OperatorStartTimeout: not ready within ``timeout`` seconds (a ``TimeoutError``).
            OperatorStartError: the command could not be run, or zkop exited before it was ready
                (a ``RuntimeError``).
        """
        try:
            for attempt in range(3):
                self._launch()
                if not wait_ready:
                    return self
                try:
                    self.wait_ready(timeout)
                    return self
                except OperatorStartTimeout:
                    raise
                except OperatorStartError as err:
                    if attempt == 2 or "Address already in use" not in err.output:
                        raise
                    self.metrics_port, self.health_port = free_port(), free_port()
        except BaseException as err:
            self.stop(timeout=5)
            if isinstance(err, OperatorStartError):
                raise type(err)(f"{err}\n{self.log_tail()}", err.returncode, self.log_tail(10**6)) from None
            raise
        return self

    def _launch(self) -> None:
        cmd = [
            *self.command_prefix,
            sys.executable, "-m", self.module, "run", "--kubeconfig", self.kubeconfig, "--zk-hosts", self.zk_hosts,
            "--metrics-bind-address", f"127.0.0.1:{self.metrics_port}",
            "--health-probe-bind-address", f"127.0.0.1:{self.health_port}", *self.args,
        ]
        env = {**os.environ, **self.env}
        env.pop("KUBECONFIG", None)
        with open(self.log_path, "ab") as log:
            try:
                self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                             start_new_session=True)
            except OSError as err:
                raise OperatorStartError(f"cannot run {cmd[0]}: {err}", None, "") from err

    def probe(self, path: str = "/readyz") -> int:
        """HTTP status of a probe endpoint, 0 if it does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}{path}", timeout=2) as r:
                return int(r.status)
        except urllib.error.HTTPError as err:
            return int(err.code)
        except OSError:
            return 0

    @property
    def metrics_url(self) -> str:
        """``http(s)://127.0.0.1:<port>/metrics``."""
        scheme = "https" if self.secure_metrics else "http"
        return f"{scheme}://127.0.0.1:{self.metrics_port}/metrics"

    def scrape(self, token: str | None = None, *, context: ssl.SSLContext | None = None) -> tuple[int, str]:
        """``(status, body)`` of one ``GET /metrics``, with ``Authorization: Bearer <token>`` when given.

        Over HTTPS the certificate is not verified unless ``context`` says otherwise (Prometheus'
        ``insecureSkipVerify``, the documented default for zkop's self-signed certificate).
        """
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        if context is None and self.secure_metrics:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        request = urllib.request.Request(self.metrics_url, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=10, context=context) as r:
                return int(r.status), str(r.read().decode())
        except urllib.error.HTTPError as err:
            return int(err.code), err.read().decode(errors="replace")

    def metrics(self, token: str | None = None) -> str:
        """The ``/metrics`` text (``token`` is needed with ``--metrics-secure``).

        Raises:
            urllib.error.HTTPError: not 200 (401 without a token, 403 with one not allowed).
        """
        status, body = self.scrape(token)
        if status != 200:
            raise urllib.error.HTTPError(self.metrics_url, status, body, {}, None)  # type: ignore[arg-type]
        return body

    def wait_ready(self, timeout: float = EVENTUALLY) -> None:
        """Block until ``/readyz`` is 200.

        Raises:
            OperatorStartError: the process exited first (its output in the message).
            OperatorStartTimeout: not ready within ``timeout`` seconds (the process is left running).
        """

        def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise OperatorStartError(f"zkop exited with {self.proc.returncode} before it was ready",
                                         self.proc.returncode, self.log_tail(10**6))
            return self.probe() == 200

        try:
            wait_for(ready, timeout=timeout, interval=0.05, message="zkop /readyz")
        except TimeoutError as err:
            raise OperatorStartTimeout(str(err), None, self.log_tail(10**6)) from None

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the process."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signum)

    def wait(self, timeout: float = 30.0) -> int:
        """Wait for exit; return the exit code."""
        assert self.proc is not None
        return self.proc.wait(timeout)

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM, wait, SIGKILL if needed; return the exit code (``None`` if never started)."""
        if self.proc is None:
            self._collect_log()
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)  # its own session: a command prefix's children too
                self.proc.wait()
        self._collect_log()
        return self.proc.returncode

    def _collect_log(self) -> None:
        """Keep the log of a stopped process in memory and remove the temp file we made."""
        if not self._owns_log or self._log_text is not None:
            return
        try:
            self._log_text = self.log_path.read_text(errors="replace")
            self.log_path.unlink()
        except OSError:
            self._log_text = ""

    def log_tail(self, lines: int = 80) -> str:
        """The last ``lines`` lines of the operator's log."""
        if self._log_text is not None:
            text = self._log_text
        else:
            try:
                text = self.log_path.read_text(errors="replace")
            except OSError:
                return ""
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> OperatorProcess:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
