"""``zkop validate``: manifests against the CRD schema and zkop's own rules, offline.

A ZooKeeperConfigTree is checked by :func:`check_tree` (its CRD's schema, the tree's spec rules and expansion);
across objects, no child path declared by two trees or by a tree and a ZooKeeperConfig.

Per ZooKeeperConfig, after the CRD's defaults: the ``apiVersion``; ``metadata.name`` a DNS-1123
subdomain and ``namespace`` a label (Kubernetes "Object Names and IDs"); the CRD's schema
(:mod:`zkop.gitops.schema`, CEL rules not evaluated); :func:`zkop.zkconfig.spec.parse_spec`, which
states every CEL rule too. A ``dataFrom`` ConfigMap in the same input is resolved from it; other
references are checked, their bytes are not. Across objects: no path declared twice, no
``namespace/name`` defined twice.

Undeclared fields are errors (``strict``), as server-side apply (Flux) and ``kubectl apply
--validate=strict`` treat them; with ``--no-strict`` warnings, for ``kubectl --validate=false``,
where the API server prunes them. ``diff`` and ``sync`` run the same checks first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from zkop.configtree import spec as tree_spec
from zkop.ensembles.spec import InvalidEnsemble, parse_ensemble
from zkop.feature.gate import Gate, probe_root, reserved_roots
from zkop.gitops.manifests import Location, ManifestObject, Manifests
from zkop.gitops.names import is_dns1123_label, is_dns1123_subdomain
from zkop.gitops.schema import SchemaChecker, load_ensemble_crd_schema, load_tree_crd_schema
from zkop.ownership.registry import DEFAULT_REGISTRY_ROOT
from zkop.zkconfig.objects import ensemble_of
from zkop.zkconfig.refs import ref_data
from zkop.zkconfig.spec import (
    DEFAULT_MAX_DATA_BYTES,
    GROUP,
    KIND,
    VERSION,
    DataRef,
    DesiredZnode,
    InvalidSpec,
    parse_spec,
)

__all__ = ["CheckedObject", "CheckedTree", "Problem", "Validation", "check_tree", "validate_manifests"]

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    """One problem: where, which object, which field, which rule.

    Attributes:
        location: ``file:line`` (plus ``items[i]`` inside a List).
        object: ``ZooKeeperConfig namespace/name``; empty for unreadable documents.
        field: e.g. ``spec.data``; empty when the whole document is concerned.
        rule: the rule broken, as a sentence.
        severity: ``error`` (validation fails) or ``warning``.
        order: sort key (file, line, list item) so problems print in file order.
    """

    location: str
    object: str
    field: str
    rule: str
    severity: Severity = "error"
    order: tuple[str, int, int] = dataclasses.field(default=("", 0, 0), compare=False, repr=False)

    def __str__(self) -> str:
        parts = [self.location, self.object, self.field, self.rule]
        line = ": ".join(p for p in parts if p)
        return f"warning: {line}" if self.severity == "warning" else line

    def to_json(self) -> dict[str, str]:
        """The problem as a JSON object with the attribute names as keys."""
        return {"location": self.location, "object": self.object, "field": self.field, "rule": self.rule,
                "severity": self.severity}


@dataclass(frozen=True)
class CheckedObject:
    """A ZooKeeperConfig object that passed every check.

    Attributes:
        manifest: the object as read.
        path: ``spec.path``.
        desired: the parsed spec; ``None`` when the data comes from ``dataFrom``.
        unresolved: the ``dataFrom`` reference that cannot be resolved without a cluster.
    """

    manifest: ManifestObject
    path: str
    desired: DesiredZnode | None
    unresolved: DataRef | None = None

    def describe(self) -> str:
        """``file:line ZooKeeperConfig namespace/name`` for messages."""
        return f"{self.manifest.location} {self.manifest.describe()}"


@dataclass(frozen=True)
class CheckedTree:
    """A ZooKeeperConfigTree object that passed every check.

    Attributes:
        manifest: the object as read.
        spec: the parsed spec.
        children: every child it declares, expanded as the operator expands them; ``None`` when a source is a
            Secret, or a ConfigMap not in the input (it cannot be expanded without a cluster).
        unresolved: the first source that cannot be resolved, as ``Secret name`` / ``ConfigMap name``.
    """

    manifest: ManifestObject
    spec: tree_spec.TreeSpec
    children: tuple[tree_spec.Child, ...] | None
    unresolved: str | None = None

    @property
    def path(self) -> str:
        """``spec.path``: the tree's root."""
        return self.spec.root

    def describe(self) -> str:
        """``file:line ZooKeeperConfigTree namespace/name`` for messages."""
        return f"{self.manifest.location} {self.manifest.describe()}"


