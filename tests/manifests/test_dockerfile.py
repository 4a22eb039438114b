"""Static checks of ``Dockerfile``, ``.dockerignore`` and ``constraints.txt`` (no Docker engine needed).

CI builds the image for real and runs it (``.github/workflows/ci.yaml``, job ``image``, and
``hack/image-smoke.sh``, which ``tests/image/test_image_smoke.py`` runs here); these tests keep the
properties the Deployment relies on: a numeric non-root user, ``zkop run`` as the default
command, pinned bases and pinned dependencies.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from importlib import metadata

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from zkop_testing.kustomize import REPO, containers, find, render

DOCKERFILE = REPO / "Dockerfile"
COMPILERS = re.compile(r"\b(gcc|g\+\+|clang|build-essential|make|cmake|[\w.+-]+-dev)\b")


@dataclass
class Stage:
    """One ``FROM`` stage: its base image, optional name and instructions ``(KEYWORD, arguments)``."""

    image: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        """The arguments of every ``keyword`` instruction in this stage."""
        return [args for kw, args in self.instructions if kw == keyword]


def parse_dockerfile(text: str) -> list[Stage]:
    """Split a Dockerfile into stages, joining continuation lines and resolving global ``ARG`` defaults in ``FROM``."""
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    assert not pending, "dangling line continuation"
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical:
        keyword, _, args = line.partition(" ")
        keyword, args = keyword.upper(), args.strip()
        if keyword == "FROM":
            parts = [p for p in args.split() if not p.startswith("--")]
            image = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: global_args[m.group(1) or m.group(2)], parts[0])
            name = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else None
            stages.append(Stage(image, name))
        elif not stages:
            assert keyword == "ARG", f"only ARG may precede FROM, found {keyword}"
            key, _, default = args.partition("=")
            global_args[key] = default
        else:
            stages[-1].instructions.append((keyword, args))
    return stages


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    """The Dockerfile's stages."""
    return parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8"))


def _env(stage: Stage) -> dict[str, str]:
    env: dict[str, str] = {}
    for args in stage.all("ENV"):
        for key, value in re.findall(r"(\w+)=(\"[^\"]*\"|\S+)", args):
            env[key] = value.strip('"')
    return env


def test_parser_handles_continuations_and_args() -> None:
    parsed = parse_dockerfile("# c\nARG B=x:1\nFROM ${B} AS one\nRUN a \\\n  # inner\n  && b\nFROM one\nUSER 1\n")
    assert [(s.image, s.name) for s in parsed] == [("x:1", "one"), ("one", None)]
    assert parsed[0].instructions == [("RUN", "a  && b")]


def test_multi_stage_build_from_pinned_python_slim(stages: list[Stage]) -> None:
    assert len(stages) >= 2
    names = {s.name for s in stages if s.name}
    for stage in stages:
        if stage.image in names:
            continue
        repo, sep, tag = stage.image.rpartition(":")
        assert sep and "/" not in tag, f"{stage.image}: pin the base image by tag"
        assert tag != "latest" and "@" not in repo
        assert re.fullmatch(r"3\.11\.\d+-slim-\w+", tag), f"{stage.image}: want python:3.11.<patch>-slim-<debian>"
        assert repo == "python"
    assert stages[0].image == stages[-1].image, "build and runtime stages must share the interpreter"


def test_first_stage_builds_wheels_with_constraints(stages: list[Stage]) -> None:
    runs = " ".join(stages[0].all("RUN"))
    assert "pip wheel" in runs
    assert "-c constraints.txt" in runs
    assert any("constraints.txt" in c for c in stages[0].all("COPY"))


def test_final_stage_installs_the_wheel_with_constraints(stages: list[Stage]) -> None:
    final = stages[-1]
    (install,) = [r for r in final.all("RUN") if "pip install" in r]
    assert "--no-cache-dir" in install
    assert re.search(r"-c \S*constraints\.txt", install)
    assert f"from={stages[0].name}" in install or any(f"--from={stages[0].name}" in c for c in final.all("COPY"))
    assert "--no-index" in install, "the final stage installs only the wheels built in the first stage"


def test_no_compilers_in_final_stage(stages: list[Stage]) -> None:
    final = stages[-1]
    assert final.image.split(":")[1].count("slim")
    for run in final.all("RUN"):
        if "apt-get install" in run or "apk add" in run:
            assert not COMPILERS.search(run), run


def test_runs_as_numeric_non_root_user(stages: list[Stage]) -> None:
    users = stages[-1].all("USER")
    assert users, "the final stage must set USER"
    user, _, group = users[-1].partition(":")
    assert user.isdigit() and int(user) != 0, "USER must be numeric (runAsNonRoot cannot check names)"
    assert not group or (group.isdigit() and int(group) != 0)
    (dep,) = find(render(REPO / "manifests" / "default"), "Deployment")
    for container in containers(dep):
        assert container["securityContext"]["runAsUser"] == int(user)


