"""``Status`` errors and field errors of the in-memory API server.

Mirrors ``k8s.io/apimachinery/pkg/api/errors`` (the ``Status`` bodies an API
server answers with) and ``k8s.io/apimachinery/pkg/util/validation/field``
(how validation failures are rendered into ``details.causes`` and the message
``Kind "name" is invalid: path: Invalid value: ...``). See the Kubernetes API
conventions, "Response Status Kind".
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "OMIT",
    "ApiError",
    "FieldError",
    "GoRaw",
    "already_exists",
    "bad_request",
    "conflict",
    "expired",
    "forbidden",
    "go_quote",
    "go_repr",
    "internal_error",
    "invalid",
    "method_not_allowed",
    "not_found",
    "status_failure",
    "status_success",
    "unsupported_media_type",
]

JSON = dict[str, Any]


class _Omit:
    """Sentinel: the field error carries no value (``field.OmitValueType`` in Go)."""

    def __repr__(self) -> str:
        return "OMIT"


OMIT: Any = _Omit()


@dataclass(frozen=True)
class GoRaw:
    """A value printed verbatim in a field error (e.g. ``0x0`` for an unset uint64)."""

    text: str

# field.ErrorType -> the text Go prints in ErrorBody().
_TYPE_TEXT = {
    "FieldValueNotFound": "Not found",
    "FieldValueRequired": "Required value",
    "FieldValueDuplicate": "Duplicate value",
    "FieldValueInvalid": "Invalid value",
    "FieldValueTypeInvalid": "Invalid value",
    "FieldValueNotSupported": "Unsupported value",
    "FieldValueForbidden": "Forbidden",
    "FieldValueTooLong": "Too long",
    "FieldValueTooMany": "Too many",
    "InternalError": "Internal error",
}
_NO_VALUE_TYPES = {"FieldValueRequired", "FieldValueForbidden", "FieldValueTooLong", "InternalError"}


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
               "\v": "\\v", '"': '\\"', "\\": "\\\\"}


def go_quote(text: str) -> str:
    """Go's ``strconv.Quote`` (``%q``): printable runes as they are (``unicode.IsPrint``, which
    ``str.isprintable`` follows), ``\\n``-style escapes, ``\\x7f`` below U+0020 and for DEL,
    ``\\u00a0``/``\\U0001f600`` for other unprintable runes."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def go_repr(value: Any) -> str:
    """Render a JSON value roughly the way Go's ``%#v``/``%q`` does in field errors.

    Strings are double-quoted, numbers and booleans printed plainly, ``None`` is
    ``null``, lists of strings become ``[]string{"a", "b"}`` and other containers
    ``[]interface {}{...}`` / ``map[string]interface {}{...}``.
    """
    if value is None:
        return "null"
    if isinstance(value, GoRaw):
        return value.text
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value) if isinstance(value, float) else str(value)
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, list):
        if all(isinstance(v, str) for v in value):
            return "[]string{" + ", ".join(go_quote(v) for v in value) + "}"
        return "[]interface {}{" + ", ".join(go_repr(v) for v in value) + "}"
    if isinstance(value, dict):
        # fmt prints map keys sorted (Go 1.12+)
        inner = ", ".join(f"{json.dumps(str(k))}:{go_repr(v)}" for k, v in sorted(value.items()))
        return "map[string]interface {}{" + inner + "}"
    return str(value)