@dataclass
class Validation:
    """Result of :func:`validate_manifests`.

    Attributes:
        objects: the ZooKeeperConfig objects without errors, in input order.
        trees: the ZooKeeperConfigTree objects without errors, in input order.
        problems: errors and warnings, in input order.
        total: ZooKeeperConfig and ZooKeeperConfigTree objects found.
        ignored: other objects skipped.
    """

    objects: list[CheckedObject] = dataclasses.field(default_factory=list)
    trees: list[CheckedTree] = dataclasses.field(default_factory=list)
    problems: list[Problem] = dataclasses.field(default_factory=list)
    total: int = 0
    ignored: int = 0

    @property
    def errors(self) -> list[Problem]:
        """Problems of severity ``error``."""
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        """Problems of severity ``warning``."""
        return [p for p in self.problems if p.severity == "warning"]


def _metadata_problems(obj: dict[str, Any]) -> list[tuple[str, str]]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return [("metadata", "is required and must be an object")]
    problems = []
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        problems.append(("metadata.name", "is required"))
    elif not is_dns1123_subdomain(name):
        problems.append(("metadata.name", "must be a DNS-1123 subdomain: at most 253 characters, lowercase "
                                          "alphanumerics, '-' or '.', starting and ending alphanumeric"))
    namespace = meta.get("namespace")
    if namespace is not None and (not isinstance(namespace, str) or not is_dns1123_label(namespace)):
        problems.append(("metadata.namespace", "must be a DNS-1123 label: at most 63 characters, lowercase "
                                               "alphanumerics or '-', starting and ending alphanumeric"))
    return problems


def _order(location: Location) -> tuple[str, int, int]:
    return (location.source, location.line, -1 if location.item is None else location.item)


def _same_field(a: str, b: str) -> bool:
    """True if ``a`` and ``b`` name the same field or one lies inside the other (``spec`` itself aside)."""
    if a == b:
        return True
    outer, inner = (a, b) if len(a) < len(b) else (b, a)
    return outer != "spec" and inner.startswith((outer + ".", outer + "["))


def _check_one(manifest: ManifestObject, checker: SchemaChecker, max_data_bytes: int,
               strict: bool, sources: Manifests | None = None,
               gate: Gate | None = None) -> tuple[list[Problem], CheckedObject | None]:
    where, what = str(manifest.location), manifest.describe()

    def problem(field_: str, rule: str, severity: Severity = "error") -> Problem:
        return Problem(where, what, field_, rule, severity, _order(manifest.location))

    obj = manifest.obj
    if obj.get("apiVersion") != f"{GROUP}/{VERSION}":
        return [problem("apiVersion", f"must be {GROUP}/{VERSION}, not {obj.get('apiVersion')!r}")], None
    problems = [problem(f, r) for f, r in _metadata_problems(obj)]
    defaulted = checker.with_defaults(obj)
    schema_problems = checker.check(defaulted)
    problems.extend(problem(p.field, p.rule) for p in schema_problems)
    problems.extend(
        problem(name, "unknown field: not in the CRD schema (server-side apply, as Flux applies, and "
                      "kubectl apply refuse it; kubectl --validate=false prunes it)",
                "error" if strict else "warning")
        for name in checker.unknown_fields(obj)
    )
    refs: list[DataRef] = []
    missing: list[str] = []

    def placeholder(ref: DataRef) -> bytes:
        """The bytes from a ConfigMap/Secret of the same input (the operator's ``ref_data``), else
        an unresolved reference (needs a cluster)."""
        source = sources.source(ref.kind, manifest.namespace, ref.name) if sources is not None else None
        if source is None:
            refs.append(ref)
            return b""
        data = ref_data(source, ref)
        if data is None:
            missing.append(f"{ref.kind} {ref.name!r} of this input has no key {ref.key!r} (or not strict base64)")
            return b""
        return data

    desired: DesiredZnode | None = None
    try:
        desired = parse_spec(defaulted.get("spec"), max_data_bytes=max_data_bytes, lookup=placeholder)
    except InvalidSpec as err:
        if not any(_same_field(p.field, err.field) for p in schema_problems):
            problems.append(problem(err.field, err.rule))
    problems.extend(problem("spec.dataFrom", text) for text in missing)
    reserved = gate.reserved_refusal(desired.path, "write") if gate is not None and desired is not None else None
    if reserved is not None:
        problems.append(problem("spec.path", reserved.message))
    if desired is None or any(p.severity == "error" for p in problems):
        return problems, None
    unresolved = refs[0] if refs else None
    checked = CheckedObject(manifest, desired.path, None if unresolved else desired, unresolved)
    return problems, checked


