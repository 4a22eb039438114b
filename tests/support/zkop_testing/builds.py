"""Run one of the project's build scripts under ``hack/`` (test and build tooling, a version-keyed cache outside the
repository), each of which prints what it built, or found cached, as its last line."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

__all__ = ["run_build_script"]

_REPO = Path(__file__).resolve().parents[3]


def run_build_script(script: Path, *args: str, error: Callable[[str], Exception],
                     failures: list[str] | None = None) -> Path:
    """The path ``script args`` prints last: built if missing, else from its cache.

    Args:
        failures: where to remember a failed build, so that it is not tried again by every later caller of a
            session (each gets the first failure's message); ``None`` to try each time.

    Raises:
        Exception: ``error(message)``, the message naming the script and holding the end of its stderr.
    """
    if failures:
        raise error(failures[0])
    done = subprocess.run(["bash", str(script), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        command = " ".join([str(script.relative_to(_REPO)), *args])
        message = f"{command} failed ({done.returncode}):\n{done.stderr[-4000:]}"
        if failures is not None:
            failures.append(message)
        raise error(message)
    return Path(done.stdout.strip().splitlines()[-1])
