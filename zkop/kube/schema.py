"""Kubernetes structural schemas: what kube-apiserver does to a custom resource, without a server.

The one implementation, used by ``zkop validate``/``zkop export`` (:mod:`zkop.gitops.schema`), the
tests' in-memory API server and the manifest tests. It follows ``k8s.io/apiextensions-apiserver``:

* :func:`default` -- ``pkg/apiserver/schema/defaulting/algorithm.go``: a missing property, or a
  ``null`` where not ``nullable``, gets a copy of its ``default``, also in ``additionalProperties``
  and ``items``;
* :func:`prune_nulls` -- ``pkg/apiserver/schema/defaulting/prunenulls.go``;
* :func:`prune` -- ``pkg/apiserver/schema/pruning/algorithm.go``: unspecified fields go, except below
  ``x-kubernetes-preserve-unknown-fields`` and ``apiVersion``/``kind``/``metadata`` of the root and
  of embedded resources;
* :func:`to_json_schema` -- ``pkg/apiserver/validation/validation.go``
  ``ConvertJSONSchemaPropsWithPostProcess``: JSON Schema Draft 7, checked with ``jsonschema``.

:class:`StructuralSchema` bundles the three for one ``openAPIV3Schema`` and renders violations as
short sentences (:class:`FieldProblem`). Imports nothing else of zkop.
"""

from __future__ import annotations

import base64
import binascii
import copy
import ipaddress
import re
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

import jsonschema
from jsonschema import Draft7Validator, FormatChecker
from jsonschema.exceptions import ValidationError

from zkop.kube.types import JSON

__all__ = [
    "FORMATS",
    "FieldProblem",
    "StructuralSchema",
    "crd_version_schema",
    "declares",
    "default",
    "defaulted",
    "field_path",
    "json_type_name",
    "prune",
    "prune_nulls",
    "schema_error",
    "to_json_schema",
]


#: Fields of a resource root (and of an embedded resource) that pruning never drops.
META_FIELDS = frozenset({"apiVersion", "kind", "metadata"})

