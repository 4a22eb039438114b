"""The admission gate's rules (``zkop.feature.gate``), one named case each: reserved roots first, with or without a
tenancy policy, the same for reads as for writes but where a root is readable; then the tenancy rules."""

from __future__ import annotations

from typing import Any

import pytest

from zkop.feature.gate import Access, Gate, reserved_roots
from zkop.feature.tenancy import TenancyPolicy

ROOTS = reserved_roots(registry_root="/zkop/owners", probe_root="/zkop/probe", bridge_root="/kubernetes/services",
                       import_root="/services")
POLICY = TenancyPolicy.from_spec({"tenancy": {"rules": [
    {"namespaces": ["team-a"], "pathPrefixes": ["/config/team-a", "/"]},
    {"namespaces": ["team-b"], "pathPrefixes": ["/config/team-b"]},
    {"namespaceSelector": {"matchLabels": {"tier": "gold"}}, "pathPrefixes": ["/gold"]}]}})


def obj(namespace: str) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": "x"}}


#: rule → (namespace, path, access, with the policy?, the reason or None)
CASES: dict[str, tuple[str, str, Access, bool, str | None]] = {
    "the registry is never written": ("team-a", "/zkop/owners/config/x", "write", False, "ReservedPath"),
    "the registry root itself is never written": ("team-a", "/zkop/owners", "write", False, "ReservedPath"),
    "the registry is never read": ("team-a", "/zkop/owners/config", "read", False, "ReservedPath"),
    "the registry holds with a policy that admits everything": ("team-a", "/zkop/owners/a", "write", True,
                                                                "ReservedPath"),
    "the probe root is never written": ("team-a", "/zkop/probe/x", "write", False, "ReservedPath"),
    "the probe root may be read": ("team-a", "/zkop/probe", "read", False, None),
    "the bridge's records are never written": ("team-b", "/kubernetes/services/team-a-web", "write", False,
                                               "ReservedPath"),
    "the bridge's records may be read": ("team-b", "/kubernetes/services/team-a-web", "read", False, None),
    "the importer's registrations are never written": ("team-a", "/services/web/1", "write", False, "ReservedPath"),
    "/zookeeper is never read": ("team-a", "/zookeeper/config", "read", False, "ReservedPath"),
    "whole segments: a sibling of a reserved root is not reserved": ("team-a", "/zkop/ownersx", "write", False,
                                                                      None),
    "the parent of a reserved root is not reserved": ("team-a", "/zkop", "write", False, None),
    "without a policy every other path is admitted": ("anyone", "/config/team-a/db", "write", False, None),
    "a namespace no rule names is refused": ("team-c", "/config/team-c", "write", True, "NamespaceNotAllowed"),
    "reads are held to the tenancy rules as writes are": ("team-b", "/config/team-a", "read", True,
                                                          "PathNotAllowed"),
    "a tenant reads its own prefix": ("team-b", "/config/team-b/x", "read", True, None),
    "a tenant may not read a prefix's look-alike": ("team-b", "/config/team-bb", "read", True, "PathNotAllowed"),
    "a namespace selected by label is admitted to its prefix": ("shop", "/gold/x", "read", True, None),
}


@pytest.mark.parametrize("rule", sorted(CASES))
def test_gate(rule: str) -> None:
    namespace, path, access, with_policy, reason = CASES[rule]
    labels = {"shop": {"tier": "gold"}}
    gate = Gate(ROOTS, (lambda o: POLICY) if with_policy else (lambda o: TenancyPolicy()), labels.get)
    refusal = gate.admit(obj(namespace), path, access)
    assert (refusal.reason if refusal is not None else None) == reason, refusal


def test_a_whole_subtree_read_leaves_out_the_unreadable_reserved_roots_below_it() -> None:
    gate = Gate(ROOTS)
    assert gate.excluded("/") == ("/zookeeper", "/zkop/owners")
    assert gate.excluded("/zkop") == ("/zkop/owners",)
    assert gate.excluded("/config") == ()
    assert gate.excluded("/zkop/owners") == ()  # the root itself is refused, not excluded (Gate.admit)


def test_the_refusal_names_the_root_and_its_holder() -> None:
    refusal = Gate(ROOTS).admit(obj("team-a"), "/kubernetes/services/a-b", "write")
    assert refusal is not None and refusal.message == (
        "path /kubernetes/services/a-b is under /kubernetes/services, reserved for zkop's service bridge (its "
        "published records): it is never written for a namespaced object")


def test_without_the_bridge_and_importer_their_roots_are_not_reserved() -> None:
    gate = Gate(reserved_roots(registry_root="/zkop/owners"))
    assert gate.admit(obj("a"), "/kubernetes/services/a-b", "write") is None
    assert gate.admit(obj("a"), "/services/web", "write") is None
    assert gate.admit(obj("a"), "/zkop/owners/x", "write") is not None
