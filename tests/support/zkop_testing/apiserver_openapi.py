"""OpenAPI documents and object schemas of the in-memory API server.

One source of schemas serves two purposes:

* server-side apply (:mod:`zkop_testing.apiserver_apply`) needs each kind's
  structure: which maps are structs, which lists are atomic, sets
  (``x-kubernetes-list-type: set``) or maps keyed by fields
  (``x-kubernetes-list-type: map`` + ``x-kubernetes-list-map-keys``);
* kubectl (``explain``, and ``apply``/``edit``/``create`` deciding whether the
  server does field validation) reads ``/openapi/v3`` and
  ``/openapi/v3/<api|apis>/<group>/<version>``; ``/openapi/v2`` is served too.

Built-in kinds are described from the ``kubernetes`` Python client's models
(generated from kube-apiserver's own OpenAPI document: property names, types
and descriptions), with the list semantics that the Go types declare
(``+listType``/``+listMapKey`` markers in ``k8s.io/api``): ``metadata.finalizers``
is a set, ``metadata.ownerReferences`` a map keyed by ``uid``, every
``conditions`` list a map keyed by ``type``, Service ``spec.ports`` a map keyed
by ``port`` and ``protocol``; any other list is atomic. Custom resources are
described by their CRD's ``openAPIV3Schema`` (``metadata`` is ObjectMeta, as in
kube-apiserver's ``builder.BuildOpenAPIV3``).

kubectl reads v3 as JSON; v2 it asks for as protobuf only (client-go ``OpenAPISchema``): that
encoding is :mod:`zkop_testing.apiserver_openapi_proto`'s, for kubectl before OpenAPI v3 (< 1.27,
Debian 12's 1.20) and ``kubectl explain --output=plaintext-openapiv2``. Left out: ETag/hash
caching, and operations other than the ones kubectl looks at (each path lists get/put/patch/delete/post with the
``x-kubernetes-group-version-kind`` extension and the ``fieldValidation``,
``dryRun``, ``fieldManager`` and ``force`` parameters).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

import kubernetes.client.models as k8s_models

__all__ = [
    "builtin_schema",
    "custom_schema",
    "definition_name",
    "object_schema",
    "openapi_v2",
    "openapi_v3_group_version",
    "openapi_v3_index",
    "resolve",
]

JSON = dict[str, Any]

_META = "io.k8s.apimachinery.pkg.apis.meta.v1"
_GROUP_PREFIX = {"": "io.k8s.api.core.v1", "events.k8s.io": "io.k8s.api.events.v1",
                 "coordination.k8s.io": "io.k8s.api.coordination.v1",
                 "discovery.k8s.io": "io.k8s.api.discovery.v1",
                 "rbac.authorization.k8s.io": "io.k8s.api.rbac.v1",
                 "authentication.k8s.io": "io.k8s.api.authentication.v1",
                 "authorization.k8s.io": "io.k8s.api.authorization.v1",
                 "apiextensions.k8s.io": "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1"}
# The ``kubernetes`` client prefixes a model with its group where two groups share a name
# (``CoreV1Event``/``EventsV1Event``, ``RbacV1Subject``, ``ApiextensionsV1WebhookClientConfig``).
_MODEL_PREFIX_GROUP = {"Core": "", "Events": "events.k8s.io", "Discovery": "discovery.k8s.io",
                       "Coordination": "coordination.k8s.io", "Rbac": "rbac.authorization.k8s.io",
                       "Authentication": "authentication.k8s.io", "Authorization": "authorization.k8s.io",
                       "Apiextensions": "apiextensions.k8s.io"}
_MODEL_NAME = re.compile(rf"^({'|'.join(_MODEL_PREFIX_GROUP)})?V\d+((alpha|beta)\d+)?")
_META_MODELS = {"V1ObjectMeta", "V1OwnerReference", "V1ManagedFieldsEntry", "V1ListMeta", "V1Condition",
                "V1Status", "V1StatusDetails", "V1StatusCause", "V1DeleteOptions", "V1Preconditions"}
# (model, property) -> list semantics from the Go types' markers
_LIST_TYPES: dict[tuple[str, str], JSON] = {
    ("V1ObjectMeta", "finalizers"): {"x-kubernetes-list-type": "set"},
    ("V1ObjectMeta", "ownerReferences"): {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["uid"]},
    ("V1ServiceSpec", "ports"): {"x-kubernetes-list-type": "map",
                                 "x-kubernetes-list-map-keys": ["port", "protocol"]},
}
_SCALARS = {"str": {"type": "string"}, "int": {"type": "integer", "format": "int64"}, "bool": {"type": "boolean"},
            "float": {"type": "number", "format": "double"}, "bytearray": {"type": "string", "format": "byte"},
            "bytes": {"type": "string", "format": "byte"}, "datetime": {"type": "string", "format": "date-time"}}
_INT_OR_STRING = {"x-kubernetes-int-or-string": True}
_OBJECT_META_REF = f"{_META}.ObjectMeta"


def definition_name(model: str, group: str = "") -> str:
    """``V1ConfigMap`` → ``io.k8s.api.core.v1.ConfigMap`` (the name kube-apiserver's documents use)."""
    match = _MODEL_NAME.match(model)
    bare = model[match.end():] if match else model
    if model in _META_MODELS:
        return f"{_META}.{bare}"
    if match and match.group(1):
        group = _MODEL_PREFIX_GROUP[match.group(1)]
    return f"{_GROUP_PREFIX.get(group, 'io.k8s.api.core.v1')}.{bare}"


def _description(cls: Any, attr: str) -> str:
    fields = getattr(cls, "model_fields", None) or {}
    info = fields.get(attr)
    return str(getattr(info, "description", "") or "")


def _type_schema(type_text: str, group: str, refs: bool) -> JSON:
    type_text = type_text.strip()
    if type_text in _SCALARS:
        return dict(_SCALARS[type_text])
    if type_text == "object":
        return dict(_INT_OR_STRING)
    match = re.fullmatch(r"(?:Dict|dict)\[str, ?(.+)\]|dict\(str, ?(.+)\)", type_text)
    if match:
        return {"type": "object", "additionalProperties": _type_schema(match.group(1) or match.group(2), group, refs)}
    match = re.fullmatch(r"(?:List|list)\[(.+)\]", type_text)
    if match:
        return {"type": "array", "items": _type_schema(match.group(1), group, refs)}
    if refs:
        return {"$ref": f"#/components/schemas/{definition_name(type_text, group)}"}
    return {"$model": type_text, "$group": group}


@functools.cache
def builtin_schema(model: str, group: str = "", refs: bool = False) -> JSON:
    """The schema of a ``kubernetes`` client model (``V1ConfigMap``); nested models are ``$model``
    placeholders (resolved lazily by :func:`resolve`) or, with ``refs``, OpenAPI ``$ref``\\ s."""
    cls = getattr(k8s_models, model)
    properties: JSON = {}
    required: list[str] = []
    fields = getattr(cls, "model_fields", None) or {}
    for attr, type_text in cls.openapi_types.items():
        name = cls.attribute_map[attr]
        prop = _type_schema(type_text, group, refs)
        if prop.get("type") == "array":
            items = prop.get("items") or {}
            item_model = items.get("$model") or str(items.get("$ref", "")).rsplit(".", 1)[-1]
            if (model, name) in _LIST_TYPES:
                prop.update(_LIST_TYPES[(model, name)])
            elif name == "conditions" and item_model:
                prop.update({"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]})
            else:
                prop["x-kubernetes-list-type"] = "atomic"
        description = _description(cls, attr)
        if "$ref" in prop:
            prop = {"allOf": [prop]}
        if description:
            prop["description"] = description
        properties[name] = prop
        info = fields.get(attr)
        if info is not None and getattr(info, "is_required", lambda: False)():
            required.append(name)
    schema: JSON = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    doc = (cls.__doc__ or "").strip()
    if doc and not doc.startswith(model):
        schema["description"] = doc.split("\n\n")[0].strip()
    return schema


def resolve(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """Replace a ``$model`` placeholder (or an ``allOf`` of one) by the model's schema."""
    if "$model" in schema:
        return builtin_schema(str(schema["$model"]), str(schema.get("$group", "")))
    all_of = schema.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], Mapping) and "$model" in all_of[0]:
        return builtin_schema(str(all_of[0]["$model"]), str(all_of[0].get("$group", "")))
    return schema


def custom_schema(crd: Mapping[str, Any], version: str) -> JSON | None:
    """A CRD version's ``openAPIV3Schema`` with ``metadata`` as ObjectMeta (for apply)."""
    for entry in (crd.get("spec") or {}).get("versions") or []:
        if entry.get("name") == version:
            schema = (entry.get("schema") or {}).get("openAPIV3Schema")
            if not isinstance(schema, Mapping):
                return None
            result = copy.deepcopy(dict(schema))
            result.setdefault("properties", {})["metadata"] = {"$model": "V1ObjectMeta", "$group": ""}
            return result
    return None


_CUSTOM_SCHEMAS: dict[tuple[str, str, str], JSON] = {}


def object_schema(store: Any, rt: Any) -> Mapping[str, Any]:
    """The schema of ``rt``'s objects: the CRD's for a custom resource, the client model's for a built-in."""
    if getattr(rt, "builtin", True):
        return builtin_schema(rt.model, rt.group) if rt.model else {}
    crd = _crd_of(store, rt)
    schema = None
    if crd is not None:
        meta = crd.get("metadata") or {}
        key = (str(meta.get("uid")), str(meta.get("resourceVersion")), str(rt.version))
        schema = _CUSTOM_SCHEMAS.get(key)
        if schema is None:
            schema = custom_schema(crd, rt.version)
            if schema is not None:
                if len(_CUSTOM_SCHEMAS) > 256:
                    _CUSTOM_SCHEMAS.clear()
                _CUSTOM_SCHEMAS[key] = schema
    if schema is None:
        return {"type": "object", "properties": {"metadata": {"$model": "V1ObjectMeta", "$group": ""}},
                "x-kubernetes-preserve-unknown-fields": True}
    return schema


def _crd_of(store: Any, rt: Any) -> Mapping[str, Any] | None:
    crd_name = getattr(rt.strategy, "crd_name", None)
    if not crd_name:
        return None
    crd_rt = store.resolve("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    for crd in store.iter_objects(crd_rt):
        if (crd.get("metadata") or {}).get("name") == crd_name:
            return crd  # type: ignore[no-any-return]
    return None


# ---------------------------------------------------------------------- documents
def _reverse_group(group: str) -> str:
    return ".".join(reversed(group.split(".")))


def _kind_definition(store: Any, rt: Any) -> tuple[str, JSON]:
    gvk = [{"group": rt.group, "version": rt.version, "kind": rt.kind}]
    if rt.builtin and rt.model:
        name = definition_name(rt.model, rt.group)
        schema = copy.deepcopy(builtin_schema(rt.model, rt.group, True))
    else:
        crd = _crd_of(store, rt)
        name = f"{_reverse_group(rt.group)}.{rt.version}.{rt.kind}"
        raw = None
        for entry in ((crd or {}).get("spec") or {}).get("versions") or []:
            if entry.get("name") == rt.version:
                raw = (entry.get("schema") or {}).get("openAPIV3Schema")
        schema = copy.deepcopy(dict(raw)) if isinstance(raw, Mapping) else {
            "type": "object", "x-kubernetes-preserve-unknown-fields": True}
        props = schema.setdefault("properties", {})
        props["metadata"] = {"allOf": [{"$ref": f"#/components/schemas/{_OBJECT_META_REF}"}],
                             "description": "Standard object's metadata. More info: https://git.k8s.io/community/"
                                            "contributors/devel/sig-architecture/api-conventions.md#metadata"}
        props.setdefault("apiVersion", {"type": "string"})
        props.setdefault("kind", {"type": "string"})
    schema["x-kubernetes-group-version-kind"] = gvk
    return name, schema


def _refs(schema: Any) -> Iterator[str]:
    if isinstance(schema, Mapping):
        ref = schema.get("$ref")
        if isinstance(ref, str):
            yield ref.rsplit("/", 1)[-1]
        for value in schema.values():
            yield from _refs(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _refs(value)


def _collect_refs(group: str, out: dict[str, JSON]) -> None:
    """Add to ``out`` every model definition its schemas refer to, transitively."""
    pending = [name for schema in out.values() for name in _refs(schema)]
    while pending:
        name = pending.pop()
        if name in out:
            continue
        model = _model_for(name)
        if model is None:
            continue
        out[name] = copy.deepcopy(builtin_schema(model, group, True))
        pending.extend(_refs(out[name]))


@functools.cache
def _model_index() -> dict[str, str]:
    index: dict[str, str] = {}
    for model in dir(k8s_models):
        if not _MODEL_NAME.match(model):
            continue
        cls = getattr(k8s_models, model)
        if not hasattr(cls, "openapi_types"):
            continue
        for group in _GROUP_PREFIX:
            index.setdefault(definition_name(model, group), model)
    return index


def _model_for(name: str) -> str | None:
    return _model_index().get(name)


def _params(namespaced: bool, named: bool) -> list[JSON]:
    params: list[JSON] = []
    if namespaced:
        params.append({"name": "namespace", "in": "path", "required": True, "schema": {"type": "string"}})
    if named:
        params.append({"name": "name", "in": "path", "required": True, "schema": {"type": "string"}})
    return params


_WRITE_PARAMS = [{"name": name, "in": "query", "schema": {"type": "string"}, "uniqueItems": True,
                  "description": text} for name, text in (
    ("dryRun", "When present, indicates that modifications should not be persisted."),
    ("fieldManager", "fieldManager is a name associated with the actor or entity that is making these changes."),
    ("fieldValidation", "fieldValidation instructs the server on how to handle objects in the request "
                        "containing unknown or duplicate fields. Valid values are: - Ignore - Warn - Strict"))]
_FORCE = {"name": "force", "in": "query", "schema": {"type": "boolean"}, "uniqueItems": True,
          "description": "Force is going to \"force\" Apply requests."}


def _paths(rt: Any, definition: str) -> JSON:
    prefix = f"/apis/{rt.group}/{rt.version}" if rt.group else f"/api/{rt.version}"
    ns = "/namespaces/{namespace}" if rt.namespaced else ""
    gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
    ref = {"content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{definition}"}}}}

    def op(verb: str, action: str, extra: list[JSON] | None = None) -> JSON:
        return {"operationId": f"{action}{rt.kind}", "x-kubernetes-action": verb,
                "x-kubernetes-group-version-kind": gvk, "parameters": list(extra or []),
                "responses": {"200": {"description": "OK", **ref}}}

    paths = {
        f"{prefix}{ns}/{rt.plural}": {
            "parameters": _params(rt.namespaced, False),
            "get": op("list", "list"), "post": op("post", "create", _WRITE_PARAMS)},
        f"{prefix}{ns}/{rt.plural}/{{name}}": {
            "parameters": _params(rt.namespaced, True),
            "get": op("get", "read"), "put": op("put", "replace", _WRITE_PARAMS),
            "patch": op("patch", "patch", [*_WRITE_PARAMS, _FORCE]), "delete": op("delete", "delete")},
    }
    if rt.has_status:
        paths[f"{prefix}{ns}/{rt.plural}/{{name}}/status"] = {
            "parameters": _params(rt.namespaced, True),
            "get": op("get", "readStatus"), "put": op("put", "replaceStatus", _WRITE_PARAMS),
            "patch": op("patch", "patchStatus", [*_WRITE_PARAMS, _FORCE])}
    return paths


def _group_versions(store: Any) -> dict[str, list[Any]]:
    result: dict[str, list[Any]] = {}
    for rt in store.endpoints():
        key = f"apis/{rt.group}/{rt.version}" if rt.group else f"api/{rt.version}"
        result.setdefault(key, []).append(rt)
    return result


def openapi_v3_group_version(store: Any, path: str) -> JSON | None:
    """The OpenAPI v3 document of one group version (``api/v1``, ``apis/<group>/<version>``), or ``None``."""
    rts = _group_versions(store).get(path)
    if rts is None:
        return None
    schemas: dict[str, JSON] = {}
    paths: JSON = {}
    for rt in sorted(rts, key=lambda r: r.plural):
        name, schema = _kind_definition(store, rt)
        schemas[name] = schema
        paths.update(_paths(rt, name))
    schemas[_OBJECT_META_REF] = copy.deepcopy(builtin_schema("V1ObjectMeta", "", True))
    _collect_refs(rts[0].group, schemas)
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "unversioned"},
            "paths": paths, "components": {"schemas": dict(sorted(schemas.items()))}}


