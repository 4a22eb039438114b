"""Tenancy rules and adoption of an ensemble, as plain data and small pure filters (no I/O).

An ensemble's ``spec.tenancy`` and ``spec.adoption`` (the default ensemble's come from
``zkop run --tenancy-policy-file``) say which namespaces may use it, which znode paths each may
manage, and whether a pre-existing znode that no zkop installation owns may be adopted::

    tenancy:
      rules:
        - namespaces: [team-a]                       # names, and/or
          namespaceSelector: {matchLabels: {team: a}}  # metav1.LabelSelector
          pathPrefixes: [/config/team-a]
    adoption: IfRequested                            # Always (default) | IfRequested | Never

The rules, decided here once (docs/operations.md, "Tenancy and adoption"):

* no ``tenancy`` (absent or null): every namespace may manage every path, as before tenancy existed;
  a ``tenancy`` with no rules admits nothing;
* an object is admitted if some rule matches its namespace and its ``spec.path`` lies under one of
  *that* rule's ``pathPrefixes`` (rules are ORed; a rule is namespaces AND prefixes);
* a rule matches a namespace named in ``namespaces`` or one whose labels ``namespaceSelector``
  selects (either is enough). A rule must give at least one of the two: a rule with neither is an
  error, not "every namespace"; ``namespaceSelector: {}`` selects every namespace, as an empty
  ``metav1.LabelSelector`` does (``LabelSelectorAsSelector``: ``labels.Everything()``);
* selector semantics are apimachinery's (``pkg/labels/selector.go``, ``Requirement.Matches``):
  ``matchLabels`` and ``matchExpressions`` are ANDed; ``In`` needs the key with a listed value,
  ``NotIn`` matches a missing key or an unlisted value, ``Exists``/``DoesNotExist`` test the key;
  ``In``/``NotIn`` need a non-empty ``values``, ``Exists``/``DoesNotExist`` an empty one;
* a prefix is a znode path as ``spec.path`` is, relative to the chroot of the ensemble's connect
  string (``--zk-hosts host:2181/chroot``: the chroot is never written in a prefix nor in a path);
  one trailing ``/`` is dropped (``/config/team-a/`` is ``/config/team-a``); ``/`` covers every
  path; otherwise the prefix must be a valid path (no ``//``, ``.``, ``..``). Matching is by whole
  segments (:func:`zkop.zookeeper.paths.is_within`): ``/config/team-a`` covers itself and
  ``/config/team-a/x``, not ``/config/team-ab``;
* ``adoption``: ``Always`` adopts a pre-existing unowned znode (today's behaviour), ``IfRequested``
  only for an object with ``spec.adoptExisting: true``, ``Never`` never.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from zkop.zookeeper.frozen import fast_init
from zkop.zookeeper.paths import InvalidPath, is_within, validate_path

__all__ = [
    "ADMIT_ALL",
    "ADOPTION_MODES",
    "LabelRequirement",
    "LabelSelector",
    "Refusal",
    "TenancyPolicy",
    "TenancyRule",
]

Adoption = Literal["Always", "IfRequested", "Never"]
#: ``spec.adoption`` values; ``Always`` is the default.
ADOPTION_MODES: tuple[Adoption, ...] = ("Always", "IfRequested", "Never")
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


@fast_init
@dataclass(frozen=True)
class Refusal:
    """Why an object may not do what it asks: a CamelCase ``reason`` for status and Events, a sentence."""

    reason: Literal["ReservedPath", "NamespaceNotAllowed", "PathNotAllowed", "AdoptionRefused", "AdoptionNotRequested"]
    message: str


@fast_init
@dataclass(frozen=True)
class LabelRequirement:
    """One ``matchExpressions`` entry (apimachinery ``labels.Requirement``)."""

    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """``Requirement.Matches`` of apimachinery's ``pkg/labels/selector.go`` for these four operators."""
        if self.operator == "In":
            return self.key in labels and labels[self.key] in self.values
        if self.operator == "NotIn":
            return self.key not in labels or labels[self.key] not in self.values
        return (self.key in labels) == (self.operator == "Exists")


