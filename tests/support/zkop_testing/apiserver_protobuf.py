"""Request bodies in Kubernetes protobuf (``application/vnd.kubernetes.protobuf``), for the kinds kubectl sends so.

kubectl (1.30+; 1.37 here) sends typed bodies as protobuf: ``kubectl create configmap|secret|namespace``
POST a ``k8s\\x00``-prefixed ``runtime.Unknown`` envelope (``typeMeta`` = 1, ``raw`` = 2) holding the
object's message (``k8s.io/apimachinery/pkg/runtime/types_proto.go``; field numbers from
``k8s.io/api/core/v1/generated.proto`` and ``k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto``).
kube-apiserver accepts protobuf for every built-in kind (never for custom resources). Decoded
here: ConfigMap, Secret, Namespace with their ObjectMeta (labels, annotations, finalizers,
ownerReferences, generateName); other kinds answer 415 as a server without a protobuf codec
for them would. Responses stay JSON (kubectl's ``Accept`` lists ``application/json`` too).
"""

from __future__ import annotations

import base64
from typing import Any

from zkop_testing import apiserver_errors as errs

__all__ = ["PROTOBUF", "decode"]

JSON = dict[str, Any]
PROTOBUF = "application/vnd.kubernetes.protobuf"
_MAGIC = b"k8s\x00"


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """The (field number, value) pairs of a message: varints as ``int``, length-delimited as ``bytes``."""
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            out.append((number, value))
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise ValueError("truncated field")
            out.append((number, data[pos:pos + length]))
            pos += length
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
    return out


def _text(value: int | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _map_entry(value: int | bytes, binary: bool) -> tuple[str, str]:
    key, item = "", b""
    for number, part in _fields(value if isinstance(value, bytes) else b""):
        if number == 1:
            key = _text(part)
        elif number == 2 and isinstance(part, bytes):
            item = part
    return key, base64.b64encode(item).decode() if binary else item.decode()


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _owner_reference(data: bytes) -> JSON:
    names = {1: "kind", 3: "name", 4: "uid", 5: "apiVersion"}
    ref: JSON = {}
    for number, value in _fields(data):
        if number in names:
            ref[names[number]] = _text(value)
        elif number in (6, 7):
            ref["controller" if number == 6 else "blockOwnerDeletion"] = bool(value)
    return ref


def _object_meta(data: bytes) -> JSON:
    strings = {1: "name", 2: "generateName", 3: "namespace", 5: "uid", 6: "resourceVersion"}
    meta: JSON = {}
    for number, value in _fields(data):
        if number in strings and _text(value):
            meta[strings[number]] = _text(value)
        elif number in (11, 12):
            key, item = _map_entry(value, False)
            meta.setdefault("labels" if number == 11 else "annotations", {})[key] = item
        elif number == 13 and isinstance(value, bytes):
            meta.setdefault("ownerReferences", []).append(_owner_reference(value))
        elif number == 14:
            meta.setdefault("finalizers", []).append(_text(value))
        elif number == 10 and isinstance(value, int):
            meta["deletionGracePeriodSeconds"] = _signed(value)
    return meta


def _config_map(data: bytes) -> JSON:
    obj: JSON = {}
    for number, value in _fields(data):
        if number == 1 and isinstance(value, bytes):
            obj["metadata"] = _object_meta(value)
        elif number in (2, 3):
            key, item = _map_entry(value, number == 3)
            obj.setdefault("data" if number == 2 else "binaryData", {})[key] = item
        elif number == 4:
            obj["immutable"] = bool(value)
    return obj


def _secret(data: bytes) -> JSON:
    obj: JSON = {}
    for number, value in _fields(data):
        if number == 1 and isinstance(value, bytes):
            obj["metadata"] = _object_meta(value)
        elif number == 2:
            key, item = _map_entry(value, True)
            obj.setdefault("data", {})[key] = item
        elif number == 3 and _text(value):
            obj["type"] = _text(value)
        elif number == 4:
            key, item = _map_entry(value, False)
            obj.setdefault("stringData", {})[key] = item
        elif number == 5:
            obj["immutable"] = bool(value)
    return obj


def _namespace(data: bytes) -> JSON:
    obj: JSON = {}
    for number, value in _fields(data):
        if number == 1 and isinstance(value, bytes):
            obj["metadata"] = _object_meta(value)
        elif number == 2 and isinstance(value, bytes):
            finalizers = [_text(v) for n, v in _fields(value) if n == 1]
            obj["spec"] = {"finalizers": finalizers} if finalizers else {}
    return obj


_KINDS = {("v1", "ConfigMap"): _config_map, ("v1", "Secret"): _secret, ("v1", "Namespace"): _namespace}


def decode(body: bytes, accepted: list[str]) -> JSON:
    """A protobuf request body as the JSON object it encodes.

    Raises:
        ApiError: 415 for a kind without a decoder here, 400 for a malformed body.
    """
    if not body.startswith(_MAGIC):
        raise errs.bad_request("provided data does not appear to be a protobuf message, expected prefix "
                               "[107 56 115 0]")
    try:
        api_version = kind = ""
        raw = b""
        for number, value in _fields(body[len(_MAGIC):]):
            if number == 1 and isinstance(value, bytes):
                for inner, part in _fields(value):
                    if inner == 1:
                        api_version = _text(part)
                    elif inner == 2:
                        kind = _text(part)
            elif number == 2 and isinstance(value, bytes):
                raw = value
        decoder = _KINDS.get((api_version, kind))
        if decoder is None:
            raise errs.unsupported_media_type(PROTOBUF, accepted)
        obj = decoder(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise errs.bad_request(f"unable to decode protobuf body: {exc}") from exc
    return {"apiVersion": api_version, "kind": kind, **obj}
