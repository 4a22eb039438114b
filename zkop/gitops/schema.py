"""The ZooKeeperConfig CRD's OpenAPI v3 schema, checked with ``jsonschema`` without an API server.

What the API server does to a custom resource before zkop ever sees it, as far
as a file can show: apply the schema's ``default`` values (Kubernetes,
"Defaulting" in "Extend the Kubernetes API with CustomResourceDefinitions"),
then validate against the structural schema. ``x-kubernetes-*`` extensions are
dropped for validation (``x-kubernetes-preserve-unknown-fields`` and
``x-kubernetes-int-or-string`` are honoured); ``nullable: true`` admits ``null``.

Fields the schema does not declare are reported separately by
:meth:`SchemaChecker.unknown_fields`: with kubectl's default
``--validate=strict`` the API server rejects them; otherwise it prunes them silently.
"""

from __future__ import annotations

import copy
import functools
import importlib.resources
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import yaml
from jsonschema import Draft7Validator
from jsonschema.exceptions import ValidationError

from zkop.zkconfig.spec import VERSION

__all__ = ["REPO_CRD_FILE", "FieldProblem", "SchemaChecker", "crd_schema", "load_crd_schema"]

CRD_PACKAGE = "zkop.crds"
CRD_FILENAME = "zookeeperconfigs.yaml"
#: The CRD in a source checkout (editable install): ``<repo>/manifests/crd/zookeeperconfigs.yaml``.
REPO_CRD_FILE = Path(__file__).resolve().parents[2] / "manifests" / "crd" / CRD_FILENAME

_SCHEMA_MAPS = ("properties", "patternProperties", "definitions")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf")
_SCHEMA_ONE = ("items", "additionalProperties", "not")


@dataclass(frozen=True)
class FieldProblem:
    """A schema violation: ``field`` like ``spec.acl[0].permissions``, ``rule`` a short sentence."""

    field: str
    rule: str


def crd_schema(crd: Any, version: str = VERSION) -> dict[str, Any]:
    """The ``openAPIV3Schema`` of ``version`` in a parsed CustomResourceDefinition.

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


@functools.cache
def _load(path: str | None) -> dict[str, Any]:
    if path is not None:
        return crd_schema(yaml.safe_load(Path(path).read_text(encoding="utf-8")))
    try:
        resource = importlib.resources.files(CRD_PACKAGE).joinpath(CRD_FILENAME)
        if resource.is_file():
            return crd_schema(yaml.safe_load(resource.read_text(encoding="utf-8")))
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError):
        pass
    if REPO_CRD_FILE.is_file():
        return crd_schema(yaml.safe_load(REPO_CRD_FILE.read_text(encoding="utf-8")))
    raise FileNotFoundError(
        f"ZooKeeperConfig CRD not found: neither the package resource {CRD_PACKAGE}/{CRD_FILENAME} "
        f"nor {REPO_CRD_FILE} exists; pass the CRD file explicitly (--crd)"
    )


def load_crd_schema(path: str | None = None) -> dict[str, Any]:
    """The ZooKeeperConfig ``openAPIV3Schema`` (version ``v1alpha1``), from the CRD manifest.

    Looks in order at: ``path`` if given; the package resource
    ``zkop.crds/zookeeperconfigs.yaml`` (``importlib.resources``, for a normal
    install); ``manifests/crd/zookeeperconfigs.yaml`` of the source checkout
    this module lives in (editable install). Cached per ``path``; do not mutate.

    Raises:
        FileNotFoundError: no CRD found (or ``path`` missing).
        ValueError: the file is not a CRD with a ``v1alpha1`` schema.
        yaml.YAMLError: the file is not YAML.
    """
    return _load(path)


def to_json_schema(schema: Any) -> Any:
    """A copy of a Kubernetes structural schema that ``jsonschema`` understands.

    Drops ``x-kubernetes-*`` keys, turns ``nullable: true`` into a ``null`` type,
    ``x-kubernetes-int-or-string`` into ``integer|string``, and
    ``x-kubernetes-preserve-unknown-fields`` into "any additional properties".
    """
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key.startswith("x-kubernetes-") or key == "nullable":
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: to_json_schema(sub) for name, sub in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [to_json_schema(sub) for sub in value]
        elif key in _SCHEMA_ONE:
            out[key] = to_json_schema(value)
        else:
            out[key] = value
    if schema.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if schema.get("nullable") and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


def _field(parts: Iterator[Any] | Any) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _rule(err: ValidationError) -> tuple[str, str]:
    """``(field, rule)`` for one jsonschema error, in words that never echo long values."""
    where = _field(err.absolute_path)
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


class SchemaChecker:
    """Defaulting, validation and unknown-field detection against one CRD schema.

    Args:
        schema: an ``openAPIV3Schema`` (see :func:`load_crd_schema`).
    """

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        self._validator = Draft7Validator(to_json_schema(schema))

    def with_defaults(self, obj: Any) -> Any:
        """A deep copy of ``obj`` with the schema's defaults filled in where fields are absent."""
        result = copy.deepcopy(obj)
        _apply_defaults(self.schema, result)
        return result

    def check(self, obj: Any) -> list[FieldProblem]:
        """Schema violations of ``obj`` (apply :meth:`with_defaults` first), sorted by field."""
        problems = {_rule(err) for err in self._validator.iter_errors(obj)}
        return [FieldProblem(f, r) for f, r in sorted(problems)]

    def unknown_fields(self, obj: Any) -> list[str]:
        """Fields of ``obj`` the schema does not declare, e.g. ``["spec.strngData"]``."""
        found: list[str] = []
        _unknown(self.schema, obj, [], found)
        return found


def _apply_defaults(schema: Any, value: Any) -> None:
    if not isinstance(schema, dict):
        return
    if isinstance(value, dict):
        for name, sub in (schema.get("properties") or {}).items():
            if not isinstance(sub, dict):
                continue
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
            if name in value:
                _apply_defaults(sub, value[name])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for name, item in value.items():
                if name not in (schema.get("properties") or {}):
                    _apply_defaults(extra, item)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            _apply_defaults(schema["items"], item)


def _unknown(schema: Any, value: Any, where: list[Any], found: list[str]) -> None:
    if not isinstance(schema, dict) or schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict) and "properties" in schema:
        properties = schema["properties"] or {}
        extra = schema.get("additionalProperties")
        for name, item in value.items():
            if name in properties:
                _unknown(properties[name], item, [*where, name], found)
            elif isinstance(extra, dict):
                _unknown(extra, item, [*where, name], found)
            elif extra is not True:
                found.append(_field([*where, name]))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            _unknown(schema["items"], item, [*where, index], found)