@fast_init
@dataclass(frozen=True)
class LabelSelector:
    """A ``metav1.LabelSelector``: every requirement must match (``matchLabels`` are ``In`` of one value)."""

    requirements: tuple[LabelRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """True if every requirement matches ``labels`` (an empty selector matches everything)."""
        return all(r.matches(labels) for r in self.requirements)

    def describe(self) -> str:
        """apimachinery's selector string (``Selector.String``: requirements sorted by key), e.g.
        ``env in (prod),!legacy,team in (a)``."""
        parts = []
        for r in sorted(self.requirements, key=lambda r: r.key):
            values = ",".join(sorted(r.values))
            parts.append({"In": f"{r.key} in ({values})", "NotIn": f"{r.key} notin ({values})",
                          "Exists": r.key, "DoesNotExist": f"!{r.key}"}[r.operator])
        return ",".join(parts) or "everything"


@fast_init
@dataclass(frozen=True)
class TenancyRule:
    """One ``tenancy.rules[i]``: which namespaces (names or a selector) may manage which path prefixes.

    Attributes:
        index: its position in ``tenancy.rules`` (named in refusals as ``tenancy.rules[index]``).
        namespaces: namespace names it admits.
        selector: namespaces whose labels it selects (``None``: only ``namespaces``).
        prefixes: normalized path prefixes (no trailing ``/`` but for ``/``).
    """

    index: int
    namespaces: frozenset[str]
    selector: LabelSelector | None
    prefixes: tuple[str, ...]

    def matches_namespace(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """True if ``namespace`` is named, or its ``labels`` are selected."""
        return namespace in self.namespaces or (self.selector is not None and self.selector.matches(labels))

    def covers(self, path: str) -> bool:
        """True if ``path`` is one of the prefixes or below one, segment-wise."""
        return any(is_within(path, prefix) for prefix in self.prefixes)

    def describe(self) -> str:
        """``tenancy.rules[0] (namespaces team-a; namespaceSelector team=a; pathPrefixes /config/team-a)``."""
        who = []
        if self.namespaces:
            who.append("namespaces " + ",".join(sorted(self.namespaces)))
        if self.selector is not None:
            who.append("namespaceSelector " + self.selector.describe())
        return f"tenancy.rules[{self.index}] ({'; '.join(who)}; pathPrefixes {','.join(self.prefixes)})"


@fast_init
@dataclass(frozen=True)
class TenancyPolicy:
    """An ensemble's tenancy rules and adoption mode.

    Attributes:
        rules: the rules; ``None`` (no ``tenancy``) admits everything.
        adoption: ``Always``, ``IfRequested`` or ``Never``.
    """

    rules: tuple[TenancyRule, ...] | None = None
    adoption: Adoption = "Always"

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any] | None) -> TenancyPolicy:
        """Read ``tenancy`` and ``adoption`` from an ensemble's spec (or a ``--tenancy-policy-file``).

        Other keys of ``spec`` are ignored (the rest of the ensemble's spec).

        Raises:
            ValueError: naming the bad field (``tenancy.rules[1].pathPrefixes[0]: ...``).
        """
        spec = spec or {}
        if not isinstance(spec, Mapping):
            raise ValueError("the policy must be a mapping with tenancy and adoption")
        adoption = spec.get("adoption", "Always")
        if adoption is None:
            adoption = "Always"
        if adoption not in ADOPTION_MODES:
            raise ValueError(f"adoption: must be one of {', '.join(ADOPTION_MODES)}, not {adoption!r}")
        tenancy = spec.get("tenancy")
        if tenancy is None:
            return cls(None, adoption)
        if not isinstance(tenancy, Mapping):
            raise ValueError("tenancy: must be a mapping with rules")
        rules = tenancy.get("rules") or []
        if not isinstance(rules, list):
            raise ValueError("tenancy.rules: must be a list")
        return cls(tuple(_rule(i, r) for i, r in enumerate(rules)), adoption)

    @property
    def needs_namespace_labels(self) -> bool:
        """True if some rule has a ``namespaceSelector``: only then are namespaces watched."""
        return any(rule.selector is not None for rule in self.rules or ())

    def admit(self, namespace: str, namespace_labels: Mapping[str, str] | None, path: str) -> Refusal | None:
        """``None`` if an object in ``namespace`` may manage ``path``, else why not.

        ``namespace_labels`` are the namespace's labels (``None``: not known, treated as none).
        Reasons: ``NamespaceNotAllowed`` (no rule matches the namespace), ``PathNotAllowed`` (rules
        match it, but none of them covers the path); the message names the rules.
        """
        if self.rules is None:
            return None
        labels = namespace_labels or {}
        matching = [rule for rule in self.rules if rule.matches_namespace(namespace, labels)]
        if any(rule.covers(path) for rule in matching):
            return None
        if not matching:
            named = "; ".join(rule.describe() for rule in self.rules) or "tenancy has no rules"
            return Refusal("NamespaceNotAllowed",
                           f"namespace {namespace} is not admitted by any tenancy rule ({named})")
        named = "; ".join(rule.describe() for rule in matching)
        return Refusal("PathNotAllowed", f"path {path} is outside the path prefixes namespace {namespace} may "
                                         f"manage: {named}")

    def may_adopt(self, requested: bool) -> Refusal | None:
        """``None`` if a pre-existing znode that no zkop installation owns may be adopted, else why not.

        ``requested``: the object sets ``spec.adoptExisting: true``.
        """
        if self.adoption == "Always" or (self.adoption == "IfRequested" and requested):
            return None
        if self.adoption == "Never":
            return Refusal("AdoptionRefused", "the znode exists and no zkop installation owns it; adoption is "
                                              "Never for this ensemble, so it is left untouched")
        return Refusal("AdoptionNotRequested", "the znode exists and no zkop installation owns it; adoption is "
                                               "IfRequested for this ensemble: set spec.adoptExisting: true to "
                                               "take it over (it is left untouched until then)")