def openapi_v3_index(store: Any) -> JSON:
    """``GET /openapi/v3``: the group versions, each with its document's URL (content hash as ``?hash=``)."""
    paths: JSON = {}
    for key in sorted(_group_versions(store)):
        doc = openapi_v3_group_version(store, key)
        digest = hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:64].upper()
        paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest}"}
    return {"paths": paths}


def _v2_parameter(parameter: Mapping[str, Any]) -> JSON:
    """Swagger 2.0 puts a non-body parameter's type on the parameter itself, not under ``schema``."""
    result = {k: v for k, v in parameter.items() if k != "schema"}
    result.update(parameter.get("schema") or {})
    return result


def openapi_v2(store: Any) -> JSON:
    """``GET /openapi/v2`` (JSON): every served kind's definition, as Swagger 2.0."""
    definitions: JSON = {}
    paths: JSON = {}
    for key in sorted(_group_versions(store)):
        doc = openapi_v3_group_version(store, key)
        assert doc is not None
        definitions.update(doc["components"]["schemas"])
        for path, item in doc["paths"].items():
            converted: JSON = {}
            for verb, op in item.items():
                if verb == "parameters":
                    converted[verb] = [_v2_parameter(p) for p in op]
                    continue
                converted[verb] = {**{k: v for k, v in op.items() if k not in ("responses", "parameters")},
                                   "parameters": [_v2_parameter(p) for p in op.get("parameters") or []],
                                   "responses": {"200": {"description": "OK", "schema": op["responses"]["200"][
                                       "content"]["application/json"]["schema"]}}}
            paths[path] = converted
    document = {"swagger": "2.0", "info": {"title": "Kubernetes", "version": "unversioned"}, "paths": paths,
                "definitions": definitions}
    return dict(json.loads(json.dumps(document).replace("#/components/schemas/", "#/definitions/")))


