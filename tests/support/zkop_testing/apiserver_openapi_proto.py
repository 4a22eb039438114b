"""``/openapi/v2`` as protobuf: the Swagger 2.0 document in gnostic's ``openapi.v2.Document`` message.

kubectl before OpenAPI v3 (< 1.27; Debian 12's ``kubernetes-client`` is 1.20) asks for the v2
document only as protobuf (``Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf``,
client-go ``discovery.OpenAPISchema``) and needs it for ``apply`` (client-side validation and
merge strategy), ``explain`` and ``create -f``; kube-apiserver serves it
(``k8s.io/kube-openapi/pkg/handler/handler.go``, ``ToProtoBinary``).

The message layout is gnostic's ``openapiv2/OpenAPIv2.proto`` (field numbers below). Encoded
here: ``swagger``, ``info``, ``definitions`` with every Schema field a Swagger 2.0 schema
has, and ``paths`` with their operations, non-body parameters (query and path) and ``200``
responses -- kubectl before 1.27 decides whether the server supports ``dryRun`` by finding that
query parameter on the PATCH operation whose ``x-kubernetes-group-version-kind`` is the kind's
(``k8s.io/kubectl/pkg/cmd/util`` ``SupportsQueryParam``). Vendor extensions, ``default``,
``enum`` and ``example`` are ``Any.yaml`` (YAML text, which JSON is), which is how kube-openapi
reads them back (``pkg/util/proto/document.go`` ``vendorExtensionToMap``).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from typing import Any

__all__ = ["ACCEPTED", "OPENAPI_V2_PROTOBUF", "encode_document"]

#: The answer's ``Content-Type`` (kube-openapi ``subTypeProtobuf``: ``@`` is no MIME token character,
#: Go's ``mime.ParseMediaType`` in the client refuses the older spelling).
OPENAPI_V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
#: What ``Accept`` may name (kube-openapi ``pkg/handler/handler.go``: ``subTypeProtobufDeprecated`` too).
ACCEPTED = (OPENAPI_V2_PROTOBUF, "application/com.github.proto-openapi.spec.v2@v1.0+protobuf")

# openapi.v2.Schema field numbers (gnostic openapiv2/OpenAPIv2.proto).
_SCHEMA_STRINGS = {"$ref": 1, "format": 2, "title": 3, "description": 4, "pattern": 13, "discriminator": 26}
_SCHEMA_DOUBLES = {"multipleOf": 6, "maximum": 7, "minimum": 9}
_SCHEMA_BOOLS = {"exclusiveMaximum": 8, "exclusiveMinimum": 10, "uniqueItems": 16, "readOnly": 27}
_SCHEMA_INTS = {"maxLength": 11, "minLength": 12, "maxItems": 14, "minItems": 15, "maxProperties": 17,
                "minProperties": 18}


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # int64 negatives as ten-byte two's complement, as protobuf does
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _bytes(number: int, payload: bytes) -> bytes:
    return _key(number, 2) + _varint(len(payload)) + payload


def _string(number: int, text: str) -> bytes:
    return _bytes(number, text.encode())


def _any(value: Any) -> bytes:
    """``openapi.v2.Any``: ``yaml`` = 2 (JSON is YAML)."""
    return _string(2, json.dumps(value))


def _named_any(number: int, name: str, value: Any) -> bytes:
    """A ``repeated NamedAny`` entry: ``name`` = 1, ``value`` = 2."""
    return _bytes(number, _string(1, name) + _bytes(2, _any(value)))


def _schema(schema: Mapping[str, Any]) -> bytes:
    """``openapi.v2.Schema`` of a Swagger 2.0 schema object."""
    out = bytearray()
    for name, number in _SCHEMA_STRINGS.items():
        if isinstance(schema.get(name), str):
            out += _string(number, schema[name])
    if "default" in schema:
        out += _bytes(5, _any(schema["default"]))
    for name, number in _SCHEMA_DOUBLES.items():
        if isinstance(schema.get(name), (int, float)) and not isinstance(schema.get(name), bool):
            out += _key(number, 1) + struct.pack("<d", float(schema[name]))
    for name, number in _SCHEMA_BOOLS.items():
        if schema.get(name) is True:
            out += _key(number, 0) + b"\x01"
    for name, number in _SCHEMA_INTS.items():
        if isinstance(schema.get(name), int) and not isinstance(schema.get(name), bool):
            out += _key(number, 0) + _varint(schema[name])
    for required in schema.get("required") or []:
        out += _string(19, str(required))
    for value in schema.get("enum") or []:
        out += _bytes(20, _any(value))
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping):
        out += _bytes(21, _bytes(1, _schema(extra)))  # AdditionalPropertiesItem.schema = 1
    elif isinstance(extra, bool):
        out += _bytes(21, _key(2, 0) + (b"\x01" if extra else b"\x00"))  # .boolean = 2
    types = schema.get("type")
    if types:
        out += _bytes(22, b"".join(_string(1, t) for t in ([types] if isinstance(types, str) else types)))
    items = schema.get("items")
    if isinstance(items, Mapping):
        out += _bytes(23, _bytes(1, _schema(items)))  # ItemsItem.schema = 1 (repeated)
    for part in schema.get("allOf") or []:
        out += _bytes(24, _schema(part))
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        out += _bytes(25, b"".join(_bytes(1, _string(1, name) + _bytes(2, _schema(sub)))
                                   for name, sub in properties.items()))  # Properties of NamedSchema
    if "example" in schema:
        out += _bytes(30, _any(schema["example"]))
    for name, value in schema.items():
        if name.startswith("x-"):
            out += _named_any(31, name, value)
    return bytes(out)


_VERBS = {"get": 2, "put": 3, "post": 4, "delete": 5, "options": 6, "head": 7, "patch": 8}  # PathItem


def _parameter(parameter: Mapping[str, Any]) -> bytes:
    """``ParametersItem.parameter`` (1) → ``Parameter.non_body_parameter`` (2) → the sub-schema of
    its location: ``query_parameter_sub_schema`` = 3 or ``path_parameter_sub_schema`` = 4 (both:
    required = 1, in = 2, description = 3, name = 4; type is 6 for a query, 5 for a path)."""
    location = str(parameter.get("in", "query"))
    if location not in ("query", "path"):
        return b""
    type_field = 6 if location == "query" else 5
    sub = (_key(1, 0) + b"\x01" if parameter.get("required") else b"") + _string(2, location)
    if parameter.get("description"):
        sub += _string(3, str(parameter["description"]))
    sub += _string(4, str(parameter.get("name", "")))
    if parameter.get("type"):
        sub += _string(type_field, str(parameter["type"]))
    return _bytes(1, _bytes(2, _bytes(3 if location == "query" else 4, sub)))


def _operation(operation: Mapping[str, Any]) -> bytes:
    """``openapi.v2.Operation``: operation_id = 5, parameters = 8, responses = 9 (``200`` with its
    schema), vendor_extension = 13."""
    out = bytearray()
    if operation.get("description"):
        out += _string(3, str(operation["description"]))
    if operation.get("operationId"):
        out += _string(5, str(operation["operationId"]))
    for parameter in operation.get("parameters") or []:
        out += _bytes(8, _parameter(parameter))
    responses = bytearray()
    for code, response in (operation.get("responses") or {}).items():
        body = _string(1, str(response.get("description", "")))
        if isinstance(response.get("schema"), Mapping):
            body += _bytes(2, _bytes(1, _schema(response["schema"])))  # SchemaItem.schema = 1
        # NamedResponseValue{name = 1, value = 2: ResponseValue{response = 1}}
        responses += _bytes(1, _string(1, str(code)) + _bytes(2, _bytes(1, body)))
    if responses:
        out += _bytes(9, bytes(responses))
    for name, value in operation.items():
        if name.startswith("x-"):
            out += _named_any(13, name, value)
    return bytes(out)


def _path_item(item: Mapping[str, Any]) -> bytes:
    out = bytearray()
    for verb, number in _VERBS.items():
        if isinstance(item.get(verb), Mapping):
            out += _bytes(number, _operation(item[verb]))
    for parameter in item.get("parameters") or []:
        out += _bytes(9, _parameter(parameter))
    return bytes(out)


def encode_document(document: Mapping[str, Any]) -> bytes:
    """The ``openapi.v2.Document`` bytes of a Swagger 2.0 document (``swagger`` = 1, ``info`` = 2,
    ``paths`` = 8, ``definitions`` = 9 as ``repeated NamedSchema additional_properties`` = 1)."""
    info = document.get("info") or {}
    out = _string(1, str(document.get("swagger", "2.0")))
    out += _bytes(2, _string(1, str(info.get("title", ""))) + _string(2, str(info.get("version", ""))))
    paths = document.get("paths") or {}
    out += _bytes(8, b"".join(_bytes(2, _string(1, path) + _bytes(2, _path_item(item)))
                              for path, item in paths.items()))  # Paths.path = 2 (NamedPathItem)
    definitions = document.get("definitions") or {}
    out += _bytes(9, b"".join(_bytes(1, _string(1, name) + _bytes(2, _schema(schema)))
                              for name, schema in definitions.items()))
    return out