def test_entrypoint_and_cmd(stages: list[Stage]) -> None:
    final = stages[-1]
    assert json.loads(final.all("ENTRYPOINT")[-1]) == ["zkop"]
    assert json.loads(final.all("CMD")[-1]) == ["run"]
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["zkop"] == "zkop.cmd.main:main"


def test_python_environment(stages: list[Stage]) -> None:
    env = _env(stages[-1])
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["PYTHONUNBUFFERED"] == "1"


def test_oci_labels(stages: list[Stage]) -> None:
    text = " ".join(stages[-1].all("LABEL"))
    labels = dict(re.findall(r"(org\.opencontainers\.image\.[\w.]+)=\"([^\"]*)\"", text))
    for key in ("title", "description", "version", "revision", "source", "licenses"):
        assert f"org.opencontainers.image.{key}" in labels, key
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert labels["org.opencontainers.image.licenses"] == project["license"]["text"]
    version_arg = [a for a in stages[-1].all("ARG") if a.startswith("VERSION=")]
    assert version_arg == [f"VERSION={project['version']}"]


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    """A ``.dockerignore`` pattern (Go ``filepath.Match`` plus ``**``) as a regular expression."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        elif pattern[i] == "[":
            end = pattern.index("]", i)
            out, i = out + pattern[i : end + 1], end + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out)


def _dockerignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parent directories decides."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    ignored = False
    for raw in patterns:
        negate = raw.startswith("!")
        regex = _pattern_regex((raw[1:] if negate else raw).strip("/"))
        if any(regex.fullmatch(p) for p in prefixes):
            ignored = not negate
    return ignored


def test_build_context(stages: list[Stage]) -> None:
    patterns = [ln.strip() for ln in (REPO / ".dockerignore").read_text().splitlines()
                if ln.strip() and not ln.startswith("#")]
    for source in ("pyproject.toml", "README.md", "LICENSE", "constraints.txt", "zkop/cmd/main.py",
                   "zkop/runtime/metrics.py"):
        assert not _dockerignored(source, patterns), source
    for excluded in (".venv/bin/python", ".git/HEAD", "tests/conftest.py", "zkop/__pycache__/cli.cpython-311.pyc",
                     ".pytest-kind/x/kubeconfig", "hack/demo.sh", "tests/support/zkop_testing/apiserver.py",
                     "zkop.egg-info/PKG-INFO"):
        assert _dockerignored(excluded, patterns), excluded
    for stage in stages:
        for copy in stage.all("COPY"):
            if "--from" in copy:
                continue
            for source in copy.split()[:-1]:
                assert (REPO / source).exists(), source
                assert not _dockerignored(source, patterns), source


# --------------------------------------------------------------------------------------------
# constraints.txt
# --------------------------------------------------------------------------------------------


def _constraints() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        assert sep and re.fullmatch(r"[\w.+!-]+", version), f"not an exact pin: {line}"
        key = canonicalize_name(name)
        assert key not in pins, f"pinned twice: {name}"
        pins[key] = version
    return pins


def _runtime_closure() -> dict[str, str]:
    """Installed version of every distribution zkop needs at run time (its dependencies, recursively)."""
    env = {**{k: str(v) for k, v in default_environment().items()}, "extra": ""}
    found: dict[str, str] = {}
    todo = [Requirement(r) for r in metadata.requires("zkop") or []]
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        key = canonicalize_name(req.name)
        if key in found:
            continue
        dist = metadata.distribution(req.name)
        found[key] = dist.version
        todo += [Requirement(r) for r in dist.requires or []]
    return found


def test_constraints_pin_exactly_the_runtime_dependencies() -> None:
    pins = _constraints()
    closure = _runtime_closure()
    assert sorted(set(closure) - set(pins)) == [], "runtime dependencies missing from constraints.txt"
    assert sorted(set(pins) - set(closure)) == [], "constraints.txt pins packages zkop no longer needs"


def test_constraints_are_what_the_tests_run_with() -> None:
    pins = _constraints()
    closure = _runtime_closure()
    differ = {name: (pins[name], closure[name]) for name in pins if pins[name] != closure.get(name)}
    assert not differ, f"constraints.txt (pinned, installed) differ; refresh it from pip freeze: {differ}"


def test_constraints_satisfy_pyproject() -> None:
    pins = _constraints()
    for spec in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]:
        req = Requirement(spec)
        assert req.specifier.contains(pins[canonicalize_name(req.name)]), spec
