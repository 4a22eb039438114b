"""Table tests of the tenancy rules and the adoption decision (:mod:`zkop.feature.tenancy`; no I/O).

Label selectors follow apimachinery's ``pkg/labels/selector.go`` (``Requirement.Matches``) and
``metav1.LabelSelectorAsSelector`` (an empty selector selects everything).
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from zkop_testing.kustomize import REPO

from zkop.feature.tenancy import ADMIT_ALL, TenancyPolicy

TEAM_A = {"namespaces": ["team-a"], "pathPrefixes": ["/config/team-a"]}


def policy(*rules: dict[str, Any], adoption: str | None = None) -> TenancyPolicy:
    spec: dict[str, Any] = {"tenancy": {"rules": list(rules)}}
    if adoption is not None:
        spec["adoption"] = adoption
    return TenancyPolicy.from_spec(spec)


def selecting(**selector: Any) -> dict[str, Any]:
    return {"namespaceSelector": selector, "pathPrefixes": ["/shared"]}


# (case, rules, namespace, labels, path, expected reason or None for admitted)
ADMIT_CASES: list[tuple[str, tuple[dict[str, Any], ...], str, dict[str, str], str, str | None]] = [
    ("named namespace, path at the prefix itself", (TEAM_A,), "team-a", {}, "/config/team-a", None),
    ("named namespace, path below the prefix", (TEAM_A,), "team-a", {}, "/config/team-a/db/url", None),
    ("whole segments: /config/team-a does not cover /config/team-ab", (TEAM_A,), "team-a", {},
     "/config/team-ab", "PathNotAllowed"),
    ("a path above the prefix", (TEAM_A,), "team-a", {}, "/config", "PathNotAllowed"),
    ("another namespace", (TEAM_A,), "team-b", {}, "/config/team-a/x", "NamespaceNotAllowed"),
    ("a trailing / on the prefix is dropped", ({"namespaces": ["a"], "pathPrefixes": ["/config/a/"]},), "a", {},
     "/config/a/x", None),
    ("the prefix / covers every path", ({"namespaces": ["a"], "pathPrefixes": ["/"]},), "a", {}, "/anything/x", None),
    ("rules are ORed: the second rule admits", (TEAM_A, {"namespaces": ["team-a"], "pathPrefixes": ["/shared"]}),
     "team-a", {}, "/shared/flag", None),
    ("a rule is namespaces AND prefixes: team-b's prefix is not team-a's",
     (TEAM_A, {"namespaces": ["team-b"], "pathPrefixes": ["/config/team-b"]}), "team-a", {}, "/config/team-b/x",
     "PathNotAllowed"),
    ("names or selector: the name is enough", ({"namespaces": ["a"], "namespaceSelector": {"matchLabels": {"t": "x"}},
                                               "pathPrefixes": ["/p"]},), "a", {}, "/p/1", None),
    ("names or selector: the labels are enough", ({"namespaces": ["a"],
                                                  "namespaceSelector": {"matchLabels": {"t": "x"}},
                                                  "pathPrefixes": ["/p"]},), "b", {"t": "x"}, "/p/1", None),
    ("matchLabels: equal value", (selecting(matchLabels={"team": "pay"}),), "n", {"team": "pay"}, "/shared/x", None),
    ("matchLabels: other value", (selecting(matchLabels={"team": "pay"}),), "n", {"team": "web"}, "/shared/x",
     "NamespaceNotAllowed"),
    ("matchLabels: key missing", (selecting(matchLabels={"team": "pay"}),), "n", {}, "/shared/x",
     "NamespaceNotAllowed"),
    ("In: a listed value", (selecting(matchExpressions=[{"key": "env", "operator": "In", "values": ["a", "b"]}]),),
     "n", {"env": "b"}, "/shared/x", None),
    ("In: an unlisted value", (selecting(matchExpressions=[{"key": "env", "operator": "In", "values": ["a"]}]),),
     "n", {"env": "c"}, "/shared/x", "NamespaceNotAllowed"),
    ("In: key missing", (selecting(matchExpressions=[{"key": "env", "operator": "In", "values": ["a"]}]),),
     "n", {}, "/shared/x", "NamespaceNotAllowed"),
    ("NotIn: key missing matches", (selecting(matchExpressions=[{"key": "env", "operator": "NotIn",
                                                                 "values": ["prod"]}]),), "n", {}, "/shared/x", None),
    ("NotIn: an unlisted value matches", (selecting(matchExpressions=[{"key": "env", "operator": "NotIn",
                                                                       "values": ["prod"]}]),), "n", {"env": "dev"},
     "/shared/x", None),
    ("NotIn: a listed value does not", (selecting(matchExpressions=[{"key": "env", "operator": "NotIn",
                                                                     "values": ["prod"]}]),), "n", {"env": "prod"},
     "/shared/x", "NamespaceNotAllowed"),
    ("Exists: key with any value", (selecting(matchExpressions=[{"key": "zk", "operator": "Exists"}]),), "n",
     {"zk": ""}, "/shared/x", None),
    ("Exists: key missing", (selecting(matchExpressions=[{"key": "zk", "operator": "Exists"}]),), "n",
     {"other": "1"}, "/shared/x", "NamespaceNotAllowed"),
    ("DoesNotExist: key missing", (selecting(matchExpressions=[{"key": "legacy", "operator": "DoesNotExist"}]),),
     "n", {}, "/shared/x", None),
    ("DoesNotExist: key present", (selecting(matchExpressions=[{"key": "legacy", "operator": "DoesNotExist"}]),),
     "n", {"legacy": "true"}, "/shared/x", "NamespaceNotAllowed"),
    ("matchLabels AND matchExpressions: both hold",
     (selecting(matchLabels={"team": "pay"}, matchExpressions=[{"key": "env", "operator": "In", "values": ["p"]}]),),
     "n", {"team": "pay", "env": "p"}, "/shared/x", None),
    ("matchLabels AND matchExpressions: one fails",
     (selecting(matchLabels={"team": "pay"}, matchExpressions=[{"key": "env", "operator": "In", "values": ["p"]}]),),
     "n", {"team": "pay", "env": "q"}, "/shared/x", "NamespaceNotAllowed"),
    ("an empty selector selects every namespace", (selecting(),), "any", {}, "/shared/x", None),
    ("a tenancy with no rules admits nothing", (), "team-a", {}, "/config/team-a", "NamespaceNotAllowed"),
]


@pytest.mark.parametrize(("rules", "namespace", "labels", "path", "reason"),
                         [case[1:] for case in ADMIT_CASES], ids=[case[0] for case in ADMIT_CASES])
def test_admit(rules: tuple[dict[str, Any], ...], namespace: str, labels: dict[str, str], path: str,
               reason: str | None) -> None:
    refusal = policy(*rules).admit(namespace, labels, path)
    assert (refusal.reason if refusal is not None else None) == reason


def test_no_tenancy_admits_everything_and_adopts() -> None:
    for spec in (None, {}, {"tenancy": None}, {"adoption": None}):
        found = TenancyPolicy.from_spec(spec)
        assert found == ADMIT_ALL
        assert found.admit("anyone", None, "/anything") is None
        assert found.may_adopt(False) is None
        assert not found.needs_namespace_labels


def test_refusals_name_the_rules() -> None:
    rules = policy(TEAM_A, selecting(matchLabels={"team": "pay"},
                                     matchExpressions=[{"key": "legacy", "operator": "DoesNotExist"}]))
    namespace = rules.admit("team-b", {}, "/config/team-a/x")
    assert namespace is not None
    assert namespace.message == (
        "namespace team-b is not admitted by any tenancy rule (tenancy.rules[0] (namespaces team-a; pathPrefixes "
        "/config/team-a); tenancy.rules[1] (namespaceSelector !legacy,team in (pay); pathPrefixes /shared))")
    path = rules.admit("team-a", {}, "/config/team-b")
    assert path is not None
    assert path.message == ("path /config/team-b is outside the path prefixes namespace team-a may manage: "
                            "tenancy.rules[0] (namespaces team-a; pathPrefixes /config/team-a)")


@pytest.mark.parametrize(("adoption", "requested", "reason"), [
    ("Always", False, None),
    ("Always", True, None),
    ("IfRequested", True, None),
    ("IfRequested", False, "AdoptionNotRequested"),
    ("Never", True, "AdoptionRefused"),
    ("Never", False, "AdoptionRefused"),
])
def test_may_adopt(adoption: str, requested: bool, reason: str | None) -> None:
    refusal = TenancyPolicy.from_spec({"adoption": adoption}).may_adopt(requested)
    assert (refusal.reason if refusal is not None else None) == reason
    if refusal is not None:
        assert adoption in refusal.message


def test_needs_namespace_labels_only_with_a_selector() -> None:
    assert not policy(TEAM_A).needs_namespace_labels
    assert policy(TEAM_A, selecting()).needs_namespace_labels


@pytest.mark.parametrize(("spec", "error"), [
    ({"adoption": "Sometimes"}, "adoption: must be one of Always, IfRequested, Never, not 'Sometimes'"),
    ({"tenancy": ["x"]}, "tenancy: must be a mapping with rules"),
    ({"tenancy": {"rules": {"a": 1}}}, "tenancy.rules: must be a list"),
    ({"tenancy": {"rules": ["x"]}}, "tenancy.rules[0]: must be a mapping"),
    ({"tenancy": {"rules": [{"pathPrefixes": ["/a"]}]}},
     "tenancy.rules[0]: give namespaces or a namespaceSelector (namespaceSelector: {} selects every namespace)"),
    ({"tenancy": {"rules": [{"namespaces": ["a"]}]}},
     "tenancy.rules[0].pathPrefixes: must name at least one prefix ('/' for every path)"),
    ({"tenancy": {"rules": [TEAM_A, {"namespaces": ["a"], "pathPrefixes": ["config"]}]}},
     "tenancy.rules[1].pathPrefixes[0]: path must be absolute (start with '/'): 'config'"),
    ({"tenancy": {"rules": [{"namespaces": ["a"], "pathPrefixes": ["/", "/a//b"]}]}},
     "tenancy.rules[0].pathPrefixes[1]: path contains an empty segment ('//'): '/a//b'"),
    ({"tenancy": {"rules": [{"namespaces": ["a"], "pathPrefixes": ["/a/../b"]}]}},
     "tenancy.rules[0].pathPrefixes[0]: path contains a relative segment '..': '/a/../b'"),
    ({"tenancy": {"rules": [{"namespaces": "a", "pathPrefixes": ["/a"]}]}},
     "tenancy.rules[0].namespaces: must be a list of strings"),
    ({"tenancy": {"rules": [{**TEAM_A, "paths": ["/a"]}]}}, "tenancy.rules[0]: unknown field 'paths'"),
    ({"tenancy": {"rules": [selecting(matchExpressions=[{"key": "k", "operator": "In"}])]}},
     "tenancy.rules[0].namespaceSelector.matchExpressions[0].values: must be non-empty for In"),
    ({"tenancy": {"rules": [selecting(matchExpressions=[{"key": "k", "operator": "Exists", "values": ["v"]}])]}},
     "tenancy.rules[0].namespaceSelector.matchExpressions[0].values: must be empty for Exists"),
    ({"tenancy": {"rules": [selecting(matchExpressions=[{"key": "k", "operator": "Gt", "values": ["1"]}])]}},
     "tenancy.rules[0].namespaceSelector.matchExpressions[0].operator: must be one of In, NotIn, Exists, "
     "DoesNotExist, not 'Gt'"),
    ({"tenancy": {"rules": [selecting(matchExpressions=[{"operator": "Exists"}])]}},
     "tenancy.rules[0].namespaceSelector.matchExpressions[0]: needs a key"),
    ({"tenancy": {"rules": [selecting(matchLabels={"k": 1})]}},
     "tenancy.rules[0].namespaceSelector.matchLabels: must map label keys to string values"),
    ({"tenancy": {"rules": [selecting(labels={"k": "v"})]}},
     "tenancy.rules[0].namespaceSelector: unknown field 'labels'"),
])
def test_from_spec_names_the_bad_field(spec: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError) as raised:
        TenancyPolicy.from_spec(spec)
    assert str(raised.value) == error


def test_other_spec_fields_are_ignored() -> None:
    """An ensemble's whole spec can be handed in: connect string and credentials are not read here."""
    found = TenancyPolicy.from_spec({"connectString": "zk:2181", "tenancy": {"rules": [TEAM_A]},
                                     "adoption": "IfRequested"})
    assert found.adoption == "IfRequested"
    assert found.admit("team-a", None, "/config/team-a/x") is None