def _check_ensemble(manifest: ManifestObject, checker: SchemaChecker, strict: bool) -> list[Problem]:
    """The problems of a ZooKeeperEnsemble: apiVersion, name (cluster-scoped: no namespace), its CRD's schema,
    :func:`zkop.ensembles.spec.parse_ensemble`."""
    where, what = str(manifest.location), manifest.describe()

    def problem(field_: str, rule: str, severity: Severity = "error") -> Problem:
        return Problem(where, what, field_, rule, severity, _order(manifest.location))

    obj = manifest.obj
    if obj.get("apiVersion") != f"{GROUP}/{VERSION}":
        return [problem("apiVersion", f"must be {GROUP}/{VERSION}, not {obj.get('apiVersion')!r}")]
    problems = [problem(f, r) for f, r in _metadata_problems(obj)]
    if manifest.namespace is not None:
        problems.append(problem("metadata.namespace", "a ZooKeeperEnsemble is cluster-scoped: no namespace"))
    defaulted = checker.with_defaults(obj)
    schema_problems = checker.check(defaulted)
    problems.extend(problem(p.field, p.rule) for p in schema_problems)
    problems.extend(problem(name, "unknown field: not in the CRD schema", "error" if strict else "warning")
                    for name in checker.unknown_fields(obj))
    try:
        parse_ensemble(defaulted.get("spec"))
    except InvalidEnsemble as err:
        if not any(_same_field(p.field, err.field) for p in schema_problems):
            problems.append(problem(err.field, err.message))
    return problems


def _tree_field(message: str) -> str:
    """The field an expansion message names first (``spec.from[0]``, ``spec.entries[2].path``), else ``spec``."""
    head = message.split(" ", 1)[0].rstrip(":")
    return head if head.startswith("spec.") else "spec"


