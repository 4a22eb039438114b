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
import json
from collections.abc import Iterable, Mapping
from typing import Any

from jsonschema.exceptions import ValidationError

from zkop.kube.schema import StructuralSchema, field_path, json_type_name, schema_error
from zkop.kube.structural import SchemaRuleError, crd_schema_errors, defaults, pruned_default_differs
from zkop_testing.apiserver_cel import CelRules
from zkop_testing.apiserver_errors import FieldError

__all__ = ["CustomResourceSchema", "check_schema", "json_type_name", "list_errors"]

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
        #: The ``x-kubernetes-validations`` rules, compiled (:mod:`zkop_testing.apiserver_cel`).
        self.rules = CelRules(openapi_schema)

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
        return self._render(self.iter_errors(self._instance(obj)), prefix)

    def _instance(self, obj: Any) -> Any:
        return {k: v for k, v in obj.items() if k != "metadata"} if self.resource and isinstance(obj, Mapping) \
            else obj

    def validate_update(self, obj: Any, old: Any, prefix: str = "") -> list[FieldError]:
        """Validate an update with validation ratcheting (feature CRDValidationRatcheting, beta and on
        since 1.30): an error is dropped when the value it is about is unchanged from ``old``.

        Follows kube-openapi ``pkg/validation/validate/ratcheting.go`` (as used by
        apiextensions-apiserver ``pkg/apiserver/validation/ratcheting.go``): values are correlated
        by object key, and list items only in ``x-kubernetes-list-type: map`` lists (by their
        keys); an error below an uncorrelatable list item is kept unless the whole list is unchanged.
        """
        new_instance, old_instance = self._instance(obj), self._instance(old)
        kept = (err for err in self.iter_errors(new_instance)
                if not _ratchets(list(err.absolute_path), new_instance, old_instance, self.schema))
        return self._render(kept, prefix)

    def _render(self, errs: Iterable[ValidationError], prefix: str) -> list[FieldError]:
        errors: list[FieldError] = []
        seen: set[tuple[str, str]] = set()
        for err in errs:
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
        if kw == "minItems":  # kube-openapi TooFewItems reports the count
            return [FieldError.invalid(path, len(value) if isinstance(value, list) else value,
                                       f"{where} in body should have at least {bound} items")]
        if kw == "maxItems":
            return [FieldError.too_many(path, len(value) if isinstance(value, list) else -1,
                                        int(bound))]
        if kw == "minProperties":  # kube-openapi TooFewProperties reports the count
            return [FieldError.invalid(path, len(value) if isinstance(value, dict) else value,
                                       f"{where} in body should have at least "
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


_MISSING = object()


def list_errors(value: Any, schema: Any, where: str = "") -> list[FieldError]:
    """Duplicates in ``x-kubernetes-list-type`` ``set`` and ``map`` lists (listtype/validation.go
    ``ValidateListSetsAndMaps``): ``Duplicate value`` at the repeated item (for maps: its keys)."""
    if not isinstance(schema, Mapping):
        return []
    errors: list[FieldError] = []
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            sub = props.get(key) if key in props else additional
            errors.extend(list_errors(item, sub, f"{where}.{key}" if where else str(key)))
    elif isinstance(value, list):
        kind = schema.get("x-kubernetes-list-type")
        if kind in ("set", "map"):
            keys = schema.get("x-kubernetes-list-map-keys") or []
            seen: set[str] = set()
            for i, item in enumerate(value):
                probe = {k: item[k] for k in keys if k in item} if kind == "map" and isinstance(item, dict) else item
                text = json.dumps(probe, sort_keys=True)
                if text in seen:
                    errors.append(FieldError.duplicate(f"{where}[{i}]", probe))
                seen.add(text)
        for i, item in enumerate(value):
            errors.extend(list_errors(item, schema.get("items"), f"{where}[{i}]"))
    return errors


def _ratchets(path: list[Any], new: Any, old: Any, schema: Any) -> bool:
    """Whether an error at ``path`` of ``new`` is about a value that is unchanged in ``old``."""
    for step in path:
        if new == old:
            return True
        schema = schema if isinstance(schema, Mapping) else {}
        if isinstance(step, str):
            if not isinstance(new, Mapping) or not isinstance(old, Mapping) or step not in old:
                return False
            props = schema.get("properties") or {}
            schema = props.get(step, schema.get("additionalProperties"))
            new, old = new.get(step, _MISSING), old[step]
            continue
        keys = schema.get("x-kubernetes-list-map-keys")
        if schema.get("x-kubernetes-list-type") != "map" or not keys or not isinstance(new, list) or \
                not isinstance(old, list) or not isinstance(step, int) or step >= len(new):
            return False
        item = new[step]
        if not isinstance(item, Mapping):
            return False
        match = [o for o in old if isinstance(o, Mapping) and all(o.get(k) == item.get(k) for k in keys)]
        if not match:
            return False
        schema, new, old = schema.get("items"), item, match[0]
    return bool(new == old)


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
    if not errors:
        try:
            CelRules(openapi_schema, path)
        except ValueError as err:
            field, _, detail = str(err).partition(": ")
            errors.append(FieldError.invalid(field, "", detail))
    return errors
