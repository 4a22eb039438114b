"""Real ZooKeeper servers for tests: a standalone server, a quorum ensemble, session expiry.

kazoo's own ``kazoo.testing`` harness needs pyOpenSSL/pyjks (and breaks with current
pyOpenSSL), so this module drives the ZooKeeper jars directly: ``java`` on ``PATH`` and, by
default, the newest supported line (3.9) resolved from Maven Central into ``~/.cache/zkop/zookeeper/``
(``hack/zookeeper-lines.sh``, :mod:`zkop_testing.zookeeper_lines`). ``ZKOP_ZOOKEEPER_DEFAULT`` names another
line, or ``debian`` for Debian's ``zookeeper`` package (``apt-get install -y zookeeper``:
``/usr/share/java/zookeeper.jar``, 3.8.0 on bookworm); see :func:`find_zookeeper`. ``ZKOP_JAVA`` overrides
``java``.

Everything binds to ``127.0.0.1`` on ports picked by the kernel (never a fixed port).
Each server runs ``org.apache.zookeeper.server.quorum.QuorumPeerMain`` in its own
process group, with its data, ``zoo.cfg``, ``log4j.properties``, the log4j log
(``logs/zookeeper.log``) and the JVM's stdout/stderr (``logs/zookeeper.out``) in a
temporary directory. Processes are killed (whole process group, ``SIGKILL``) by a
``weakref.finalize`` finalizer when their handle is garbage collected or the
interpreter exits, so a failing test run does not leak JVMs; servers launched from the
main thread also get a parent-death signal (``setpriv --pdeathsig KILL``) so they die
even if the test process is killed outright.

Configuration keys and four-letter words follow the ZooKeeper Administrator's Guide (3.8 and 3.9,
"Configuration Parameters", "The Four Letter Words"); session expiry follows
the ZooKeeper FAQ ("How do I simulate a session expiration?").

Typical use::

    with ZooKeeperServer() as server:
        client = KazooClient(server.hosts)
        ...

    with ZooKeeperEnsemble(3) as ensemble:
        old = ensemble.kill_leader()
        new = ensemble.wait_for_quorum()

The classes are not thread-safe: drive each instance from one thread.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self

from kazoo.client import KazooClient, KazooState

from zkop_testing.waiting import EVENTUALLY, wait_for

__all__ = [
    "DEBIAN",
    "DEFAULT_JVM_FLAGS",
    "INSTALL_HINT",
    "LOOPBACK",
    "EnsembleMember",
    "ZooKeeperEnsemble",
    "ZooKeeperError",
    "ZooKeeperInstallation",
    "ZooKeeperNotInstalledError",
    "ZooKeeperNotServingError",
    "ZooKeeperServer",
    "ZooKeeperStartError",
    "connected_client",
    "debian_zookeeper",
    "expire_session",
    "find_zookeeper",
    "four_letter_word",
    "free_port",
    "free_ports",
    "port_is_free",
    "tree_state",
]

LOOPBACK = "127.0.0.1"
INSTALL_HINT = "apt-get install -y zookeeper"
DEFAULT_ZOOKEEPER_JAR = "/usr/share/java/zookeeper.jar"
#: ``ZKOP_ZOOKEEPER_DEFAULT=debian``: Debian's package instead of the newest line (:func:`debian_zookeeper`).
DEBIAN = "debian"
# Debian's zookeeper.jar manifest pulls in slf4j-api but no binding; without one the
# server logs nothing. Both jars come with the package's dependencies.
_LOG_JARS = ("/usr/share/java/slf4j-log4j12.jar", "/usr/share/java/log4j-1.2.jar")
_MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"

#: JVM flags tuned for fast start-up and a small footprint (several JVMs per test run).
DEFAULT_JVM_FLAGS: tuple[str, ...] = (
    "-Xms16m",
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-Djava.awt.headless=true",
    "-Djava.net.preferIPv4Stack=true",
    "-Dzookeeper.jmx.log4j.disable=true",
    # Leader election re-sends notifications with exponential back-off capped at
    # 60 s by default; cap it at 1 s so re-elections in tests stay quick.
    "-Dzookeeper.fastleader.maxNotificationInterval=1000",
)

#: ``Mode:`` values (from ``srvr``) of a server that is serving client requests.
SERVING_MODES = frozenset({"standalone", "leader", "follower", "observer", "read-only"})
_NOT_SERVING = "not currently serving requests"
_BIND_FAILURE = re.compile(r"Address already in use|BindException|Couldn't bind|UNABLE_TO_BIND")
_START_ATTEMPTS = 5


# --------------------------------------------------------------------------- errors


class ZooKeeperError(RuntimeError):
    """Base class for errors raised by this harness."""


class ZooKeeperNotInstalledError(ZooKeeperError):
    """``java`` or the ZooKeeper jar is missing; the message says how to install them."""


class ZooKeeperStartError(ZooKeeperError):
    """A server did not come up in time or exited early; the message carries the log tail."""


class ZooKeeperNotServingError(ZooKeeperError):
    """The server answered but is not serving requests (e.g. an ensemble member without quorum)."""


# --------------------------------------------------------------------- installation


@dataclass(frozen=True)
class ZooKeeperInstallation:
    """Where the ZooKeeper server lives.

    :ivar java: path of the ``java`` executable.
    :ivar classpath: jar files, ZooKeeper first, then the log4j binding jars if present.
    :ivar name: what the installation is, for test ids and messages: the release (``3.9.5``) of a line resolved
        from Maven Central (:func:`zkop_testing.zookeeper_lines.installation`; the suite's default is the newest
        line, :func:`find_zookeeper`), or ``debian`` (Debian's jar or ``ZKOP_ZOOKEEPER_JAR``,
        :func:`debian_zookeeper`).
    :ivar version: ``(major, minor)`` of the server, e.g. ``(3, 5)``; for Debian's jar the version Debian ships
        (3.8), unless ``ZKOP_ZOOKEEPER_JAR`` names another jar (then ``(3, 8)`` is assumed).
    """

    java: str
    classpath: tuple[str, ...]
    name: str = "default"
    version: tuple[int, int] = (3, 8)

    def at_least(self, major: int, minor: int) -> bool:
        """True if this server's line is ``major.minor`` or newer (``at_least(3, 6)``: persistent watches)."""
        return self.version >= (major, minor)

    @property
    def bundles_netty(self) -> bool:
        """True if netty's codec is on the class path already (Maven lines: transitive; Debian: not)."""
        return any(Path(jar).name.startswith("netty-codec") for jar in self.classpath)


