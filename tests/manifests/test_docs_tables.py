"""The tables of ``docs/operations.md`` checked against the code, so they cannot drift (issue 30).

``tests/manifests/test_docs.py`` checks that every flag and every metric is named somewhere in the guide,
and ``tests/cmd/test_flags.py`` the exit codes. These read the tables themselves: the metrics table's
types and labels against the registry, the flag tables' defaults against the parser, and the
status-reason table and the Event reasons against every ``Outcome`` and ``Event`` the ZooKeeperConfig
code can make (read from its source, so a new reason fails here until it is documented).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import pkgutil
import re
from pathlib import Path

from prometheus_client import REGISTRY, CollectorRegistry
from zkop_testing.kustomize import REPO

import zkop
import zkop.zkconfig
from zkop.cmd.main import build_parser
from zkop.kube.duration import format_duration
from zkop.runtime.cache import Indexer
from zkop.zkconfig.status_metrics import ZooKeeperConfigStatusCollector

OPERATIONS = REPO / "docs" / "operations.md"


def _section(heading: str) -> str:
    """The text of ``docs/operations.md`` under ``heading`` up to the next heading of the same level."""
    text = OPERATIONS.read_text(encoding="utf-8")
    level = heading.split(" ", 1)[0]
    body = text.split(f"\n{heading}\n", 1)[1]
    return re.split(rf"\n{level} ", body, maxsplit=1)[0]


def _rows(section: str) -> list[list[str]]:
    """The cells of each table row in ``section`` (header and separator rows left out)."""
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in section.splitlines() if line.startswith("| ")]
    return [r for r in rows if not set("".join(r)) <= set("-: ") and r[0] not in ("metric", "flag", "reason")]


def _ticked(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


# ---------------------------------------------------------------------------------------------- metrics

def _families() -> dict[str, tuple[str, frozenset[str]]]:
    """Every family zkop exports (every zkop module imported, as ``test_docs`` scans): name → (type, label names)."""
    for module in pkgutil.walk_packages(zkop.__path__, "zkop."):
        importlib.import_module(module.name)  # every metric registered
    registry = CollectorRegistry(auto_describe=True)
    registry.register(ZooKeeperConfigStatusCollector(Indexer()))
    found: dict[str, tuple[str, frozenset[str]]] = {}
    for collector in [*REGISTRY._collector_to_names, *registry._collector_to_names]:  # described, not collected
        describe = getattr(collector, "describe", None)
        families = describe() if describe is not None else collector.collect()
        for family in families:
            if family.name.startswith(("python_", "process_")):
                continue
            name = f"{family.name}_total" if family.type == "counter" else family.name
            # a metric's own label names; a custom collector's family (GaugeMetricFamily) keeps them too
            labels = getattr(collector, "_labelnames", None) or getattr(family, "_labelnames", None)
            if labels is None:
                labels = {k for s in family.samples for k in s.labels if k != "le"}
            found[name] = (family.type, frozenset(labels))
    return found


def test_the_metrics_table_gives_each_metric_its_type_and_labels() -> None:
    families = _families()
    documented: dict[str, tuple[str, frozenset[str]]] = {}
    for cells in _rows(_section("## Metrics, dashboard and alerts")):
        if cells[1] not in ("counter", "gauge", "histogram"):
            continue  # the alerts' table
        names, kind, labels = _ticked(cells[0]), cells[1], cells[2]
        # label names are the ticked words outside parentheses (inside them: example values)
        label_names = frozenset(_ticked(re.sub(r"\([^)]*\)", "", labels)))
        for name in names:
            documented[name] = (kind, label_names)
    assert len(documented) > 40
    unknown = sorted(set(documented) - set(families))
    assert not unknown, f"docs/operations.md lists metrics zkop does not export: {unknown}"
    wrong = {name: {"documented": documented[name], "exported": families[name]} for name in documented
             if documented[name] != families[name]}
    assert not wrong, f"type or labels differ from the code: {wrong}"


# ---------------------------------------------------------------------------------------------- flags

def _run_actions() -> dict[str, argparse.Action]:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    run: argparse.ArgumentParser = sub.choices["run"]
    return {opt: action for action in run._actions for opt in action.option_strings}


def _shown(default: object) -> set[str]:
    """How the guide may write ``default``: as Python prints it, and a duration as Go does."""
    if isinstance(default, bool):
        return {"on" if default else "off", str(default).lower()}
    shown = {str(default)}
    if isinstance(default, (int, float)) and not isinstance(default, bool):
        shown |= {format_duration(float(default)), f"{default:g}"}
    return shown


def test_the_flag_tables_give_each_flag_its_default() -> None:
    """Each row whose default cell starts with one ticked value (or ``on``/``off``) matches the parser's default;
    the rows that describe a fallback (*env*, the pod's namespace, …) are read by ``test_docs`` only."""
    actions = _run_actions()
    checked = 0
    for heading in ("### Kubernetes and ZooKeeper", "### Reconciliation", "### Process, probes, leader election",
                    "### Service bridge", "### Service import"):
        for cells in _rows(_section(heading)):
            flags = [t.split(" ", 1)[0] for t in _ticked(cells[0]) if t.startswith("--")]
            default_cell = cells[1]
            match = re.fullmatch(r"(?:`([^`]*)`|(on|off))(?: \(.*\))?", default_cell)
            if not flags or match is None:
                continue
            written = match.group(1) if match.group(1) is not None else match.group(2)
            for flag in flags:
                action = actions.get(flag)
                if action is None or action.default is None or isinstance(action.default, list):
                    continue
                assert written in _shown(action.default), (flag, written, action.default)
                checked += 1
    assert checked >= 25


# ---------------------------------------------------------------------------------------------- reasons

def _zkconfig_sources() -> list[tuple[Path, ast.Module]]:
    """The ZooKeeperConfig code: ``zkop/zkconfig`` and ``zkop/ensembles`` (the status of an object whose
    ensemble is missing)."""
    package = Path(zkop.zkconfig.__file__).parent
    paths = [*sorted(package.glob("*.py")), *sorted((package.parent / "ensembles").glob("*.py"))]
    return [(path, ast.parse(path.read_text(encoding="utf-8"))) for path in paths]


def _constants(tree: ast.Module) -> dict[str, str]:
    return {t.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
            for t in node.targets if isinstance(t, ast.Name) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)}


