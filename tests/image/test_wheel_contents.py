"""The runtime wheel (what the image installs) holds zkop's runtime package and nothing of the tests.

Builds the wheel with pip from a copy of the Docker build context (what ``.dockerignore`` lets
through), as the Dockerfile's first stage does, and reads its file list.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _context(dest: Path) -> Path:
    """The Docker build context (``.dockerignore``'s allow-list) copied to ``dest``: the wheel is built from it."""
    for name in ("pyproject.toml", "README.md", "LICENSE", "constraints.txt"):
        shutil.copy2(REPO / name, dest / name)
    shutil.copytree(REPO / "zkop", dest / "zkop", ignore=shutil.ignore_patterns("__pycache__", "*.py[cod]"))
    return dest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    context = _context(tmp_path_factory.mktemp("context"))
    # Build isolation, as in the Dockerfile: setuptools comes from the package index.
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-cache-dir", "--wheel-dir", str(out), str(context)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (path,) = out.glob("zkop-*.whl")
    return zipfile.ZipFile(path)


def test_wheel_contains_no_test_doubles(wheel: zipfile.ZipFile) -> None:
    names = wheel.namelist()
    top = {n.split("/")[0] for n in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"zkop"}, top
    offending = [n for n in names if "zkop_testing" in n or n.startswith(("tests/", "zkop/testing/"))
                 or "/tests/" in n or "conftest" in n]
    assert offending == [], offending


def test_wheel_contains_every_runtime_module_and_the_crd(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    modules = {str(p.relative_to(REPO)) for p in (REPO / "zkop").rglob("*.py")}
    assert modules - names == set()
    assert "zkop/py.typed" in names
    assert any(n.startswith("zkop/crds/") and n.endswith(".yaml") for n in names)


def test_wheel_metadata_carries_the_license_and_version(wheel: zipfile.ZipFile) -> None:
    import zkop

    (meta,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    text = wheel.read(meta).decode()
    assert f"\nVersion: {zkop.__version__}\n" in text
    assert "Apache-2.0" in text
    assert any(n.endswith("/LICENSE") and ".dist-info/" in n for n in wheel.namelist()), "LICENSE not in the wheel"
