"""The real Java clients of ZooKeeper, as test programs: built from Maven Central, run as processes that answer JSON.

``tests/interop/java`` is a Maven project of small programs (``zkop.interop.*``) that use Apache Curator's
service discovery and recipes and Apache Dubbo's ZooKeeper registry exactly as an application would;
``tests/interop/java-spring`` a Spring Boot application with Spring Cloud Zookeeper discovery
(``zkop.interop.spring.*``); ``tests/interop/java-dubbo27`` a Dubbo 2.7 consumer (``zkop.interop.dubbo27.*``, apart:
Dubbo 2.7 and 3 cannot share a class path). :func:`java_classpath` builds them all with
``hack/build-java-interop.sh`` (JDK 17 and Maven; the jars come from Maven Central, the classes go to a
version-keyed cache
``~/.cache/zkop/java-interop/<hash>/``, reused while the projects, the script and the JDK are unchanged) and returns
a project's ``java -cp`` class path.

:class:`JavaProgram` runs one program: it prints one JSON document per line on stdout (the first,
``{"ready": true}``, once it is connected); :meth:`JavaProgram.call` sends one command line on stdin and returns the
JSON reply, :meth:`JavaProgram.lines` returns what a program printed without being asked (events). Nothing of it
ships in zkop.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from zkop_testing.builds import run_build_script
from zkop_testing.waiting import EVENTUALLY

__all__ = ["JavaBuildError", "JavaProgram", "JavaProgramError", "build_before_tests", "java_classpath"]

REPO = Path(__file__).resolve().parents[3]
BUILD_SCRIPT = REPO / "hack" / "build-java-interop.sh"
_BUILD_ERROR: list[str] = []


class JavaBuildError(RuntimeError):
    """``hack/build-java-interop.sh`` failed (its output is in the message)."""


class JavaProgramError(RuntimeError):
    """A Java program exited, answered with ``{"error": …}`` or did not answer in time; its stderr is in the message."""


@functools.cache
def _build() -> Path:
    """The cache directory of the built programs (``hack/build-java-interop.sh``'s last line)."""
    return run_build_script(BUILD_SCRIPT, error=JavaBuildError, failures=_BUILD_ERROR)


def java_classpath(project: str = "java") -> str:
    """The class path of the programs of ``tests/interop/<project>`` (``java``, ``java-spring`` or ``java-dubbo27``),
    built if missing
    (Maven downloads the jars the first time).

    Raises:
        JavaBuildError: the build failed (once per session: a failed build is not tried again by every test).
    """
    return (_build() / f"classpath-{project}.txt").read_text(encoding="utf-8").strip()


def build_before_tests(items: list[Any], module_prefix: str = "test_java_") -> None:
    """Build the programs before the first test runs if one of ``items`` (pytest items) lives in a module whose
    name starts with ``module_prefix``, so that no per-test timeout counts a cold build (Maven's downloads)."""
    if any(Path(str(item.fspath)).name.startswith(module_prefix) for item in items):
        with contextlib.suppress(JavaBuildError):
            java_classpath()


class JavaProgram:
    """One running interop program (``zkop.interop.<main>``).

    Args:
        main: the class's simple name, e.g. ``CuratorDiscovery``.
        args: its command-line arguments (usually a ZooKeeper connect string first).
        system_properties: ``-Dkey=value`` options for the JVM.
        env: environment variables added to the test's own (e.g. Dubbo's ``DUBBO_IP_TO_REGISTRY``).
        project: the Maven project under ``tests/interop`` that has ``main`` (``java``, ``java-spring`` or
            ``java-dubbo27``).

    A line on its stdout that is not JSON (a library logging to stdout) is kept apart (:meth:`stderr` shows it),
    never taken for a reply.

    Use as a context manager: entering starts it and waits for ``{"ready": true}``; leaving stops it
    (``close`` on stdin if it is still running, then SIGTERM, then SIGKILL).
    """

    def __init__(self, main: str, args: Sequence[str] = (), *,
                 system_properties: dict[str, str] | None = None, env: dict[str, str] | None = None,
                 project: str = "java") -> None:
        self.main = main
        self.project = project
        self._noise: list[str] = []
        self.env = dict(env or {})
        self.args = list(args)
        self.system_properties = dict(system_properties or {})
        self.proc: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[Any] = queue.Queue()
        self._stderr = tempfile.TemporaryFile(mode="w+", encoding="utf-8")  # noqa: SIM115 (closed by stop)
        self._reader: threading.Thread | None = None
        self._home: str | None = None

    def __enter__(self) -> JavaProgram:
        try:
            self.start()
        except BaseException:
            self.stop()  # a program that never said it was ready leaves no process and no home directory behind
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()

    def start(self, timeout: float = EVENTUALLY) -> None:
        """Start the JVM and wait until the program says it is ready.

        Raises:
            JavaProgramError: it exited or did not say so within ``timeout`` seconds.
        """
        # Its temporary files (Tomcat's base directory) and home (Dubbo's ~/.dubbo caches) are a directory of its
        # own, removed by stop(); no perf data file in /tmp either.
        self._home = tempfile.mkdtemp(prefix="zkop-java-")
        command = ["java", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
                   f"-Djava.io.tmpdir={self._home}", f"-Duser.home={self._home}",
                   "-cp", java_classpath(self.project), *(f"-D{k}={v}" for k, v in self.system_properties.items()),
                   f"zkop.interop.{self.main}", *self.args]
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                     text=True, encoding="utf-8", start_new_session=True,
                                     env={**os.environ, **self.env})
        self._reader = threading.Thread(target=self._read, name=f"java-{self.main}", daemon=True)
        self._reader.start()
        first = self._next(timeout, "start")
        if first != {"ready": True}:
            raise JavaProgramError(f"{self.main} started with {first!r}\n{self.stderr()}")

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self._lines.put(json.loads(line))
            except ValueError:
                self._noise.append(line)
        self._lines.put(None)  # end of output

    def _next(self, timeout: float, what: str) -> Any:
        try:
            item = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise JavaProgramError(f"{self.main}: no answer to {what} within {timeout} s\n{self.stderr()}") from None
        if item is None:
            self._lines.put(None)
            raise JavaProgramError(f"{self.main} exited ({self.returncode()}) during {what}\n{self.stderr()}")
        return item

    def call(self, *words: str, timeout: float = EVENTUALLY) -> Any:
        """Send one command (``words`` joined by spaces) and return its JSON reply.

        Raises:
            JavaProgramError: the reply is ``{"error": …}``, or none came within ``timeout`` seconds.
        """
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(" ".join(words) + "\n")
        self.proc.stdin.flush()
        reply = self._next(timeout, " ".join(words))
        if isinstance(reply, dict) and set(reply) == {"error"}:
            raise JavaProgramError(f"{self.main} {' '.join(words)}: {reply['error']}")
        return reply

    def lines(self) -> Iterator[Any]:
        """What the program printed since the last call of this, without waiting (for programs that print events)."""
        while True:
            try:
                item = self._lines.get_nowait()
            except queue.Empty:
                return
            if item is None:
                self._lines.put(None)
                return
            yield item

    def returncode(self) -> int | None:
        """The exit code, ``None`` while it runs."""
        return None if self.proc is None else self.proc.poll()

    def stderr(self) -> str:
        """The last 4000 characters the program wrote to stderr (its log)."""
        self._stderr.flush()
        self._stderr.seek(0)
        return ("".join(self._noise[-20:]) + self._stderr.read())[-4000:]

    def close(self, timeout: float = EVENTUALLY) -> None:
        """Ask the program to close its clients and exit (``close`` on stdin), and wait until it has."""
        if self.proc is None or self.proc.poll() is not None:
            return
        assert self.proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            self.proc.stdin.write("close\n")
            self.proc.stdin.flush()
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise JavaProgramError(f"{self.main} did not exit after close\n{self.stderr()}") from None

    def stop(self) -> None:
        """Stop the program whatever its state (close, then SIGTERM, then SIGKILL to its process group)."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(JavaProgramError):
                self.close(timeout=10)
            for sig in (signal.SIGTERM, signal.SIGKILL):
                if self.proc.poll() is not None:
                    break
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, sig)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(10)
        if self._reader is not None:
            self._reader.join(10)
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
        self._stderr.close()
        if self._home is not None:
            shutil.rmtree(self._home, ignore_errors=True)
