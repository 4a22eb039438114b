"""The in-memory API server's structural-schema handling: :mod:`zkop.kube.schema` plus kube-apiserver's errors.

Pruning, defaulting and the translation into JSON Schema are
:mod:`zkop.kube.schema` (the one implementation, following apiextensions-apiserver
``pkg/apiserver/schema/{pruning,defaulting}`` and ``pkg/apiserver/validation``); this
module renders the ``jsonschema`` errors the way apiextensions-apiserver renders
go-openapi results (``spec.x in body must be of type string: "integer"``) as
:class:`~zkop_testing.apiserver_errors.FieldError` values.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from jsonschema.exceptions import ValidationError

from zkop.kube.schema import StructuralSchema, field_path, json_type_name, schema_error
from zkop.kube.structural import SchemaRuleError, crd_schema_errors, defaults, pruned_default_differs
from zkop_testing.apiserver_errors import FieldError

__all__ = ["CustomResourceSchema", "check_schema", "json_type_name"]

JSON = dict[str, Any]


class CustomResourceSchema(StructuralSchema):
    """The ``openAPIV3Schema`` of one custom resource version.

    Args:
        openapi_schema: the ``schema.openAPIV3Schema`` mapping of a CRD version.
            ``metadata`` constraints inside it are ignored (ObjectMeta is handled
            by the server, as in kube-apiserver).
        resource: ``False`` for a schema below the root (a ``default``'s own schema):
            ``metadata`` is then an ordinary property.
    """

    def __init__(self, openapi_schema: Mapping[str, Any], *, resource: bool = True) -> None:
        schema = copy.deepcopy(dict(openapi_schema))
        props = schema.get("properties")
        if isinstance(props, dict) and resource:
            props.pop("metadata", None)
        self.resource = resource
        super().__init__(schema)

    def apply_defaults(self, obj: JSON) -> None:
        """Apply ``default`` values in place (:func:`zkop.kube.schema.default`)."""
        self.default(obj)

    def validate(self, obj: Any, prefix: str = "") -> list[FieldError]:
        """Validate ``obj`` (a whole custom resource); ``metadata`` is not checked here.

        Args:
            obj: the object (any value when ``resource`` is ``False``).
            prefix: the path of ``obj`` itself (e.g. ``...properties[spec].default``);
                ``""`` for a resource.

        Returns:
            field errors rendered like kube-apiserver, in schema order, without duplicates.
        """
        instance = {k: v for k, v in obj.items() if k != "metadata"} if self.resource and isinstance(obj, Mapping) \
            else obj
        errors: list[FieldError] = []
        seen: set[tuple[str, str]] = set()
        for err in self.iter_errors(instance):
            for fe in self._convert(err, prefix):
                key = (fe.field, fe.type)
                if key not in seen:
                    seen.add(key)
                    errors.append(fe)
        return errors

    def _convert(self, err: ValidationError, prefix: str = "") -> list[FieldError]:
        parts: list[str | int] = list(err.absolute_path)
        if prefix:
            parts = [prefix, *parts]
        path = field_path(parts)
        where = path or "<root>"
        kw = err.validator
        value = err.instance
        bound: Any = err.validator_value
        if kw == "required":
            missing = [p for p in bound if isinstance(value, dict) and p not in value]
            return [FieldError.required(field_path([*parts, p])) for p in missing]
        if kw == "type":
            expected = bound
            if isinstance(expected, list):
                expected = "/".join(t for t in expected if t != "null")
            actual = json_type_name(value)
            return [FieldError.type_invalid(path, actual, f'{where} in body must be of type {expected}: "{actual}"')]
        if kw == "enum":
            return [FieldError.not_supported(path, value, [v for v in bound if v is not None])]
        if kw == "pattern":
            return [FieldError.invalid(path, value, f"{where} in body should match '{bound}'")]
        if kw == "minLength":
            return [FieldError.invalid(path, value, f"{where} in body should be at least {bound} "
                                                    "chars long")]
        if kw == "maxLength":
            return [FieldError.too_long(path, int(bound))]
        if kw in ("minimum", "exclusiveMinimum"):
            op = "greater than or equal to" if kw == "minimum" else "greater than"
            return [FieldError.invalid(path, value, f"{where} in body should be {op} {bound}")]
        if kw in ("maximum", "exclusiveMaximum"):
            op = "less than or equal to" if kw == "maximum" else "less than"
            return [FieldError.invalid(path, value, f"{where} in body should be {op} {bound}")]
        if kw == "minItems":
            return [FieldError.invalid(path, value, f"{where} in body should have at least {bound} "
                                                    "items")]
        if kw == "maxItems":
            return [FieldError.too_many(path, len(value) if isinstance(value, list) else -1,
                                        int(bound))]
        if kw == "minProperties":
            return [FieldError.invalid(path, value, f"{where} in body should have at least "
                                                    f"{bound} properties")]
        if kw == "maxProperties":
            return [FieldError.too_many(path, len(value) if isinstance(value, dict) else -1,
                                        int(bound))]
        if kw == "uniqueItems":
            dup = _first_duplicate(value)
            return [FieldError.duplicate(field_path([*parts, dup[0]]) if dup else path, dup[1] if dup else value)]
        if kw == "multipleOf":
            return [FieldError.invalid(path, value, f"{where} in body should be a multiple of "
                                                    f"{bound}")]
        if kw == "format":
            return [FieldError.invalid(path, value, f'{where} in body must be of type {bound}: '
                                                    f'"{value}"')]
        if kw == "oneOf":
            return [FieldError.invalid(path, value, f"{where} in body must validate one and only one schema "
                                                    "(oneOf)")]
        if kw == "anyOf":
            return [FieldError.invalid(path, value, f"{where} in body must validate at least one schema (anyOf)")]
        if kw == "not":
            return [FieldError.invalid(path, value, f"{where} in body should not validate the given schema "
                                                    "(not)")]
        return [FieldError.invalid(path, value, err.message)]


def _first_duplicate(value: Any) -> tuple[int, Any] | None:
    if not isinstance(value, list):
        return None
    for i, item in enumerate(value):
        if any(item == other and json_type_name(item) == json_type_name(other) for other in value[:i]):
            return i, item
    return None


def _field_error(rule: SchemaRuleError) -> FieldError:
    if rule.type == "Required":
        return FieldError.required(rule.field, rule.detail)
    if rule.type == "Forbidden":
        return FieldError.forbidden(rule.field, rule.detail)
    if rule.type == "NotSupported":
        return FieldError.not_supported(rule.field, rule.value, list(rule.supported))
    return FieldError.invalid(rule.field, rule.value, rule.detail)


def check_schema(openapi_schema: Mapping[str, Any], path: str) -> list[FieldError]:
    """What kube-apiserver checks in a CRD version schema (:mod:`zkop.kube.structural`), as field errors.

    Structural rules first; only when there are none, each ``default`` is checked: pruned
    (``must not have unknown fields``) and valid against its own schema
    (``defaulting/validation.go`` ``ValidateDefaults``). A schema whose JSON Schema
    translation is unusable is refused as well (``error building validator``).

    Returns:
        field errors with paths under ``path`` (``spec.versions[i].schema.openAPIV3Schema``).
    """
    errors = [_field_error(rule) for rule in crd_schema_errors(openapi_schema, path)]
    if not errors:
        for where, value, schema in defaults(openapi_schema, path):
            if pruned_default_differs(value, schema):
                errors.append(FieldError.invalid(where, value, "must not have unknown fields"))
                continue
            errors.extend(CustomResourceSchema(schema, resource=False).validate(value, where))
    if not errors:
        problem = schema_error(openapi_schema)
        if problem is not None:
            errors.append(FieldError.invalid(path, "", f"invalid schema: {problem}"))
    return errors
