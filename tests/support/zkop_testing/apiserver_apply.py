"""Server-side apply and ``metadata.managedFields`` for the in-memory API server.

Follows kube-apiserver's field manager (``k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager``,
``k8s.io/apimachinery/pkg/util/managedfields/internal``) and sigs.k8s.io/structured-merge-diff
(``merge/update.go``: ``Update``, ``Apply``, ``prune``, ``addBackOwnedItems``; ``typed``:
``ToFieldSet``, ``Compare``, ``Merge``), as documented in kubernetes.io "Server-Side Apply":

* Every create/update/patch (and ``/status`` write) records ownership in
  ``metadata.managedFields``: one entry per manager identity (``manager``,
  ``operation``, ``subresource``, and for ``Update`` the ``apiVersion``), with a
  ``FieldsV1`` set (``f:<field>``, ``k:<json key>`` for list-map items, ``v:<json>``
  for set items, ``.`` when the path itself is owned). The manager of an
  ``Update`` is the ``fieldManager`` query parameter, else the ``User-Agent`` up
  to its first ``/`` (``managerOrUserAgent``). An update takes the fields it
  adds or changes from every other manager; removed fields leave every set.
  The entry's ``time`` changes only when that manager's fields change.
* ``PATCH`` with ``application/apply-patch+yaml`` (``fieldManager`` required, 422
  otherwise; ``force`` only for apply): the applied configuration is merged into
  the live object (structs and granular maps recursively, lists by their
  ``x-kubernetes-list-type``: ``atomic`` replaced, ``set`` by value, ``map`` by
  keys); the applier's set becomes exactly what it applied; a field it applied
  last time and omits now is removed unless another manager (``Apply`` or
  ``Update``) owns it; changing a value that another manager owns is a 409
  conflict (``Apply failed with N conflict(s): conflict with "m" using v: .path``,
  causes of type ``FieldManagerConflict``) unless ``force=true``, which moves
  the field to the applier. Apply creates a missing object.
* Reset fields (``GetResetFields``): on the main resource of a kind with a
  ``status`` subresource, ``status`` is neither owned nor changed; on ``/status``
  only ``status`` is. Server-managed metadata (name, namespace, uid,
  resourceVersion, generation, creationTimestamp, managedFields, ...) is never owned
  (``internal/stripmeta.go``).
* A field the schema does not declare makes the apply fail with 500 ``failed to create
  typed patch object (ns/name; group/version, Kind=K): .spec.x: field not declared in schema``
  (``internal/structuredmerge.go`` returns a plain error; kubernetes/kubernetes#122480, #139253),
  whatever ``fieldValidation`` says; Flux reports it as a failed dry-run.
* Entries are sorted as kube does: operation, time, manager, apiVersion, subresource.
* Client-side apply's annotation (``internal/lastappliedmanager.go``, ``lastappliedupdater.go``), for the
  field manager ``kubectl`` only: an apply whose conflicts all lie on fields the live object's
  ``kubectl.kubernetes.io/last-applied-configuration`` holds with the live value is forced (the first
  server-side apply after client-side applies takes those fields over without ``--force-conflicts``),
  and a successful apply rewrites an annotation the object has to the applied configuration.

* ``managedFields`` a client sends with a create, update or patch replace the live ones
  when they decode (``decodeLiveOrNew``; kubectl's client-side → server-side apply
  migration patches them), ``[{}]`` empties them; never on ``/status``.

Left out (not used by zkop, Flux or kubectl here): the cap of
10 ``Update`` managers (``ancient-changes``), conversion of sets between API
versions (each CRD here serves one version), unions, ``x-kubernetes-map-type:
atomic`` on ObjectMeta fields, and the
``before-first-apply`` entry (every object here has managedFields from its first write).
"""

from __future__ import annotations

import contextlib
import copy
import json
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import yaml

from zkop_testing import apiserver_errors as errs
from zkop_testing.apiserver_errors import ApiError, FieldError
from zkop_testing.apiserver_kinds import format_time, now_time, parse_time
from zkop_testing.apiserver_openapi import object_schema, resolve, unknown_fields