def check_tree(manifest: ManifestObject, checker: SchemaChecker, *, strict: bool = True,
               sources: Manifests | None = None,
               gate: Gate | None = None) -> tuple[list[Problem], CheckedTree | None]:
    """The problems of one ZooKeeperConfigTree, offline, and the tree if it has none.

    The checks: ``apiVersion``, the object's names, the tree CRD's schema (after its defaults; CEL rules not
    evaluated) and unknown fields, :func:`zkop.configtree.spec.parse_spec`, then
    :func:`zkop.configtree.spec.expand` with the ConfigMaps of the same input (a child with ``..``, two children on
    one path, a value that does not parse in its format), and the admission gate's reserved roots for the root
    (read) and every child (write).
    A Secret source, or a ConfigMap not in the input, leaves the children unexpanded (``children`` ``None``).
    """
    where, what = str(manifest.location), manifest.describe()

    def problem(field_: str, rule: str, severity: Severity = "error") -> Problem:
        return Problem(where, what, field_, rule, severity, _order(manifest.location))

    obj = manifest.obj
    if obj.get("apiVersion") != f"{GROUP}/{VERSION}":
        return [problem("apiVersion", f"must be {GROUP}/{VERSION}, not {obj.get('apiVersion')!r}")], None
    problems = [problem(f, r) for f, r in _metadata_problems(obj)]
    defaulted = checker.with_defaults(obj)
    schema_problems = checker.check(defaulted)
    problems.extend(problem(p.field, p.rule) for p in schema_problems)
    problems.extend(
        problem(name, "unknown field: not in the CRD schema (server-side apply, as Flux applies, and "
                      "kubectl apply refuse it; kubectl --validate=false prunes it)",
                "error" if strict else "warning")
        for name in checker.unknown_fields(obj))

    def add(err: Exception) -> None:
        field_ = _tree_field(str(err))
        if not any(_same_field(p.field, field_) for p in schema_problems):
            problems.append(problem(field_, str(err)))

    try:
        spec = tree_spec.parse_spec(defaulted)
    except tree_spec.InvalidSpec as err:
        add(err)
        return problems, None
    unresolved = next((f"{s.kind} {s.name}" for s in spec.sources
                       if s.kind == "Secret" or sources is None
                       or sources.source(s.kind, manifest.namespace, s.name) is None), None)
    children: tuple[tree_spec.Child, ...] | None = None
    if unresolved is None:
        def lookup(source: tree_spec.SourceRef) -> dict[str, Any] | None:
            assert sources is not None
            return sources.source(source.kind, manifest.namespace, source.name)

        try:
            children = tuple(tree_spec.expand(spec, lookup))
        except tree_spec.InvalidSpec as err:
            add(err)
        except tree_spec.RefNotFound as err:
            problems.append(problem("spec.from", f"{err} in this input"))
    if gate is not None:
        refusal = gate.reserved_refusal(spec.root, "read")
        if refusal is not None:
            problems.append(problem("spec.path", refusal.message))
        for child in children or ():
            refusal = gate.reserved_refusal(child.path, "write")
            if refusal is not None:
                problems.append(problem("spec", f"child {child.path}: {refusal.message}"))
                break
    if any(p.severity == "error" for p in problems):
        return problems, None
    return problems, CheckedTree(manifest, spec, children, unresolved)


def validate_manifests(manifests: Manifests, checker: SchemaChecker, *,
                       max_data_bytes: int = DEFAULT_MAX_DATA_BYTES, strict: bool = True,
                       registry_root: str = DEFAULT_REGISTRY_ROOT) -> Validation:
    """Check every ZooKeeperConfig in ``manifests``; never touches ZooKeeper or Kubernetes.

    Args:
        manifests: as loaded by :func:`zkop.gitops.manifests.load_manifests` (load
            problems become problems without an object).
        max_data_bytes: the operator's ``--max-data-bytes``.
        strict: unknown fields are errors (the default: server-side apply answers "field not
            declared in schema" for them, whatever ``fieldValidation`` says -- structured-merge-diff
            converts the applied object to the schema's type; kubectl >= 1.27 sends
            ``fieldValidation=Strict`` on client-side apply); ``False``: warnings, for manifests
            applied with ``kubectl --validate=false``, where the API server prunes them.
        registry_root: the operator's ``--registry-root``: a path under it (or under the start-up probe's root
            beside it) is refused, as the operator's admission gate refuses it (:mod:`zkop.feature.gate`).

    Returns:
        The valid objects and all problems; validation failed if ``errors`` is non-empty.
    """
    result = Validation(total=len(manifests.objects) + len(manifests.trees), ignored=manifests.ignored)
    result.problems.extend(Problem(str(p.location), "", "", p.message, order=_order(p.location))
                           for p in manifests.problems)
    candidates: list[CheckedObject] = []
    gate = Gate(reserved_roots(registry_root=registry_root, probe_root=probe_root(registry_root)))
    for manifest in manifests.objects:
        problems, checked = _check_one(manifest, checker, max_data_bytes, strict, manifests, gate)
        result.problems.extend(problems)
        if checked is not None:
            candidates.append(checked)
    trees: list[CheckedTree] = []
    if manifests.trees:
        tree_checker = SchemaChecker(load_tree_crd_schema())
        for manifest in manifests.trees:
            problems, tree = check_tree(manifest, tree_checker, strict=strict, sources=manifests, gate=gate)
            result.problems.extend(problems)
            if tree is not None:
                trees.append(tree)
    if manifests.ensembles:
        ensemble_checker = SchemaChecker(load_ensemble_crd_schema())
        for manifest in manifests.ensembles:
            result.problems.extend(_check_ensemble(manifest, ensemble_checker, strict))
    result.problems.extend(_duplicates(manifests.objects))
    result.problems.extend(_tree_duplicates(manifests.objects, trees, manifests.trees))
    result.problems.sort(key=lambda p: p.order)
    flagged = {p.location for p in result.errors}
    result.objects = [c for c in candidates if str(c.manifest.location) not in flagged]
    result.trees = [t for t in trees if str(t.manifest.location) not in flagged]
    return result


