"""Structural-schema handling for custom resources: pruning, defaulting and validation.

Follows the Kubernetes documentation "Extend the Kubernetes API with
CustomResourceDefinitions": sections "Specifying a structural schema",
"Field pruning", "Defaulting" and "Validation". Validation itself is done by
``jsonschema`` (Draft 7) on a translation of the OpenAPI v3 schema:

* ``nullable: true`` adds ``null`` to ``type`` (and to ``enum``);
* ``x-kubernetes-int-or-string: true`` means ``integer`` or ``string``;
* ``x-kubernetes-*`` extensions are otherwise ignored (CEL rules in
  ``x-kubernetes-validations`` are not evaluated);
* OpenAPI's boolean ``exclusiveMinimum``/``exclusiveMaximum`` become Draft 7 numbers;
* formats ``byte`` (standard base64), ``date-time``, ``date``, ``int32``,
  ``int64``, ``uuid``, ``ipv4``, ``ipv6``, ``cidr`` and ``hostname`` are checked.

Errors are rendered the way apiextensions-apiserver renders go-openapi
results (``spec.x in body must be of type string: "integer"``).
"""

from __future__ import annotations

import base64
import binascii
import copy
import ipaddress
import re
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import jsonschema
from jsonschema import Draft7Validator, FormatChecker
from jsonschema.exceptions import ValidationError

from zkop_testing.apiserver_errors import FieldError
from zkop_testing.apiserver_select import dns1123_subdomain_errors

__all__ = ["CustomResourceSchema", "json_type_name"]

JSON = dict[str, Any]
_ROOT_KEEP = ("apiVersion", "kind", "metadata")