__all__ = ["apply_patch", "decode_fields", "encode_fields", "on_write", "request_context"]

JSON = dict[str, Any]
Elem = tuple[str, str]
Path = tuple[Elem, ...]
FieldSet = set[Path]

APPLY_PATCH = "application/apply-patch+yaml"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
#: The one field manager whose applies read and write :data:`LAST_APPLIED` (``lastappliedmanager.go``).
LAST_APPLIED_MANAGER = "kubectl"
_MISSING: Any = object()
_STRIPPED = {(("f", "apiVersion"),), (("f", "kind"),), (("f", "metadata"),)} | {
    (("f", "metadata"), ("f", name)) for name in (
        "name", "namespace", "creationTimestamp", "selfLink", "uid", "clusterName", "generation", "managedFields",
        "resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds")}
_STATUS: Path = (("f", "status"),)


# ---------------------------------------------------------------------- request context
class _Context(threading.local):
    active: bool = False
    field_manager: str | None = None
    user_agent: str = ""
    precomputed: list[JSON] | None = None


_ctx = _Context()


@contextlib.contextmanager
def request_context(query: Mapping[str, str], user_agent: str) -> Iterator[None]:
    """Make the request's ``fieldManager`` and ``User-Agent`` known to :func:`on_write` (per thread)."""
    saved = (_ctx.active, _ctx.field_manager, _ctx.user_agent, _ctx.precomputed)
    _ctx.active = True
    _ctx.field_manager = query.get("fieldManager") or None
    _ctx.user_agent = user_agent
    _ctx.precomputed = None
    try:
        _check_field_manager(_ctx.field_manager)
        yield
    finally:
        _ctx.active, _ctx.field_manager, _ctx.user_agent, _ctx.precomputed = saved


def _check_field_manager(manager: str | None) -> None:
    # ValidateFieldManager (apimachinery/pkg/apis/meta/v1/validation): at most 128 printable characters
    if manager is None:
        return
    errors: list[FieldError] = []
    if len(manager) > 128:
        errors.append(FieldError.too_long("fieldManager", 128))
    elif any(not ch.isprintable() for ch in manager):
        errors.append(FieldError.invalid("fieldManager", manager, "must only contain printable characters"))
    if errors:
        raise errs.invalid("meta.k8s.io", "CreateOptions", "", errors)


def _update_manager() -> str:
    if not _ctx.active:  # the server's own writes (bootstrap namespaces, the kubernetes Service)
        return "kube-apiserver"
    if _ctx.field_manager:
        return _ctx.field_manager
    return _ctx.user_agent.split("/")[0]


# ---------------------------------------------------------------------- schema helpers
def _shape(schema: Mapping[str, Any], value: Any) -> str:
    if schema.get("x-kubernetes-int-or-string"):
        return "scalar"
    kind = schema.get("type")
    if kind == "object" or "properties" in schema or "additionalProperties" in schema:
        return "map" if isinstance(value, dict) or value is _MISSING else "scalar"
    if kind == "array":
        return "list" if isinstance(value, list) else "scalar"
    if kind in ("string", "integer", "number", "boolean"):
        return "scalar"
    if isinstance(value, dict):
        return "map"
    if isinstance(value, list):
        return "list"
    return "scalar"


def _atomic(schema: Mapping[str, Any], shape: str) -> bool:
    if shape == "map":
        return schema.get("x-kubernetes-map-type") == "atomic"
    if shape == "list":
        return schema.get("x-kubernetes-list-type") not in ("set", "map")
    return True