def _tree_duplicates(objects: Sequence[ManifestObject], trees: Sequence[CheckedTree],
                     all_trees: Sequence[ManifestObject]) -> list[Problem]:
    """A path declared on one ensemble by two trees, or by a tree and a ZooKeeperConfig (the same path on two
    ensembles is two znodes); a tree name defined twice. In a cluster the oldest declarer wins and the other reports
    ``PathConflict``; in one input it is a mistake."""
    problems = []
    declared: dict[tuple[str, str], ManifestObject] = {}  # (ensemble, path): one path per ensemble
    for manifest in objects:
        spec = manifest.obj.get("spec")
        path = spec.get("path") if isinstance(spec, dict) else None
        if isinstance(path, str):
            declared.setdefault((ensemble_of(manifest.obj), path), manifest)
    for tree in trees:
        for child in tree.children or ():
            first = declared.setdefault((tree.spec.ensemble, child.path), tree.manifest)
            if first is not tree.manifest:
                problems.append(Problem(str(tree.manifest.location), tree.manifest.describe(), "spec",
                                        f"duplicate path {child.path}: also declared at {first.location} "
                                        f"({first.describe()}); one znode, one object",
                                        order=_order(tree.manifest.location)))
                break
    names: dict[tuple[str, str], ManifestObject] = {}
    for manifest in all_trees:
        if manifest.name:
            key = (manifest.namespace or "", manifest.name)
            first = names.setdefault(key, manifest)
            if first is not manifest:
                problems.append(Problem(str(manifest.location), manifest.describe(), "metadata.name",
                                        f"duplicate {tree_spec.KIND} {'/'.join(filter(None, key))}: also defined "
                                        f"at {first.location}", order=_order(manifest.location)))
    return problems


def _duplicates(objects: Sequence[ManifestObject]) -> list[Problem]:
    problems = []
    by_path: dict[tuple[str, str], ManifestObject] = {}  # (ensemble, path): one path per ensemble
    by_name: dict[tuple[str, str], ManifestObject] = {}
    for manifest in objects:
        spec = manifest.obj.get("spec")
        path = spec.get("path") if isinstance(spec, dict) else None
        if isinstance(path, str):
            first = by_path.setdefault((ensemble_of(manifest.obj), path), manifest)
            if first is not manifest:
                problems.append(Problem(str(manifest.location), manifest.describe(), "spec.path",
                                        f"duplicate path {path}: also declared at {first.location} "
                                        f"({first.describe()}); one znode, one object",
                                        order=_order(manifest.location)))
        if manifest.name:
            key = (manifest.namespace or "", manifest.name)
            first = by_name.setdefault(key, manifest)
            if first is not manifest:
                problems.append(Problem(str(manifest.location), manifest.describe(), "metadata.name",
                                        f"duplicate {KIND} {'/'.join(filter(None, key))}: also defined at "
                                        f"{first.location}", order=_order(manifest.location)))
    return problems