@dataclass(frozen=True)
class FieldError:
    """One validation failure, like Go's ``field.Error``.

    Attributes:
        type: cause type, e.g. ``FieldValueInvalid``, ``FieldValueRequired``,
            ``FieldValueNotSupported``, ``FieldValueForbidden``, ``FieldValueTooLong``,
            ``FieldValueTooMany``, ``FieldValueDuplicate``, ``FieldValueTypeInvalid``.
        field: dotted path with ``[i]`` indexes, e.g. ``spec.ports[0].port``.
        value: the offending value, or :data:`OMIT`.
        detail: free text appended after the value.
    """

    type: str
    field: str
    value: Any = OMIT
    detail: str = ""

    def body(self) -> str:
        """The text after ``field: `` (Go ``ErrorBody``)."""
        text = _TYPE_TEXT.get(self.type, self.type)
        if self.type not in _NO_VALUE_TYPES and self.value is not OMIT:
            text = f"{text}: {go_repr(self.value)}"
        if self.detail:
            text = f"{text}: {self.detail}"
        return text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}" if self.field else self.body()

    # Constructors named like the Go helpers.
    @staticmethod
    def required(path: str, detail: str = "") -> FieldError:
        """``field.Required``."""
        return FieldError("FieldValueRequired", path, OMIT, detail)

    @staticmethod
    def invalid(path: str, value: Any, detail: str) -> FieldError:
        """``field.Invalid``."""
        return FieldError("FieldValueInvalid", path, value, detail)

    @staticmethod
    def type_invalid(path: str, value: Any, detail: str) -> FieldError:
        """``field.TypeInvalid``."""
        return FieldError("FieldValueTypeInvalid", path, value, detail)

    @staticmethod
    def forbidden(path: str, detail: str) -> FieldError:
        """``field.Forbidden``."""
        return FieldError("FieldValueForbidden", path, OMIT, detail)

    @staticmethod
    def not_supported(path: str, value: Any, supported: Sequence[Any]) -> FieldError:
        """``field.NotSupported``: ``Unsupported value: "x": supported values: "a", "b"``."""
        detail = "supported values: " + ", ".join(
            json.dumps(v) if isinstance(v, str) else go_repr(v) for v in supported
        )
        return FieldError("FieldValueNotSupported", path, value, detail)

    @staticmethod
    def too_long(path: str, max_length: int) -> FieldError:
        """``field.TooLong``."""
        return FieldError("FieldValueTooLong", path, OMIT, f"may not be more than {max_length} bytes")

    @staticmethod
    def too_many(path: str, actual: int, max_items: int) -> FieldError:
        """``field.TooMany``."""
        return FieldError("FieldValueTooMany", path, actual, f"must have at most {max_items} items")

    @staticmethod
    def duplicate(path: str, value: Any) -> FieldError:
        """``field.Duplicate``."""
        return FieldError("FieldValueDuplicate", path, value, "")


@dataclass
class ApiError(Exception):
    """An error answered as a ``Status`` object with HTTP status ``code``.

    Attributes:
        code: HTTP status code.
        reason: ``StatusReason`` (``NotFound``, ``AlreadyExists``, ``Conflict``,
            ``Invalid``, ``Expired``, ``Gone``, ``BadRequest``, ``MethodNotAllowed``,
            ``UnsupportedMediaType``, ``TooManyRequests``, ``InternalError``, ...);
            empty for ``StatusReasonUnknown``.
        message: human readable text.
        details: ``StatusDetails`` (``name``, ``group``, ``kind``, ``uid``, ``causes``,
            ``retryAfterSeconds``) or ``None``.
        headers: extra response headers (``Retry-After``).
    """

    code: int
    reason: str
    message: str
    details: JSON | None = None
    headers: dict[str, str] = field(default_factory=dict)
    #: ``metadata`` of the ``Status`` (ListMeta: ``continue`` of an expired list continuation)
    list_meta: JSON = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.code} {self.reason}: {self.message}"

    def status(self) -> JSON:
        """The ``Status`` body."""
        body = status_failure(self.code, self.reason, self.message, self.details)
        body["metadata"] = dict(self.list_meta)
        return body


def status_failure(code: int, reason: str, message: str, details: JSON | None = None) -> JSON:
    """Build a failure ``Status`` dict (keys omitted when empty, like Go's ``omitempty``)."""
    body: JSON = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure"}
    if message:
        body["message"] = message
    if reason:
        body["reason"] = reason
    if details is not None:
        body["details"] = {k: v for k, v in details.items() if v not in (None, "", [], 0)}
    body["code"] = code
    return body


