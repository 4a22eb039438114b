"""README's "What a CI run covers" says what ``.ci/run`` does: the builds it waits for before the suite are what a
cold run covers, the builds it leaves to the background are what only the next run adds, and a cold run skips the
Flux tests (``ZKOP_SKIP_FLUX``) and limits the minors (``ZKOP_K8S_MINORS``) exactly as the table says."""

from __future__ import annotations

import re

from zkop_testing.controlplane import REPO

CI = (REPO / ".ci" / "run").read_text(encoding="utf-8")
README = (REPO / "README.md").read_text(encoding="utf-8")


def _table() -> dict[str, tuple[str, str]]:
    """README's coverage table: first cell's first words → (cold run, next run)."""
    section = README[README.index("\n### What a CI run covers\n"):]
    section = section[:section.index("\n### ", 1)]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line][1:]
    table = {}
    for row in rows:
        first, cold, warm = (cell.strip() for cell in row.strip("|").split("|"))
        table[first.split(" (")[0]] = (cold, warm)
    return table


def test_a_cold_run_builds_the_newest_minor_and_helm_and_leaves_the_oldest_and_flux_to_the_background() -> None:
    foreground = re.findall(r"^bin=\$\(hack/control-plane/build\.sh --version (\S+)\)$", CI, re.M)
    background_minors = re.findall(r'cold\+=\("hack/control-plane/build\.sh --version (\S+)"\)', CI)
    assert foreground == ["1.37"] and background_minors == ["1.35"]
    assert 'cold+=("hack/control-plane/build-flux.sh")' in CI
    assert 'cold+=("hack/build-reloader.sh")' in CI and "export ZKOP_SKIP_RELOADER=" in CI
    assert 'cold+=("hack/build-bench-peers.sh")' in CI and "export ZKOP_SKIP_BENCH_PEERS=" in CI
    assert re.search(r"^bin=\$\(hack/build-helm\.sh", CI, re.M)  # Helm is built before the suite, cold or not
    # What the cold run exports while the background builds run: only the foreground minor, no Flux.
    assert f"export ZKOP_K8S_MINORS={foreground[0]}" in CI and "export ZKOP_SKIP_FLUX=" in CI
    # Every minor the control plane is pinned for is built one way or the other.
    pinned = {path.name.removeprefix("kubernetes-") for path in (REPO / "hack" / "control-plane").glob("kubernetes-*")}
    assert pinned == {*foreground, *background_minors}

    table = _table()
    assert table["Kubernetes minors"] == (", ".join(foreground), ", ".join([*foreground, *background_minors]))
    assert table["Flux's controllers"] == ("skipped (`ZKOP_SKIP_FLUX`)", "run")
    assert table["Helm"] == ("run", "run")
    assert table["Stakater Reloader"] == ("skipped (`ZKOP_SKIP_RELOADER`)", "run")
    assert table["The benchmark's Go peer"] == ("skipped (`ZKOP_SKIP_BENCH_PEERS`)", "run")


def test_the_messages_the_table_quotes_are_what_ci_prints() -> None:
    section = README[README.index("\n### What a CI run covers\n"):]
    for quoted in re.findall(r"\(`([^`]+)`, `([^`]+)`\)", section)[0]:
        assert quoted in CI, quoted
    for quoted in ("background build stopped",):
        assert quoted in section and quoted in CI


def test_no_doc_says_every_run_covers_both_minors() -> None:
    """The claim issue 40 found: "every `.ci/run`, 1.35 and 1.37"."""
    for path in (REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))):
        text = " ".join(path.read_text(encoding="utf-8").split())
        assert not re.search(r"1\.35[^.|]*every `\.ci/run`|every `\.ci/run`[^.|]*1\.35 and 1\.37", text), path.name