_DNS1123_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
# kube-openapi pkg/validation/strfmt/default.go DateTimePattern ("." is any character there, too)
_DATE_TIME = re.compile(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$")
# bool before int: True is an int in Python.
_TYPE_NAMES: tuple[tuple[type, str], ...] = (
    (bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (list, "array"), (dict, "object"))
_NOT_VALIDATION = ("nullable", "default", "example", "externalDocs", "description", "title", "$schema", "id")


# --------------------------------------------------------------------------------------------
# lookups
# --------------------------------------------------------------------------------------------


def crd_version_schema(crd: Any, version: str) -> JSON:
    """The ``openAPIV3Schema`` of ``version`` in a parsed CustomResourceDefinition.

    Args:
        crd: a decoded ``apiextensions.k8s.io/v1`` CustomResourceDefinition (any value is accepted).
        version: a version name, e.g. ``"v1alpha1"``.

    Raises:
        ValueError: not a CRD, or it has no such version with a schema.
    """
    versions = crd.get("spec", {}).get("versions") if isinstance(crd, dict) else None
    for entry in versions or []:
        if isinstance(entry, dict) and entry.get("name") == version:
            schema = (entry.get("schema") or {}).get("openAPIV3Schema")
            if isinstance(schema, dict):
                return schema
    raise ValueError(f"the CRD has no version {version!r} with an openAPIV3Schema")


def declares(schema: Mapping[str, Any], path: Iterable[str]) -> bool:
    """Whether ``properties`` lead from ``schema`` through ``path`` (e.g. ``("spec", "acl")``)."""
    node: Any = schema
    for key in path:
        props = node.get("properties", {}) if isinstance(node, Mapping) else {}
        if key not in props:
            return False
        node = props[key]
    return True


def json_type_name(value: Any) -> str:
    """The OpenAPI type name of a decoded JSON value (``string``, ``integer``, ``object``, ...)."""
    if value is None:
        return "null"
    return next((name for kind, name in _TYPE_NAMES if isinstance(value, kind)), type(value).__name__)


def field_path(parts: Iterable[str | int]) -> str:
    """``spec.acl[0].permissions`` for ``["spec", "acl", 0, "permissions"]`` (field.Path's rendering)."""
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text = f"{text}.{part}" if text else str(part)
    return text


# --------------------------------------------------------------------------------------------
# formats (kube-openapi pkg/validation/strfmt, the ones CRDs use)
# --------------------------------------------------------------------------------------------


def _parses(parse: Any, value: object) -> bool:
    if not isinstance(value, str):
        return True
    try:
        parse(value)
    except (ValueError, binascii.Error):
        return False
    return True


def _is_date(text: str) -> bool:
    """strfmt ``IsDate``: ``time.Parse("2006-01-02", text)`` (two-digit month and day)."""
    return re.fullmatch(r"\d{4}-\d{2}-\d{2}", text) is not None and _parses(
        lambda s: datetime.strptime(s, "%Y-%m-%d"), text)


def _is_date_time(text: str) -> bool:
    """strfmt ``IsDateTime``, literally: lower-cased, split at ``t``, a date before and
    ``hh:mm:ss[.f](z|±hh:mm)`` after the first ``t`` (so ``t``/``z`` pass, a space does not)."""
    if len(text) < 4:
        return False
    parts = text.lower().split("t")
    if len(parts) < 2 or not _is_date(parts[0]):
        return False
    match = _DATE_TIME.match(parts[1])
    return match is not None and match[1] <= "23" and match[2] <= "59" and match[3] <= "59"


def _format_checker() -> FormatChecker:
    checker = FormatChecker(formats=())
    checker.checks("byte")(lambda v: _parses(lambda s: base64.b64decode(s, validate=True), v))
    for name in ("date-time", "datetime"):
        checker.checks(name)(lambda v: not isinstance(v, str) or _is_date_time(v))
    checker.checks("date")(lambda v: not isinstance(v, str) or _is_date(v))
    checker.checks("int32")(lambda v: not isinstance(v, int) or -(2 ** 31) <= v < 2 ** 31)
    checker.checks("int64")(lambda v: not isinstance(v, int) or -(2 ** 63) <= v < 2 ** 63)
    checker.checks("uuid")(lambda v: _parses(uuid.UUID, v))
    checker.checks("ipv4")(lambda v: _parses(ipaddress.IPv4Address, v))
    checker.checks("ipv6")(lambda v: _parses(ipaddress.IPv6Address, v))
    checker.checks("cidr")(lambda v: _parses(lambda s: ipaddress.ip_network(s, strict=False), v)
                           and (not isinstance(v, str) or "/" in v))
    checker.checks("hostname")(lambda v: not isinstance(v, str)
                               or (len(v) <= 253 and re.fullmatch(_DNS1123_SUBDOMAIN, v) is not None))
    return checker


#: The format checker used for validation (formats not listed here are not checked, as in kube-openapi).
FORMATS = _format_checker()


# --------------------------------------------------------------------------------------------
# translation, defaulting, pruning
# --------------------------------------------------------------------------------------------


def to_json_schema(schema: Any) -> Any:
    """A JSON Schema Draft 7 copy of a Kubernetes structural schema.

    - ``x-kubernetes-int-or-string: true`` becomes ``type: [integer, string]``;
    - ``nullable: true`` adds ``null`` to ``type`` (and to ``enum``);
    - other ``x-kubernetes-*`` extensions are ignored: CEL rules in ``x-kubernetes-validations`` are
      not evaluated (:func:`zkop.zkconfig.spec.parse_spec` checks each of zkop's; ``tests/validation``
      keeps the two in agreement on kube-apiserver);
    - OpenAPI's boolean ``exclusiveMinimum``/``exclusiveMaximum`` become Draft 7 numbers;
    - ``format`` stays; :data:`FORMATS` checks ``byte`` (standard base64), ``date-time`` (strfmt
      ``IsDateTime``: ``t``/``z`` in either case, no space), ``date``, ``int32``, ``int64``, ``uuid``,
      ``ipv4``, ``ipv6``, ``cidr`` and ``hostname`` (kube-openapi ``strfmt``).

    Args:
        schema: an ``openAPIV3Schema`` or any node of one; non-mappings are returned as they are.
    """
    if not isinstance(schema, Mapping):
        return schema
    out: JSON = {}
    for key, value in schema.items():
        if key.startswith("x-kubernetes-") or key in _NOT_VALIDATION:
            continue
        if key in ("properties", "patternProperties", "definitions", "dependencies"):
            out[key] = {k: to_json_schema(v) for k, v in value.items()} if isinstance(value, Mapping) else value
        elif key in ("items", "additionalProperties", "additionalItems", "not"):
            out[key] = [to_json_schema(v) for v in value] if isinstance(value, list) else to_json_schema(value)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [to_json_schema(v) for v in value]
        elif key not in ("exclusiveMinimum", "exclusiveMaximum"):
            out[key] = copy.deepcopy(value)
    for exclusive, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if schema.get(exclusive) is True and bound in schema:
            out[exclusive] = schema[bound]
            out.pop(bound, None)
    if schema.get("x-kubernetes-int-or-string"):
        out["type"] = ["integer", "string"]
    if schema.get("nullable") is True:
        kind = out.get("type")
        if isinstance(kind, str):
            out["type"] = [kind, "null"]
        elif isinstance(kind, list) and "null" not in kind:
            out["type"] = [*kind, "null"]
        if "enum" in out and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
    return out


def _non_nullable_null(value: Any, schema: Any) -> bool:
    return value is None and isinstance(schema, Mapping) and not schema.get("nullable")


def default(value: Any, schema: Any) -> None:
    """Apply the schema's ``default`` values to ``value`` in place (defaulting/algorithm.go ``Default``).

    A property that is missing, or ``null`` where its schema is not ``nullable``, gets a deep
    copy of its default; the same for ``null`` entries of ``additionalProperties`` maps and of
    arrays whose ``items`` have a default. Recurses into every property present.
    """
    if not isinstance(schema, Mapping):
        return
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for key, sub in props.items():
            if isinstance(sub, Mapping) and "default" in sub and (
                    key not in value or _non_nullable_null(value[key], sub)):
                value[key] = copy.deepcopy(sub["default"])
        additional = schema.get("additionalProperties")
        for key in value:
            if key in props:
                default(value[key], props[key])
            elif isinstance(additional, Mapping):
                if _non_nullable_null(value[key], additional) and "default" in additional:
                    value[key] = copy.deepcopy(additional["default"])
                default(value[key], additional)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for index, item in enumerate(value):
                if _non_nullable_null(item, items) and "default" in items:
                    value[index] = copy.deepcopy(items["default"])
                default(value[index], items)


def defaulted(value: Any, schema: Any) -> Any:
    """``value`` with the schema's defaults applied, without changing ``value`` (copy on write).

    The same result as :func:`default` on a deep copy, but ``value`` itself (no copy at all)
    is returned when no default applies, and only the containers on the way to an applied
    default are copied: cheap enough to run on every read, as kube-apiserver's decoder
    defaults every custom resource it reads from storage.
    """
    if not isinstance(schema, Mapping):
        return value
    if isinstance(value, dict):
        out: dict[str, Any] | None = None
        props = schema.get("properties") or {}
        for key, sub in props.items():
            if isinstance(sub, Mapping) and "default" in sub and (
                    key not in value or _non_nullable_null(value[key], sub)):
                out = dict(value) if out is None else out
                out[key] = copy.deepcopy(sub["default"])
        current = value if out is None else out
        additional = schema.get("additionalProperties")
        for key in list(current):
            sub = props.get(key) if key in props else additional
            child = current[key]
            if key not in props and isinstance(additional, Mapping) and _non_nullable_null(child, additional) \
                    and "default" in additional:
                child = copy.deepcopy(additional["default"])
            new = defaulted(child, sub)
            if new is not current[key]:
                out = dict(value) if out is None else out
                current = out
                out[key] = new
        return value if out is None else out
    if isinstance(value, list):
        items = schema.get("items")
        if not isinstance(items, Mapping):
            return value
        result: list[Any] | None = None
        for index, item in enumerate(value):
            child = copy.deepcopy(items["default"]) if _non_nullable_null(item, items) and "default" in items \
                else item
            new = defaulted(child, items)
            if new is not item:
                result = list(value) if result is None else result
                result[index] = new
        return value if result is None else result
    return value


def prune_nulls(value: Any, schema: Any) -> None:
    """Drop, in place, ``null`` values whose schema is not ``nullable`` and has no ``default``.

    ``PruneNonNullableNullsWithoutDefaults`` (defaulting/prunenulls.go): kube-apiserver runs it
    right after pruning, before defaulting and validation; a ``null`` with a default is left
    for :func:`default`. Fields the schema does not know are left alone.
    """
    schema = schema if isinstance(schema, Mapping) else None
    if isinstance(value, dict):
        props = (schema or {}).get("properties") or {}
        additional = (schema or {}).get("additionalProperties")
        for key in list(value):
            sub = props.get(key) if key in props else (additional if isinstance(additional, Mapping) else None)
            if value[key] is None and isinstance(sub, Mapping) and not sub.get("nullable") and "default" not in sub:
                del value[key]
            else:
                prune_nulls(value[key], sub)
    elif isinstance(value, list):
        items = (schema or {}).get("items")
        for item in value:
            prune_nulls(item, items)


def prune(value: Any, schema: Mapping[str, Any], *, root: bool = True) -> list[str]:
    """Drop, in place, the fields ``schema`` does not specify (pruning/algorithm.go ``Prune``).

    Args:
        value: a decoded object (changed in place).
        schema: its structural schema.
        root: ``value`` is a whole resource: ``apiVersion``, ``kind`` and ``metadata`` are kept
            (as for ``x-kubernetes-embedded-resource`` objects).

    Returns:
        the dropped fields, e.g. ``["spec.strngData", "spec.acl[0].x"]``, in document order.
        ``additionalProperties: true`` keeps everything below it.
    """
    dropped: list[str] = []
    _prune(value, schema, [], dropped, embedded=root)
    return dropped


def _prune(value: Any, schema: Any, where: list[str | int], dropped: list[str], *, embedded: bool) -> None:
    # A missing schema (an array without items) prunes everything below, as Go's nil *Structural.
    schema = schema if isinstance(schema, Mapping) else {}
    embedded = embedded or bool(schema.get("x-kubernetes-embedded-resource"))
    preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for key in list(value):
            if embedded and key in META_FIELDS:
                continue
            if key in props:
                _prune(value[key], props[key], [*where, key], dropped, embedded=False)
            elif isinstance(additional, Mapping):
                _prune(value[key], additional, [*where, key], dropped, embedded=False)
            elif not (additional is True or preserve):
                dropped.append(field_path([*where, key]))
                del value[key]
    elif isinstance(value, list) and not (preserve and not isinstance(schema.get("items"), Mapping)):
        for index, item in enumerate(value):
            _prune(item, schema.get("items"), [*where, index], dropped, embedded=False)


def schema_error(openapi_schema: Mapping[str, Any]) -> str | None:
    """Why ``openapi_schema`` is not a usable schema (its JSON Schema translation is invalid), or ``None``."""
    try:
        Draft7Validator.check_schema(to_json_schema(openapi_schema))
    except jsonschema.SchemaError as exc:
        return str(exc.message)
    return None


# --------------------------------------------------------------------------------------------
# one schema
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldProblem:
    """A schema violation: ``field`` like ``spec.acl[0].permissions``, ``rule`` a short sentence."""

    field: str
    rule: str


class StructuralSchema:
    """Defaulting, pruning and validation against one ``openAPIV3Schema``.

    Args:
        schema: the ``schema.openAPIV3Schema`` mapping of a CRD version (kept, not copied:
            do not mutate it afterwards).
    """

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema: Mapping[str, Any] = schema
        self.validator = Draft7Validator(to_json_schema(schema), format_checker=FORMATS)

    def default(self, obj: Any) -> None:
        """Drop non-nullable ``null`` values and apply defaults to ``obj`` in place.

        :func:`prune_nulls` then :func:`default`, the order of kube-apiserver's decoder.
        """
        prune_nulls(obj, self.schema)
        default(obj, self.schema)

    def defaulted(self, obj: Any) -> Any:
        """``obj`` with defaults applied, copied only where a default applies (see :func:`defaulted`)."""
        return defaulted(obj, self.schema)

    def with_defaults(self, obj: Any) -> Any:
        """A deep copy of ``obj`` with non-nullable ``null`` values dropped and the defaults applied."""
        result = copy.deepcopy(obj)
        self.default(result)
        return result

    def prune(self, obj: Any) -> list[str]:
        """Drop unspecified fields of the resource ``obj`` in place; returns them (see :func:`prune`)."""
        return prune(obj, self.schema, root=True)

    def unknown_fields(self, obj: Any) -> list[str]:
        """Fields of the resource ``obj`` that pruning would drop, e.g. ``["spec.strngData"]``.

        With kubectl's default ``--validate=strict`` the API server rejects them; otherwise it
        drops them silently.
        """
        return prune(copy.deepcopy(obj), self.schema, root=True)

    def iter_errors(self, obj: Any) -> Iterator[ValidationError]:
        """The ``jsonschema`` errors of ``obj`` (apply defaults first), in schema order."""
        return cast(Iterator[ValidationError], self.validator.iter_errors(obj))

    def check(self, obj: Any) -> list[FieldProblem]:
        """Schema violations of ``obj`` (apply :meth:`with_defaults` first) in short words, sorted by field."""
        problems = {_rule(err) for err in self.iter_errors(obj)}
        return [FieldProblem(f, r) for f, r in sorted(problems)]


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _rule(err: ValidationError) -> tuple[str, str]:
    """``(field, rule)`` for one jsonschema error, in words that never echo long values."""
    where = field_path(err.absolute_path)
    kind, expected = err.validator, cast(Any, err.validator_value)
    if kind == "required":
        missing = next((name for name in expected if isinstance(err.instance, dict) and name not in err.instance),
                       "?")
        return (f"{where}.{missing}" if where else str(missing)), "is required"
    if kind == "oneOf" and all(isinstance(s, dict) and list(s) == ["required"] for s in expected):
        names = ", ".join(f"{where}.{s['required'][0]}" if where else s["required"][0] for s in expected)
        return where, f"exactly one of {names} must be set"
    if kind == "type":
        types = expected if isinstance(expected, list) else [expected]
        return where, f"must be of type {' or '.join(map(str, types))}, not {type(err.instance).__name__}"
    if kind == "enum":
        return where, f"must be one of {', '.join(map(str, expected))}, not {_short(err.instance)}"
    if kind == "pattern":
        return where, f"does not match the pattern {expected}"
    if kind in ("minLength", "maxLength"):
        word = "at least" if kind == "minLength" else "at most"
        return where, f"must be {word} {expected} characters long"
    if kind in ("minItems", "maxItems"):
        word = "at least" if kind == "minItems" else "at most"
        return where, f"must have {word} {expected} items"
    if kind in ("minimum", "maximum"):
        word = "at least" if kind == "minimum" else "at most"
        return where, f"must be {word} {expected}"
    message = err.message if len(err.message) <= 160 else err.message[:159] + "…"
    return where, f"violates {kind}: {message}"
