"""CRD schemas kube-apiserver refuses at create/update (structural schemas, API validation, defaults).

Sources (kubernetes/kubernetes staging/src/k8s.io/apiextensions-apiserver):

* ``pkg/apiserver/schema/validation.go`` ``ValidateStructural`` / ``validateStructuralInvariants`` /
  ``validateNestedValueValidation`` and ``pkg/apiserver/schema/complete.go``;
* ``pkg/apis/apiextensions/validation/validation.go`` ``ValidateCustomResourceDefinitionOpenAPISchema``,
  ``specStandardValidatorV3.validate``, ``validateMapListKeysMapSet``;
* ``pkg/apiserver/schema/defaulting/validation.go`` ``ValidateDefaults``.

Each of the six variants the fidelity table (row 5) lists is refused with 422 and kube-apiserver's
field path and text; the shipped CRD passes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from apiserver_helpers import api_error
from zkop_testing.apiserver_fixtures import zookeeperconfig_crd

from zkop.kube.client import KubeClient, resource_path
from zkop.kube.structural import crd_schema_errors

CRDS = resource_path("apiextensions.k8s.io", "v1", "customresourcedefinitions")
ROOT = "spec.versions[0].schema.openAPIV3Schema"
SPEC = f"{ROOT}.properties[spec]"
JSON = dict[str, Any]


def _schema(crd: JSON) -> JSON:
    schema: JSON = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _untyped_property(s: JSON) -> None:
    s["properties"]["spec"]["properties"]["extra"] = {"description": "no type"}


def _default_in_metadata(s: JSON) -> None:
    s["properties"]["metadata"]["default"] = {"labels": {"a": "b"}}


def _type_in_one_of(s: JSON) -> None:
    s["properties"]["spec"]["oneOf"] = [{"required": ["data"], "type": "object"}, {"required": ["stringData"]}]


def _list_map_key_not_required(s: JSON) -> None:
    conditions = s["properties"]["status"]["properties"]["conditions"]
    conditions["items"]["required"] = [r for r in conditions["items"]["required"] if r != "type"]


def _default_fails_enum(s: JSON) -> None:
    s["properties"]["spec"]["properties"]["encoding"]["default"] = "latin1"


def _additional_with_properties(s: JSON) -> None:
    s["properties"]["spec"]["additionalProperties"] = {"type": "string"}


VARIANTS: list[tuple[str, Callable[[JSON], None], str, str, str]] = [
    # validation.go validateStructuralInvariants
    ("untyped property", _untyped_property, f"{SPEC}.properties[extra].type", "FieldValueRequired",
     "Required value: must not be empty for specified object fields"),
    # validation.go (apiextensions) withForbiddenDefaults("in top-level metadata")
    ("default inside metadata", _default_in_metadata, f"{ROOT}.properties[metadata].default", "FieldValueForbidden",
     "Forbidden: must not be set in top-level metadata"),
    # validation.go validateNestedValueValidation
    ("type inside oneOf", _type_in_one_of, f"{SPEC}.oneOf[0].type", "FieldValueForbidden",
     "Forbidden: must be empty to be structural"),
    # validation.go (apiextensions) validateMapListKeysMapSet
    ("list-map key neither required nor defaulted", _list_map_key_not_required,
     f"{ROOT}.properties[status].properties[conditions].items.properties[type].default", "FieldValueRequired",
     "Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a "
     "required property"),
    # defaulting/validation.go ValidateDefaults -> ValidateCustomResource
    ("default failing its enum", _default_fails_enum, f"{SPEC}.properties[encoding].default",
     "FieldValueNotSupported", 'Unsupported value: "latin1": supported values: "utf-8", "binary"'),
    # validation.go (apiextensions) ValidateCustomResourceDefinitionOpenAPISchema
    ("additionalProperties with properties", _additional_with_properties, f"{SPEC}.additionalProperties",
     "FieldValueForbidden", "Forbidden: additionalProperties and properties are mutual exclusive"),
]


def test_the_shipped_crd_is_structural() -> None:
    assert crd_schema_errors(_schema(zookeeperconfig_crd()), ROOT) == []


@pytest.mark.parametrize(("what", "change", "field", "reason", "text"), VARIANTS, ids=[v[0] for v in VARIANTS])
def test_invalid_schema_is_refused_on_create(kube: KubeClient, what: str, change: Callable[[JSON], None],
                                             field: str, reason: str, text: str) -> None:
    crd = zookeeperconfig_crd()
    change(_schema(crd))
    status, body = api_error(lambda: kube.request("POST", CRDS, body=crd))
    assert status == 422 and body["reason"] == "Invalid", body
    causes = body["details"]["causes"]
    assert {"reason": reason, "field": field, "message": text} in causes, causes
    assert f"{field}: {text}" in body["message"]
    assert body["message"].startswith(
        'CustomResourceDefinition.apiextensions.k8s.io "zookeeperconfigs.platform.example.com" is invalid: ')


@pytest.mark.parametrize(("what", "change", "field", "reason", "text"), VARIANTS, ids=[v[0] for v in VARIANTS])
def test_invalid_schema_is_refused_on_update(kube: KubeClient, what: str, change: Callable[[JSON], None],
                                             field: str, reason: str, text: str) -> None:
    created = kube.request("POST", CRDS, body=zookeeperconfig_crd())
    change(_schema(created))
    status, body = api_error(lambda: kube.request("PUT", f"{CRDS}/{created['metadata']['name']}", body=created))
    assert status == 422
    assert any(c["field"] == field for c in body["details"]["causes"]), body


def test_more_structural_rules() -> None:
    # validation.go validateStructuralInvariants, apiextensions validation.go specStandardValidatorV3.
    schema: JSON = {"type": "object", "additionalProperties": {"type": "string"}, "properties": {
        "spec": {"type": "object", "properties": {
            "list": {"type": "array"},
            "unique": {"type": "array", "uniqueItems": True, "items": {"type": "string"}},
            "ref": {"$ref": "#/x"},
            "nul": {"type": "null"},
        }, "anyOf": [{"properties": {"missing": {"minLength": 1}}}]},
        "metadata": {"type": "object", "properties": {"labels": {"type": "object"}}},
    }}
    found = {(e.field.removeprefix("R."), e.type, e.detail) for e in crd_schema_errors(schema, "R")}
    assert ("additionalProperties", "Forbidden", "must not be used at the root") in found
    assert ("properties[spec].properties[list].items", "Required", "must be specified") in found
    assert ("properties[spec].properties[unique].uniqueItems", "Forbidden",
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic") in found
    assert ("properties[spec].properties[ref].$ref", "Forbidden", "$ref is not supported") in found
    assert ("properties[spec].properties[nul].type", "Forbidden",
            "type cannot be set to null, use nullable as an alternative") in found
    assert ("properties[spec].properties[missing]", "Required",
            "because it is defined in R.properties[spec].anyOf[0].properties[missing]") in found
    assert ("properties[metadata]", "Forbidden",
            "must not specify anything other than name and generateName, but metadata is implicitly specified") in found


def test_int_or_string_any_of_is_allowed() -> None:
    # validation.go isIntOrStringAnyOfPattern: the one anyOf that may carry types.
    schema: JSON = {"type": "object", "properties": {"port": {
        "x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}}}
    assert crd_schema_errors(schema, "R") == []


def test_default_with_unknown_fields_is_refused(kube: KubeClient) -> None:
    # defaulting/validation.go ValidateDefaults with requirePrunedDefaults (apiextensions/v1).
    crd = zookeeperconfig_crd()
    _schema(crd)["properties"]["status"]["default"] = {"state": "Pending", "bogus": 1}
    status, body = api_error(lambda: kube.request("POST", CRDS, body=crd))
    assert status == 422
    assert body["details"]["causes"][0] == {
        "reason": "FieldValueInvalid", "field": f"{ROOT}.properties[status].default",
        "message": 'Invalid value: map[string]interface {}{"bogus":1, "state":"Pending"}: must not have unknown '
                   "fields"}


def test_default_of_the_wrong_type_is_refused(kube: KubeClient) -> None:
    # defaulting/validation.go ValidateDefaults -> apiserver/validation ValidateCustomResource.
    crd = zookeeperconfig_crd()
    _schema(crd)["properties"]["spec"]["properties"]["syncPolicy"]["default"] = 3
    status, body = api_error(lambda: kube.request("POST", CRDS, body=crd))
    assert status == 422
    fields = [c["field"] for c in body["details"]["causes"]]
    assert f"{SPEC}.properties[syncPolicy].default" in fields
