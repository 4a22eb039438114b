"""The rules kube-apiserver applies to a CRD version's ``openAPIV3Schema`` when the CRD is created or updated.

A schema that passes here is not refused by a cluster for these reasons. Ported from
apiextensions-apiserver:

* ``pkg/apiserver/schema/validation.go`` ``ValidateStructural``, ``validateNestedValueValidation``:
  the structural invariants;
* ``pkg/apiserver/schema/complete.go``: a property named in a value validation is also specified
  outside it;
* ``pkg/apis/apiextensions/validation/validation.go``
  (``ValidateCustomResourceDefinitionOpenAPISchema``, ``specStandardValidatorV3``,
  ``validateMapListKeysMapSet``);
* ``pkg/apiserver/schema/defaulting/validation.go`` ``ValidateDefaults``: :func:`defaults` lists
  the defaults for the caller to validate.

Errors are :class:`SchemaRuleError` values whose ``type`` is the ``field.ErrorType`` name and whose
``field`` renders as Go's ``field.Path`` (``properties[spec].type``, ``versions[0]``).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from zkop.kube.schema import prune

__all__ = ["OPENAPI_TYPES", "SchemaRuleError", "crd_schema_errors", "defaults", "pruned_default_differs"]


#: ``openapiV3Types`` of validation.go.
OPENAPI_TYPES = ("array", "boolean", "integer", "number", "object", "string")
_META_FIELDS = ("apiVersion", "kind", "metadata")
_JUNCTORS = ("allOf", "anyOf", "oneOf")
_INT_OR_STRING_ANY_OF = [{"type": "integer"}, {"type": "string"}]
_UNSUPPORTED = (("id", "id is not supported"), ("additionalItems", "additionalItems is not supported"),
                ("patternProperties", "patternProperties is not supported"),
                ("definitions", "definitions is not supported"), ("dependencies", "dependencies is not supported"),
                ("$ref", "$ref is not supported"))
# validateNestedValueValidation: keyword -> the detail of its Forbidden error.
_NESTED_FORBIDDEN = (("type", "must be empty to be structural"),
                     ("additionalProperties", "must be undefined to be structural"),
                     ("default", "must be undefined to be structural"),
                     ("title", "must be empty to be structural"),
                     ("description", "must be empty to be structural"),
                     ("nullable", "must be false to be structural"),
                     ("x-kubernetes-preserve-unknown-fields", "must be false to be structural"),
                     ("x-kubernetes-embedded-resource", "must be false to be structural"),
                     ("x-kubernetes-int-or-string", "must be false to be structural"),
                     ("x-kubernetes-list-map-keys", "must be empty to be structural"),
                     ("x-kubernetes-list-type", "must be undefined to be structural"),
                     ("x-kubernetes-map-type", "must be undefined to be structural"),
                     ("x-kubernetes-validations", "must be empty to be structural"))


@dataclass(frozen=True)
class SchemaRuleError:
    """One refused schema rule, like Go's ``field.Error``.

    Attributes:
        type: ``Required``, ``Forbidden``, ``Invalid`` or ``NotSupported``.
        field: the path of the offending keyword.
        detail: kube-apiserver's text.
        value: the offending value (``Invalid``/``NotSupported``), else ``None``.
        supported: the supported values (``NotSupported``).
    """

    type: str
    field: str
    detail: str
    value: Any = None
    supported: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"{self.field}: {self.type}: {self.detail}"


def _key(path: str, name: str) -> str:
    return f"{path}.properties[{name}]"


def _truthy(schema: Mapping[str, Any], keyword: str) -> bool:
    value = schema.get(keyword)
    return value not in (None, False, "", [], {})


def _types(schema: Mapping[str, Any]) -> str:
    value = schema.get("type")
    return value if isinstance(value, str) else ""


def _subschemas(schema: Mapping[str, Any]) -> dict[str, Any]:
    props = schema.get("properties")
    return dict(props) if isinstance(props, Mapping) else {}


# ---------------------------------------------------------------------------- ValidateStructural


def _structural(schema: Mapping[str, Any], path: str, level: str, errors: list[SchemaRuleError]) -> None:
    """``validateStructuralInvariants`` (level: ``root``, ``item`` or ``field``)."""
    kind = _types(schema)
    items = schema.get("items")
    if kind == "array" and items is None:
        errors.append(SchemaRuleError("Required", f"{path}.items", "must be specified"))
    if isinstance(items, Mapping):
        _structural(items, f"{path}.items", "item", errors)
    for name, sub in _subschemas(schema).items():
        if isinstance(sub, Mapping):
            _structural(sub, _key(path, name), "field", errors)
    additional = schema.get("additionalProperties")
    if additional is not None:
        if level == "root":
            errors.append(SchemaRuleError("Forbidden", f"{path}.additionalProperties", "must not be used at the root"))
        if isinstance(additional, Mapping):
            _structural(additional, f"{path}.additionalProperties", "field", errors)
    int_or_string = bool(schema.get("x-kubernetes-int-or-string"))
    preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    embedded = bool(schema.get("x-kubernetes-embedded-resource"))
    if int_or_string and preserve:
        errors.append(SchemaRuleError("Invalid", f"{path}.x-kubernetes-preserve-unknown-fields",
                                      "must be false if x-kubernetes-int-or-string is true", True))
    if int_or_string and embedded:
        errors.append(SchemaRuleError("Invalid", f"{path}.x-kubernetes-embedded-resource",
                                      "must be false if x-kubernetes-int-or-string is true", True))
    any_of = schema.get("anyOf")
    all_of = schema.get("allOf")
    skip_any_of = any_of == _INT_OR_STRING_ANY_OF
    skip_first_all_of = isinstance(all_of, list) and bool(all_of) and isinstance(all_of[0], Mapping) and \
        all_of[0].get("anyOf") == _INT_OR_STRING_ANY_OF
    _value_validation(schema, path, skip_any_of, skip_first_all_of, errors)
    if embedded and kind != "object":
        if not kind:
            errors.append(SchemaRuleError("Required", f"{path}.type",
                                          "must be object if x-kubernetes-embedded-resource is true"))
        else:
            errors.append(SchemaRuleError("Invalid", f"{path}.type",
                                          "must be object if x-kubernetes-embedded-resource is true", kind))
    elif not kind and not int_or_string and not preserve:
        detail = {"root": "must not be empty at the root", "item": "must not be empty for specified array items",
                  "field": "must not be empty for specified object fields"}[level]
        errors.append(SchemaRuleError("Required", f"{path}.type", detail))
    if embedded and additional is not None:
        errors.append(SchemaRuleError("Forbidden", f"{path}.additionalProperties",
                                      "must not be used if x-kubernetes-embedded-resource is set"))
    if level == "root" and kind and kind != "object":
        errors.append(SchemaRuleError("Invalid", f"{path}.type", "must be object at the root", kind))
    props = _subschemas(schema)
    check_meta = level == "root" or embedded
    for name in ("kind", "apiVersion"):
        sub = props.get(name)
        if check_meta and isinstance(sub, Mapping) and _types(sub) != "string":
            errors.append(SchemaRuleError("Invalid", f"{_key(path, name)}.type", "must be string", _types(sub)))
    metadata = props.get("metadata")
    if isinstance(metadata, Mapping):
        _metadata(metadata, check_meta, level, _key(path, "metadata"), errors)
    if embedded and not preserve and not props:
        errors.append(SchemaRuleError("Required", f"{path}.properties", "must not be empty if "
                                      "x-kubernetes-embedded-resource is true without "
                                      "x-kubernetes-preserve-unknown-fields"))


def _metadata(schema: Mapping[str, Any], check_meta: bool, level: str, path: str,
              errors: list[SchemaRuleError]) -> None:
    """``validateStructuralMetadataInvariants``."""
    if check_meta and _types(schema) != "object":
        errors.append(SchemaRuleError("Invalid", f"{path}.type", "must be object", _types(schema)))
    if level != "root":
        return
    rest = {k: v for k, v in schema.items() if k not in ("type", "default")}
    props = rest.pop("properties", None)
    if isinstance(props, Mapping) and set(props) - {"name", "generateName"}:
        rest["properties"] = props
    if rest:
        errors.append(SchemaRuleError("Forbidden", path, "must not specify anything other than name and "
                                      "generateName, but metadata is implicitly specified"))


def _value_validation(schema: Mapping[str, Any], path: str, skip_any_of: bool, skip_first_all_of: bool,
                      errors: list[SchemaRuleError]) -> None:
    """``validateValueValidation``: what ``allOf``/``anyOf``/``oneOf``/``not`` may hold."""
    for junctor in _JUNCTORS:
        entries = schema.get(junctor)
        if not isinstance(entries, list) or (junctor == "anyOf" and skip_any_of):
            continue
        for i, entry in enumerate(entries):
            if isinstance(entry, Mapping):
                skip = junctor == "allOf" and i == 0 and skip_first_all_of
                _nested(entry, f"{path}.{junctor}[{i}]", skip, errors)
    negated = schema.get("not")
    if isinstance(negated, Mapping):
        _nested(negated, f"{path}.not", False, errors)
    pattern = schema.get("pattern")
    if isinstance(pattern, str) and pattern:
        try:
            re.compile(pattern)
        except re.error as exc:
            errors.append(SchemaRuleError("Invalid", f"{path}.pattern",
                                          f"must be a valid regular expression, but isn't: {exc}", pattern))


def _nested(schema: Mapping[str, Any], path: str, skip_any_of: bool, errors: list[SchemaRuleError]) -> None:
    """``validateNestedValueValidation``."""
    _value_validation(schema, path, skip_any_of, False, errors)
    items = schema.get("items")
    if isinstance(items, Mapping):
        _nested(items, f"{path}.items", False, errors)
    for name, sub in _subschemas(schema).items():
        if isinstance(sub, Mapping):
            _nested(sub, _key(path, name), False, errors)
    for keyword, detail in _NESTED_FORBIDDEN:
        if _truthy(schema, keyword):
            errors.append(SchemaRuleError("Forbidden", f"{path}.{keyword}", detail))


def _completeness(value_schema: Mapping[str, Any], structural: Mapping[str, Any] | None, s_path: str, v_path: str,
                  errors: list[SchemaRuleError]) -> None:
    """complete.go: properties and items named in a value validation exist in the structural schema."""
    for junctor in (("not",), _JUNCTORS):
        for name in junctor:
            entries = value_schema.get(name)
            if isinstance(entries, Mapping):
                _nested_completeness(entries, structural, s_path, f"{v_path}.{name}", errors)
            elif isinstance(entries, list):
                for i, entry in enumerate(entries):
                    if isinstance(entry, Mapping):
                        _nested_completeness(entry, structural, s_path, f"{v_path}.{name}[{i}]", errors)


def _nested_completeness(nested: Mapping[str, Any], structural: Mapping[str, Any] | None, s_path: str, v_path: str,
                         errors: list[SchemaRuleError]) -> None:
    if structural is None:
        errors.append(SchemaRuleError("Required", s_path, f"because it is defined in {v_path}"))
        return
    _completeness(nested, structural, s_path, v_path, errors)
    items = nested.get("items")
    if isinstance(items, Mapping):
        s_items = structural.get("items")
        _nested_completeness(items, s_items if isinstance(s_items, Mapping) else None, f"{s_path}.items",
                             f"{v_path}.items", errors)
    s_props = _subschemas(structural)
    for name, sub in _subschemas(nested).items():
        if not isinstance(sub, Mapping):
            continue
        if name not in s_props:
            errors.append(SchemaRuleError("Required", _key(s_path, name),
                                          f"because it is defined in {_key(v_path, name)}"))
        elif isinstance(s_props[name], Mapping):
            _nested_completeness(sub, s_props[name], _key(s_path, name), _key(v_path, name), errors)


def _walk_structural(schema: Mapping[str, Any], path: str, errors: list[SchemaRuleError]) -> None:
    """Run the completeness check at every node of the structural skeleton."""
    _completeness(schema, schema, path, path, errors)
    items = schema.get("items")
    if isinstance(items, Mapping):
        _walk_structural(items, f"{path}.items", errors)
    for name, sub in _subschemas(schema).items():
        if isinstance(sub, Mapping):
            _walk_structural(sub, _key(path, name), errors)
    additional = schema.get("additionalProperties")
    if isinstance(additional, Mapping):
        _walk_structural(additional, f"{path}.additionalProperties", errors)


# ---------------------------------------------------------------------------- validation.go


def _api_rules(schema: Mapping[str, Any], path: str, *, root: bool, inside_meta: bool, defaults_forbidden: str | None,
               errors: list[SchemaRuleError]) -> None:
    """``ValidateCustomResourceDefinitionOpenAPISchema`` with ``specStandardValidatorV3``."""
    kind = schema.get("type")
    if isinstance(kind, str) and kind and kind not in OPENAPI_TYPES:
        if kind == "null":
            errors.append(SchemaRuleError("Forbidden", f"{path}.type",
                                          "type cannot be set to null, use nullable as an alternative"))
        else:
            errors.append(SchemaRuleError("NotSupported", f"{path}.type", "", kind, OPENAPI_TYPES))
    if "default" in schema and defaults_forbidden is not None:
        errors.append(SchemaRuleError("Forbidden", f"{path}.default", f"must not be set {defaults_forbidden}".rstrip()))
    for keyword, detail in _UNSUPPORTED:
        if keyword in schema:
            errors.append(SchemaRuleError("Forbidden", f"{path}.{keyword}", detail))
    if isinstance(schema.get("items"), list):
        errors.append(SchemaRuleError("Forbidden", f"{path}.items", "items must be a schema object and not an array"))
    if inside_meta and schema.get("x-kubernetes-embedded-resource"):
        errors.append(SchemaRuleError("Forbidden", f"{path}.x-kubernetes-embedded-resource",
                                      "must not be used inside of resource meta"))
    if schema.get("uniqueItems") is True:
        errors.append(SchemaRuleError("Forbidden", f"{path}.uniqueItems", "uniqueItems cannot be set to true since "
                                      "the runtime complexity becomes quadratic"))
    props = _subschemas(schema)
    additional = schema.get("additionalProperties")
    if additional is not None and props and additional is not True:
        errors.append(SchemaRuleError("Forbidden", f"{path}.additionalProperties",
                                      "additionalProperties and properties are mutual exclusive"))
    if isinstance(additional, Mapping):
        sub_forbidden = "inside additionalProperties applying to object metadata" if inside_meta \
            else defaults_forbidden
        _api_rules(additional, f"{path}.additionalProperties", root=False, inside_meta=inside_meta,
                   defaults_forbidden=sub_forbidden, errors=errors)
    embedded = bool(schema.get("x-kubernetes-embedded-resource"))
    for name, sub in props.items():
        if not isinstance(sub, Mapping):
            continue
        sub_meta, sub_forbidden = inside_meta, defaults_forbidden
        if (root or embedded) and name in _META_FIELDS:
            sub_meta = True
            if root:
                sub_forbidden = f"in top-level {name}"
        _api_rules(sub, _key(path, name), root=False, inside_meta=sub_meta, defaults_forbidden=sub_forbidden,
                   errors=errors)
    negated = schema.get("not")
    if isinstance(negated, Mapping):
        _api_rules(negated, f"{path}.not", root=False, inside_meta=inside_meta, defaults_forbidden=defaults_forbidden,
                   errors=errors)
    for junctor in _JUNCTORS:
        for i, entry in enumerate(schema.get(junctor) or []):
            if isinstance(entry, Mapping):
                _api_rules(entry, f"{path}.{junctor}[{i}]", root=False, inside_meta=inside_meta,
                           defaults_forbidden=defaults_forbidden, errors=errors)
    items = schema.get("items")
    if isinstance(items, Mapping):
        _api_rules(items, f"{path}.items", root=False, inside_meta=inside_meta, defaults_forbidden=defaults_forbidden,
                   errors=errors)
    _list_rules(schema, path, errors)


def _list_rules(schema: Mapping[str, Any], path: str, errors: list[SchemaRuleError]) -> None:
    """The ``x-kubernetes-list-type``/``x-kubernetes-list-map-keys`` rules (incl. ``validateMapListKeysMapSet``)."""
    list_type = schema.get("x-kubernetes-list-type")
    keys = schema.get("x-kubernetes-list-map-keys")
    items = schema.get("items")
    item_props = _subschemas(items) if isinstance(items, Mapping) else {}
    if keys:
        if list_type is None:
            errors.append(SchemaRuleError("Required", f"{path}.x-kubernetes-list-type",
                                          "must be map if x-kubernetes-list-map-keys is non-empty"))
        elif list_type != "map":
            errors.append(SchemaRuleError("Invalid", f"{path}.x-kubernetes-list-type",
                                          "must be map if x-kubernetes-list-map-keys is non-empty", list_type))
    if list_type == "map":
        if not keys:
            errors.append(SchemaRuleError("Required", f"{path}.x-kubernetes-list-map-keys",
                                          "must not be empty if x-kubernetes-list-type is map"))
        if not isinstance(items, Mapping):
            errors.append(SchemaRuleError("Required", f"{path}.items",
                                          "must have a schema if x-kubernetes-list-type is map"))
        elif isinstance(keys, list):
            if any(k not in item_props for k in keys):
                errors.append(SchemaRuleError("Invalid", f"{path}.x-kubernetes-list-map-keys",
                                              "entries must all be names of item properties", keys))
            elif len(set(map(str, keys))) != len(keys):
                errors.append(SchemaRuleError("Invalid", f"{path}.x-kubernetes-list-map-keys",
                                              "must not contain duplicate entries", keys))
    if list_type not in ("map", "set") or not isinstance(items, Mapping):
        return
    if items.get("nullable"):
        errors.append(SchemaRuleError("Forbidden", f"{path}.items.nullable",
                                      f"cannot be nullable when x-kubernetes-list-type is {list_type}"))
    if list_type == "map" and isinstance(keys, list):
        required = set(items.get("required") or [])
        for key in keys:
            sub = item_props.get(key)
            if not isinstance(sub, Mapping):
                continue
            if key not in required and "default" not in sub:
                errors.append(SchemaRuleError("Required", f"{path}.items.properties[{key}].default",
                                              "this property is in x-kubernetes-list-map-keys, so it must have a "
                                              "default or be a required property"))
            if sub.get("nullable"):
                errors.append(SchemaRuleError("Forbidden", f"{path}.items.properties[{key}].nullable",
                                              "this property is in x-kubernetes-list-map-keys, so it cannot be "
                                              "nullable"))


# ---------------------------------------------------------------------------- entry points


def crd_schema_errors(schema: Mapping[str, Any], path: str) -> list[SchemaRuleError]:
    """Why kube-apiserver refuses ``schema`` (an ``openAPIV3Schema``) in a CRD; ``[]`` if it does not.

    Args:
        schema: the ``openAPIV3Schema`` of one version.
        path: its path, e.g. ``spec.versions[0].schema.openAPIV3Schema``.

    The structural errors come sorted by their text (as ``ValidateStructural`` sorts them);
    the ``validation.go`` rules follow. Defaults are checked separately (:func:`defaults`),
    and only when this returns no structural error.
    """
    structural: list[SchemaRuleError] = []
    _structural(schema, path, "root", structural)
    _walk_structural(schema, path, structural)
    structural.sort(key=str)
    api: list[SchemaRuleError] = []
    if schema.get("nullable") is True:
        api.append(SchemaRuleError("Forbidden", f"{path}.nullable", "nullable cannot be true at the root"))
    _api_rules(schema, path, root=True, inside_meta=False, defaults_forbidden=None, errors=api)
    return structural + api


def defaults(schema: Mapping[str, Any], path: str) -> Iterator[tuple[str, Any, Mapping[str, Any]]]:
    """Every ``default`` ``ValidateDefaults`` checks: ``(path of the default, its value, its schema)``.

    Follows ``properties`` and ``items`` (not ``additionalProperties``, where defaults are
    forbidden, nor value validations); skips top-level ``apiVersion``/``kind``/``metadata``.
    """
    if "default" in schema:
        yield f"{path}.default", schema["default"], schema
    items = schema.get("items")
    if isinstance(items, Mapping):
        yield from defaults(items, f"{path}.items")
    for name, sub in _subschemas(schema).items():
        if isinstance(sub, Mapping) and not (path.endswith("openAPIV3Schema") and name in _META_FIELDS):
            yield from defaults(sub, _key(path, name))


def pruned_default_differs(value: Any, schema: Mapping[str, Any]) -> bool:
    """Whether pruning ``value`` with ``schema`` drops something ("must not have unknown fields")."""
    pruned = copy.deepcopy(value)
    prune(pruned, schema, root=bool(schema.get("x-kubernetes-embedded-resource")))
    return bool(pruned != value)