def status_success(name: str, group: str, resource: str, uid: str) -> JSON:
    """The ``Status`` a delete answers with when the resource does not return the deleted object."""
    details = {k: v for k, v in {"name": name, "group": group, "kind": resource, "uid": uid}.items() if v}
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}


def _details(name: str, group: str, kind: str, causes: list[JSON] | None = None) -> JSON:
    return {"name": name, "group": group, "kind": kind, "causes": causes or []}


def _qualified(resource: str, group: str) -> str:
    return f"{resource}.{group}" if group else resource


def not_found(group: str, resource: str, name: str) -> ApiError:
    """``errors.NewNotFound``: 404 ``<resource>[.<group>] "name" not found``."""
    return ApiError(404, "NotFound", f'{_qualified(resource, group)} "{name}" not found',
                    _details(name, group, resource))


def already_exists(group: str, resource: str, name: str) -> ApiError:
    """``errors.NewAlreadyExists``: 409 ``... "name" already exists``."""
    return ApiError(409, "AlreadyExists", f'{_qualified(resource, group)} "{name}" already exists',
                    _details(name, group, resource))


def conflict(group: str, resource: str, name: str, why: str) -> ApiError:
    """``errors.NewConflict``: 409 ``Operation cannot be fulfilled on <res> "name": <why>``."""
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {_qualified(resource, group)} "{name}": {why}',
                    _details(name, group, resource))


def invalid(group: str, kind: str, name: str, errors: Sequence[FieldError]) -> ApiError:
    """``errors.NewInvalid``: 422 ``Kind[.group] "name" is invalid: <aggregate>`` with ``details.causes``."""
    causes = [{"reason": e.type, "message": e.body(), "field": e.field} for e in errors]
    qualified = _qualified(kind, group)
    if not errors:
        message = f'{qualified} "{name}" is invalid'
    elif len(errors) == 1:
        message = f'{qualified} "{name}" is invalid: {errors[0]}'
    else:
        message = f'{qualified} "{name}" is invalid: [' + ", ".join(str(e) for e in errors) + "]"
    return ApiError(422, "Invalid", message, _details(name, group, kind, causes))


def bad_request(message: str) -> ApiError:
    """``errors.NewBadRequest``: 400."""
    return ApiError(400, "BadRequest", message)


def forbidden(group: str, resource: str, name: str, why: str, causes: list[JSON] | None = None) -> ApiError:
    """``errors.NewForbidden``: 403 ``<res> "name" is forbidden: <why>``."""
    qualified = _qualified(resource, group)
    message = f'{qualified} "{name}" is forbidden: {why}' if name else f"{qualified} is forbidden: {why}"
    return ApiError(403, "Forbidden", message, _details(name, group, resource, causes))


def method_not_allowed(message: str, group: str = "", resource: str = "", name: str = "") -> ApiError:
    """405 ``MethodNotAllowed``."""
    return ApiError(405, "MethodNotAllowed", message, _details(name, group, resource) if resource else None)


def unsupported_media_type(content_type: str, accepted: Sequence[str]) -> ApiError:
    """415 ``UnsupportedMediaType`` as answered for an unknown patch/body type."""
    message = ("the body of the request was in an unknown format - accepted media types include: "
               + ", ".join(accepted))
    return ApiError(415, "UnsupportedMediaType", message, {"causes": []} if not content_type else None)


def expired(message: str) -> ApiError:
    """``errors.NewResourceExpired``: 410 reason ``Expired``."""
    return ApiError(410, "Expired", message)


def internal_error(message: str) -> ApiError:
    """``errors.NewInternalError``: 500 ``Internal error occurred: <message>``."""
    return ApiError(500, "InternalError", f"Internal error occurred: {message}",
                    {"causes": [{"message": message}]})


def status_from_mapping(body: Mapping[str, Any]) -> ApiError:
    """Rebuild an :class:`ApiError` from a ``Status`` dict (used by tests and the CLI)."""
    return ApiError(int(body.get("code", 500)), str(body.get("reason", "")), str(body.get("message", "")),
                    dict(body.get("details") or {}) or None)
