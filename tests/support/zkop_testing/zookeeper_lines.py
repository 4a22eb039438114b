"""ZooKeeper servers of every supported line (3.5 to 3.9), resolved from Maven Central, for the harness.

``tests/support/zookeeper-lines/versions`` names the release each line runs (the newest that Maven Central
serves here with its dependencies); ``hack/zookeeper-lines.sh`` resolves a release's run-time class path into
a version-keyed cache (``~/.cache/zkop/zookeeper/<version>-<hash>/lib``) and prints its directory, reusing it
when present. :func:`installation` turns that into a
:class:`~zkop_testing.zookeeper.ZooKeeperInstallation` that :class:`~zkop_testing.zookeeper.ZooKeeperServer`,
:class:`~zkop_testing.zookeeper.ZooKeeperEnsemble` and
:class:`~zkop_testing.zookeeper_secure.SecureZooKeeperServer` accept as ``installation=``.

Which lines a test run covers follows the pattern of
:func:`zkop_testing.controlplane.minors_under_test`: :func:`lines_under_test` reads ``ZKOP_ZOOKEEPER_LINES``
(comma-separated lines such as ``3.5,3.9``, or ``all``); unset or empty, a run covers only the default server
(:func:`~zkop_testing.zookeeper.find_zookeeper`: the newest line, :func:`default_line`, unless
``ZKOP_ZOOKEEPER_DEFAULT`` names another, or ``debian`` for Debian's 3.8.0 jar). The tests marked
``zookeeper_semantics`` run once per line under test (``tests/conftest.py``); the default server's own line is
not run a second time.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path

from zkop_testing.zookeeper import ZooKeeperError, ZooKeeperInstallation, ZooKeeperNotInstalledError, find_zookeeper

__all__ = [
    "DEFAULT",
    "LINES",
    "RESOLVE_SCRIPT",
    "VERSIONS_FILE",
    "ZooKeeperLineError",
    "default_line",
    "installation",
    "lines_under_test",
    "resolve",
]

REPO = Path(__file__).resolve().parents[3]
RESOLVE_SCRIPT = REPO / "hack" / "zookeeper-lines.sh"
VERSIONS_FILE = REPO / "tests" / "support" / "zookeeper-lines" / "versions"
#: The name of the default installation in :func:`lines_under_test` and in test ids (``zk-default``).
DEFAULT = "default"


class ZooKeeperLineError(ZooKeeperError):
    """A line is unknown, or its release could not be resolved from Maven Central (the message says why)."""


def _read_versions() -> dict[str, str]:
    lines: dict[str, str] = {}
    for raw in VERSIONS_FILE.read_text().splitlines():
        fields = raw.split()
        if len(fields) == 2 and not raw.startswith("#"):
            lines[fields[0]] = fields[1]
    return lines


#: Line (``"3.5"``) → the release the tests run (``"3.5.10"``), oldest line first.
LINES: dict[str, str] = _read_versions()


def default_line() -> str:
    """The line of the server every test starts unless it names another: the one ``ZKOP_ZOOKEEPER_DEFAULT``
    names when it names a line of :data:`LINES` or its pinned release (``3.8``, ``3.8.6``), else the newest line
    of :data:`LINES` (``3.9``) when the variable is unset; ``""`` when the default is no line of :data:`LINES`
    (``debian``, a jar of ``ZKOP_ZOOKEEPER_JAR``, another release). Resolves nothing."""
    raw = os.environ.get("ZKOP_ZOOKEEPER_DEFAULT", "").strip()
    if not raw or raw == DEFAULT:
        return "" if os.environ.get("ZKOP_ZOOKEEPER_JAR") else next(reversed(LINES))
    return next((line for line, release in LINES.items() if raw in (line, release)), "")


def lines_under_test() -> tuple[str, ...]:
    """The servers the ``zookeeper_semantics`` tests run against: ``default`` first, then each line named by
    ``ZKOP_ZOOKEEPER_LINES`` (comma-separated lines of :data:`LINES`, or ``all``) but the default's own
    (:func:`default_line`: its server is the same); ``("default",)`` when unset.

    :raises ZooKeeperLineError: if the variable names a line the project does not list.
    """
    raw = os.environ.get("ZKOP_ZOOKEEPER_LINES", "").strip()
    chosen = list(LINES) if raw == "all" else [line.strip() for line in raw.split(",")
                                                if line.strip() and line.strip() != DEFAULT]
    unknown = [line for line in chosen if line not in LINES]
    if unknown:
        raise ZooKeeperLineError(f"ZKOP_ZOOKEEPER_LINES names {unknown}; the project tests {list(LINES)}")
    return (DEFAULT, *dict.fromkeys(line for line in chosen if line != default_line()))


@functools.cache
def resolve(version: str) -> Path:
    """The cache directory holding ``lib/*.jar`` of ZooKeeper ``version`` (a release such as ``3.5.10``),
    resolved from Maven Central by ``hack/zookeeper-lines.sh`` if missing (about 10 s a line when Maven's
    repository is warm, under a minute for all lines cold; no Maven run when cached).

    :raises ZooKeeperLineError: the script failed (its output is in the message).
    """
    done = subprocess.run(["bash", str(RESOLVE_SCRIPT), version], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ZooKeeperLineError(f"hack/zookeeper-lines.sh {version} failed ({done.returncode}):\n"
                                 f"{done.stderr[-4000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def installation(line: str) -> ZooKeeperInstallation:
    """The ZooKeeper installation for ``line``: ``default`` (:func:`find_zookeeper`), a line of :data:`LINES`
    (``"3.5"``: its listed release) or a release (``"3.5.10"``), resolved into the cache when needed.

    :raises ZooKeeperLineError: if ``line`` is neither, or resolving fails.
    :raises ZooKeeperNotInstalledError: if ``java`` is missing (or Debian's jar, for ``default``).
    """
    if line == DEFAULT:
        return find_zookeeper()  # the newest line, or what ZKOP_ZOOKEEPER_DEFAULT names
    version = LINES.get(line, line)
    match = re.fullmatch(r"(3)\.(\d+)\.\d+", version)
    if match is None:
        raise ZooKeeperLineError(f"not a ZooKeeper line or release: {line!r} (lines: {list(LINES)})")
    java = os.environ.get("ZKOP_JAVA") or shutil.which("java")
    if java is None:
        raise ZooKeeperNotInstalledError("the ZooKeeper test harness needs java on PATH (or ZKOP_JAVA)")
    jars = tuple(sorted(str(jar) for jar in (resolve(version) / "lib").glob("*.jar")))
    return ZooKeeperInstallation(java=java, classpath=jars, name=version,
                                 version=(int(match.group(1)), int(match.group(2))))