def json_type_name(value: Any) -> str:
    """The OpenAPI type name of a decoded JSON value (``string``, ``integer``, ``object``, ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _format_checker() -> FormatChecker:
    checker = FormatChecker(formats=())

    @checker.checks("byte")
    def _byte(value: object) -> bool:
        if not isinstance(value, str):
            return True
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return False
        return True

    @checker.checks("date-time")
    @checker.checks("datetime")
    def _date_time(value: object) -> bool:
        if not isinstance(value, str):
            return True
        return re.fullmatch(
            r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})", value) is not None

    @checker.checks("date")
    def _date(value: object) -> bool:
        if not isinstance(value, str):
            return True
        try:
            datetime.strptime(value, "%Y-%m-%d")
        except ValueError:
            return False
        return True

    @checker.checks("int32")
    def _int32(value: object) -> bool:
        return not isinstance(value, int) or -(2 ** 31) <= value < 2 ** 31

    @checker.checks("int64")
    def _int64(value: object) -> bool:
        return not isinstance(value, int) or -(2 ** 63) <= value < 2 ** 63

    @checker.checks("uuid")
    def _uuid(value: object) -> bool:
        if not isinstance(value, str):
            return True
        try:
            uuid.UUID(value)
        except ValueError:
            return False
        return True

    @checker.checks("ipv4")
    def _ipv4(value: object) -> bool:
        if not isinstance(value, str):
            return True
        try:
            ipaddress.IPv4Address(value)
        except ValueError:
            return False
        return True

    @checker.checks("ipv6")
    def _ipv6(value: object) -> bool:
        if not isinstance(value, str):
            return True
        try:
            ipaddress.IPv6Address(value)
        except ValueError:
            return False
        return True

    @checker.checks("cidr")
    def _cidr(value: object) -> bool:
        if not isinstance(value, str):
            return True
        try:
            ipaddress.ip_network(value, strict=False)
        except ValueError:
            return False
        return "/" in value

    @checker.checks("hostname")
    def _hostname(value: object) -> bool:
        return not isinstance(value, str) or not dns1123_subdomain_errors(value)

    return checker


_FORMATS = _format_checker()


def _translate(schema: Any) -> Any:
    """Translate an OpenAPI v3 (Kubernetes structural) schema into Draft 7 JSON Schema."""
    if not isinstance(schema, Mapping):
        return schema
    out: JSON = {}
    for key, value in schema.items():
        if key.startswith("x-kubernetes-") or key in ("nullable", "default", "example", "externalDocs",
                                                      "description", "title", "$schema", "id"):
            continue
        if key in ("properties", "patternProperties", "definitions", "dependencies"):
            out[key] = {k: _translate(v) for k, v in value.items()} if isinstance(value, Mapping) else value
        elif key in ("items", "additionalProperties", "additionalItems", "not"):
            if isinstance(value, list):
                out[key] = [_translate(v) for v in value]
            else:
                out[key] = _translate(value)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [_translate(v) for v in value]
        elif key in ("exclusiveMinimum", "exclusiveMaximum"):
            continue
        else:
            out[key] = copy.deepcopy(value)
    for excl, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if schema.get(excl) is True and bound in schema:
            out[excl] = schema[bound]
            out.pop(bound, None)
    if schema.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["type"] = ["integer", "string"]
    if schema.get("nullable") is True:
        t = out.get("type")
        if isinstance(t, str):
            out["type"] = [t, "null"]
        elif isinstance(t, list) and "null" not in t:
            out["type"] = [*t, "null"]
        if "enum" in out and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
    return out


def _path(parts: Iterable[str | int]) -> str:
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text = f"{text}.{part}" if text else str(part)
    return text


class CustomResourceSchema:
    """The ``openAPIV3Schema`` of one custom resource version.

    Args:
        openapi_schema: the ``schema.openAPIV3Schema`` mapping of a CRD version.
            ``metadata`` constraints inside it are ignored (ObjectMeta is handled
            by the server, as in kube-apiserver).
    """

    def __init__(self, openapi_schema: Mapping[str, Any]) -> None:
        schema = copy.deepcopy(dict(openapi_schema))
        props = schema.get("properties")
        if isinstance(props, dict):
            props.pop("metadata", None)
        self.schema: JSON = schema
        self._validator = Draft7Validator(_translate(schema), format_checker=_FORMATS)

    # -------------------------------------------------------------- pruning
    def prune(self, obj: JSON) -> None:
        """Drop, in place, fields not specified by the schema (unless preserved).

        ``apiVersion``, ``kind`` and ``metadata`` at the root are always kept;
        ``x-kubernetes-preserve-unknown-fields: true`` keeps unknown fields of
        that object, ``x-kubernetes-embedded-resource`` keeps apiVersion/kind/metadata.
        """
        self._prune(obj, self.schema, root=True)

    def _prune(self, value: Any, schema: Mapping[str, Any], root: bool = False) -> None:
        if isinstance(value, dict):
            props = schema.get("properties") or {}
            additional = schema.get("additionalProperties")
            preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
            embedded = bool(schema.get("x-kubernetes-embedded-resource"))
            for key in list(value):
                if (root or embedded) and key in _ROOT_KEEP:
                    continue
                if key in props:
                    self._prune(value[key], props[key])
                elif isinstance(additional, Mapping):
                    self._prune(value[key], additional)
                elif additional is True or preserve:
                    continue
                else:
                    del value[key]
        elif isinstance(value, list):
            items = schema.get("items")
            if isinstance(items, Mapping):
                for item in value:
                    self._prune(item, items)

    # -------------------------------------------------------------- defaulting
    def apply_defaults(self, obj: JSON) -> None:
        """Apply ``default`` values in place, recursively, where the parent object exists.

        A missing field, or a ``null`` in a field that is not ``nullable``, gets a
        deep copy of its default; defaults inside array items and
        ``additionalProperties`` are applied to every element.
        """
        self._default(obj, self.schema)

    def _default(self, value: Any, schema: Mapping[str, Any]) -> None:
        if isinstance(value, dict):
            props = schema.get("properties") or {}
            for key, sub in props.items():
                if not isinstance(sub, Mapping) or "default" not in sub:
                    continue
                if key not in value or (value[key] is None and not sub.get("nullable")):
                    value[key] = copy.deepcopy(sub["default"])
            additional = schema.get("additionalProperties")
            for key, item in value.items():
                if key in props and isinstance(props[key], Mapping):
                    self._default(item, props[key])
                elif isinstance(additional, Mapping):
                    self._default(item, additional)
        elif isinstance(value, list):
            items = schema.get("items")
            if isinstance(items, Mapping):
                for item in value:
                    self._default(item, items)

    # -------------------------------------------------------------- validation
    def validate(self, obj: Mapping[str, Any]) -> list[FieldError]:
        """Validate ``obj`` (a whole custom resource); ``metadata`` is not checked here.

        Returns:
            field errors rendered like kube-apiserver, in schema order, without duplicates.
        """
        instance = {k: v for k, v in obj.items() if k != "metadata"}
        errors: list[FieldError] = []
        seen: set[tuple[str, str]] = set()
        for err in self._validator.iter_errors(instance):
            for fe in self._convert(err):
                key = (fe.field, fe.type)
                if key not in seen:
                    seen.add(key)
                    errors.append(fe)
        return errors

    def _convert(self, err: ValidationError) -> list[FieldError]:
        parts = list(err.absolute_path)
        path = _path(parts)
        where = path or "<root>"
        kw = err.validator
        value = err.instance
        bound: Any = err.validator_value
        if kw == "required":
            missing = [p for p in bound if isinstance(value, dict) and p not in value]
            return [FieldError.required(_path([*parts, p])) for p in missing]
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
            return [FieldError.duplicate(_path([*parts, dup[0]]) if dup else path, dup[1] if dup else value)]
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


def check_schema(openapi_schema: Mapping[str, Any], path: str) -> list[FieldError]:
    """Minimal structural checks of a CRD version schema (root ``type: object``, valid JSON Schema).

    Returns:
        field errors with paths under ``path`` (``spec.versions[i].schema.openAPIV3Schema``).
    """
    errors: list[FieldError] = []
    if openapi_schema.get("type") != "object":
        if not openapi_schema.get("type"):
            errors.append(FieldError.required(f"{path}.type", "must not be empty at the root"))
        else:
            errors.append(FieldError.invalid(f"{path}.type", openapi_schema.get("type"),
                                             "must be object at the root"))
    try:
        Draft7Validator.check_schema(_translate(openapi_schema))
    except jsonschema.SchemaError as exc:
        errors.append(FieldError.invalid(path, "", f"invalid schema: {exc.message}"))
    return errors