def find_zookeeper() -> ZooKeeperInstallation:
    """Locate ``java`` and the ZooKeeper server every test starts unless it names another.

    The default is the newest supported line (:func:`zkop_testing.zookeeper_lines.default_line`: 3.9, the
    release ``tests/support/zookeeper-lines/versions`` pins, resolved from Maven Central into
    ``~/.cache/zkop/zookeeper/`` by ``hack/zookeeper-lines.sh`` when missing). ``ZKOP_ZOOKEEPER_DEFAULT`` names
    another line (``3.5``) or release (``3.5.10``) instead, or ``debian`` for Debian's package
    (:func:`debian_zookeeper`); ``ZKOP_ZOOKEEPER_JAR`` alone also means a jar of its own (Debian-style).
    ``ZKOP_JAVA`` overrides the ``java`` found on ``PATH``.

    :raises ZooKeeperNotInstalledError: ``java`` (or, for ``debian``, the jar) is missing; the message says how
        to install it.
    :raises zkop_testing.zookeeper_lines.ZooKeeperLineError: the line is unknown, or resolving it from Maven
        Central failed.
    """
    line = os.environ.get("ZKOP_ZOOKEEPER_DEFAULT", "").strip()
    if line == DEBIAN or (not line and os.environ.get("ZKOP_ZOOKEEPER_JAR")):
        return debian_zookeeper()
    from zkop_testing.zookeeper_lines import default_line, installation  # imports this module: import when asked

    return installation(line if line and line != "default" else default_line())


def debian_zookeeper() -> ZooKeeperInstallation:
    """Debian's ZooKeeper (bookworm: 3.8.0): ``/usr/share/java/zookeeper.jar`` (or ``ZKOP_ZOOKEEPER_JAR``) and the
    log4j binding Debian ships beside it; ``java`` from ``ZKOP_JAVA`` or ``PATH``.

    :raises ZooKeeperNotInstalledError: if either is missing; the message tells to run
        ``apt-get install -y zookeeper``.
    """
    java = os.environ.get("ZKOP_JAVA") or shutil.which("java")
    jar = os.environ.get("ZKOP_ZOOKEEPER_JAR") or DEFAULT_ZOOKEEPER_JAR
    missing = []
    if not java or not os.access(java, os.X_OK):
        missing.append(f"java executable ({java or 'not on PATH'})")
    if not os.path.isfile(jar):
        missing.append(f"ZooKeeper jar ({jar})")
    if missing or java is None:
        raise ZooKeeperNotInstalledError(
            f"ZooKeeper test harness needs {' and '.join(missing)}; run `{INSTALL_HINT}` "
            "(or set ZKOP_JAVA / ZKOP_ZOOKEEPER_JAR)"
        )
    # the slf4j binding is useless without log4j itself: add both or neither
    extra = _LOG_JARS if all(os.path.isfile(p) for p in _LOG_JARS) else ()
    return ZooKeeperInstallation(java=java, classpath=(jar, *extra), name=DEBIAN)


# ---------------------------------------------------------------------------- ports

_handed_out: set[int] = set()
_ports_lock = threading.Lock()


def free_port(host: str = LOOPBACK) -> int:
    """Return a TCP port on ``host`` that is free right now (bind to port 0, then close).

    Ports already handed out by this process are never returned twice, so the ports of
    one ensemble cannot collide with each other. Another process may still grab the port
    before the server binds it; the servers in this module retry start-up with fresh
    ports when that happens.
    """
    with _ports_lock:
        for _ in range(100):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind((host, 0))
                port: int = sock.getsockname()[1]
            if port not in _handed_out:
                _handed_out.add(port)
                return port
    raise ZooKeeperError("could not find a free port not handed out before")


def free_ports(count: int, host: str = LOOPBACK) -> list[int]:
    """Return ``count`` distinct free ports (see :func:`free_port`)."""
    return [free_port(host) for _ in range(count)]


