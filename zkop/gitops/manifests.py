"""Reading and writing manifest YAML.

Input follows ``kubectl apply -f``: files, directories (walked recursively for
``*.yaml``, ``*.yml`` and ``*.json``; hidden entries such as ``.git`` skipped)
and ``-`` for standard input (e.g. the output of ``kustomize build``). A directory that
holds a kustomization file (given, or met in the walk) is read as Flux reads it: built with
kustomize (:mod:`zkop.gitops.kustomize`), so only what it lists counts. A file
may hold several YAML documents; a document may be a ``List`` (any kind ending
in ``List`` with ``items``). Only ZooKeeperConfig (and ZooKeeperConfigTree, ZooKeeperEnsemble) objects of
zkop's API group are returned; every other object (a Kustomization, a ConfigMap, …) is counted and
ignored.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml

from zkop.gitops.kustomize import KustomizeError, build, is_kustomization_dir
from zkop.zkconfig.spec import GROUP, KIND

#: The cluster-scoped kind ZooKeeperConfigs name in ``spec.ensembleRef`` (:mod:`zkop.ensembles.spec`).
ENSEMBLE_KIND = "ZooKeeperEnsemble"
#: A whole subtree from one object (:mod:`zkop.configtree.spec`).
TREE_KIND = "ZooKeeperConfigTree"

__all__ = [
    "MANIFEST_SUFFIXES",
    "TREE_KIND",
    "LoadProblem",
    "Location",
    "ManifestObject",
    "ManifestSourceError",
    "Manifests",
    "dump_yaml",
    "load_manifests",
    "load_yaml",
]

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
STDIN = "-"

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ManifestSourceError(Exception):
    """An input path cannot be read (missing, unreadable, ``-`` given twice, or a kustomization that
    cannot be built)."""


@dataclass(frozen=True)
class _Build:
    """A directory to build with kustomize (it holds a kustomization file)."""

    directory: Path


@dataclass(frozen=True)
class Location:
    """Where an object was read.

    Attributes:
        source: the file as given (or found in a directory); ``<stdin>`` for ``-``.
        line: 1-based line where the YAML document starts.
        item: index in the ``items`` of a ``List`` document, if it came from one.
    """

    source: str
    line: int
    item: int | None = None

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}"
        return where if self.item is None else f"{where} items[{self.item}]"


@dataclass(frozen=True)
class ManifestObject:
    """One ZooKeeperConfig object as written in a manifest (not validated)."""

    location: Location
    obj: dict[str, Any]

    @property
    def name(self) -> str | None:
        """``metadata.name`` if it is a string."""
        meta = self.obj.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        return name if isinstance(name, str) else None

    @property
    def namespace(self) -> str | None:
        """``metadata.namespace`` if it is a string (``None``: the namespace of the kubectl context)."""
        meta = self.obj.get("metadata")
        namespace = meta.get("namespace") if isinstance(meta, dict) else None
        return namespace if isinstance(namespace, str) else None

    def describe(self) -> str:
        """``ZooKeeperConfig namespace/name`` (``ZooKeeperConfigTree namespace/name``, ``ZooKeeperEnsemble name``)
        for messages."""
        name = self.name or "<no name>"
        kind = self.obj.get("kind") if self.obj.get("kind") in (ENSEMBLE_KIND, TREE_KIND) else KIND
        return f"{kind} {self.namespace}/{name}" if self.namespace else f"{kind} {name}"


@dataclass(frozen=True)
class LoadProblem:
    """A document that could not be read as an object (YAML syntax, not a mapping)."""

    location: Location
    message: str


@dataclass
class Manifests:
    """What :func:`load_manifests` found.

    Attributes:
        objects: ZooKeeperConfig objects in input order.
        problems: unreadable documents.
        ignored: number of other objects (other kinds or API groups).
        files: number of files (and stdin) read.
        sources: the core/v1 ConfigMaps of the input, by ``(kind, namespace, name)`` (namespace
            ``None``: the kubectl context's, as for a ZooKeeperConfig without one), which
            ``spec.dataFrom`` of a ZooKeeperConfig in the same input reads, as it would in the cluster
            the input is applied to. Counted in ``ignored`` too. Secrets are never kept: no Secret
            byte is read or printed offline (in Git they are usually encrypted anyway, e.g. SOPS,
            which Flux decrypts in the cluster).
    """

    objects: list[ManifestObject] = field(default_factory=list)
    #: ZooKeeperEnsemble objects in input order (checked by ``zkop validate``; not counted in ``ignored``).
    ensembles: list[ManifestObject] = field(default_factory=list)
    #: ZooKeeperConfigTree objects in input order (not counted in ``ignored``).
    trees: list[ManifestObject] = field(default_factory=list)
    problems: list[LoadProblem] = field(default_factory=list)
    ignored: int = 0
    files: int = 0
    sources: dict[tuple[str, str | None, str], dict[str, Any]] = field(default_factory=dict)

    def source(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The ``kind`` (``ConfigMap``) ``namespace/name`` of the input, or ``None``."""
        return self.sources.get((kind, namespace, name))


def _walk(directory: Path) -> Iterator[str | _Build]:
    """Manifest files below ``directory`` in path order; a sub-directory with a kustomization is built."""
    if is_kustomization_dir(directory):
        yield _Build(directory)
        return
    found: list[tuple[str, str | _Build]] = []
    for dirpath, dirnames, filenames in os.walk(directory):
        kept = []
        for name in sorted(d for d in dirnames if not d.startswith(".")):
            sub = Path(dirpath, name)
            if is_kustomization_dir(sub):
                found.append((str(sub), _Build(sub)))
            else:
                kept.append(name)
        dirnames[:] = kept
        found.extend(
            (path, path) for path in (os.path.join(dirpath, f) for f in filenames
                                      if not f.startswith(".") and f.endswith(MANIFEST_SUFFIXES))
        )
    for _, source in sorted(found, key=lambda entry: entry[0]):
        yield source


def _expand(paths: Sequence[str]) -> Iterator[str | _Build]:
    seen_stdin = False
    for given in paths:
        if given == STDIN:
            if seen_stdin:
                raise ManifestSourceError("'-' (standard input) can be given only once")
            seen_stdin = True
            yield STDIN
            continue
        path = Path(given)
        if path.is_dir():
            yield from _walk(path)
        elif path.is_file():
            yield given
        else:
            raise ManifestSourceError(f"{given}: no such file or directory")


def _json_documents(text: str, source: str) -> list[tuple[Location, Any]] | None:
    """The JSON values of ``text`` if it is a stream of them, else ``None`` (it is YAML then).

    As apimachinery's ``YAMLOrJSONDecoder`` (``GuessJSONStream``: the first non-space character is
    ``{``) and kubectl read a manifest: a JSON one is decoded as JSON, so ``"\\ud83d\\ude00"`` (how
    ``json.dumps`` writes U+1F600) is one character, which YAML's escapes cannot spell.
    """
    if not text.lstrip().startswith("{"):
        return None
    decoder = json.JSONDecoder()
    found: list[tuple[Location, Any]] = []
    index = 0
    while True:
        while index < len(text) and text[index].isspace():
            index += 1
        if index == len(text):
            return found
        try:
            value, end = decoder.raw_decode(text, index)
        except ValueError:
            return None
        found.append((Location(source, text.count("\n", 0, index) + 1), value))
        index = end


def _documents(text: str, source: str) -> Iterator[tuple[Location, Any]]:
    """Yield ``(location, document)`` for each JSON value of a JSON stream, else each YAML document; a YAML
    syntax error ends the file."""
    as_json = _json_documents(text, source)
    if as_json is not None:
        yield from as_json
        return
    loader = _Loader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            line = node.start_mark.line + 1 if node is not None else 1
            yield Location(source, line), loader.construct_document(node)
    finally:
        loader.dispose()


def _is_ours(obj: dict[str, Any], kind: str = KIND) -> bool:
    api_version = obj.get("apiVersion")
    return obj.get("kind") == kind and isinstance(api_version, str) and api_version.split("/")[0] == GROUP


def _note_source(result: Manifests, obj: dict[str, Any]) -> None:
    """Keep a core/v1 ConfigMap for ``dataFrom`` (see :attr:`Manifests.sources`)."""
    meta = obj.get("metadata")
    if obj.get("apiVersion") != "v1" or obj.get("kind") != "ConfigMap" or not isinstance(meta, dict):
        return
    name, namespace = meta.get("name"), meta.get("namespace")
    if isinstance(name, str) and (namespace is None or isinstance(namespace, str)):
        result.sources[("ConfigMap", namespace, name)] = obj


def _collect(result: Manifests, location: Location, doc: Any) -> None:
    if doc is None:
        return
    if not isinstance(doc, dict):
        result.problems.append(LoadProblem(location, f"document is a {type(doc).__name__}, not an object"))
        return
    kind = doc.get("kind")
    items = doc.get("items")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(items, list):
        for index, item in enumerate(items):
            item_location = Location(location.source, location.line, index)
            if isinstance(item, dict):
                if _is_ours(item):
                    result.objects.append(ManifestObject(item_location, item))
                elif _is_ours(item, ENSEMBLE_KIND):
                    result.ensembles.append(ManifestObject(item_location, item))
                elif _is_ours(item, TREE_KIND):
                    result.trees.append(ManifestObject(item_location, item))
                else:
                    _note_source(result, item)
                    result.ignored += 1
            else:
                result.problems.append(LoadProblem(item_location, "list item is not an object"))
        return
    if _is_ours(doc):
        result.objects.append(ManifestObject(location, doc))
    elif _is_ours(doc, ENSEMBLE_KIND):
        result.ensembles.append(ManifestObject(location, doc))
    elif _is_ours(doc, TREE_KIND):
        result.trees.append(ManifestObject(location, doc))
    else:
        _note_source(result, doc)
        result.ignored += 1


def load_manifests(paths: Sequence[str], stdin: TextIO | None = None) -> Manifests:
    """Read ZooKeeperConfig objects from files, directories and ``-`` (``stdin``, default ``sys.stdin``).

    YAML problems are collected in :attr:`Manifests.problems` (with file and line),
    not raised: a syntax error stops reading that file only.

    A directory holding a kustomization file is built with kustomize (the way Flux builds it); its
    objects are located in the build output (``<dir> (kustomize build):<line>``).

    Raises:
        ManifestSourceError: a path does not exist or cannot be read; a kustomization cannot be
            built (no kustomize/kubectl, or kustomize's own error such as a listed file missing).
    """
    result = Manifests()
    for source in _expand(paths):
        if isinstance(source, _Build):
            name = f"{source.directory} (kustomize build)"
            try:
                text = build(source.directory)
            except KustomizeError as err:
                raise ManifestSourceError(str(err)) from err
        elif source == STDIN:
            name, text = "<stdin>", (stdin or sys.stdin).read()
        else:
            name = source
            try:
                text = Path(source).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as err:
                raise ManifestSourceError(f"{source}: {err}") from err
        result.files += 1
        try:
            for location, doc in _documents(text, name):
                _collect(result, location, doc)
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
            line = mark.line + 1 if mark is not None else 1
            problem = " ".join(str(getattr(err, "problem", None) or err).split())
            result.problems.append(LoadProblem(Location(name, line), f"YAML syntax: {problem}"))
    return result


class _Dumper(yaml.SafeDumper):
    """Block style (``|``) for multi-line strings; the emitter falls back to quoting when a block cannot
    round-trip. PyYAML's own emitter on purpose: libyaml's escapes characters outside the BMP (emoji)."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)


def dump_yaml(obj: Any) -> str:
    """One YAML document, keys in insertion order, UTF-8 text as is, long lines unfolded."""
    text: str = yaml.dump(obj, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=1 << 30,
                          default_flow_style=False)
    return text


def load_yaml(text: str) -> Any:
    """One YAML document, read with the same (safe) loader as manifests."""
    return yaml.load(text, Loader=_Loader)
