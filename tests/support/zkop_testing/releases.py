"""zkop's releases as docs/release.md and CHANGELOG.md name them, for the tests that upgrade from one.

- :func:`releases`: docs/release.md's "Releases" table, newest first: each version, its date and the commit that
  released it. A clean clone may carry no git tags, so the commit is read from the table, never from a tag. A
  release merged but not yet recorded says ``pending`` there (the lead fills the hash in after the merge): its tree
  is then this working tree.
- :func:`release_tree`: a release's files (``git archive`` of its commit, or this working tree's for a pending one).
- :func:`upgrade_steps`: the numbered steps of CHANGELOG.md's "Upgrading from X.Y.Z" list, each with its title and
  its ``sh`` blocks, so a test runs them as a person reads them.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PENDING", "Release", "Step", "for_install", "newest_release_with", "numbered_steps", "release",
           "release_tree", "releases", "upgrade_steps"]

REPO = Path(__file__).resolve().parents[3]
#: What docs/release.md's commit column says of a release whose merge commit is not recorded yet.
PENDING = "pending"
_ROW = re.compile(r"^\| (?P<version>\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?) \| (?P<date>\d{4}-\d{2}-\d{2}) \| "
                  r"(?:`(?P<commit>[0-9a-f]{40})`|(?P<pending>pending)\b[^|]*) \|$")


@dataclass(frozen=True)
class Release:
    """One row of docs/release.md's "Releases" table; ``commit`` is ``None`` while the row says ``pending``."""

    version: str
    date: str
    commit: str | None


@dataclass(frozen=True)
class Step:
    """One numbered step of a CHANGELOG "Upgrading from" list: its number, its bold title, its whole text and the
    ``sh`` blocks in it (each as written, the indentation of the list removed)."""

    number: int
    title: str
    text: str
    commands: tuple[str, ...]


def _section(text: str, heading: str) -> str:
    """The text under ``heading`` (a whole line) up to the next heading of the same or a higher level.

    Raises:
        ValueError: ``heading`` is not in ``text``.
    """
    level = len(heading) - len(heading.lstrip("#"))
    start = text.index(f"\n{heading}\n") + len(heading) + 2
    end = re.compile(rf"^#{{1,{level}}} ", re.M).search(text, start)
    return text[start:end.start() if end else len(text)]


def releases(root: Path = REPO) -> list[Release]:
    """docs/release.md's "Releases" table under ``root``, newest first.

    Raises:
        ValueError: the section is missing, or a row is not ``| X.Y.Z | YYYY-MM-DD | `<40 hex>` or pending |``.
    """
    section = _section((root / "docs" / "release.md").read_text(encoding="utf-8"), "## Releases")
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| version")
            and not line.startswith("| ---")]
    found = []
    for row in rows:
        match = _ROW.match(row)
        if match is None:
            raise ValueError(f"docs/release.md: a release row must read | X.Y.Z | date | `commit` or pending |: {row}")
        found.append(Release(match["version"], match["date"], match["commit"]))
    if not found:
        raise ValueError("docs/release.md: the Releases table is empty")
    return found


def release(version: str, root: Path = REPO) -> Release:
    """The row of ``version``.

    Raises:
        LookupError: the table has no such release.
    """
    for found in releases(root):
        if found.version == version:
            return found
    raise LookupError(f"docs/release.md names no release {version}")


def release_tree(version: str, directory: Path, paths: tuple[str, ...]) -> Path:
    """``paths`` of release ``version`` under ``directory`` (made here): ``git archive`` of its commit, or, for a
    pending release, a copy of this working tree's (which is that release until the lead records its commit).

    Raises:
        LookupError: no such release; subprocess.CalledProcessError: git could not read the commit.
    """
    commit = release(version).commit
    directory.mkdir(parents=True)
    if commit is None:
        for path in paths:
            source = REPO / path
            if source.is_dir():
                shutil.copytree(source, directory / path, symlinks=True)
            else:
                shutil.copy2(source, directory / path)
        return directory
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, *paths], capture_output=True, check=True,
                             timeout=60).stdout
    subprocess.run(["tar", "-x", "-C", str(directory)], input=archive, check=True, timeout=60)
    return directory


def newest_release_with(path: str) -> Release | None:
    """The newest release whose tree holds ``path`` (a pending one: this working tree), or ``None``."""
    for found in releases():
        if found.commit is None:
            if (REPO / path).exists():
                return found
            continue
        listed = subprocess.run(["git", "-C", str(REPO), "ls-tree", "--name-only", found.commit, path],
                                capture_output=True, text=True, check=True, timeout=60).stdout
        if listed.strip():
            return found
    return None


def numbered_steps(path: Path, heading: str) -> list[Step]:
    """The numbered list under ``heading`` (a whole line, e.g. ``## Uninstall``) of the Markdown file ``path``: each
    item ``N. **Title.** …`` with its ``sh`` blocks (indented under it), in order; the list ends at the first line
    that is not indented.

    Raises:
        ValueError: the section is missing, its items are not numbered 1, 2, … or an item has no bold title.
    """
    section = _section(path.read_text(encoding="utf-8"), heading)
    items = re.split(r"^(?=\d+\. )", section, flags=re.M)[1:]
    steps = []
    for expected, whole in enumerate(items, start=1):
        item = re.split(r"\n(?=\S)", whole, maxsplit=1)[0]  # the list ends at the first line not indented
        head = re.match(r"(\d+)\. \*\*(.+?)\*\*", item)
        if head is None or int(head[1]) != expected:
            raise ValueError(f"{path.name}, {heading}: item {expected} must start '{expected}. **Title.**': "
                             f"{item[:80]!r}")
        blocks = re.findall(r"^( *)```sh\n(.*?)^\1```$", item, flags=re.M | re.S)
        commands = tuple("\n".join(line[len(indent):] for line in body.splitlines()) for indent, body in blocks)
        steps.append(Step(expected, head[2].rstrip("."), item.strip(), commands))
    if not steps:
        raise ValueError(f"{path.name}, {heading}: no numbered steps")
    return steps


def upgrade_steps(previous: str, root: Path = REPO) -> list[Step]:
    """The steps of CHANGELOG.md's "### Upgrading from ``previous``" under ``root``, in order.

    Raises:
        ValueError: as :func:`numbered_steps`.
    """
    return numbered_steps(root / "CHANGELOG.md", f"### Upgrading from {previous}")


def for_install(commands: tuple[str, ...], install: str) -> list[str]:
    """The blocks of ``commands`` that apply to ``install`` (``kustomize``, ``Helm`` or ``Flux``): a block whose
    first line is a comment naming installs (``# Helm and Flux``) only for those, every other block for all."""
    chosen = []
    for block in commands:
        first = block.splitlines()[0] if block else ""
        label = re.fullmatch(r"# ((?:kustomize|Helm|Flux)(?:(?:, | and )(?:kustomize|Helm|Flux))*)", first)
        if label is None or install in re.split(r", | and ", label[1]):
            chosen.append(block)
    return chosen