def port_is_free(port: int, host: str = LOOPBACK) -> bool:
    """True if a server could listen on ``host:port`` now.

    Binds with ``SO_REUSEADDR`` (as ZooKeeper does), so connections lingering in
    ``TIME_WAIT`` do not count as "in use"; a listening socket does.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
            sock.listen(1)
        except OSError:
            return False
    return True


# ------------------------------------------------------------------ four-letter words


def four_letter_word(host: str, port: int, command: str, timeout: float = 5.0) -> str:
    """Send a four-letter word (``ruok``, ``srvr``, ``mntr``, ``stat``, ``cons``, ``wchs``...)
    to ``host:port`` and return the whole reply (the server closes the connection after it).

    See "The Four Letter Words" in the ZooKeeper Administrator's Guide. The servers
    started here whitelist all of them (``4lw.commands.whitelist=*``).

    :param timeout: socket timeout per connect/receive, in seconds.
    :raises ValueError: if ``command`` is not four lowercase ASCII letters.
    :raises OSError: if the server cannot be reached (refused, reset, timed out).
    """
    if not re.fullmatch(r"[a-z]{4}", command):
        raise ValueError(f"not a four-letter word: {command!r}")
    chunks: list[bytes] = []
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(command.encode("ascii"))
        while data := sock.recv(65536):
            chunks.append(data)
    return b"".join(chunks).decode("utf-8", "replace")


def _parse_mode(srvr: str) -> str | None:
    match = re.search(r"^Mode: (\S+)", srvr, re.MULTILINE)
    return match.group(1) if match else None


def _tail(path: Path, lines: int) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 256 * 1024))
            text = fh.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _pdeathsig_prefix() -> list[str]:
    """``setpriv --pdeathsig KILL`` when launching from the main thread, else nothing.

    The kernel then SIGKILLs the JVM when the launching thread dies, which covers a test
    run killed by SIGTERM/SIGKILL (no finalizers run then). The parent-death signal is
    tied to the *thread* that forked, so it is only used from the main thread (whose end
    is the end of the process); servers launched from other threads rely on the
    finalizers alone.
    """
    setpriv = shutil.which("setpriv")  # util-linux, Essential on Debian
    if setpriv is None or threading.current_thread() is not threading.main_thread():
        return []
    return [setpriv, "--pdeathsig", "KILL"]


def _kill_process_group(proc: subprocess.Popen[bytes]) -> None:
    """Finalizer: SIGKILL the process group of ``proc`` (if not reaped yet) and reap it."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


# ----------------------------------------------------------------------- processes


class _Stoppable(Protocol):
    def stop(self, timeout: float = ...) -> None: ...