def test_the_worked_example_of_the_operations_guide() -> None:
    """docs/operations.md, "Tenancy and adoption": the policy file and what the text says of it."""
    section = (REPO / "docs" / "operations.md").read_text(encoding="utf-8").split("## Tenancy and adoption")[1]
    example = TenancyPolicy.from_spec(yaml.safe_load(section.split("```yaml")[1].split("```")[0]))
    payments = {"platform.example.com/team": "payments", "platform.example.com/env": "prod"}
    assert example.adoption == "IfRequested"
    assert example.admit("checkout", {}, "/config/checkout/db/url") is None
    assert example.admit("checkout-staging", {}, "/config/checkout") is None
    assert example.admit("shop", payments, "/switches/payments/3ds") is None
    assert example.admit("anyone", {}, "/config/shared/feature-flags/dark-mode") is None
    refused = example.admit("checkout", {}, "/config/payments/3ds")
    assert refused is not None and refused.reason == "PathNotAllowed"
    assert example.admit("shop", {**payments, "platform.example.com/env": "dev"}, "/config/payments/x") is not None
    lonely = example.admit("shop", {}, "/config/checkout-v2")
    assert lonely is not None and lonely.reason == "PathNotAllowed"  # rule 2 ({}) matches every namespace
    quoted = section.split("names the rules that admit its namespace\n(`")[1].split("`)")[0]
    assert quoted == f"{refused.message}; nothing is written"
    assert "namespaceSelector platform.example.com/env in (prod,staging),platform.example.com/team in (payments)" in \
        example.admit("checkout", payments, "/elsewhere").message  # type: ignore[union-attr]