def _child(schema: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    props = schema.get("properties") or {}
    if key in props:
        return resolve(props[key])
    extra = schema.get("additionalProperties")
    return resolve(extra) if isinstance(extra, Mapping) else {}


def _declared(schema: Mapping[str, Any], key: str) -> bool:
    return key in (schema.get("properties") or {})


def _items(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    items = schema.get("items")
    return resolve(items) if isinstance(items, Mapping) else {}


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _item_elem(schema: Mapping[str, Any], item: Any, index: int) -> Elem:
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "set":
        return ("v", _canonical(item))
    if list_type == "map" and isinstance(item, dict):
        keys = schema.get("x-kubernetes-list-map-keys") or []
        return ("k", _canonical({k: item[k] for k in keys if k in item}))
    return ("i", str(index))


def _indexed(schema: Mapping[str, Any], items: Any) -> dict[Elem, Any]:
    result: dict[Elem, Any] = {}
    if isinstance(items, list):
        for i, item in enumerate(items):
            result.setdefault(_item_elem(schema, item, i), item)
    return result


# ---------------------------------------------------------------------- field sets
def _to_set(value: Any, schema: Mapping[str, Any], path: Path, out: FieldSet) -> None:
    """``typed.ToFieldSet``: leaves, list items, and map entries that are not declared fields."""
    shape = _shape(schema, value)
    if shape == "scalar" or _atomic(schema, shape):
        if path:
            out.add(path)
        return
    if shape == "map":
        for key, child in value.items():
            sub = (*path, ("f", str(key)))
            _to_set(child, _child(schema, str(key)), sub, out)
            if child is None or (isinstance(child, dict) and not child) or not _declared(schema, str(key)):
                out.add(sub)
        return
    item_schema = _items(schema)
    for elem, item in _indexed(schema, value).items():
        sub = (*path, elem)
        _to_set(item, item_schema, sub, out)
        out.add(sub)


def _all_paths(value: Any, schema: Mapping[str, Any], path: Path, out: FieldSet) -> None:
    """Every path of a subtree that appeared (or disappeared) as a whole, the subtree's own path included."""
    if path:
        out.add(path)
    shape = _shape(schema, value)
    if shape == "scalar" or _atomic(schema, shape):
        return
    if shape == "map":
        for key, child in value.items():
            _all_paths(child, _child(schema, str(key)), (*path, ("f", str(key))), out)
        return
    item_schema = _items(schema)
    for elem, item in _indexed(schema, value).items():
        _all_paths(item, item_schema, (*path, elem), out)


def _compare(old: Any, new: Any, schema: Mapping[str, Any], path: Path,
             added: FieldSet, removed: FieldSet, modified: FieldSet) -> None:
    """``typed.Compare``: the paths added, removed and modified between two values."""
    if old is _MISSING and new is _MISSING:
        return
    if old is _MISSING:
        _all_paths(new, schema, path, added)
        return
    if new is _MISSING:
        _all_paths(old, schema, path, removed)
        return
    shape = _shape(schema, new)
    if shape != _shape(schema, old) or shape == "scalar" or _atomic(schema, shape):
        if old != new and path:
            modified.add(path)
        return
    if shape == "map":
        for key in list(old) + [k for k in new if k not in old]:
            _compare(old.get(key, _MISSING), new.get(key, _MISSING), _child(schema, str(key)),
                     (*path, ("f", str(key))), added, removed, modified)
        return
    item_schema = _items(schema)
    old_items, new_items = _indexed(schema, old), _indexed(schema, new)
    for elem in list(old_items) + [e for e in new_items if e not in old_items]:
        _compare(old_items.get(elem, _MISSING), new_items.get(elem, _MISSING), item_schema, (*path, elem),
                 added, removed, modified)


def _owned(path: Path, subresource: str | None, has_status: bool) -> bool:
    if path in _STRIPPED or (len(path) >= 2 and path[:2] in _STRIPPED):
        return False
    if subresource == "status":
        return path[:1] == _STATUS
    return not (has_status and path[:1] == _STATUS)


def _filter(paths: FieldSet, subresource: str | None, has_status: bool) -> FieldSet:
    return {p for p in paths if _owned(p, subresource, has_status)}


# ---------------------------------------------------------------------- FieldsV1 encoding
def _encode_elem(elem: Elem) -> str:
    return f"{elem[0]}:{elem[1]}"


def encode_fields(paths: FieldSet) -> JSON:
    """A set of paths as ``FieldsV1`` (``{"f:spec": {".": {}, "f:data": {}}}``)."""
    tree: JSON = {}
    for path in sorted(paths, key=len):
        node = tree
        for elem in path:
            node = node.setdefault(_encode_elem(elem), {})
    for path in paths:
        node = tree
        for elem in path:
            node = node[_encode_elem(elem)]
        if any(k != "." for k in node):
            node["."] = {}
    return _sorted_tree(tree)


def _sorted_tree(node: JSON) -> JSON:
    return {k: _sorted_tree(v) for k, v in sorted(node.items(), key=lambda kv: (kv[0] != ".", kv[0]))}


def decode_fields(fields: Any, path: Path = ()) -> FieldSet:
    """``FieldsV1`` back to a set of paths (``k:``/``v:`` values canonicalised)."""
    out: FieldSet = set()
    if not isinstance(fields, dict):
        return out
    for key, child in fields.items():
        if key == ".":
            if path:
                out.add(path)
            continue
        prefix, _, rest = str(key).partition(":")
        if prefix in ("k", "v"):
            with contextlib.suppress(ValueError):
                rest = _canonical(json.loads(rest))
        sub = (*path, (prefix, rest))
        if not child:
            out.add(sub)
        else:
            out |= decode_fields(child, sub)
    return out


def _path_text(path: Path) -> str:
    """``fieldpath.Path.String()``: ``.spec.data``, ``[type="Ready"]``, ``[="x"]``, ``[0]``."""
    parts = []
    for kind, value in path:
        if kind == "f":
            parts.append(f".{value}")
        elif kind == "k":
            keys = json.loads(value)
            parts.append("[" + ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(keys.items())) + "]")
        elif kind == "v":
            parts.append(f"[={value}]")
        else:
            parts.append(f"[{value}]")
    return "".join(parts)


# ---------------------------------------------------------------------- managers
_Key = tuple[str, str, str, str]  # manager, operation, apiVersion ("" for Apply), subresource


class _Entry:
    def __init__(self, manager: str, operation: str, api_version: str, subresource: str, time: str | None,
                 fields: FieldSet) -> None:
        self.manager = manager
        self.operation = operation
        self.api_version = api_version
        self.subresource = subresource
        self.time = time
        self.fields = fields

    @property
    def key(self) -> _Key:
        return (self.manager, self.operation, "" if self.operation == "Apply" else self.api_version,
                self.subresource)

    def describe(self) -> str:
        text = json.dumps(self.manager)
        if self.subresource:
            text += f" with subresource {json.dumps(self.subresource)}"
        if self.operation == "Update":
            text += f" using {self.api_version}"
        return text

    def render(self) -> JSON:
        entry: JSON = {"manager": self.manager, "operation": self.operation, "apiVersion": self.api_version}
        if self.time:
            entry["time"] = self.time
        entry["fieldsType"] = "FieldsV1"
        entry["fieldsV1"] = encode_fields(self.fields)
        if self.subresource:
            entry["subresource"] = self.subresource
        return entry


def _decode_managers(meta: Mapping[str, Any]) -> dict[_Key, _Entry]:
    managers: dict[_Key, _Entry] = {}
    for raw in meta.get("managedFields") or []:
        if not isinstance(raw, Mapping):
            continue
        entry = _Entry(str(raw.get("manager", "")), str(raw.get("operation", "Update")),
                       str(raw.get("apiVersion", "")), str(raw.get("subresource", "")), raw.get("time"),
                       decode_fields(raw.get("fieldsV1")))
        managers[entry.key] = entry
    return managers


def _decode_given(given: Any) -> dict[_Key, _Entry] | None:
    """``DecodeManagedFields``: ``None`` when an entry is not a valid ``FieldsV1`` entry."""
    if not isinstance(given, list):
        return None
    managers: dict[_Key, _Entry] = {}
    for raw in given:
        if not isinstance(raw, Mapping) or raw.get("fieldsType") != "FieldsV1" or \
                raw.get("operation") not in ("Apply", "Update") or not isinstance(raw.get("fieldsV1", {}), dict):
            return None
        entry = _Entry(str(raw.get("manager", "")), str(raw["operation"]), str(raw.get("apiVersion", "")),
                       str(raw.get("subresource", "")), _seconds(raw.get("time")), decode_fields(raw.get("fieldsV1")))
        managers[entry.key] = entry
    return managers


def _seconds(time: Any) -> str | None:
    """``ManagedFieldsEntry.time`` is a ``metav1.Time``: RFC 3339 to the second."""
    if not isinstance(time, str):
        return None
    try:
        return format_time(parse_time(time))
    except ValueError:
        return time


def _base_managers(old: Mapping[str, Any] | None, given: Any, subresource: str | None) -> dict[_Key, _Entry]:
    """``decodeLiveOrNew`` (``internal/fieldmanager.go``): managedFields a client sends replace the live ones
    (``[{}]`` resets them); on a subresource, or when they are absent or invalid, the live ones count."""
    live = _decode_managers((old or {}).get("metadata") or {}) if old is not None else {}
    if subresource:
        return live
    if given == [{}]:
        return {}
    decoded = _decode_given(given)
    if not decoded:
        return live
    return decoded


def _render_managers(managers: Mapping[_Key, _Entry]) -> list[JSON]:
    entries = [e for e in managers.values() if e.fields]
    entries.sort(key=lambda e: (e.operation, e.time or "", e.manager, e.api_version, e.subresource))
    return [e.render() for e in entries]


def _body(obj: Mapping[str, Any] | None) -> Any:
    if obj is None:
        return {}
    body = copy.deepcopy(dict(obj))
    meta = body.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return body


def _covers(owned: FieldSet, path: Path) -> bool:
    """``path`` or something under it is owned."""
    return any(p[:len(path)] == path for p in owned)


# ---------------------------------------------------------------------- every write
def on_write(store: Any, rt: Any, old: Mapping[str, Any] | None, new: JSON, subresource: str | None) -> None:
    """Set ``new``'s ``metadata.managedFields`` for a create (``old`` is ``None``) or update (``Update``
    operation by the request's manager), or to what :func:`apply_patch` computed for an apply."""
    meta = new.setdefault("metadata", {})
    given = meta.pop("managedFields", None)
    if _ctx.precomputed is not None:
        rendered = _ctx.precomputed
    else:
        managers = _base_managers(old, given, subresource)
        schema = object_schema(store, rt)
        added: FieldSet = set()
        removed: FieldSet = set()
        modified: FieldSet = set()
        _compare(_body(old), _body(new), schema, (), added, removed, modified)
        changed = _filter(added | modified, subresource, rt.has_status)
        removed = _filter(removed, subresource, rt.has_status)
        key: _Key = (_update_manager(), "Update", rt.api_version, subresource or "")
        for entry in managers.values():
            if entry.key != key:
                entry.fields = entry.fields - changed - removed
        mine = managers.get(key)
        if changed:
            previous = mine.fields - removed if mine is not None else set()
            managers[key] = _Entry(key[0], "Update", rt.api_version, key[3], now_time(), previous | changed)
        elif mine is not None:
            mine.fields = mine.fields - removed
        rendered = _render_managers(managers)
    if rendered:
        meta["managedFields"] = rendered
    else:
        meta.pop("managedFields", None)


# ---------------------------------------------------------------------- apply
def _merge(live: Any, config: Any, schema: Mapping[str, Any]) -> Any:
    """``typed.Merge``: the applied configuration over the live value."""
    if live is _MISSING:
        return copy.deepcopy(config)
    shape = _shape(schema, config)
    if shape != _shape(schema, live) or shape == "scalar" or _atomic(schema, shape):
        return copy.deepcopy(config)
    if shape == "map":
        result = copy.deepcopy(live)
        for key, value in config.items():
            result[key] = _merge(live.get(key, _MISSING), value, _child(schema, str(key)))
        return result
    item_schema = _items(schema)
    live_items = _indexed(schema, live)
    config_items = _indexed(schema, config)
    merged = [_merge(item, config_items[elem], item_schema) if elem in config_items else copy.deepcopy(item)
              for elem, item in live_items.items()]
    merged.extend(copy.deepcopy(item) for elem, item in config_items.items() if elem not in live_items)
    return merged


def _remove(value: Any, schema: Mapping[str, Any], path: Path) -> None:
    """Remove one path (a field, or a list item) from ``value`` in place, if present."""
    node, node_schema = value, schema
    for depth, elem in enumerate(path):
        last = depth == len(path) - 1
        if elem[0] == "f":
            if not isinstance(node, dict) or elem[1] not in node:
                return
            if last:
                del node[elem[1]]
                return
            node, node_schema = node[elem[1]], _child(node_schema, elem[1])
        else:
            if not isinstance(node, list):
                return
            matches = [i for i, item in enumerate(node) if _item_elem(node_schema, item, i) == elem]
            if not matches:
                return
            if last:
                del node[matches[0]]
                return
            node, node_schema = node[matches[0]], _items(node_schema)


def _conflict(conflicts: list[tuple[_Entry, Path]]) -> ApiError:
    """``internal/conflict.go`` NewConflictError."""
    causes = [{"type": "FieldManagerConflict", "message": f"conflict with {entry.describe()}",
               "field": _path_text(path)} for entry, path in conflicts]
    if len(conflicts) == 1:
        message = f"Apply failed with 1 conflict: conflict with {conflicts[0][0].describe()}: " \
                  f"{_path_text(conflicts[0][1])}"
    else:
        by_manager: dict[str, list[str]] = {}
        for entry, path in conflicts:
            by_manager.setdefault(entry.describe(), []).append(_path_text(path))
        lines = []
        for manager in sorted(by_manager):
            lines.append(f"conflicts with {manager}:")
            lines.extend(f"- {p}" for p in by_manager[manager])
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return ApiError(409, "Conflict", message, {"causes": causes})


def _last_applied(obj: Mapping[str, Any] | None) -> str:
    annotations = ((obj or {}).get("metadata") or {}).get("annotations") or {}
    value = annotations.get(LAST_APPLIED)
    return value if isinstance(value, str) else ""


def _allowed_by_last_applied(live: Mapping[str, Any] | None, live_body: Any, schema: Mapping[str, Any],
                             api_version: str) -> FieldSet:
    """``allowedConflictsFromLastApplied``: the fields of the last-applied annotation whose value the live object
    still has (empty without an annotation of the live object's version)."""
    try:
        last = json.loads(_last_applied(live) or "null")
    except ValueError:
        return set()
    if not isinstance(last, dict) or last.get("apiVersion") != api_version:
        return set()
    fields: FieldSet = set()
    _to_set(last, schema, (), fields)
    added: FieldSet = set()
    removed: FieldSet = set()
    modified: FieldSet = set()
    _compare(last, live_body, schema, (), added, removed, modified)
    return fields - modified - added - removed


def _parse_bool(value: str | None) -> bool:
    return (value or "") in ("1", "t", "T", "true", "TRUE", "True")


def apply_patch(store: Any, rt: Any, namespace: str | None, name: str, body: bytes, subresource: str | None,
                query: Mapping[str, str]) -> tuple[int, JSON]:
    """``PATCH`` with ``application/apply-patch+yaml`` (server-side apply); creates a missing object (201).

    Raises:
        ApiError: 400 (body not a YAML/JSON object, name mismatch), 409 (conflicts, stale
            ``resourceVersion``), 422 (no ``fieldManager``; invalid result), 404 (apply-create on
            ``/status``).
    """
    manager = query.get("fieldManager") or ""
    if not manager:
        raise errs.invalid("meta.k8s.io", "PatchOptions", "",
                           [FieldError.required("fieldManager", "is required for apply patch")])
    force = _parse_bool(query.get("force"))
    try:
        config = yaml.safe_load(body or b"")
    except yaml.YAMLError as exc:
        raise errs.bad_request(f"error decoding YAML: {exc}") from exc
    if not isinstance(config, dict):
        raise errs.bad_request("error decoding YAML: the apply patch must be an object")
    if config.get("apiVersion") != rt.api_version:  # internal/fieldmanager.go Apply
        raise errs.bad_request(f"Incorrect version specified in apply patch. Specified patch version: "
                               f"{config.get('apiVersion') or ''}, expected: {rt.api_version}")
    meta = config.get("metadata")
    if not isinstance(meta, dict):
        meta = config["metadata"] = {}
    if meta.get("name") not in (None, name):
        raise errs.bad_request(f"the name of the object ({meta.get('name')}) does not match the name on the URL "
                               f"({name})")
    meta.pop("managedFields", None)
    schema = object_schema(store, rt)
    unknown = unknown_fields(schema, config)
    if unknown:
        # structuredmerge.go: the typed conversion of the patch fails; a plain error, so 500 (kubernetes#122480)
        where = f"{namespace}/{name}" if namespace else f"/{name}"
        details = [f".{path}: field not declared in schema" for path in unknown]
        text = details[0] if len(details) == 1 else "errors:\n  " + "\n  ".join(details)
        group_version = rt.api_version if rt.group else f"/{rt.version}"
        raise ApiError(500, "", f"failed to create typed patch object ({where}; {group_version}, Kind={rt.kind}): "
                                f"{text}")
    has_status = rt.has_status
    from zkop_testing.apiserver_store import _dry_run, _obj_key  # the store imports this module's hooks
    dry_run = _dry_run(query)
    with store._lock:
        storage = store._storage(rt)
        live_internal = storage.objects.get(_obj_key(rt.namespaced, namespace, name))
        if live_internal is None and subresource:
            raise errs.not_found(rt.group, rt.plural, name)
        live = store._out(live_internal, rt) if live_internal is not None else None
        managers = _decode_managers((live or {}).get("metadata") or {})
        live_body = _body(live)
        applied: FieldSet = set()
        _to_set(config, schema, (), applied)
        applied = _filter(applied, subresource, has_status)
        key: _Key = (manager, "Apply", "", subresource or "")
        last = managers.get(key)
        merged = _merge(live_body, config, schema) if live is not None else copy.deepcopy(config)
        merged.setdefault("metadata", {})["name"] = name
        if last is not None:
            protected = set(applied)
            for entry in managers.values():
                if entry.key != key:
                    protected |= entry.fields
            for path in sorted(last.fields - applied, key=len, reverse=True):
                if not _covers(protected, path):
                    _remove(merged, schema, path)
        added: FieldSet = set()
        removed: FieldSet = set()
        modified: FieldSet = set()
        _compare(live_body, merged, schema, (), added, removed, modified)
        changed = _filter(added | modified, subresource, has_status)
        removed = _filter(removed, subresource, has_status)
        conflicts: list[tuple[_Entry, Path]] = []
        for entry in managers.values():
            if entry.key == key:
                continue
            for path in sorted(entry.fields & changed):
                conflicts.append((entry, path))
        if conflicts and not force and manager == LAST_APPLIED_MANAGER:
            allowed = _allowed_by_last_applied(live, live_body, schema, rt.api_version)
            conflicts = [(entry, path) for entry, path in conflicts if path not in allowed]
            force = not conflicts
        if conflicts and not force:
            raise _conflict(conflicts)
        for entry in managers.values():
            if entry.key != key:
                entry.fields = entry.fields - changed - removed
        time = last.time if last is not None else None
        if last is None or last.fields != applied or changed or removed:
            time = now_time()
        managers[key] = _Entry(manager, "Apply", rt.api_version, subresource or "", time, applied)
        rendered = _render_managers(managers)
        if manager == LAST_APPLIED_MANAGER and _last_applied(merged):
            # lastappliedupdater.go: after the managed fields are settled, the applied configuration as the
            # annotation (runtime.Encode with the unstructured JSON scheme: sorted keys, a closing newline).
            applied_config = copy.deepcopy(config)
            config_annotations = (applied_config.get("metadata") or {}).get("annotations")
            if isinstance(config_annotations, dict):
                config_annotations.pop(LAST_APPLIED, None)
            merged["metadata"]["annotations"][LAST_APPLIED] = json.dumps(
                applied_config, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"
        merged.setdefault("apiVersion", rt.api_version)
        merged.setdefault("kind", rt.kind)
        obj = store._decode_body(rt, merged)
        saved = _ctx.precomputed
        _ctx.precomputed = rendered
        try:
            if live_internal is None:
                code, result = 201, store._create_locked(rt, namespace, obj, dry_run)
            else:
                code, result = store._update_locked(rt, namespace, name, obj, subresource, dry_run)
        finally:
            _ctx.precomputed = saved
        return code, dict(store._out(result, rt))
