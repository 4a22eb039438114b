"""docs/security.md: every threat names the test that shows it stopped (a file and a function that exist), or says
**open**; and every reserved root the gate keeps is in the page."""

from __future__ import annotations

import ast
import re

from zkop_testing.kustomize import REPO

from zkop.feature.gate import reserved_roots

DOC = (REPO / "docs" / "security.md").read_text(encoding="utf-8")


def _rows() -> list[list[str]]:
    section = DOC.split("\n## Threats\n", 1)[1]
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in section.splitlines()
            if line.startswith("| ") and not line.startswith("| threat") and not line.startswith("|---")]


def _functions(path: str) -> set[str]:
    tree = ast.parse((REPO / path).read_text(encoding="utf-8"))
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}


def test_every_threat_names_a_test_that_exists_or_says_open() -> None:
    rows = _rows()
    assert len(rows) >= 10
    for threat, stop, test in rows:
        if "**open**" in stop:
            assert test == "—", threat
            continue
        named = re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+))?`", test)
        assert named, (threat, test)
        for path, function in named:
            assert (REPO / path).is_file(), path
            if function:
                assert function in _functions(path), f"{path}::{function}"


def test_the_page_names_every_reserved_root() -> None:
    for root in reserved_roots(registry_root="/zkop/owners", probe_root="/zkop/probe",
                               bridge_root="/kubernetes/services", import_root="/import"):
        if root.path != "/import":
            assert f"`{root.path}`" in DOC, root.path
