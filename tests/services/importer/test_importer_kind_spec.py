"""The pure rules of a ZooKeeperServiceImport (``zkop.services.importer.kind.spec``): parsing and defaults, every
rejection with the field it names, the bounds (the CRD schema's, held again), the selection, ownership marks and the
status."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from zkop.services.importer.kind import spec as kind
from zkop.services.importer.kind.spec import (
    MAX_NAMES_IN_STATUS,
    ImportSpec,
    Outcome,
    SpecError,
    desired_status,
    key_of_owned,
    owner_id,
    owner_reference,
    parse_spec,
    with_owner,
)
from zkop.services.importer.objects import CreateObject, PatchObject, is_owned, owned_annotations, owned_labels

JSON = dict[str, Any]
CRD = Path(__file__).resolve().parents[3] / "manifests" / "crd" / "zookeeperserviceimports.yaml"


def obj(**spec: Any) -> JSON:
    return {"apiVersion": kind.API_VERSION, "kind": kind.KIND,
            "metadata": {"name": "shop", "namespace": "team-a", "uid": "u-1", "generation": 3}, "spec": spec}


def test_defaults_follow_the_format() -> None:
    assert parse_spec(obj()) == ImportSpec("/services", "curator")
    assert parse_spec({"metadata": {}}) == ImportSpec("/services", "curator")  # no spec at all
    assert parse_spec(obj(format="json")) == ImportSpec("/kubernetes/services", "json")
    assert parse_spec(obj(format="dubbo")) == ImportSpec("/dubbo", "dubbo")
    assert parse_spec(obj(format="dubbo", root="/team-a/dubbo", prefix="legacy-",
                          selection={"names": ["com.example.Api"], "pattern": "com.example.*"})) == ImportSpec(
        "/team-a/dubbo", "dubbo", ("com.example.Api",), "com.example.*", "legacy-")


@pytest.mark.parametrize(("spec", "message"), [
    ("a string", "spec: an object with root, format, selection and prefix"),
    ({"format": "consul"}, "spec.format 'consul': one of curator, json, dubbo"),
    ({"format": ["curator"]}, "spec.format \"['curator']\": one of curator, json, dubbo"),
    ({"root": 7}, "spec.root: a znode path of at most 4096 characters"),
    ({"root": "/" + "a" * 4096}, "spec.root: a znode path of at most 4096 characters"),
    ({"root": "services"}, "spec.root 'services': path must be absolute (start with '/'): 'services'"),
    ({"root": "/"}, "spec.root '/': the root znode '/' cannot be managed"),
    ({"root": "/services/"}, "spec.root '/services/': path must not end with '/': '/services/'"),
    ({"root": "/a//b"}, "spec.root '/a//b': path contains an empty segment ('//'): '/a//b'"),
    ({"root": "/a/../zkop"}, "spec.root '/a/../zkop': path contains a relative segment '..': '/a/../zkop'"),
    ({"root": "/zookeeper/quota"}, "spec.root '/zookeeper/quota': paths under /zookeeper are reserved for the "
                                   "ZooKeeper server"),
    ({"root": "/a\x00b"}, "spec.root '/a\\x00b': path contains a forbidden character U+0000 at index 2"),
    ({"selection": ["orders"]}, "spec.selection: an object with names and/or pattern"),
    ({"selection": {"names": "orders"}}, "spec.selection.names: a list of service names"),
    ({"selection": {"names": ["orders", ""]}}, "spec.selection.names: a list of service names"),
    ({"selection": {"names": ["orders", 7]}}, "spec.selection.names: a list of service names"),
    ({"selection": {"names": [f"s{i}" for i in range(257)]}},
     "spec.selection.names: at most 256 names of at most 1024 characters"),
    ({"selection": {"names": ["x" * 1025]}}, "spec.selection.names: at most 256 names of at most 1024 characters"),
    ({"selection": {"pattern": ""}}, "spec.selection.pattern: a non-empty glob of at most 1024 characters"),
    ({"selection": {"pattern": 3}}, "spec.selection.pattern: a non-empty glob of at most 1024 characters"),
    ({"selection": {"pattern": "*" * 1025}}, "spec.selection.pattern: a non-empty glob of at most 1024 characters"),
    ({"prefix": 7}, "spec.prefix: a string of at most 40 characters"),
    ({"prefix": "p" * 41}, "spec.prefix: a string of at most 40 characters"),
])
def test_every_rejection_names_its_field_and_rule(spec: Any, message: str) -> None:
    with pytest.raises(SpecError) as raised:
        parse_spec({"metadata": {"name": "x"}, "spec": spec})
    assert str(raised.value) == message


def test_the_bounds_at_their_limits_are_accepted() -> None:
    parsed = parse_spec(obj(root="/" + "a" * 4095, prefix="p" * 40,
                            selection={"names": [f"{i:04}" + "x" * 1020 for i in range(256)], "pattern": "*" * 1024}))
    assert len(parsed.names) == 256 and len(parsed.prefix) == 40


def test_the_bounds_are_the_crds() -> None:
    schema = yaml.safe_load(CRD.read_text())["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec = schema["properties"]["spec"]["properties"]
    names = spec["selection"]["properties"]["names"]
    assert (names["maxItems"], names["items"]["maxLength"]) == (kind.MAX_NAMES, kind.MAX_NAME_LENGTH)
    assert spec["selection"]["properties"]["pattern"]["maxLength"] == kind.MAX_NAME_LENGTH
    assert spec["prefix"]["maxLength"] == kind.MAX_PREFIX_LENGTH and spec["root"]["maxLength"] == kind.MAX_ROOT_LENGTH
    assert spec["format"]["enum"] == ["curator", "json", "dubbo"]


def test_a_huge_value_is_cut_in_the_message() -> None:
    with pytest.raises(SpecError) as raised:
        parse_spec(obj(format="x" * 10_000))
    assert len(str(raised.value)) < 200


def test_selection_names_and_pattern() -> None:
    everything = ImportSpec("/services", "curator")
    assert everything.selects("orders") and everything.selects("anything")
    chosen = ImportSpec("/services", "curator", ("orders",), "bill*")
    assert chosen.selects("orders") and chosen.selects("billing") and not chosen.selects("Billing")
    assert not chosen.selects("orders-v2") and not ImportSpec("/s", "curator", ("orders",)).selects("billing")
    # A glob, not a regular expression: '.' is a dot.
    assert ImportSpec("/d", "dubbo", (), "com.example.*").selects("com.example.Api")
    assert not ImportSpec("/d", "dubbo", (), "com.example.*").selects("comXexample.Api")


@given(st.text(min_size=1, max_size=60), st.text(min_size=1, max_size=60))
def test_parse_never_raises_anything_but_a_spec_error(root: str, pattern: str) -> None:
    with contextlib.suppress(SpecError):
        parse_spec(obj(root=root, selection={"pattern": pattern}))


# --- ownership ----------------------------------------------------------------------------------


def test_owner_identity_is_per_object_and_never_the_flags_importers() -> None:
    owner = owner_id("prod", "shop")
    assert owner == "prod/serviceimport/shop"
    service: JSON = {"metadata": {"name": "orders", "namespace": "team-a", "labels": owned_labels(),
                            "annotations": owned_annotations("/services/orders", owner)}}
    assert service["metadata"]["annotations"]["platform.example.com/imported-by"] == "zkop/prod/serviceimport/shop"
    assert is_owned(service, owner) and not is_owned(service, "prod")  # the flags' importer never takes it
    assert not is_owned(service, owner_id("prod", "other"))  # nor another object in its namespace
    assert key_of_owned(service, "prod") == "team-a/shop"
    assert key_of_owned(service, "staging") is None  # another installation's
    flags = {"metadata": {"namespace": "team-a", "annotations": owned_annotations("/services/orders", "prod")}}
    assert key_of_owned(flags, "prod") is None
    empty = {"metadata": {"namespace": "team-a", "annotations": owned_annotations("/s", owner_id("prod", ""))}}
    assert key_of_owned(empty, "prod") is None and key_of_owned({}, "prod") is None


def test_the_service_gets_the_object_as_its_one_controller_owner() -> None:
    ref = owner_reference(obj())
    assert ref == {"apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperServiceImport", "name": "shop",
                   "uid": "u-1", "controller": True}
    created = with_owner(CreateObject("services", {"metadata": {"name": "orders"}, "spec": {}}), None, ref)
    assert isinstance(created, CreateObject) and created.body["metadata"]["ownerReferences"] == [ref]
    patched = with_owner(PatchObject("services", "orders", {"metadata": {"resourceVersion": "5"}}), None, ref)
    assert isinstance(patched, PatchObject) and patched.patch["metadata"] == {"resourceVersion": "5",
                                                                              "ownerReferences": [ref]}
    current = {"metadata": {"name": "orders", "resourceVersion": "9", "ownerReferences": [ref]}}
    assert with_owner(None, current, ref) is None  # nothing to do
    # The object was deleted and made anew (another uid): the Service is handed to the new one.
    stale = {"metadata": {"name": "orders", "resourceVersion": "9", "ownerReferences": [{**ref, "uid": "old"}]}}
    handed = with_owner(None, stale, ref)
    assert isinstance(handed, PatchObject) and handed.patch == {
        "metadata": {"resourceVersion": "9", "ownerReferences": [ref]}}
    assert with_owner(None, None, ref) is None


# --- status -------------------------------------------------------------------------------------


def test_status_conditions_counts_and_capped_names() -> None:
    names = tuple(f"s{i:03}" for i in range(MAX_NAMES_IN_STATUS + 10))
    status = desired_status({}, Outcome("Imported", "60 imported", ready=True, services=names), 3,
                            "2024-01-01T00:00:00Z")
    assert status["observedGeneration"] == 3 and status["importedServices"] == len(names)
    assert status["services"] == list(names[:MAX_NAMES_IN_STATUS]) and status["conflicts"] == []
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [("Ready", "True", "Imported")]
    stalled = desired_status(status, Outcome("Conflict", "taken", stalled=True, conflicts=("orders",)), 4,
                             "2024-01-01T00:01:00Z")
    assert [(c["type"], c["status"], c["reason"], c["message"]) for c in stalled["conditions"]] == [
        ("Ready", "False", "Conflict", "taken"), ("Stalled", "True", "Conflict", "taken")]
    assert stalled["conflicts"] == ["orders"] and stalled["importedServices"] == 0
    assert all(c["observedGeneration"] == 4 for c in stalled["conditions"])
