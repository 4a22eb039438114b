"""``Table`` responses (``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``), what ``kubectl get`` prints.

kube-apiserver converts objects to ``meta.k8s.io/v1`` ``Table`` when the client asks
(``k8s.io/apiserver/pkg/endpoints/handlers/response.go`` ``transformObject``/``asTable``):

* custom resources: a ``Name`` column, then the CRD version's ``additionalPrinterColumns``
  (``apiextensions-apiserver/pkg/registry/customresource/tableconvertor``: simple JSONPath,
  ``string`` columns printed, ``date`` columns as the age ``5m``, ``integer``/``number``/``boolean``
  as JSON values), or ``Name`` + ``Age`` when the CRD declares none;
* built-ins: the columns of ``kubernetes/pkg/printers/internalversion/printers.go`` for the
  kinds served here (ConfigMap, Secret, Namespace, Service, Event in both groups, Endpoints,
  EndpointSlice, Lease, CRD); ``priority: 1`` columns are the ones ``-o wide`` adds;
* rows carry ``object`` per ``includeObject`` (``Metadata``, the default: a
  ``PartialObjectMetadata``; ``Object``; ``None``); a watch sends the column
  definitions with its first event only (``handlers/watch.go`` ``watchEmbeddedEncoder``).

Ages follow apimachinery ``util/duration.HumanDuration``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from zkop_testing.apiserver_kinds import parse_time

__all__ = ["human_duration", "table_for", "wants_table", "watch_transform"]

JSON = dict[str, Any]

_NAME_DESCRIPTION = ("Name must be unique within a namespace. Is required when creating resources, although some "
                     "resources may allow a client to request the generation of an appropriate name automatically. "
                     "Name is primarily intended for creation idempotence and configuration definition. Cannot be "
                     "updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/"
                     "names#names")
_AGE_DESCRIPTION = ("CreationTimestamp is a timestamp representing the server time when this object was created. "
                    "It is not guaranteed to be set in happens-before order across separate operations. Clients "
                    "may not set this value. It is represented in RFC3339 form and is in UTC.")


def wants_table(accept: str) -> bool:
    """The ``Accept`` header asks for ``Table`` (``as=Table;g=meta.k8s.io``, ``v1`` or ``v1beta1``) first."""
    for part in accept.split(","):
        params = dict(p.strip().split("=", 1) for p in part.split(";")[1:] if "=" in p)
        if params.get("as") == "Table" and params.get("g") == "meta.k8s.io" and params.get("v") in ("v1",
                                                                                                    "v1beta1"):
            return True
        if part.strip().split(";")[0].strip() in ("application/json", "*/*"):
            return False
    return False


def human_duration(seconds: float) -> str:
    """``duration.HumanDuration``."""
    whole = int(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 120:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        s = whole % 60
        return f"{minutes}m" if s == 0 else f"{minutes}m{s}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if dy == 0 else f"{hours // 24 // 365}y{dy}d"
    return f"{hours // 24 // 365}y"


def _age(timestamp: Any) -> str:
    if not timestamp:
        return "<unknown>"
    try:
        moment = parse_time(str(timestamp))
    except ValueError:
        return "<invalid>"
    return human_duration((datetime.now(UTC) - moment).total_seconds())


def _column(name: str, kind: str = "string", fmt: str = "", description: str = "", priority: int = 0) -> JSON:
    return {"name": name, "type": kind, "format": fmt, "description": description, "priority": priority}


_NAME = _column("Name", "string", "name", _NAME_DESCRIPTION)
_AGE = _column("Age", "string", "", _AGE_DESCRIPTION)


# ---------------------------------------------------------------------- JSONPath (the subset CRDs use)
def _jsonpath(obj: Any, path: str) -> list[Any]:
    """``.a.b``, ``.a[0]``, ``.a[*]``, ``.a[?(@.k=="v")]``; a list of results."""
    tokens = re.findall(r"\.([^.\[\]]+)|\[\?\(@\.([^=!]+)\s*==\s*(\"[^\"]*\"|'[^']*'|[^)]+)\)\]|\[(\*|-?\d+)\]",
                        path.strip().removeprefix("{").removesuffix("}"))
    current = [obj]
    for field, fkey, fvalue, index in tokens:
        following: list[Any] = []
        for value in current:
            if field:
                if isinstance(value, Mapping) and field in value:
                    following.append(value[field])
            elif fkey:
                wanted = fvalue.strip("\"'")
                if isinstance(value, list):
                    following.extend(v for v in value if isinstance(v, Mapping) and str(v.get(fkey.strip()))
                                     == wanted)
            elif index == "*":
                if isinstance(value, list):
                    following.extend(value)
                elif isinstance(value, Mapping):
                    following.extend(value.values())
            elif isinstance(value, list):
                with _suppress():
                    following.append(value[int(index)])
        current = following
    return current


class _suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> bool:
        return exc[0] is IndexError


def _print_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, separators=(",", ":"))


# ---------------------------------------------------------------------- custom resources
def _crd_columns(store: Any, rt: Any) -> list[JSON]:
    from zkop_testing.apiserver_openapi import _crd_of

    crd = _crd_of(store, rt) or {}
    for version in (crd.get("spec") or {}).get("versions") or []:
        if version.get("name") == rt.version:
            return list(version.get("additionalPrinterColumns") or [])
    return []


def _custom_table(store: Any, rt: Any) -> tuple[list[JSON], Callable[[JSON], list[Any]]]:
    columns = _crd_columns(store, rt)
    if not columns:
        return [_NAME, _AGE], lambda o: [o["metadata"].get("name"), _age(o["metadata"].get("creationTimestamp"))]
    definitions = [_NAME] + [_column(str(c.get("name")), str(c.get("type", "string")), str(c.get("format", "")),
                                     str(c.get("description", "")), int(c.get("priority", 0))) for c in columns]

    def cells(obj: JSON) -> list[Any]:
        row: list[Any] = [obj["metadata"].get("name")]
        for column in columns:
            results = _jsonpath(obj, str(column.get("jsonPath", "")))
            if not results or results[0] is None:
                row.append(None)
                continue
            value = results[0]
            kind = column.get("type", "string")
            if kind == "string":
                row.append(_print_value(value))
            elif kind == "date":
                row.append(_age(value) if isinstance(value, str) else None)
            elif kind == "integer":
                row.append(int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None)
            elif kind == "number":
                row.append(float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None)
            elif kind == "boolean":
                row.append(value if isinstance(value, bool) else None)
            else:
                row.append(None)
        return row

    return definitions, cells


# ---------------------------------------------------------------------- built-ins (printers.go)
def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _created(obj: Mapping[str, Any]) -> str:
    return _age(_meta(obj).get("creationTimestamp"))


def _service_ports(spec: Mapping[str, Any]) -> str:
    parts = []
    for port in spec.get("ports") or []:
        protocol = port.get("protocol", "TCP")
        if port.get("nodePort"):
            parts.append(f"{port.get('port')}:{port.get('nodePort')}/{protocol}")
        else:
            parts.append(f"{port.get('port')}/{protocol}")
    return ",".join(parts) or "<none>"


def _external_ip(spec: Mapping[str, Any], status: Mapping[str, Any]) -> str:
    kind = spec.get("type", "ClusterIP")
    external = list(spec.get("externalIPs") or [])
    if kind in ("ClusterIP", "NodePort"):
        return ",".join(external) or "<none>"
    if kind == "LoadBalancer":
        ingress = [i.get("ip") or i.get("hostname") for i in (status.get("loadBalancer") or {}).get("ingress") or []]
        found = [i for i in ingress if i] + external
        return ",".join(found) or "<pending>"
    if kind == "ExternalName":
        return str(spec.get("externalName", ""))
    return "<unknown>"


def _selector(selector: Mapping[str, Any] | None) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted((selector or {}).items())) or "<none>"


def _event_cells(obj: JSON) -> list[Any]:
    legacy = "involvedObject" in obj or "regarding" not in obj
    target = (obj.get("involvedObject") if legacy else obj.get("regarding")) or {}
    first = obj.get("firstTimestamp") if legacy else obj.get("deprecatedFirstTimestamp")
    last = obj.get("lastTimestamp") if legacy else obj.get("deprecatedLastTimestamp")
    first_text = _age(first) if first else _age(obj.get("eventTime"))
    last_text = _age(last) if last else first_text
    count = obj.get("count") if legacy else obj.get("deprecatedCount")
    series = obj.get("series")
    if series:
        last_text = _age(series.get("lastObservedTime"))
        count = series.get("count")
    elif not count:
        count = 1
    kind = str(target.get("kind", "")).lower()
    object_text = f"{kind}/{target['name']}" if target.get("name") else kind
    source = obj.get("source") if legacy else obj.get("deprecatedSource")
    source = source or {}
    if source.get("component"):
        source_text = source["component"] + (f", {source['host']}" if source.get("host") else "")
    else:
        controller = obj.get("reportingComponent") or obj.get("reportingController") or ""
        instance = obj.get("reportingInstance") or ""
        source_text = controller + (f", {instance}" if instance else "")
    message = obj.get("message") if legacy else obj.get("note")
    return [last_text, obj.get("type", ""), obj.get("reason", ""), object_text, target.get("fieldPath", ""),
            source_text, str(message or "").strip(), first_text, int(count), _meta(obj).get("name")]


_EVENT_COLUMNS = [
    _column("Last Seen", description="The time at which the most recent occurrence of this event was recorded."),
    _column("Type", description="Type of this event (Normal, Warning), new types could be added in the future."),
    _column("Reason", description="This should be a short, machine understandable string that gives the reason "
                                  "for the transition into the object's current status."),
    _column("Object", description="The object that this event is about."),
    _column("Subobject", priority=1, description="The field of the object the event is about."),
    _column("Source", priority=1, description="The component reporting this event."),
    _column("Message", description="A human-readable description of the status of this operation."),
    _column("First Seen", priority=1, description="The time at which the event was first recorded."),
    _column("Count", priority=1, description="The number of times this event has occurred."),
    _column("Name", fmt="name", priority=1, description=_NAME_DESCRIPTION),
]

_BUILTIN: dict[str, tuple[list[JSON], Callable[[JSON], list[Any]]]] = {
    "ConfigMap": ([_NAME, _column("Data"), _AGE], lambda o: [
        _meta(o).get("name"), len(o.get("data") or {}) + len(o.get("binaryData") or {}), _created(o)]),
    "Secret": ([_NAME, _column("Type"), _column("Data"), _AGE], lambda o: [
        _meta(o).get("name"), o.get("type", ""), len(o.get("data") or {}), _created(o)]),
    "Namespace": ([_NAME, _column("Status"), _AGE], lambda o: [
        _meta(o).get("name"), (o.get("status") or {}).get("phase", ""), _created(o)]),
    "Service": ([_NAME, _column("Type"), _column("Cluster-IP"), _column("External-IP"), _column("Port(s)"), _AGE,
                 _column("Selector", priority=1)], lambda o: [
        _meta(o).get("name"), (o.get("spec") or {}).get("type", "ClusterIP"),
        (o.get("spec") or {}).get("clusterIP") or "<none>", _external_ip(o.get("spec") or {}, o.get("status") or {}),
        _service_ports(o.get("spec") or {}), _created(o), _selector((o.get("spec") or {}).get("selector"))]),
    "Event": (_EVENT_COLUMNS, _event_cells),
    "Lease": ([_NAME, _column("Holder"), _AGE], lambda o: [
        _meta(o).get("name"), (o.get("spec") or {}).get("holderIdentity", ""), _created(o)]),
    "EndpointSlice": ([_NAME, _column("AddressType"), _column("Ports"), _column("Endpoints"), _AGE], lambda o: [
        _meta(o).get("name"), o.get("addressType", ""),
        ",".join(str(p.get("port", "<unset>")) for p in o.get("ports") or []) or "<unset>",
        ",".join(a for e in o.get("endpoints") or [] for a in e.get("addresses") or []) or "<unset>",
        _created(o)]),
    "Endpoints": ([_NAME, _column("Endpoints"), _AGE], lambda o: [
        _meta(o).get("name"),
        ",".join(f"{a.get('ip')}:{p.get('port')}" for s in o.get("subsets") or [] for a in s.get("addresses") or []
                 for p in s.get("ports") or [{}]) or "<none>", _created(o)]),
    "CustomResourceDefinition": ([_NAME, _column("Created At", "date", description=_AGE_DESCRIPTION)], lambda o: [
        _meta(o).get("name"), _meta(o).get("creationTimestamp")]),
}


def _table_shape(store: Any, rt: Any) -> tuple[list[JSON], Callable[[JSON], list[Any]]]:
    if not getattr(rt, "builtin", True):
        return _custom_table(store, rt)
    if rt.kind in _BUILTIN:
        return _BUILTIN[rt.kind]
    # rest.DefaultTableConvertor
    return [_NAME, _column("Created At", "date", description=_AGE_DESCRIPTION)], lambda o: [
        _meta(o).get("name"), _meta(o).get("creationTimestamp")]


def _row_object(obj: JSON, include: str) -> JSON | None:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": dict(_meta(obj))}


def table_for(store: Any, rt: Any, result: JSON, query: Mapping[str, str], headers: bool = True) -> JSON:
    """``result`` (one object or a list) as a ``Table``."""
    columns, cells = _table_shape(store, rt)
    include = query.get("includeObject") or "Metadata"
    is_list = isinstance(result.get("items"), list)
    objects = list(result["items"]) if is_list else [result]
    rows = []
    for obj in objects:
        row: JSON = {"cells": cells(obj)}
        embedded = _row_object(obj, include)
        if embedded is not None:
            row["object"] = embedded
        rows.append(row)
    metadata: JSON = {}
    source_meta = _meta(result)
    for key in ("resourceVersion", "continue", "remainingItemCount"):
        if source_meta.get(key) not in (None, ""):
            metadata[key] = source_meta[key]
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata,
            "columnDefinitions": columns if headers else None, "rows": rows}


def watch_transform(accept: str, store: Any, rt: Any, query: Mapping[str, str]) -> Callable[[JSON], JSON] | None:
    """For a watch asking for ``Table``: turns each event's object into a one-row table
    (column definitions on the first one only); ``None`` otherwise."""
    if not wants_table(accept):
        return None
    first = [True]

    def transform(event: JSON) -> JSON:
        obj = event.get("object")
        if event.get("type") in ("ERROR", "BOOKMARK") or not isinstance(obj, dict):
            return event
        table = table_for(store, rt, obj, query, headers=first[0])
        first[0] = False
        return {**event, "object": table}

    return transform
