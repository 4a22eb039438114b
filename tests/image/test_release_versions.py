"""One version, carried everywhere; the release files a user adopts are there and say the same.

The version is written once, in ``pyproject.toml``; ``zkop.__version__`` reads the installed
metadata; ``hack/set-version.sh`` carries it to the Dockerfile's ``VERSION`` default and the
kustomize ``newTag`` and the Helm chart's ``version``/``appVersion``; the release workflow tags the
image with it (docs/release.md).
"""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml
from zkop_testing.releases import releases, upgrade_steps
from zkop_testing.zookeeper_lines import LINES, default_line

import zkop

REPO = Path(__file__).resolve().parents[2]
SEMVER = re.compile(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?")
PLACES = ("pyproject.toml", "Dockerfile", "manifests/default/kustomization.yaml", "charts/zkop/Chart.yaml")


def versions(root: Path) -> dict[str, str]:
    """The version each place states, under ``root`` (a checkout or a copy of its version files)."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]
    (arg,) = re.findall(r"^ARG VERSION=(\S+)$", (root / "Dockerfile").read_text(), re.MULTILINE)
    kustomization = yaml.safe_load((root / "manifests/default/kustomization.yaml").read_text())
    (image,) = [i for i in kustomization["images"] if i["name"] == "ghcr.io/example/zkop"]
    chart = yaml.safe_load((root / "charts/zkop/Chart.yaml").read_text())
    return {"pyproject.toml": project, "Dockerfile ARG VERSION": arg, "kustomize newTag": str(image["newTag"]),
            "Chart.yaml version": str(chart["version"]), "Chart.yaml appVersion": str(chart["appVersion"])}


def test_the_version_is_semantic_and_agrees_everywhere() -> None:
    found = versions(REPO)
    assert SEMVER.fullmatch(found["pyproject.toml"]), found
    assert set(found.values()) == {found["pyproject.toml"]}, found
    assert zkop.__version__ == found["pyproject.toml"], "stale editable install: run hack/setup-venv.sh"


def test_the_manifests_run_the_release_image() -> None:
    kustomization = yaml.safe_load((REPO / "manifests/default/kustomization.yaml").read_text())
    (image,) = kustomization["images"]
    assert "newName" not in image, "the owner is the user's choice (README overlay) or the release's install.yaml"
    assert "digest" not in image
    if shutil.which("kubectl"):
        rendered = subprocess.run(["kubectl", "kustomize", str(REPO / "manifests/default")], capture_output=True,
                                  text=True, check=True, timeout=60).stdout
        assert re.findall(r"image: (\S+)", rendered) == [f"ghcr.io/example/zkop:{zkop.__version__}"]


def test_set_version_carries_one_version_everywhere(tmp_path: Path) -> None:
    for place in (*PLACES, "hack/set-version.sh"):
        (tmp_path / place).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / place, tmp_path / place)
    done = subprocess.run(["bash", str(tmp_path / "hack/set-version.sh"), "1.2.3-rc.1"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert set(versions(tmp_path).values()) == {"1.2.3-rc.1"}
    for place in PLACES:  # nothing else in those files changed
        before, after = (REPO / place).read_text(), (tmp_path / place).read_text()
        assert len(before.splitlines()) == len(after.splitlines()), place
        changed = sum(a != b for a, b in zip(before.splitlines(), after.splitlines(), strict=True))
        assert changed == (2 if place == "charts/zkop/Chart.yaml" else 1), place  # version and appVersion
    bad = subprocess.run(["bash", str(tmp_path / "hack/set-version.sh"), "v1.2"], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2


def test_changelog_keeps_a_changelog_with_this_version() -> None:
    text = (REPO / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", text, re.MULTILINE)
    assert headings[0] == ("Unreleased", "")
    released = [v for v, _ in headings[1:]]
    assert zkop.__version__ in released, "CHANGELOG.md has no section for the current version"
    assert all(SEMVER.fullmatch(v) and date for v, date in headings[1:]), headings
    for version in ("Unreleased", *released):
        assert re.search(rf"^\[{re.escape(version)}\]: https://", text, re.MULTILINE), f"no link for {version}"
    for kind in re.findall(r"^### (.+)$", text, re.MULTILINE):
        assert kind in ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security") or \
            re.fullmatch(r"Upgrading from \d+\.\d+\.\d+", kind), kind


def test_every_release_is_in_the_releases_table_with_its_commit() -> None:
    """docs/release.md's table names every CHANGELOG release, newest first, with the commit git knows (a clean clone
    may have no tags) or ``pending`` for the release being merged; only the newest may be pending."""
    text = (REPO / "CHANGELOG.md").read_text()
    released = re.findall(r"^## \[(\d[^\]]*)\] - (\d{4}-\d{2}-\d{2})$", text, re.MULTILINE)
    table = releases()
    assert [(r.version, r.date) for r in table] == released
    assert table[0].version == zkop_version_in_pyproject()
    assert all(r.commit is not None for r in table[1:]), "only the newest release may be pending"
    for row in table:
        if row.commit is not None:
            kind = subprocess.run(["git", "-C", str(REPO), "cat-file", "-t", row.commit], capture_output=True,
                                  text=True, timeout=30, check=False).stdout.strip()
            assert kind == "commit", f"{row.version}: {row.commit} is not a commit of this repository"
            pyproject = subprocess.run(["git", "-C", str(REPO), "show", f"{row.commit}:pyproject.toml"],
                                       capture_output=True, text=True, timeout=30, check=True).stdout
            assert tomllib.loads(pyproject)["project"]["version"] == row.version, row


def test_each_release_after_the_first_says_how_to_upgrade_from_the_one_before() -> None:
    """Each release section after the first has "Upgrading from <the release before>" as numbered steps that
    ``zkop_testing.releases.upgrade_steps`` reads (a bold title each; commands in ``sh`` blocks)."""
    table = releases()
    for newer, older in itertools.pairwise(table):
        text = (REPO / "CHANGELOG.md").read_text()
        section = text[text.index(f"## [{newer.version}]"):text.index(f"## [{older.version}]")]
        assert f"\n### Upgrading from {older.version}\n" in section, newer.version
        steps = upgrade_steps(older.version)
        assert steps and any(step.commands for step in steps)
        assert any("kubectl apply -k" in command for step in steps for command in step.commands)


def zkop_version_in_pyproject() -> str:
    """``pyproject.toml``'s version."""
    return str(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"])


def test_license_is_the_apache_license_pyproject_names() -> None:
    assert tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["license"] == {"text": "Apache-2.0"}
    text = (REPO / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    canonical = Path("/usr/share/common-licenses/Apache-2.0")
    if canonical.exists():
        assert text == canonical.read_text()


def test_security_policy_says_how_to_report_and_what_is_supported() -> None:
    text = (REPO / "SECURITY.md").read_text()
    assert "## Reporting a vulnerability" in text and "## Supported versions" in text
    minor = ".".join(zkop.__version__.split(".")[:2])
    assert re.search(rf"^\| {re.escape(minor)}\.x\s*\| yes", text, re.MULTILINE), "current minor not supported?"


def test_readme_installs_the_published_image_and_lists_supported_versions() -> None:
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Running in a real cluster"):readme.index("## Development")]
    first = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert first is not None
    block = first.group(1)
    assert "kubectl apply -k manifests/default" not in block, "that applies the placeholder image name"
    assert "newName: ghcr.io/$OWNER/zkop" in block
    assert "### Supported versions" in section
    for row in ("| Kubernetes |", "| ZooKeeper |", "| Python |"):
        assert row in section, row
    e2e = (REPO / ".github/workflows/e2e.yaml").read_text()
    (node,) = re.findall(r"KIND_NODE_IMAGE: kindest/node:v(\d+\.\d+)", e2e)
    (row,) = [line for line in section.splitlines() if line.startswith("| Kubernetes |")]
    assert f"{node} (`kindest/node:v{node}" in row, "the table must name the Kubernetes version the kind suite runs"


def test_the_zookeeper_lines_called_tested_are_the_ones_ci_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """README's ZooKeeper row calls a release tested only if ``.ci/run`` runs the ``zookeeper_semantics`` set on
    its line (``ZKOP_ZOOKEEPER_LINES``) and resolves it (``hack/zookeeper-lines.sh``); the releases are the ones
    ``tests/support/zookeeper-lines/versions`` pins, and the one it says runs the whole suite is the harness's
    default (the newest line, :func:`zkop_testing.zookeeper_lines.default_line`)."""
    readme = (REPO / "README.md").read_text()
    (row,) = [line for line in readme.splitlines() if line.startswith("| ZooKeeper |")]
    tested = row.split("|")[2]
    pinned = [line.split()[1] for line in (REPO / "tests/support/zookeeper-lines/versions").read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    claimed = re.findall(r"\b3\.\d+\.\d+\b", tested)
    assert set(claimed) == set(pinned), claimed
    monkeypatch.delenv("ZKOP_ZOOKEEPER_DEFAULT", raising=False)
    monkeypatch.delenv("ZKOP_ZOOKEEPER_JAR", raising=False)
    whole_suite = tested.split("the whole test suite")[0]
    assert re.findall(r"\b3\.\d+\.\d+\b", whole_suite) == [LINES[default_line()]] == pinned[-1:], whole_suite
    ci = (REPO / ".ci/run").read_text()
    (lines,) = re.findall(r"^export ZKOP_ZOOKEEPER_LINES=(\S+)$", ci, re.MULTILINE)
    assert lines == "all" or set(lines.split(",")) == {v.rsplit(".", 1)[0] for v in pinned}, lines
    assert "hack/zookeeper-lines.sh" in ci


def test_release_workflow_builds_smokes_publishes_and_scans() -> None:
    workflow = yaml.safe_load((REPO / ".github/workflows/release.yaml").read_text())
    on = workflow[True]  # PyYAML reads the key `on` as a boolean
    assert on["push"]["tags"] == ["v[0-9]+.[0-9]+.[0-9]+*"]
    jobs = workflow["jobs"]
    platforms = {m["platform"] for m in jobs["smoke"]["strategy"]["matrix"]["include"]}
    assert platforms == {"linux/amd64", "linux/arm64"}
    smoke_runs = " ".join(s.get("run", "") for s in jobs["smoke"]["steps"])
    assert "hack/image-smoke.sh --image docker-daemon:zkop:smoke" in smoke_runs
    assert any(str(s.get("uses", "")).startswith("aquasecurity/trivy-action") for s in jobs["smoke"]["steps"])
    assert set(jobs["publish"]["needs"]) >= {"smoke"} and jobs["publish"]["if"] == "github.ref_type == 'tag'"
    (push,) = [s for s in jobs["publish"]["steps"] if str(s.get("uses", "")).startswith("docker/build-push-action")]
    assert push["with"]["platforms"] == "linux/amd64,linux/arm64"
    assert push["with"]["push"] is True and push["with"]["sbom"] is True
    assert push["with"]["provenance"] == "mode=max"
    assert jobs["publish"]["permissions"] == {"contents": "read", "packages": "write"}
    assert workflow["permissions"] == {"contents": "read"}


@pytest.mark.parametrize("doc", ["docs/release.md"])
def test_release_procedure_is_documented(doc: str) -> None:
    text = (REPO / doc).read_text()
    for needle in ("hack/set-version.sh", "git tag -a v", "CHANGELOG.md", "hack/image-smoke.sh",
                   "provenance", "SBOM"):
        assert needle in text, needle