def _outcomes() -> dict[str, tuple[str, bool, bool]]:
    """Every ``Outcome(state, reason, message, ready, stalled=…)`` the ZooKeeperConfig code makes:
    reason → (state, ready, stalled)."""
    found: dict[str, tuple[str, bool, bool]] = {}
    for _, tree in _zkconfig_sources():
        constants = _constants(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Outcome"):
                continue
            state, reason, _, ready = node.args[:4]
            if isinstance(reason, ast.Name):
                reason = ast.Constant(constants[reason.id])
            assert isinstance(state, ast.Constant) and isinstance(reason, ast.Constant)
            assert isinstance(ready, ast.Constant)
            stalled = any(k.arg == "stalled" and isinstance(k.value, ast.Constant) and bool(k.value.value)
                          for k in node.keywords)
            entry = (str(state.value), bool(ready.value), stalled)
            assert found.setdefault(str(reason.value), entry) == entry, f"{reason.value!r} made two ways"
    return found


def _normal_event_reasons() -> set[str]:
    """Every reason of an ``Event("Normal", reason, …)`` the ZooKeeperConfig code makes: a literal, or the
    literals of the expression assigned to the name it passes."""
    found: set[str] = set()
    for _, tree in _zkconfig_sources():
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef):
                continue
            assigned = {t.id: node.value for node in ast.walk(function) if isinstance(node, ast.Assign)
                        for t in node.targets if isinstance(t, ast.Name)}
            for node in ast.walk(function):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Event"
                        and isinstance(node.args[0], ast.Constant) and node.args[0].value == "Normal"):
                    continue
                reason = node.args[1]
                if isinstance(reason, ast.Name):
                    reason = assigned[reason.id]
                found |= {c.value for c in ast.walk(reason) if isinstance(c, ast.Constant) and isinstance(c.value, str)
                          and re.fullmatch(r"[A-Z][A-Za-z]+", c.value)}
    return found


def test_the_status_reason_table_is_every_reason_the_code_reports() -> None:
    outcomes = _outcomes()
    section = _section("## Troubleshooting by status reason")
    table = {_ticked(cells[0])[0]: cells for cells in _rows(section)}
    failing = {reason for reason, (state, _, _) in outcomes.items() if state != "Synced"}
    assert set(table) == failing, "the table's reasons and the code's differ"
    for reason, cells in table.items():
        state, _, stalled = outcomes[reason]
        assert cells[1] == state, (reason, cells[1], state)
        assert ("Stalled" in cells[2]) == stalled, (reason, cells[2], stalled)
    successful = re.search(r"Successful reasons for reference: (.*?);", section, re.S)
    assert successful is not None
    assert set(_ticked(successful.group(1))) == {r for r, (state, _, _) in outcomes.items() if state == "Synced"}


def _every_event() -> set[tuple[str, str]]:
    """``(type, reason)`` of every Event zkop sends with a reason written in its source: ``recorder.event(obj,
    type, reason, …)`` and ``Event(type, reason, …)`` calls, the mirror's ``warnings=((reason, …),)``, and the
    ZooKeeperConfig's reasons (:func:`_normal_event_reasons`; its Warnings carry the status reasons)."""
    package = Path(zkop.__file__).parent
    found = {("Normal", reason) for reason in _normal_event_reasons()}
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "attr", getattr(node.func, "id", None))
                args = node.args[1:3] if name == "event" else node.args[:2] if name == "Event" else []
                if len(args) == 2 and all(isinstance(a, ast.Constant) for a in args):
                    found.add((str(args[0].value), str(args[1].value)))  # type: ignore[attr-defined]
            if isinstance(node, ast.keyword) and node.arg == "warnings":
                found |= {("Warning", str(t.elts[0].value)) for t in ast.walk(node.value)
                          if isinstance(t, ast.Tuple) and t.elts and isinstance(t.elts[0], ast.Constant)}
    return found


def test_the_event_table_is_every_event_zkop_sends() -> None:
    table: set[tuple[str, str]] = set()
    for cells in _rows(_section("## Events")):
        if cells[0].startswith("the `Error` reasons"):
            table |= {("Warning", r) for r, (state, _, _) in _outcomes().items() if state == "Error"}
            continue
        table |= {(cells[1], reason) for reason in _ticked(cells[0])}
    zkconfig_warnings = {("Warning", r) for r, (state, _, _) in _outcomes().items() if state == "Error"}
    assert table == _every_event() | zkconfig_warnings


def test_the_normal_event_reasons_are_the_code_s() -> None:
    section = _section("## Troubleshooting by status reason")
    events = re.search(r"; Events (.*?)\.\n", section, re.S)
    assert events is not None
    assert set(_ticked(events.group(1))) == _normal_event_reasons()