#: The policy without ``tenancy``: every namespace, every path, adoption Always (zkop before tenancy).
ADMIT_ALL = TenancyPolicy()


def _strings(value: Any, field: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{field}: must be a list of strings")
    return list(value)


def _prefix(value: str, field: str) -> str:
    """A normalized prefix: one trailing ``/`` dropped, ``/`` kept, otherwise a valid znode path."""
    if value == "/":
        return value
    prefix = value[:-1] if value.endswith("/") else value
    try:
        return validate_path(prefix, allow_reserved=True)
    except InvalidPath as err:
        raise ValueError(f"{field}: {err}") from None


def _selector(value: Any, field: str) -> LabelSelector:
    """A ``metav1.LabelSelector`` (``matchLabels``, ``matchExpressions``), validated as apimachinery does."""
    if not isinstance(value, Mapping):
        raise ValueError(f"{field}: must be a label selector (matchLabels, matchExpressions)")
    unknown = set(value) - {"matchLabels", "matchExpressions"}
    if unknown:
        raise ValueError(f"{field}: unknown field {sorted(unknown)[0]!r}")
    requirements: list[LabelRequirement] = []
    labels = value.get("matchLabels") or {}
    if not isinstance(labels, Mapping) or not all(isinstance(v, str) for v in labels.values()):
        raise ValueError(f"{field}.matchLabels: must map label keys to string values")
    requirements += [LabelRequirement(str(k), "In", frozenset({v})) for k, v in labels.items()]
    expressions = value.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise ValueError(f"{field}.matchExpressions: must be a list")
    for i, expr in enumerate(expressions):
        where = f"{field}.matchExpressions[{i}]"
        if not isinstance(expr, Mapping) or not isinstance(expr.get("key"), str) or not expr["key"]:
            raise ValueError(f"{where}: needs a key")
        operator = expr.get("operator")
        if operator not in _OPERATORS:
            raise ValueError(f"{where}.operator: must be one of {', '.join(_OPERATORS)}, not {operator!r}")
        values = _strings(expr.get("values") or [], f"{where}.values")
        if operator in ("In", "NotIn") and not values:
            raise ValueError(f"{where}.values: must be non-empty for {operator}")
        if operator in ("Exists", "DoesNotExist") and values:
            raise ValueError(f"{where}.values: must be empty for {operator}")
        requirements.append(LabelRequirement(expr["key"], operator, frozenset(values)))
    return LabelSelector(tuple(requirements))


def _rule(index: int, value: Any) -> TenancyRule:
    field = f"tenancy.rules[{index}]"
    if not isinstance(value, Mapping):
        raise ValueError(f"{field}: must be a mapping")
    unknown = set(value) - {"namespaces", "namespaceSelector", "pathPrefixes"}
    if unknown:
        raise ValueError(f"{field}: unknown field {sorted(unknown)[0]!r}")
    namespaces = _strings(value.get("namespaces") or [], f"{field}.namespaces")
    raw_selector = value.get("namespaceSelector")
    selector = _selector(raw_selector, f"{field}.namespaceSelector") if raw_selector is not None else None
    if not namespaces and selector is None:
        raise ValueError(f"{field}: give namespaces or a namespaceSelector (namespaceSelector: {{}} selects every "
                         "namespace)")
    prefixes: Sequence[str] = _strings(value.get("pathPrefixes") or [], f"{field}.pathPrefixes")
    if not prefixes:
        raise ValueError(f"{field}.pathPrefixes: must name at least one prefix ('/' for every path)")
    return TenancyRule(index, frozenset(namespaces), selector,
                       tuple(_prefix(p, f"{field}.pathPrefixes[{i}]") for i, p in enumerate(prefixes)))
