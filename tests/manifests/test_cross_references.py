"""Every cross-reference in zkop's docstrings and in docs/architecture.md names something that exists.

A docstring role (``:func:`x```, ``:class:``, ``:meth:``, ``:mod:``, ``:data:``, ``:attr:``,
``:exc:``) resolves from the module it is written in: a dotted ``zkop.…`` name is imported, a
short one is looked up in the module's names, in the class it is written in, and in the classes
of the module, then as a module of the same package (``.session``). In docs/architecture.md every
``zkop/…`` path must exist and every backticked ``module.name`` naming a zkop module must resolve.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import re
import types
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Heads of ZooKeeperConfig fields (``spec.acl``, ``status.znodeVersion``), which name no module.
FIELDS = {"spec", "status", "metadata"}
ROLE = re.compile(r":(?:func|class|meth|mod|data|attr|exc|obj):`([^`]+)`")


def _target(text: str) -> str:
    match = re.search(r"<([^>]+)>$", text)
    return (match.group(1) if match else text).lstrip("~").removesuffix("()")


def _resolve_dotted(name: str) -> bool:
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = _attr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


def _attr(obj: Any, name: str) -> Any:
    """``getattr``, or a dataclass field / annotated attribute of a class (no class attribute of its own)."""
    if hasattr(obj, name):
        return getattr(obj, name)
    if inspect.isclass(obj):
        for klass in obj.__mro__:
            if name in getattr(klass, "__annotations__", {}) or name in getattr(klass, "__dataclass_fields__", {}):
                return None
            init = klass.__dict__.get("__init__")
            if init is not None and f"self.{name}" in _source(init):
                return None
    raise AttributeError(name)


def _source(func: Any) -> str:
    try:
        return inspect.getsource(func)
    except (OSError, TypeError):
        return ""


def _resolve(name: str, module: types.ModuleType, klass: type | None) -> bool:
    if name.startswith("zkop."):
        return _resolve_dotted(name)
    if name.startswith("."):
        package = module.__name__ if module.__file__ and module.__file__.endswith("__init__.py") \
            else module.__name__.rpartition(".")[0]
        return _resolve_dotted(package + name)
    head, _, rest = name.partition(".")
    scopes: list[Any] = [module, builtins]
    if klass is not None:
        scopes.insert(0, klass)
    scopes += [v for v in vars(module).values() if inspect.isclass(v)]
    for scope in scopes:
        try:
            obj = _attr(scope, head)
            for attr in rest.split(".") if rest else []:
                obj = _attr(obj, attr)
        except AttributeError:
            continue
        return True
    package = module.__name__.rpartition(".")[0]
    return _resolve_dotted(f"{package}.{name}") or _resolve_dotted(f"zkop.{name}") \
        or _external(name)


def _external(name: str) -> bool:
    """Names of the standard library and the dependencies (``threading.Event``, ``KazooState``)."""
    return _resolve_dotted(name)


def _docstrings(path: Path) -> list[tuple[str, str | None, int]]:
    """``(docstring, enclosing class name, line)`` of the module, its classes and functions."""
    tree = ast.parse(path.read_text())
    found: list[tuple[str, str | None, int]] = []

    def visit(node: ast.AST, klass: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                doc = ast.get_docstring(child)
                inner = child.name if isinstance(child, ast.ClassDef) else klass
                if doc:
                    found.append((doc, inner, child.lineno))
                visit(child, inner)
    doc = ast.get_docstring(tree)
    if doc:
        found.append((doc, None, 1))
    visit(tree, None)
    return found


def _docstring_references() -> list[tuple[str, str, str, str | None]]:
    refs = []
    for path in sorted((ROOT / "zkop").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for doc, klass, line in _docstrings(path):
            for match in ROLE.finditer(doc):
                refs.append((f"{path.relative_to(ROOT)}:{line}", module, _target(match.group(1)), klass))
    return refs


def test_every_docstring_reference_resolves() -> None:
    broken = []
    for where, module_name, name, klass_name in _docstring_references():
        module = importlib.import_module(module_name)
        klass = getattr(module, klass_name, None) if klass_name else None
        if not _resolve(name, module, klass if inspect.isclass(klass) else None):
            broken.append(f"{where}: {name}")
    assert broken == []


def _architecture_references() -> tuple[list[str], list[str]]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    spans = re.findall(r"`([^`\n]+)`", text)
    paths = sorted({m for s in spans for m in re.findall(r"\bzkop/[\w/]+(?:\.py)?", s)})
    names = []
    modules = {".".join(p.relative_to(ROOT / "zkop").with_suffix("").parts).removesuffix(".__init__")
               for p in (ROOT / "zkop").rglob("*.py")} - {"__init__"}
    leaves: dict[str, str] = {}
    ambiguous = set()
    for m in sorted(modules):
        leaf = m.rpartition(".")[2]
        if leaf in leaves:
            ambiguous.add(leaf)
        leaves[leaf] = m
    for span in spans:
        if "/" in span or span.endswith(".py"):
            continue
        for name in re.findall(r"\b([a-z_]+(?:\.[A-Za-z_]\w*)+)", span):
            head = name.split(".")[0]
            if head in FIELDS:
                continue
            if f"zkop.{name}".rsplit(".", 1)[0] in {f"zkop.{m}" for m in modules} or head == "zkop":
                names.append(name if head == "zkop" else f"zkop.{name}")
            elif head in ambiguous:
                names.append(f"ambiguous: {name} (qualify it: several zkop modules are called {head})")
            elif head in leaves:
                names.append(f"zkop.{leaves[head]}.{name.partition('.')[2]}")
    return paths, sorted(set(names))


def test_architecture_names_exist() -> None:
    paths, names = _architecture_references()
    assert paths and names  # the check reads what it should
    missing = [p for p in paths if not (ROOT / p).exists()]
    unresolved = [n for n in names if not _resolve_dotted(n)]
    assert (missing, unresolved) == ([], [])


@pytest.mark.parametrize("text, target", [(":func:`~zkop.a.b`", "zkop.a.b"), (":meth:`x <zkop.c.D.e>`", "zkop.c.D.e")])
def test_the_role_syntax_is_read(text: str, target: str) -> None:
    match = ROLE.search(text)
    assert match is not None and _target(match.group(1)) == target


def test_a_wrong_reference_is_found() -> None:
    module = importlib.import_module("zkop.zkconfig.decide")
    assert _resolve("decide_sync", module, None)
    assert not _resolve("decide_acl_drift", module, None)
    assert not _resolve_dotted("zkop.zkconfig.decide.unsynced_path")
