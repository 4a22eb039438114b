"""README's service format table: a row per format the bridge or the importer knows, each cell naming the tests that
show it (a file and a function that exist, a parametrized one with a case id) or saying it is not there yet."""

from __future__ import annotations

import ast
import re

from zkop_testing.kustomize import REPO

from zkop.services.bridge.formats import FORMATS

README = (REPO / "README.md").read_text(encoding="utf-8")


def _rows() -> list[list[str]]:
    start = README.index("| format | Kubernetes → ZooKeeper (bridge) | ZooKeeper → Kubernetes (importer) |")
    lines = README[start:].split("\n\n", 1)[0].splitlines()[2:]
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines]


def _functions(path: str) -> set[str]:
    tree = ast.parse((REPO / path).read_text(encoding="utf-8"))
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}


def test_every_cell_names_tests_that_exist_or_says_not_yet() -> None:
    rows = _rows()
    named_formats = {m.group(1) for fmt, *_ in rows if (m := re.match(r"`(\w+)`", fmt)) is not None}
    assert named_formats == set(FORMATS)
    for fmt, *cells in rows:
        assert len(cells) == 2, fmt
        for cell in cells:
            # A parametrized test may be named with its case's id: `tests/…::test_x[ID]`.
            named = re.findall(r"`(tests/[\w/]+\.py)::(\w+)(?:\[[\w.-]+\])?`", cell)
            assert named or "not written yet" in cell, (fmt, cell)
            for path, function in named:
                assert (REPO / path).is_file(), path
                assert function in _functions(path), f"{path}::{function}"
