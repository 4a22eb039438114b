"""Patch mechanics: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and a strategic merge patch subset.

The strategic merge patch implemented here is the subset needed by the
built-in kinds the in-memory server serves: it behaves like a merge patch
except for lists whose Go type declares ``patchStrategy:"merge"``
(``metadata.finalizers``, ``metadata.ownerReferences`` keyed by ``uid``,
``spec.ports`` of Services keyed by ``port``, ``status.conditions`` keyed by
``type``), and it understands the ``$patch`` (``replace``/``delete``),
``$deleteFromPrimitiveList/<field>``, ``$setElementOrder/<field>`` and
``$retainKeys`` directives (Kubernetes docs, "Update API Objects in Place Using
kubectl patch").
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch

from zkop_testing.apiserver_errors import ApiError, bad_request

__all__ = ["apply_json_patch", "apply_merge_patch", "apply_strategic_merge_patch"]

_PRIMITIVE = ""
# path (without list indexes) -> merge key ("" for a list of scalars merged as a set)
_MERGE_LISTS: dict[tuple[str, ...], str] = {
    ("metadata", "finalizers"): _PRIMITIVE,
    ("metadata", "ownerReferences"): "uid",
    ("spec", "ports"): "port",
    ("status", "conditions"): "type",
}


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` deletes, everything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result


def apply_json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 via ``jsonpatch``.

    Raises:
        ApiError: 400 when the body is not a JSON array of operations; 422
            (``the server rejected our request due to an error in our request``,
            cause ``UnexpectedServerResponse``) when an operation fails, which is
            what kube-apiserver answers for a failed ``test``.
    """
    if not isinstance(operations, list):
        raise bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    try:
        return jsonpatch.JsonPatch(operations).apply(copy.deepcopy(target))
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError, KeyError,
            IndexError, ValueError) as exc:
        raise ApiError(422, "Invalid", "the server rejected our request due to an error in our request",
                       {"causes": [{"reason": "UnexpectedServerResponse", "message": str(exc)}]}) from exc


def apply_strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Apply a strategic merge patch (subset, see the module docstring) to a built-in object.

    Raises:
        ApiError: 400 for a body that is not a JSON object.
    """
    if not isinstance(patch, dict):
        raise bad_request("json: cannot unmarshal array into Go value of type map[string]interface {}")
    result = _merge_map(target if isinstance(target, dict) else {}, patch, ())
    return {} if result is None else result


def _merge_map(original: dict[str, Any], patch: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any] | None:
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    result = copy.deepcopy(original)
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list) and isinstance(value, list):
                result[field] = [v for v in result[field] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
            continue
        sub_path = (*path, key)
        current = result.get(key)
        if isinstance(value, dict):
            merged = _merge_map(current if isinstance(current, dict) else {}, value, sub_path)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list) and sub_path[-2:] in _MERGE_LISTS and isinstance(current, list):
            result[key] = _merge_list(current, value, _MERGE_LISTS[sub_path[-2:]], sub_path)
        else:
            result[key] = copy.deepcopy(value)
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_list(original: list[Any], patch: list[Any], merge_key: str, path: tuple[str, ...]) -> list[Any]:
    if merge_key == _PRIMITIVE:
        result = list(original)
        for item in patch:
            if item not in result:
                result.append(item)
        return result
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [copy.deepcopy(i) for i in patch if not (isinstance(i, dict) and i.get("$patch") == "replace")]
    result = [copy.deepcopy(i) for i in original]
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            result.append(copy.deepcopy(item))
            continue
        index = next((i for i, existing in enumerate(result)
                      if isinstance(existing, dict) and existing.get(merge_key) == item[merge_key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                del result[index]
            continue
        if index is None:
            result.append({k: copy.deepcopy(v) for k, v in item.items() if k != "$patch"})
        else:
            merged = _merge_map(result[index], item, path)
            if merged is not None:
                result[index] = merged
    return result
