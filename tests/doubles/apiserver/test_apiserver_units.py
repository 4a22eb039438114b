"""Unit tests of the building blocks: structural schemas, selectors, patches and field errors."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from zkop_testing.apiserver_errors import OMIT, FieldError, GoRaw, go_repr, invalid
from zkop_testing.apiserver_patch import apply_json_patch, apply_merge_patch, apply_strategic_merge_patch
from zkop_testing.apiserver_schema import CustomResourceSchema
from zkop_testing.apiserver_select import FieldSelector, LabelSelector, SelectorError

JSON = dict[str, Any]

SCHEMA: JSON = {"type": "object", "properties": {"spec": {"type": "object", "required": ["name"], "properties": {
    "name": {"type": "string", "minLength": 2},
    "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
    "when": {"type": "string", "format": "date-time"},
    "size": {"type": "integer", "exclusiveMinimum": True, "minimum": 0},
    "tags": {"type": "array", "uniqueItems": True, "minItems": 1, "items": {"type": "string"}},
    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    "choice": {"type": "object", "oneOf": [{"required": ["x"]}, {"required": ["y"]}],
               "properties": {"x": {"type": "string"}, "y": {"type": "string"}}},
    "either": {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True},
    "notempty": {"type": "string", "not": {"enum": [""]}},
    "maybe": {"type": "object", "nullable": True, "default": {"z": 1},
              "properties": {"z": {"type": "integer"}}},
    "embedded": {"type": "object", "x-kubernetes-embedded-resource": True,
                 "properties": {"spec": {"type": "object"}}},
}}}}


def fields(errors: list[FieldError]) -> dict[str, FieldError]:
    return {e.field: e for e in errors}


def test_schema_defaults_prune_and_validate() -> None:
    schema = CustomResourceSchema(SCHEMA)
    obj: JSON = {"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "n", "extra": 1},
                 "spec": {"name": "ok", "unknown": 1, "labels": {"a": "b"},
                          "embedded": {"apiVersion": "v1", "kind": "X", "metadata": {}, "junk": 1}},
                 "other": 1}
    schema.prune(obj)
    schema.apply_defaults(obj)
    assert obj["metadata"] == {"name": "n", "extra": 1}  # metadata is handled by the server, not the schema
    assert "other" not in obj and "unknown" not in obj["spec"]
    assert obj["spec"]["embedded"] == {"apiVersion": "v1", "kind": "X", "metadata": {}}
    assert obj["spec"]["mode"] == "a" and obj["spec"]["maybe"] == {"z": 1}
    assert schema.validate(obj) == []


def test_nullable_keeps_null_and_non_nullable_null_gets_the_default() -> None:
    schema = CustomResourceSchema(SCHEMA)
    obj: JSON = {"spec": {"name": "ok", "maybe": None, "mode": None}}
    schema.apply_defaults(obj)
    assert obj["spec"]["maybe"] is None and obj["spec"]["mode"] == "a"
    assert schema.validate(obj) == []


def test_schema_error_rendering() -> None:
    schema = CustomResourceSchema(SCHEMA)
    errors = fields(schema.validate({"spec": {
        "name": "x", "mode": "c", "when": "yesterday", "size": 0, "tags": ["a", "a"],
        "labels": {"k": 1}, "choice": {"x": "1", "y": "2"}, "either": [1], "notempty": ""}}))
    assert str(errors["spec.name"]) == ('spec.name: Invalid value: "x": spec.name in body should be at least 2 chars '
                                        "long")
    assert str(errors["spec.mode"]) == 'spec.mode: Unsupported value: "c": supported values: "a", "b"'
    assert str(errors["spec.when"]) == ('spec.when: Invalid value: "yesterday": spec.when in body must be of type '
                                        'date-time: "yesterday"')
    assert str(errors["spec.size"]) == "spec.size: Invalid value: 0: spec.size in body should be greater than 0"
    assert errors["spec.tags[1]"].type == "FieldValueDuplicate"
    assert errors["spec.labels.k"].type == "FieldValueTypeInvalid"
    assert "oneOf" in str(errors["spec.choice"])
    assert "spec.either" in errors
    assert "(not)" in str(errors["spec.notempty"])
    missing = schema.validate({"spec": {}})
    assert [str(e) for e in missing] == ["spec.name: Required value"]


def test_field_error_and_invalid_rendering() -> None:
    assert go_repr(["a", "b"]) == '[]string{"a", "b"}'
    assert go_repr(None) == "null" and go_repr(True) == "true" and go_repr(GoRaw("0x0")) == "0x0"
    err = invalid("g.io", "Kind", "n", [FieldError.required("spec.a"), FieldError.too_many("spec.b", 4, 3)])
    assert err.code == 422
    assert err.message == 'Kind.g.io "n" is invalid: [spec.a: Required value, spec.b: Too many: 4: must have at ' \
                          'most 3 items]'
    assert FieldError("FieldValueForbidden", "x", OMIT, "nope").body() == "Forbidden: nope"


@pytest.mark.parametrize(("text", "labels", "expected"), [
    ("", {}, True),
    ("a=b", {"a": "b"}, True),
    ("a=b", {"a": "c"}, False),
    ("a!=b", {}, True),
    ("a in (x, y),b", {"a": "y", "b": ""}, True),
    ("a notin (x)", {"a": "x"}, False),
    ("!a", {"b": "1"}, True),
    ("example.com/a=1", {"example.com/a": "1"}, True),
    ("a<3", {"a": "2"}, True),
    ("a=", {"a": ""}, True),
])
def test_label_selector_matching(text: str, labels: dict[str, str], expected: bool) -> None:
    assert LabelSelector(text).matches(labels) is expected


@pytest.mark.parametrize("text", ["a in ()", "a in (b", "(a)", "a=b)", "a b", "!", "a>b", "a,,b", "a/b/c"])
def test_label_selector_syntax_errors(text: str) -> None:
    with pytest.raises(SelectorError):
        LabelSelector(text)


def test_field_selector_escapes() -> None:
    selector = FieldSelector(r"metadata.name=a\,b,metadata.namespace!=x")
    assert selector.terms == [("metadata.name", "=", "a,b"), ("metadata.namespace", "!=", "x")]
    assert selector.matches({"metadata.name": "a,b", "metadata.namespace": "y"})
    with pytest.raises(SelectorError):
        FieldSelector("justaword")


def test_strategic_merge_patch_directives() -> None:
    target = {"metadata": {"finalizers": ["a"], "ownerReferences": [{"uid": "1", "name": "x"}]},
              "spec": {"ports": [{"port": 1, "name": "a"}], "keep": 1, "drop": 2}}
    patched = apply_strategic_merge_patch(target, {
        "metadata": {"finalizers": ["b"], "ownerReferences": [{"uid": "1", "name": "renamed"}]},
        "spec": {"$retainKeys": ["ports", "keep"], "ports": [{"port": 2}], "$setElementOrder/ports": [{"port": 1}]}})
    assert patched["metadata"]["finalizers"] == ["a", "b"]
    assert patched["metadata"]["ownerReferences"] == [{"uid": "1", "name": "renamed"}]
    assert patched["spec"] == {"ports": [{"port": 1, "name": "a"}, {"port": 2}], "keep": 1}
    replaced = apply_strategic_merge_patch(target, {"spec": {"$patch": "replace", "only": True}})
    assert replaced["spec"] == {"only": True}
    assert "spec" not in apply_strategic_merge_patch(target, {"spec": {"$patch": "delete"}})


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=3),
                           lambda children: st.dictionaries(st.text(max_size=3), children, max_size=3)
                           | st.lists(children, max_size=3), max_leaves=8)
json_objects = st.dictionaries(st.text(max_size=3), json_values, max_size=4)


@given(json_objects, json_objects)
def test_merge_patch_is_idempotent_and_pure(target: JSON, patch: JSON) -> None:
    before = copy.deepcopy(target)
    once = apply_merge_patch(target, patch)
    assert target == before
    assert apply_merge_patch(once, patch) == once
    for key, value in patch.items():
        if value is None:
            assert key not in once
        elif not isinstance(value, dict):
            assert once[key] == value


def test_json_patch_errors() -> None:
    assert apply_json_patch({"a": 1}, [{"op": "add", "path": "/b", "value": 2}]) == {"a": 1, "b": 2}
    with pytest.raises(Exception) as info:
        apply_json_patch({"a": 1}, [{"op": "remove", "path": "/missing"}])
    assert getattr(info.value, "code", None) == 422