class _StopOnExit:
    """``with`` support shared by :class:`ZooKeeperServer` and :class:`ZooKeeperEnsemble`: leaving stops."""

    def __exit__(
        self: _Stoppable,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class _ZooKeeperProcess:
    """One ZooKeeper JVM: shared machinery of :class:`ZooKeeperServer` and :class:`EnsembleMember`."""

    def __init__(
        self,
        *,
        port: int | None,
        tick_time: float,
        min_session_timeout: float,
        max_session_timeout: float,
        extra_config: Mapping[str, str] | None,
        jvm_flags: Sequence[str],
        installation: ZooKeeperInstallation | None,
        log_level: str,
    ) -> None:
        if not min_session_timeout <= max_session_timeout:
            raise ValueError("min_session_timeout must be <= max_session_timeout")
        #: The server's class path; change it between :meth:`stop` and :meth:`start` to upgrade or
        #: downgrade this server in place (a rolling upgrade of an ensemble member), keeping its data.
        self.installation = installation or find_zookeeper()
        self._port_pinned = port is not None
        self.client_port: int = port if port is not None else free_port()
        self.tick_time = tick_time
        self.min_session_timeout = min_session_timeout
        self.max_session_timeout = max_session_timeout
        self.extra_config: dict[str, str] = dict(extra_config or {})
        self.jvm_flags: tuple[str, ...] = tuple(jvm_flags)
        self.log_level = log_level
        self._proc: subprocess.Popen[bytes] | None = None
        self._proc_finalizer: weakref.finalize[Any, Any] | None = None
        self._started_once = False
        self._base_dir: Path | None = None

    # -- layout ------------------------------------------------------------------

    @property
    def base_dir(self) -> Path:
        """Directory holding ``data/``, ``conf/`` and ``logs/`` of this server."""
        if self._base_dir is None:
            raise ZooKeeperError("server has no directory (never started, or stopped)")
        return self._base_dir

    @property
    def data_dir(self) -> Path:
        """ZooKeeper ``dataDir`` (snapshots, transaction logs, ``myid``)."""
        return self.base_dir / "data"

    @property
    def log_path(self) -> Path:
        """The log4j log of the server (appended to across restarts)."""
        return self.base_dir / "logs" / "zookeeper.log"

    @property
    def out_path(self) -> Path:
        """stdout/stderr of the JVM (appended to across restarts)."""
        return self.base_dir / "logs" / "zookeeper.out"

    @property
    def hosts(self) -> str:
        """Connect string for this server alone: ``"127.0.0.1:PORT"``."""
        return f"{LOOPBACK}:{self.client_port}"

    @property
    def pid(self) -> int | None:
        """pid (= process group id) of the running JVM, or None."""
        return self._proc.pid if self._proc is not None else None

    @property
    def is_running(self) -> bool:
        """True while the JVM process is alive (it may not be serving yet)."""
        return self._proc is not None and self._proc.poll() is None

    def ports(self) -> tuple[int, ...]:
        """All TCP ports this server listens on."""
        return (self.client_port,)

    def _config(self) -> dict[str, str]:
        """``zoo.cfg`` entries (ZooKeeper Administrator's Guide, "Configuration Parameters")."""
        config = {
            "tickTime": str(round(self.tick_time * 1000)),
            "initLimit": "10",
            "syncLimit": "5",
            "dataDir": str(self.data_dir),
            "clientPort": str(self.client_port),
            "clientPortAddress": LOOPBACK,
            "minSessionTimeout": str(round(self.min_session_timeout * 1000)),
            "maxSessionTimeout": str(round(self.max_session_timeout * 1000)),
            # every test connects from 127.0.0.1; the default cap of 60 is too low
            "maxClientCnxns": "0",
            "4lw.commands.whitelist": "*",
            "admin.enableServer": "false",
            "reconfigEnabled": "false",
            "autopurge.purgeInterval": "0",
            # throw-away data: skip fsync, keep transaction log pre-allocation small (KiB)
            "forceSync": "no",
            "preAllocSize": "1024",
        }
        config.update(self.extra_config)
        return config

    def _prepare_dir(self) -> None:
        """Create the directory layout (if needed) and write ``zoo.cfg``/``log4j.properties``."""
        for sub in ("data", "conf", "logs"):
            (self.base_dir / sub).mkdir(parents=True, exist_ok=True)
        cfg = "".join(f"{key}={value}\n" for key, value in self._config().items())
        (self.base_dir / "conf" / "zoo.cfg").write_text(cfg)
        (self.base_dir / "conf" / "log4j.properties").write_text(
            f"log4j.rootLogger={self.log_level}, FILE\n"
            "log4j.appender.FILE=org.apache.log4j.FileAppender\n"
            f"log4j.appender.FILE.File={self.log_path}\n"
            "log4j.appender.FILE.Append=true\n"
            "log4j.appender.FILE.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.FILE.layout.ConversionPattern="
            "%d{ISO8601} [myid:%X{myid}] - %-5p [%t:%C{1}@%L] - %m%n\n"
        )

    # -- process control -----------------------------------------------------------

    def _launch(self) -> None:
        """Start the JVM without waiting for it to serve."""
        if self.is_running:
            raise ZooKeeperError(f"ZooKeeper on {self.hosts} is already running")
        self._reap()
        self._prepare_dir()
        conf = self.base_dir / "conf"
        cmd = [
            *_pdeathsig_prefix(),
            self.installation.java,
            *self.jvm_flags,
            f"-Dzookeeper.log.dir={self.base_dir / 'logs'}",
            f"-Dlog4j.configuration={(conf / 'log4j.properties').as_uri()}",
            "-cp",
            os.pathsep.join((str(conf), *self.installation.classpath)),
            _MAIN_CLASS,
            str(conf / "zoo.cfg"),
        ]
        with self.out_path.open("ab") as out:
            out.write(f"==== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(cmd)}\n".encode())
            out.flush()
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.base_dir,
                start_new_session=True,  # own session + process group: pgid == pid
                close_fds=True,
            )
        self._proc = proc
        self._proc_finalizer = weakref.finalize(self, _kill_process_group, proc)

    def _reap(self) -> None:
        """Forget a process that has already exited."""
        if self._proc is not None and self._proc.poll() is not None:
            self._terminate(timeout=0)

    def _terminate(self, timeout: float, sig: signal.Signals = signal.SIGTERM) -> None:
        """Signal the process group with ``sig``; SIGKILL it after ``timeout`` seconds; reap."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if self._proc_finalizer is not None:
            self._proc_finalizer.detach()
        self._proc = None
        self._proc_finalizer = None

    def _signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` to the process group if the process has not been reaped."""
        if self._proc is not None and self._proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, sig)

    def _check_alive(self) -> None:
        proc = self._proc
        if proc is None:
            raise ZooKeeperStartError(f"ZooKeeper on {self.hosts} is not running")
        code = proc.poll()
        if code is not None:
            raise ZooKeeperStartError(f"ZooKeeper on {self.hosts} exited with code {code}\n{self.log_tail()}")

    def _probe_started(self, wait_serving: bool) -> bool:
        """One poll of start-up: raises if the JVM died, True when it is up (and serving)."""
        self._check_alive()
        try:
            if self.four_letter_word("ruok", timeout=1.0).strip() != "imok":
                return False
            # Make sure the answer comes from our JVM and not from another server that
            # holds the port (ours would then exit with a bind error): its working
            # directory, reported by ``envi``, is our base dir.
            if f"user.dir={self.base_dir}" not in self.four_letter_word("envi", timeout=1.0).splitlines():
                return False
            return not wait_serving or self.mode() in SERVING_MODES
        except OSError:
            return False

    def _wait_started(self, timeout: float, wait_serving: bool) -> None:
        try:
            wait_for(lambda: self._probe_started(wait_serving), timeout, interval=0.05)
        except TimeoutError:
            tail = self.log_tail()
            self._terminate(timeout=0, sig=signal.SIGKILL)
            what = "serving" if wait_serving else "answering ruok"
            raise ZooKeeperStartError(f"ZooKeeper on {self.hosts} not {what} after {timeout:g} s\n{tail}") from None

    def _bind_failed(self) -> bool:
        return bool(_BIND_FAILURE.search(self.log_tail(400)))

    def start(self, timeout: float = 30.0, *, wait_serving: bool = True) -> None:
        """Start the JVM and wait until it answers ``ruok`` with ``imok`` and, if
        ``wait_serving``, until ``srvr`` reports a serving ``Mode:`` (standalone, leader,
        follower, observer).

        :param timeout: seconds to wait for the server.
        :raises ZooKeeperError: if it is already running.
        :raises ZooKeeperStartError: on timeout or early exit (the JVM is killed; the
            message carries the log tail).
        """
        self._launch()
        self._wait_started(timeout, wait_serving)
        self._started_once = True

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the process group, SIGKILL it after ``timeout`` seconds, and reap it.

        No-op if not running.
        """
        self._terminate(timeout)

    def kill(self) -> None:
        """SIGKILL the process group (a crash: no clean shutdown, data dir kept)."""
        self._terminate(timeout=10.0, sig=signal.SIGKILL)

    def restart(self, timeout: float = 30.0, *, wait_serving: bool = True) -> None:
        """Stop (if running) and start again on the same ports with the same data dir.

        :raises ZooKeeperStartError: as :meth:`start`.
        """
        self._terminate(timeout=10.0)
        self.start(timeout, wait_serving=wait_serving)

    def wipe_and_restart(self, timeout: float = 30.0) -> None:
        """Lose every znode: stop, delete the data dir (snapshots, transaction logs), start on the same port.

        A standalone server rebuilt from nothing: its zxid starts again from 0, so it refuses
        the session of any client that has seen a later zxid ("Refusing session request …
        as it has seen zxid …"). For a whole ensemble use :meth:`ZooKeeperEnsemble.wipe_and_restart`
        (one member wiped alone just syncs from the leader).

        :raises ZooKeeperStartError: as :meth:`start`.
        """
        self._terminate(timeout=10.0)
        shutil.rmtree(self.data_dir, ignore_errors=True)
        self.start(timeout)

    # -- inspection ------------------------------------------------------------------

    def four_letter_word(self, command: str, timeout: float = 5.0) -> str:
        """Send a four-letter word to this server; see :func:`four_letter_word`.

        :raises OSError: if the server cannot be reached.
        """
        return four_letter_word(LOOPBACK, self.client_port, command, timeout)

    def srvr(self) -> str:
        """Raw ``srvr`` reply (version, latency, connections, zxid, ``Mode:``, node count)."""
        return self.four_letter_word("srvr")

    def mode(self) -> str | None:
        """``Mode:`` from ``srvr`` (``standalone``, ``leader``, ``follower``...), or None when
        the server is unreachable or not serving."""
        try:
            return _parse_mode(self.srvr())
        except OSError:
            return None

    def is_serving(self) -> bool:
        """True if the server is reachable and serving client requests."""
        return self.mode() in SERVING_MODES

    def mntr(self) -> dict[str, str]:
        """``mntr`` as a dict of ``zk_*`` keys to string values (e.g. ``zk_server_state``,
        ``zk_znode_count``, ``zk_ephemerals_count``, ``zk_num_alive_connections``).

        :raises OSError: if the server cannot be reached.
        :raises ZooKeeperNotServingError: if the server is up but not serving requests.
        """
        reply = self.four_letter_word("mntr")
        if _NOT_SERVING in reply:
            raise ZooKeeperNotServingError(f"{self.hosts}: {reply.strip()}")
        result: dict[str, str] = {}
        for line in reply.splitlines():
            key, sep, value = line.partition("\t")
            if sep:
                result[key.strip()] = value.strip()
        return result

    def log_tail(self, lines: int = 60) -> str:
        """Last ``lines`` lines of the JVM output and of the log4j log, for error messages."""
        if self._base_dir is None:
            return "(no logs)"
        return (
            f"--- {self.out_path} (tail) ---\n{_tail(self.out_path, 15)}\n"
            f"--- {self.log_path} (tail) ---\n{_tail(self.log_path, lines)}"
        )

    def __repr__(self) -> str:
        state = "running" if self.is_running else "stopped"
        return f"<{type(self).__name__} {self.hosts} {state} pid={self.pid}>"


class ZooKeeperServer(_ZooKeeperProcess, _StopOnExit):
    """A standalone ZooKeeper server on ``127.0.0.1`` in a temporary directory.

    ``start()`` creates the temporary directory if there is none; ``stop()`` stops the
    server and deletes it; ``kill()`` and ``restart()`` keep it (so ``kill()`` then
    ``start()`` recovers the data like a crashed server would). The client port is
    picked on the first start and kept afterwards; if another process grabs it before
    the first start, start-up is retried with a fresh port.

    :param port: client port; default: a free port (see :func:`free_port`).
    :param tick_time: ``tickTime`` in seconds (0.5 → session timeouts down to 1 s).
    :param min_session_timeout: ``minSessionTimeout`` in seconds.
    :param max_session_timeout: ``maxSessionTimeout`` in seconds.
    :param extra_config: extra/overriding ``zoo.cfg`` keys (Administrator's Guide).
    :param jvm_flags: JVM options placed before the main class.
    :param installation: where java/the jar are; default :func:`find_zookeeper`.
    :param log_level: log4j root level (``INFO``, ``DEBUG``...).
    :raises ZooKeeperNotInstalledError: if java or the jar is missing.
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        tick_time: float = 0.5,
        min_session_timeout: float = 1.0,
        max_session_timeout: float = 60.0,
        extra_config: Mapping[str, str] | None = None,
        jvm_flags: Sequence[str] = DEFAULT_JVM_FLAGS,
        installation: ZooKeeperInstallation | None = None,
        log_level: str = "INFO",
    ) -> None:
        super().__init__(
            port=port,
            tick_time=tick_time,
            min_session_timeout=min_session_timeout,
            max_session_timeout=max_session_timeout,
            extra_config=extra_config,
            jvm_flags=jvm_flags,
            installation=installation,
            log_level=log_level,
        )
        self._dir_finalizer: weakref.finalize[Any, Any] | None = None

    def _config(self) -> dict[str, str]:
        config = super()._config()
        config.setdefault("standaloneEnabled", "true")
        return config

    def _ensure_dir(self) -> None:
        if self._base_dir is None:
            self._base_dir = Path(tempfile.mkdtemp(prefix="zkop-zk-"))
            self._dir_finalizer = weakref.finalize(self, shutil.rmtree, str(self._base_dir), ignore_errors=True)

    def start(self, timeout: float = 30.0, *, wait_serving: bool = True) -> None:
        """Start the server and wait until it serves (``ruok`` → ``imok`` and ``srvr``
        shows ``Mode: standalone``).

        :param timeout: seconds to wait, per attempt (up to 5 attempts, each with a fresh
            port, are made only when the first-ever start fails to bind its port).
        :raises ZooKeeperError: if it is already running.
        :raises ZooKeeperStartError: on timeout or early exit, with the log tail.
        """
        self._ensure_dir()
        for attempt in range(_START_ATTEMPTS):
            try:
                super().start(timeout, wait_serving=wait_serving)
                return
            except ZooKeeperStartError:
                retry = (
                    not self._started_once
                    and not self._port_pinned
                    and attempt + 1 < _START_ATTEMPTS
                    and self._bind_failed()
                )
                if not retry:
                    raise
                self._terminate(timeout=0, sig=signal.SIGKILL)
                self.client_port = free_port()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (SIGTERM, SIGKILL after ``timeout`` seconds) and delete its
        temporary directory, data and logs included. Safe to call repeatedly."""
        self._terminate(timeout)
        if self._dir_finalizer is not None:
            self._dir_finalizer()
        self._dir_finalizer = None
        self._base_dir = None

    def __enter__(self) -> Self:
        if not self.is_running:
            self.start()
        return self



class EnsembleMember(_ZooKeeperProcess):
    """Handle on one member of a :class:`ZooKeeperEnsemble` (``myid`` = ``index + 1``).

    Behaves like a machine switched off and on: ``stop()``/``kill()`` end the JVM but keep
    its data dir (owned by the ensemble and deleted by :meth:`ZooKeeperEnsemble.stop`);
    ``start()``/``restart()`` bring it back on the same ports. ``start()`` waits until
    the member serves, which needs a quorum of running members; pass
    ``wait_serving=False`` to wait only for ``ruok``.
    """

    def __init__(self, ensemble: ZooKeeperEnsemble, index: int, base_dir: Path) -> None:
        super().__init__(
            port=None,
            tick_time=ensemble.tick_time,
            min_session_timeout=ensemble.min_session_timeout,
            max_session_timeout=ensemble.max_session_timeout,
            extra_config=ensemble.extra_config,
            jvm_flags=ensemble.jvm_flags,
            installation=ensemble.installation,
            log_level=ensemble.log_level,
        )
        self._ensemble = ensemble
        self.index = index
        self.myid = index + 1
        self.quorum_port, self.election_port = free_ports(2)
        self._base_dir = base_dir

    def ports(self) -> tuple[int, ...]:
        return (self.client_port, self.quorum_port, self.election_port)

    def _reallocate_ports(self) -> None:
        self.client_port, self.quorum_port, self.election_port = free_ports(3)

    def _config(self) -> dict[str, str]:
        config = super()._config()
        for member in self._ensemble.members:
            config[f"server.{member.myid}"] = f"{LOOPBACK}:{member.quorum_port}:{member.election_port}"
        # quorum mode even for a 1-member ensemble
        config.setdefault("standaloneEnabled", "false")
        return config

    def _prepare_dir(self) -> None:
        super()._prepare_dir()
        (self.data_dir / "myid").write_text(f"{self.myid}\n")

    def _wipe_data(self) -> None:
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def __repr__(self) -> str:
        state = "running" if self.is_running else "stopped"
        return f"<EnsembleMember {self.index} (myid {self.myid}) {self.hosts} {state} pid={self.pid}>"


class ZooKeeperEnsemble(_StopOnExit):
    """A real ZooKeeper quorum of ``size`` servers on ``127.0.0.1``.

    Members are indexed ``0..size-1`` (``myid`` ``1..size``). Each has a client port,
    a quorum port and an election port (classic ``server.N=127.0.0.1:quorum:election``
    lines, per-member ``clientPort``), a ``myid`` file, ``reconfigEnabled=false`` (no
    dynamic configuration) and ``standaloneEnabled=false``. All state lives in one
    temporary directory deleted by :meth:`stop`.

    :param size: number of members (3 tolerates one failure, 5 two).
    :param tick_time: ``tickTime`` in seconds; ``initLimit=10``, ``syncLimit=5`` ticks.
    :param min_session_timeout: ``minSessionTimeout`` in seconds.
    :param max_session_timeout: ``maxSessionTimeout`` in seconds.
    :param extra_config: extra ``zoo.cfg`` keys for every member.
    :param jvm_flags: JVM options for every member.
    :param installation: default :func:`find_zookeeper`.
    :param log_level: log4j root level.
    :raises ZooKeeperNotInstalledError: if java or the jar is missing.
    """

    def __init__(
        self,
        size: int = 3,
        *,
        tick_time: float = 0.5,
        min_session_timeout: float = 1.0,
        max_session_timeout: float = 60.0,
        extra_config: Mapping[str, str] | None = None,
        jvm_flags: Sequence[str] = DEFAULT_JVM_FLAGS,
        installation: ZooKeeperInstallation | None = None,
        log_level: str = "INFO",
    ) -> None:
        if size < 1:
            raise ValueError(f"ensemble size must be >= 1, got {size}")
        self.size = size
        self.tick_time = tick_time
        self.min_session_timeout = min_session_timeout
        self.max_session_timeout = max_session_timeout
        self.extra_config: dict[str, str] = dict(extra_config or {})
        self.jvm_flags: tuple[str, ...] = tuple(jvm_flags)
        self.installation = installation or find_zookeeper()
        self.log_level = log_level
        self._base_dir = Path(tempfile.mkdtemp(prefix="zkop-zk-ensemble-"))
        self._dir_finalizer = weakref.finalize(self, shutil.rmtree, str(self._base_dir), ignore_errors=True)
        self.members: tuple[EnsembleMember, ...] = ()
        self.members = tuple(EnsembleMember(self, i, self._member_dir(i)) for i in range(size))
        self._formed_once = False

    def _member_dir(self, index: int) -> Path:
        return self._base_dir / f"member-{index + 1}"

    def _ensure_dir(self) -> None:
        """Give the ensemble a new temporary directory if :meth:`stop` removed the old one."""
        if self._dir_finalizer.alive:
            return
        self._base_dir = Path(tempfile.mkdtemp(prefix="zkop-zk-ensemble-"))
        self._dir_finalizer = weakref.finalize(self, shutil.rmtree, str(self._base_dir), ignore_errors=True)
        for member in self.members:
            member._base_dir = self._member_dir(member.index)

    @property
    def majority(self) -> int:
        """Number of running members needed for a quorum (``size // 2 + 1``)."""
        return self.size // 2 + 1

    @property
    def hosts(self) -> str:
        """Connect string with every member: ``"127.0.0.1:P1,127.0.0.1:P2,..."``."""
        return ",".join(m.hosts for m in self.members)

    def member(self, index: int) -> EnsembleMember:
        """The member with index ``index`` (``0 <= index < size``)."""
        return self.members[index]

    def modes(self) -> dict[int, str | None]:
        """``Mode:`` of each member by index; None if stopped, unreachable or not serving."""
        return {m.index: (m.mode() if m.is_running else None) for m in self.members}

    def leader(self) -> int:
        """Index of the member currently reporting ``Mode: leader``.

        :raises ZooKeeperError: if there is not exactly one leader right now.
        """
        modes = self.modes()
        leaders = [i for i, mode in modes.items() if mode == "leader"]
        if len(leaders) != 1:
            raise ZooKeeperError(f"expected exactly one leader, member modes: {modes}")
        return leaders[0]

    def start(self, timeout: float = 60.0) -> None:
        """Start every member at once and wait until all of them serve and exactly one
        reports ``Mode: leader`` (via ``srvr``).

        :param timeout: seconds per attempt. If the very first start fails because a port
            was taken by another process, the ensemble is retried with fresh ports (up to
            5 attempts).
        :raises ZooKeeperError: if a member is already running.
        :raises ZooKeeperStartError: on timeout or if a member exits; carries log tails.
        """
        self._ensure_dir()
        for attempt in range(_START_ATTEMPTS):
            try:
                self._start_members(self.members, timeout)
                self._formed_once = True
                return
            except ZooKeeperStartError:
                bind_failed = any(m._bind_failed() for m in self.members)
                if self._formed_once or not bind_failed or attempt + 1 == _START_ATTEMPTS:
                    self._terminate_all()
                    raise
                self._terminate_all()
                for member in self.members:
                    member._wipe_data()
                    member._reallocate_ports()

    def _start_members(self, members: Sequence[EnsembleMember], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for member in members:
            member._launch()
        for member in members:
            member._wait_started(max(0.0, deadline - time.monotonic()), wait_serving=False)
        try:
            self.wait_for_quorum(max(0.0, deadline - time.monotonic()))
        except TimeoutError as exc:
            raise ZooKeeperStartError(str(exc)) from None
        for member in members:
            member._started_once = True

    def wait_for_quorum(self, timeout: float = 30.0) -> int:
        """Wait until every running member serves and exactly one of them is the leader.

        :param timeout: seconds.
        :returns: index of the leader.
        :raises ZooKeeperError: at once if fewer than :attr:`majority` members run.
        :raises ZooKeeperStartError: if a running member exits while waiting.
        :raises TimeoutError: if no quorum forms in time; carries modes and log tails.
        """
        running = [m for m in self.members if m.is_running]
        if len(running) < self.majority:
            raise ZooKeeperError(f"only {len(running)} of {self.size} members running; a quorum needs {self.majority}")

        def formed() -> tuple[int, ...]:  # (leader,) once formed; () is falsy: keep waiting
            modes: dict[int, str | None] = {}
            for m in running:
                m._check_alive()
                modes[m.index] = m.mode()
            if any(mode not in SERVING_MODES for mode in modes.values()):
                return ()
            leaders = [i for i, mode in modes.items() if mode == "leader"]
            return (leaders[0],) if len(leaders) == 1 else ()

        try:
            return wait_for(formed, timeout, interval=0.05)[0]
        except TimeoutError:
            tails = "\n".join(f"== member {m.index} ==\n{m.log_tail(25)}" for m in running)
            raise TimeoutError(
                f"no quorum on {self.hosts} after {timeout:g} s; modes {self.modes()}\n{tails}"
            ) from None

    def heal(self, timeout: float = 60.0) -> int:
        """Start every stopped member and wait for a quorum of all members.

        :returns: index of the leader.
        :raises ZooKeeperStartError: if a member fails to start or no quorum forms.
        """
        stopped = [m for m in self.members if not m.is_running]
        for m in stopped:
            m._reap()
        if stopped:
            self._start_members(stopped, timeout)
            return self.leader()
        try:
            return self.wait_for_quorum(timeout)
        except TimeoutError as exc:
            raise ZooKeeperStartError(str(exc)) from None

    def kill_leader(self) -> int:
        """SIGKILL the current leader; return its index. Follow with :meth:`wait_for_quorum`.

        :raises ZooKeeperError: if there is not exactly one leader.
        """
        index = self.leader()
        self.members[index].kill()
        return index

    def wipe_and_restart(self, timeout: float = 60.0) -> int:
        """Lose every znode: stop all members, delete their data dirs, start them on the same ports.

        An ensemble rebuilt from nothing: it forms a new quorum whose zxids start below what
        clients have seen, so their old sessions are refused.

        :returns: index of the new leader.
        :raises ZooKeeperStartError: if a member fails to start or no quorum forms.
        """
        self._terminate_all()
        for member in self.members:
            member._wipe_data()
        self._start_members(self.members, timeout)
        return self.leader()

    def _terminate_all(self, timeout: float = 10.0) -> None:
        for m in self.members:
            m._signal(signal.SIGTERM)  # all at once, then wait for each
        for m in self.members:
            m._terminate(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop all members (SIGTERM together, SIGKILL after ``timeout`` seconds) and
        delete the ensemble's temporary directory. Safe to call repeatedly; a later
        :meth:`start` begins afresh (empty data, same ports)."""
        self._terminate_all(timeout)
        self._dir_finalizer()

    def __enter__(self) -> Self:
        self.start()
        return self


    def __repr__(self) -> str:
        return f"<ZooKeeperEnsemble size={self.size} {self.hosts}>"


# -------------------------------------------------------------------- clients


@contextlib.contextmanager
def connected_client(hosts: str, *, timeout: float = 10.0, handler: Any = None,
                     **options: Any) -> Iterator[KazooClient]:
    """A kazoo client connected to ``hosts``, stopped and closed on leaving.

    :param hosts: connect string, optionally with a chroot (``127.0.0.1:2181/base``).
    :param timeout: session timeout in seconds.
    :param handler: a kazoo handler; default kazoo's threading handler.
    :param options: more ``KazooClient`` arguments (``sasl_options``, ``auth_data``).
    :raises kazoo.handlers.threading.KazooTimeoutError: not connected within ``EVENTUALLY`` s.
    """
    client = KazooClient(hosts=hosts, timeout=timeout, handler=handler, **options)
    client.start(timeout=EVENTUALLY)
    try:
        yield client
    finally:
        client.stop()
        client.close()


# -------------------------------------------------------------------- session expiry


def expire_session(
    client: KazooClient,
    hosts: str,
    timeout: float = 10.0,
    *,
    wait_reconnect: bool = True,
) -> None:
    """Make the server expire ``client``'s session, the standard way.

    Follows the ZooKeeper FAQ ("How do I simulate a session expiration?"): open a second
    connection with the same session id and password (``client.client_id``), then close
    it. Closing sends ``closeSession``, so the server ends the session at once: its
    ephemeral nodes are deleted and watches fire. ``client``'s own connection is dropped;
    when it reconnects with the dead session it is told the session expired, goes to
    ``KazooState.LOST`` and (kazoo's default) starts a new session.

    Returns once ``client`` has seen ``LOST`` (or its session id changed) and, if
    ``wait_reconnect``, once it is connected again with a new session id.

    :param client: a started, connected kazoo client.
    :param hosts: connect string of the server/ensemble the client uses.
    :param timeout: seconds for each phase (second connection, LOST, reconnect).
    :raises ZooKeeperError: if ``client`` is not connected.
    :raises kazoo.handlers.threading.KazooTimeoutError: if the second connection cannot
        be opened within ``timeout``.
    :raises TimeoutError: if the client does not notice the expiry or reconnect in time.
    """
    client_id = client.client_id
    if client_id is None:
        raise ZooKeeperError("expire_session needs a connected client")
    old_session_id = client_id[0]
    lost = threading.Event()

    def listener(state: str) -> bool:
        if state == KazooState.LOST:
            lost.set()
            return True  # kazoo removes the listener
        return False

    def new_session() -> bool:
        current = client.client_id
        return current is not None and current[0] != old_session_id

    client.add_listener(listener)
    try:
        twin = KazooClient(hosts=hosts, client_id=client_id, timeout=timeout)
        try:
            twin.start(timeout=timeout)
        finally:
            twin.stop()
            twin.close()
        wait_for(
            lambda: lost.is_set() or new_session(),
            timeout,
            message=f"client did not see expiry of session 0x{old_session_id:x}",
        )
        if wait_reconnect:
            wait_for(
                new_session,
                timeout,
                message=f"client did not reconnect after expiry of session 0x{old_session_id:x}",
            )
    finally:
        client.remove_listener(listener)


def tree_state(zk: KazooClient, root: str) -> dict[str, tuple[bytes, int, int]]:
    """Every znode under ``root`` (``root`` included): path → (data, mzxid, cversion); any write changes one of
    them, so two states compare equal only if nothing was written in between."""
    found: dict[str, tuple[bytes, int, int]] = {}
    frontier = [root]
    while frontier:
        path = frontier.pop()
        data, stat = zk.get(path)
        found[path] = (data, stat.mzxid, stat.cversion)
        frontier += [f"{path.rstrip('/')}/{child}" for child in zk.get_children(path)]
    return found