def serve(store: Any, segments: list[str]) -> JSON | None:
    """The document at ``/openapi/...`` (path segments), or ``None`` (404)."""
    if segments == ["openapi", "v2"]:
        return openapi_v2(store)
    if segments == ["openapi", "v3"]:
        return openapi_v3_index(store)
    if len(segments) >= 4 and segments[:2] == ["openapi", "v3"]:
        return openapi_v3_group_version(store, "/".join(segments[2:]))
    return None


def unknown_fields(schema: Mapping[str, Any], value: Any, path: str = "") -> list[str]:
    """Paths of fields the schema does not declare (``fieldValidation``: ``Strict`` refuses them,
    ``Warn`` answers a warning): ``spec.foo``, ``spec.acl[0].bar``. Keys of a patch starting with
    ``$`` (strategic merge directives) are not fields."""
    schema = resolve(schema)
    if schema.get("x-kubernetes-preserve-unknown-fields") or schema.get("x-kubernetes-int-or-string"):
        return []
    found: list[str] = []
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        if not props and extra is None and schema.get("type") != "object":
            return []
        for key, child in value.items():
            key = str(key)
            sub = f"{path}.{key}" if path else key
            if key.startswith("$") or (not path and key in ("apiVersion", "kind")):
                continue
            if schema.get("x-kubernetes-embedded-resource") and key in ("apiVersion", "kind", "metadata"):
                continue
            if key in props:
                found.extend(unknown_fields(props[key], child, sub))
            elif isinstance(extra, Mapping):
                found.extend(unknown_fields(extra, child, sub))
            elif extra is not True:
                found.append(sub)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            found.extend(unknown_fields(schema["items"], item, f"{path}[{index}]"))
    return found
