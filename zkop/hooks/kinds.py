"""The three hooks: :class:`ExecHook` (a command, by argv, never a shell), :class:`SignalHook` (a signal to a
process found by PID file or by name under ``/proc``) and :class:`HttpHook` (an HTTP POST)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

__all__ = ["CHANGED_KEYS_LIMIT", "Change", "ExecHook", "Hook", "HookFailed", "HttpHook", "SignalHook",
           "find_processes"]

#: At most this many bytes of ``ZKOP_CHANGED_KEYS``; more: it is left empty and ``ZKOP_CHANGED_KEYS_TRUNCATED`` is
#: ``true`` (Linux refuses one environment string over 128 KiB).
CHANGED_KEYS_LIMIT = 64 * 1024


@dataclass(frozen=True)
class Change:
    """What a notification tells: the ``keys`` changed since the last successful one (sorted), the ``digest``
    (SHA-256, hex) of what is written now and the ``output`` written (the file or directory)."""

    keys: tuple[str, ...]
    digest: str
    output: str


class HookFailed(Exception):
    """A hook did not succeed (non-zero exit, timeout, no process to signal, HTTP error); it is retried."""


class Hook(Protocol):
    """One way to notify; ``name`` is for logs."""

    name: str

    def __call__(self, change: Change) -> None:
        """Notify of ``change``.

        Raises:
            HookFailed: it did not succeed.
        """


class ExecHook:
    """Run ``argv`` (no shell: the user writes ``sh -c '…'`` if they want one) with ``ZKOP_CHANGED_KEYS`` (the
    changed keys, one a line), ``ZKOP_DIGEST`` and ``ZKOP_OUTPUT`` added to zkop's environment; it must exit 0
    within ``timeout`` seconds (else its process group is killed)."""

    def __init__(self, argv: Sequence[str], timeout: float = 30.0) -> None:
        if not argv:
            raise ValueError("--exec: an empty command")
        self.argv = list(argv)
        self.timeout = timeout
        self.name = f"exec {self.argv[0]}"

    def __call__(self, change: Change) -> None:
        """Run the command once; see the class docstring.

        Raises:
            HookFailed: it could not start, exited non-zero or ran longer than the timeout.
        """
        keys = "\n".join(change.keys)
        truncated = len(keys.encode("utf-8")) > CHANGED_KEYS_LIMIT
        env = {**os.environ, "ZKOP_CHANGED_KEYS": "" if truncated else keys,
               "ZKOP_CHANGED_KEYS_TRUNCATED": "true" if truncated else "false",
               "ZKOP_DIGEST": change.digest, "ZKOP_OUTPUT": change.output}
        try:
            proc = subprocess.Popen(self.argv, env=env, stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as err:
            raise HookFailed(f"cannot run {self.argv[0]}: {err}") from None
        try:
            code = proc.wait(self.timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise HookFailed(f"{self.argv[0]} ran longer than {self.timeout:g}s; killed") from None
        if code != 0:
            raise HookFailed(f"{self.argv[0]} exited {code}")


def _comm_and_argv0(pid: str) -> tuple[str, str]:
    base = Path("/proc") / pid
    try:
        comm = (base / "comm").read_text(encoding="utf-8", errors="replace").strip()
        argv0 = (base / "cmdline").read_bytes().split(b"\0", 1)[0].decode("utf-8", errors="replace")
    except OSError:
        return "", ""
    return comm, os.path.basename(argv0)


def find_processes(name: str) -> list[int]:
    """PIDs (sorted) of the processes whose name (``/proc/PID/comm``) or ``argv[0]``'s last part is ``name``, other
    than this one; in a pod with ``shareProcessNamespace: true`` these are the other containers' processes too."""
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid() and name in _comm_and_argv0(entry):
            found.append(int(entry))
    return sorted(found)


class SignalHook:
    """Send ``sig`` to the process whose PID ``pid_file`` holds (read anew every time), or to every process named
    ``process_name`` (:func:`find_processes`)."""

    def __init__(self, sig: signal.Signals, *, pid_file: str | None = None, process_name: str | None = None) -> None:
        if (pid_file is None) == (process_name is None):
            raise ValueError("--signal needs exactly one of --pid-file and --process-name")
        self.sig = sig
        self.pid_file = pid_file
        self.process_name = process_name
        self.name = f"signal {sig.name} to {pid_file or process_name}"

    def _pids(self) -> list[int]:
        if self.process_name is not None:
            return find_processes(self.process_name)
        assert self.pid_file is not None
        try:
            text = Path(self.pid_file).read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError) as err:
            raise HookFailed(f"cannot read the PID file {self.pid_file}: {err}") from None
        if not text.isdigit() or int(text) <= 1:
            raise HookFailed(f"the PID file {self.pid_file} holds {text[:20]!r}, not a process ID above 1")
        return [int(text)]

    def __call__(self, change: Change) -> None:
        """Signal the process(es) once.

        Raises:
            HookFailed: no such process, or the signal was refused.
        """
        pids = self._pids()
        if not pids:
            raise HookFailed(f"no process named {self.process_name!r}")
        for pid in pids:
            try:
                os.kill(pid, self.sig)
            except ProcessLookupError:
                raise HookFailed(f"no process {pid}") from None
            except PermissionError:
                raise HookFailed(f"not allowed to signal process {pid}") from None


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # a redirect is an answer that is not 2xx: the notification failed


class HttpHook:
    """POST ``{}`` (``Content-Type: application/json``, as Spring Boot Actuator's ``/actuator/refresh`` takes it)
    to ``url``, with headers ``X-Zkop-Digest`` and ``X-Zkop-Changed-Keys`` (the count); any 2xx answer within
    ``timeout`` seconds is success. No proxy, no redirect followed."""

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"--notify-url {url!r}: an http:// or https:// URL")
        self.url = url
        self.timeout = timeout
        self.name = f"POST {url}"
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirects())

    def __call__(self, change: Change) -> None:
        """POST once.

        Raises:
            HookFailed: no connection, a timeout, or an answer that is not 2xx.
        """
        request = urllib.request.Request(self.url, data=json.dumps({}).encode(), method="POST", headers={
            "Content-Type": "application/json", "X-Zkop-Digest": change.digest,
            "X-Zkop-Changed-Keys": str(len(change.keys))})
        try:
            with self._opener.open(request, timeout=self.timeout) as answer:
                status = answer.status
                answer.read(65536)
        except urllib.error.HTTPError as err:
            raise HookFailed(f"{self.url} answered {err.code}") from None
        except (urllib.error.URLError, OSError, TimeoutError) as err:
            raise HookFailed(f"{self.url}: {getattr(err, 'reason', err)}") from None
        if not 200 <= status < 300:
            raise HookFailed(f"{self.url} answered {status}")
