"""Resource types served by the in-memory API server and their per-kind rules ("strategies").

Each :class:`Strategy` mirrors the registry strategy of kube-apiserver for that
kind (``pkg/registry/<group>/<kind>/strategy.go``): defaults applied on create
and update, which fields are reset, validation, whether ``metadata.generation``
is maintained, whether a PUT without ``resourceVersion`` is allowed
(``AllowUnconditionalUpdate``), whether a PUT may create
(``AllowCreateOnUpdate``) and whether DELETE answers with the deleted object
(``ReturnDeletedObject``).

Built-in objects are decoded against the models of the official ``kubernetes``
client: unknown fields are dropped (as Go's JSON decoding into typed structs
does), type mismatches are answered with 400 and timestamps are re-serialised
(``metav1.Time`` as RFC 3339 seconds, ``metav1.MicroTime`` with microseconds).
"""

from __future__ import annotations

import base64
import binascii
import copy
import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import kubernetes.client.models as k8s_models
import pydantic

from zkop_testing.apiserver_cel import rule_errors
from zkop_testing.apiserver_core_validation import (
    event_errors,
    lease_spec_errors,
    path_segment_name_errors,
    port_name_errors,
    service_selector_errors,
)
from zkop_testing.apiserver_discovery import default_endpoint_slice, endpoint_slice_errors
from zkop_testing.apiserver_errors import ApiError, FieldError, bad_request
from zkop_testing.apiserver_schema import CustomResourceSchema, check_schema, list_errors
from zkop_testing.apiserver_select import (
    dns1035_label_errors,
    dns1123_label_errors,
    dns1123_subdomain_errors,
    label_value_errors,
    qualified_name_errors,
)

__all__ = [
    "CRD_CLEANUP_FINALIZER",
    "ResourceType",
    "StoreHooks",
    "Strategy",
    "builtin_resource_types",
    "custom_resource_types",
    "format_time",
    "now_time",
]

JSON = dict[str, Any]

CRD_CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
SERVICE_CIDR = ipaddress.ip_network("10.96.0.0/12")
#: Secondary (IPv6) service range for dual-stack Services, as in kubeadm's dual-stack examples.
SERVICE_CIDR_V6 = ipaddress.ip_network("fd00:10:96::/108")
NODE_PORT_RANGE = (30000, 32767)
_MICRO_TIME_FIELDS = {
    ("V1LeaseSpec", "acquire_time"), ("V1LeaseSpec", "renew_time"),
    ("CoreV1Event", "event_time"), ("EventsV1Event", "event_time"),
    ("CoreV1EventSeries", "last_observed_time"), ("EventsV1EventSeries", "last_observed_time"),
}  # (metav1.ManagedFieldsEntry.Time is a metav1.Time)
_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_MICRO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})")
_MAX_CONFIG_BYTES = 1024 * 1024


def format_time(moment: datetime, micro: bool = False) -> str:
    """RFC 3339 in UTC with ``Z``: seconds (``metav1.Time``) or microseconds (``metav1.MicroTime``)."""
    moment = moment.astimezone(UTC)
    if micro:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def now_time() -> str:
    """The current time as a ``metav1.Time`` string."""
    return format_time(datetime.now(UTC))


def parse_time(text: str) -> datetime:
    """Parse an RFC 3339 timestamp with an explicit offset; raises ``ValueError`` otherwise."""
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})", text):
        raise ValueError(f'parsing time "{text}" as "2006-01-02T15:04:05Z07:00": cannot parse')
    fixed = text.replace("Z", "+00:00")
    match = re.match(r"(.*T\d{2}:\d{2}:\d{2})(\.\d+)?(.*)", fixed)
    assert match is not None
    frac = (match.group(2) or ".0")[1:7].ljust(6, "0")
    return datetime.fromisoformat(f"{match.group(1)}.{frac}{match.group(3)}")


class StoreHooks(Protocol):
    """What strategies may ask of the store (all called with the store lock held)."""

    def namespace_is_empty(self, namespace: str) -> bool:
        """No object lives in ``namespace``."""

    def delete_namespace_contents(self, namespace: str) -> None:
        """Delete every object in ``namespace`` (finalizers honoured)."""

    def crd_has_objects(self, crd: Mapping[str, Any]) -> bool:
        """Custom resources of this CRD still exist."""

    def delete_crd_objects(self, crd: Mapping[str, Any]) -> None:
        """Delete every custom resource of this CRD (finalizers honoured)."""

    def register_crd(self, crd: Mapping[str, Any]) -> None:
        """Serve (or re-serve after an update) the resources a CRD defines."""

    def unregister_crd(self, crd: Mapping[str, Any]) -> None:
        """Stop serving the resources of a removed CRD."""

    def end_watches(self, crd: Mapping[str, Any]) -> None:
        """End the open watches on a CRD's custom resources (its storage is rebuilt)."""


@dataclass(eq=False)
class ResourceType:
    """One served ``group/version/plural`` endpoint.

    Several endpoints can share one storage (all versions of a CRD; ``v1`` and
    ``events.k8s.io/v1`` events): objects are stored once, under
    ``storage_key``, in the storage version and converted on the way in and out.
    """

    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    strategy: Strategy
    has_status: bool = False
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    model: str | None = None
    schema: CustomResourceSchema | None = None
    selectable_fields: tuple[str, ...] = ()
    builtin: bool = True
    verbs: tuple[str, ...] = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")

    @property
    def storage_key(self) -> tuple[str, str]:
        """Key of the shared storage: ``(group, plural)`` of the stored kind."""
        return self.strategy.storage_key

    @property
    def api_version(self) -> str:
        """``v1`` or ``<group>/<version>``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        """``<Kind>List``."""
        return f"{self.kind}List"

    @property
    def qualified_kind(self) -> str:
        """``Kind`` or ``Kind.group``."""
        return f"{self.kind}.{self.group}" if self.group else self.kind


# ----------------------------------------------------------------- model-driven decoding


def _model_class(name: str) -> Any:
    return getattr(k8s_models, name, None)


_FIELD_MAPS: dict[str, dict[str, tuple[str, str, bool]]] = {}
_DROP: Any = object()


def _field_map(model_name: str) -> dict[str, tuple[str, str, bool]]:
    """JSON key -> (attribute name, type string, required) for a client model."""
    cached = _FIELD_MAPS.get(model_name)
    if cached is None:
        cls = _model_class(model_name)
        cached = {}
        if cls is not None:
            types: Mapping[str, str] = getattr(cls, "openapi_types", {})
            model_fields: Mapping[str, Any] = getattr(cls, "model_fields", {})
            for attr, key in getattr(cls, "attribute_map", {}).items():
                info = model_fields.get(attr)
                required = bool(info is not None and info.is_required())
                cached[key] = (attr, types.get(attr, "object"), required)
        _FIELD_MAPS[model_name] = cached
    return cached


def _decode_value(value: Any, type_str: str, owner: str, attr: str, path: str, required: bool) -> Any:
    """Decode one field; returns ``_DROP`` for what Go's ``omitempty`` would not serialise."""
    if value is None:
        return _DROP
    if type_str.startswith("List[") and type_str.endswith("]"):
        if not isinstance(value, list):
            return value  # type error reported by the model check
        if not value and not required:
            return _DROP
        inner = type_str[5:-1]
        items = [_decode_value(v, inner, owner, attr, f"{path}[{i}]", True) for i, v in enumerate(value)]
        return [None if v is _DROP else v for v in items]
    if type_str.startswith("Dict[") and type_str.endswith("]"):
        if not isinstance(value, dict):
            return value
        if not value and not required:
            return _DROP
        inner = type_str[type_str.index(",") + 1:-1].strip()
        out = {k: _decode_value(v, inner, owner, attr, f"{path}[{k}]", True) for k, v in value.items()}
        return {k: (None if v is _DROP else v) for k, v in out.items()}
    if type_str == "datetime":
        if not isinstance(value, str):
            return value
        micro = (owner, attr) in _MICRO_TIME_FIELDS
        try:
            moment = parse_time(value)
            if micro and not _MICRO_TIME.fullmatch(value):
                # metav1.MicroTime.UnmarshalJSON: time.Parse(RFC3339Micro, ...), exactly six digits
                raise ValueError(f'parsing time "{value}" as "2006-01-02T15:04:05.000000Z07:00": cannot parse')
        except ValueError as exc:
            raise bad_request(f"{path}: {exc}") from exc
        return format_time(moment, micro=micro)
    if owner == "V1ObjectMeta" and (value == "" or (attr == "generation" and value == 0)):
        return _DROP
    if _model_class(type_str) is not None and isinstance(value, dict):
        return decode_model(value, type_str, path)
    return value


def decode_model(obj: Mapping[str, Any], model_name: str, path: str = "") -> JSON:
    """Drop fields unknown to ``model_name`` (recursively), normalise timestamps, and drop
    ``null``s and empty optional lists/maps (what Go's ``omitempty`` does on the way back out).

    Raises:
        ApiError: 400 for an unparseable timestamp.
    """
    fields = _field_map(model_name)
    out: JSON = {}
    for key, value in obj.items():
        spec = fields.get(key)
        if spec is None:
            continue
        attr, type_str, required = spec
        decoded = _decode_value(value, type_str, model_name, attr, f"{path}.{key}" if path else key, required)
        if decoded is not _DROP:
            out[key] = decoded
    return out


def check_model_types(obj: Mapping[str, Any], model_name: str, kind: str, version: str) -> None:
    """Check JSON types against the client model (400 ``BadRequest`` like Go's decoder).

    Missing required fields are not reported here: kube-apiserver decodes them
    as zero values and validation answers 422.
    """
    cls = _model_class(model_name)
    if cls is None:
        return
    try:
        cls.from_dict(dict(obj))
    except pydantic.ValidationError as exc:
        # from_dict() passes None for absent fields: those are "missing", not type errors
        problems = [e for e in exc.errors() if e.get("type") != "missing" and e.get("input") is not None]
        if problems:
            first = problems[0]
            where = ".".join(str(p) for p in first.get("loc", ()))
            raise bad_request(
                f'{kind} in version "{version}" cannot be handled as a {kind}: json: cannot unmarshal '
                f"{first.get('msg', 'value')} into Go struct field {kind}.{where}"
            ) from exc
    except (TypeError, ValueError) as exc:
        raise bad_request(f'{kind} in version "{version}" cannot be handled as a {kind}: {exc}') from exc


# ----------------------------------------------------------------- base strategy


class Strategy:
    """Per-kind rules; subclasses override the hooks they need.

    Hooks receive objects in the storage layout; the store holds its lock while
    calling them. ``validate`` returns field errors (answered as 422 ``Invalid``).
    """

    group: str = ""
    plural: str = ""
    kind: str = ""
    namespaced: bool = True
    has_generation: bool = False
    allow_unconditional_update: bool = True
    allow_create_on_update: bool = False
    return_deleted_object: bool = False
    strategic_merge: bool = True
    extra_fields: tuple[str, ...] = ()

    @property
    def storage_key(self) -> tuple[str, str]:
        """``(group, plural)`` of the stored kind."""
        return (self.group, self.plural)

    # naming
    def name_errors(self, name: str) -> list[str]:
        """Messages for an invalid ``metadata.name`` (default: DNS-1123 subdomain)."""
        return dns1123_subdomain_errors(name)

    # conversion between the served version and storage
    def to_version(self, obj: JSON, rt: ResourceType) -> JSON:
        """Storage layout -> the layout of ``rt``'s version (default: rewrite ``apiVersion``)."""
        if obj.get("apiVersion") == rt.api_version:
            return obj
        out = dict(obj)
        out["apiVersion"] = rt.api_version
        return out

    def from_version(self, obj: JSON, rt: ResourceType) -> JSON:
        """Layout of ``rt``'s version -> storage layout."""
        obj["apiVersion"] = self.storage_api_version(rt)
        obj["kind"] = rt.kind
        return obj

    def storage_api_version(self, rt: ResourceType) -> str:
        """``apiVersion`` objects are stored with."""
        return rt.api_version

    # decoding (request body in the served version)
    def decode(self, obj: JSON, rt: ResourceType) -> JSON:
        """Prune unknown fields and check types of a request body; returns the cleaned object."""
        if rt.model:
            check_model_types(obj, rt.model, rt.kind, rt.api_version)
            return decode_model(obj, rt.model)
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            check_model_types(meta, "V1ObjectMeta", rt.kind, rt.api_version)
            obj["metadata"] = decode_model(meta, "V1ObjectMeta")
        return obj

    # lifecycle hooks
    def prepare_create(self, store: StoreHooks, obj: JSON, rt: ResourceType) -> None:
        """Defaults and server-owned fields on create."""

    def prepare_update(self, store: StoreHooks, new: JSON, old: JSON, rt: ResourceType) -> None:
        """Defaults and reset fields on update (main endpoint and /status)."""

    def validate(self, store: StoreHooks, obj: JSON, old: JSON | None, rt: ResourceType) -> list[FieldError]:
        """Kind-specific validation (``old`` is ``None`` on create)."""
        return []

    def validate_status(self, store: StoreHooks, obj: JSON, old: JSON, rt: ResourceType) -> list[FieldError]:
        """Validation of a ``/status`` update (default: as any update)."""
        return self.validate(store, obj, old, rt)

    def read_defaults(self, obj: JSON, rt: ResourceType) -> None:
        """Defaults kube-apiserver applies when reading an object back from storage (custom resources)."""

    def commit_create(self, store: StoreHooks, obj: JSON) -> None:
        """Called right before an object is stored (allocations)."""

    def commit_update(self, store: StoreHooks, new: JSON, old: JSON) -> None:
        """Called right before an update is stored."""

    def after_create(self, store: StoreHooks, obj: JSON) -> None:
        """Called right after an object was stored."""

    def after_update(self, store: StoreHooks, new: JSON, old: JSON) -> None:
        """Called right after an update was stored."""

    def on_removed(self, store: StoreHooks, obj: JSON) -> None:
        """Called after an object left the store (release allocations)."""

    def can_finalize(self, store: StoreHooks, obj: Mapping[str, Any]) -> bool:
        """Besides an empty ``metadata.finalizers``, may this terminating object be removed now?"""
        return True

    def needs_finalization(self, obj: Mapping[str, Any]) -> bool:
        """Does deleting this object go through a terminating phase even without finalizers?"""
        return False

    def on_terminating(self, obj: JSON) -> None:
        """Mutate an object that just got its ``deletionTimestamp``."""

    def after_terminating(self, store: StoreHooks, obj: JSON) -> None:
        """Start the work a controller would do for a terminating object."""

    # field selectors
    def field_values(self, obj: Mapping[str, Any]) -> dict[str, str]:
        """Selectable fields of a stored object."""
        meta = obj.get("metadata") or {}
        values = {"metadata.name": str(meta.get("name", ""))}
        if self.namespaced:
            values["metadata.namespace"] = str(meta.get("namespace", ""))
        for path in self.extra_fields:
            values[path] = _lookup_string(obj, path)
        return values

    def supports_field(self, name: str, rt: ResourceType) -> bool:
        """Whether ``name`` may be used in a field selector."""
        if name == "metadata.name" or (name == "metadata.namespace" and self.namespaced):
            return True
        return name in self.extra_fields or name in rt.selectable_fields


def _lookup_string(obj: Mapping[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return ""
        value = value.get(part)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _config_key_errors(key: str) -> list[str]:
    errs = []
    if len(key) > 253:
        errs.append("must be no more than 253 characters")
    if not _CONFIG_KEY.fullmatch(key):
        errs.append("a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. "
                    "'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')")
    if key in (".", ".."):
        errs.append(f"must not be '{key}'")
    if key.startswith(".."):
        errs.append("must not start with '..'")
    return errs


def _immutable_data_errors(obj: Mapping[str, Any], old: Mapping[str, Any] | None, keys: Sequence[str]) -> list[
        FieldError]:
    errors: list[FieldError] = []
    if old is None or not old.get("immutable"):
        return errors
    if not obj.get("immutable"):
        errors.append(FieldError.forbidden("immutable", "field is immutable when `immutable` is set"))
    for key in keys:
        if obj.get(key) != old.get(key):
            errors.append(FieldError.forbidden(key, "field is immutable when `immutable` is set"))
    return errors


# ----------------------------------------------------------------- core kinds


class NamespaceStrategy(Strategy):
    """Namespaces (cluster-scoped); deletion goes through ``Terminating`` while contents are removed."""

    plural = "namespaces"
    kind = "Namespace"
    namespaced = False
    return_deleted_object = True
    extra_fields = ("status.phase",)
    protected = ("default", "kube-system", "kube-public")

    def name_errors(self, name: str) -> list[str]:
        return dns1123_label_errors(name)

    def prepare_create(self, store: StoreHooks, obj: JSON, rt: ResourceType) -> None:
        meta = obj["metadata"]
        meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta.get("name", "")
        obj["spec"] = {"finalizers": ["kubernetes"]}
        obj["status"] = {"phase": "Active"}

    def prepare_update(self, store: StoreHooks, new: JSON, old: JSON, rt: ResourceType) -> None:
        meta = new["metadata"]
        meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta.get("name", "")
        if "spec" in old:
            new["spec"] = copy.deepcopy(old["spec"])

    def can_finalize(self, store: StoreHooks, obj: Mapping[str, Any]) -> bool:
        return store.namespace_is_empty(str(obj["metadata"]["name"]))

    def needs_finalization(self, obj: Mapping[str, Any]) -> bool:
        return True

    def on_terminating(self, obj: JSON) -> None:
        obj.setdefault("status", {})["phase"] = "Terminating"

    def after_terminating(self, store: StoreHooks, obj: JSON) -> None:
        store.delete_namespace_contents(str(obj["metadata"]["name"]))


class ConfigMapStrategy(Strategy):
    """ConfigMaps: key syntax, no key in both ``data`` and ``binaryData``, 1 MiB, ``immutable``."""

    plural = "configmaps"
    kind = "ConfigMap"

    def validate(self, store: StoreHooks, obj: JSON, old: JSON | None, rt: ResourceType) -> list[FieldError]:
        errors: list[FieldError] = []
        data = obj.get("data") or {}
        binary = obj.get("binaryData") or {}
        total = 0
        for key, value in data.items():
            errors.extend(FieldError.invalid(f"data[{key}]", key, m) for m in _config_key_errors(key))
            if key in binary:
                errors.append(FieldError.invalid(f"data[{key}]", key, "duplicate of key present in binaryData"))
            total += len(str(value).encode())
        for key, value in binary.items():
            errors.extend(FieldError.invalid(f"binaryData[{key}]", key, m) for m in _config_key_errors(key))
            total += len(str(value)) * 3 // 4
        if total > _MAX_CONFIG_BYTES:
            errors.append(FieldError("FieldValueTooLong", "", "", f"must have at most {_MAX_CONFIG_BYTES} bytes"))
        errors.extend(_immutable_data_errors(obj, old, ("data", "binaryData")))
        return errors


class SecretStrategy(Strategy):
    """Secrets: base64 ``data``, ``stringData`` merged into ``data`` and dropped, immutable ``type``."""

    plural = "secrets"
    kind = "Secret"
    extra_fields = ("type",)

    def decode(self, obj: JSON, rt: ResourceType) -> JSON:
        data = obj.get("data")
        if isinstance(data, dict):
            for value in data.values():
                if isinstance(value, str):
                    try:
                        base64.b64decode(value, validate=True)
                    except (binascii.Error, ValueError) as exc:
                        raise bad_request(
                            f'Secret in version "v1" cannot be handled as a Secret: illegal base64 data: {exc}'
                        ) from exc
        return super().decode(obj, rt)

    @staticmethod
    def _merge_string_data(obj: JSON) -> None:
        string_data = obj.pop("stringData", None)
        if string_data:
            data = obj.get("data") or {}
            for key, value in string_data.items():
                data[key] = base64.b64encode(str(value).encode()).decode()
            obj["data"] = data
        if not obj.get("type"):
            obj["type"] = "Opaque"

    def prepare_create(self, store: StoreHooks, obj: JSON, rt: ResourceType) -> None:
        self._merge_string_data(obj)

    def prepare_update(self, store: StoreHooks, new: JSON, old: JSON, rt: ResourceType) -> None:
        self._merge_string_data(new)

    def validate(self, store: StoreHooks, obj: JSON, old: JSON | None, rt: ResourceType) -> list[FieldError]:
        errors: list[FieldError] = []
        data = obj.get("data") or {}
        total = 0
        for key, value in data.items():
            errors.extend(FieldError.invalid(f"data[{key}]", key, m) for m in _config_key_errors(key))
            total += len(str(value)) * 3 // 4
        if total > _MAX_CONFIG_BYTES:
            errors.append(FieldError("FieldValueTooLong", "data", "", f"must have at most {_MAX_CONFIG_BYTES} bytes"))
        if obj.get("type") == "kubernetes.io/tls":
            for key in ("tls.crt", "tls.key"):
                if key not in data:
                    errors.append(FieldError.required(f"data[{key}]"))
        if old is not None and old.get("type") != obj.get("type"):
            errors.append(FieldError.invalid("type", obj.get("type"), "field is immutable"))
        errors.extend(_immutable_data_errors(obj, old, ("data",)))
        return errors


def _needs_cluster_ip(spec: Mapping[str, Any]) -> bool:
    return bool(spec.get("type", "ClusterIP") != "ExternalName")


def _needs_node_ports(spec: Mapping[str, Any]) -> bool:
    kind = spec.get("type", "ClusterIP")
    if kind == "NodePort":
        return True
    return kind == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts", True) is not False


def _port_number_errors(value: Any) -> bool:
    return not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 65535


class ServiceStrategy(Strategy):
    """Services: ClusterIP allocation from 10.96.0.0/12, NodePort allocation from 30000-32767, defaults."""

    plural = "services"
    kind = "Service"
    return_deleted_object = True
    extra_fields = ("spec.clusterIP", "spec.type")

    def __init__(self) -> None:
        self.allocated_ips: set[int] = set()
        self.allocated_ports: set[int] = set()
        self._base = int(SERVICE_CIDR.network_address)
        self._size = SERVICE_CIDR.num_addresses
        self._next_ip = 256  # dynamic allocations start in the upper band, as kube-apiserver prefers
        self._next_port = NODE_PORT_RANGE[0]
        self._next_ip6 = 1  # offset of the last IPv6 secondary handed out (dual-stack Services)
        self.allocated_ips.add(self._base)  # network address
        self.allocated_ips.add(self._base + self._size - 1)  # broadcast

    def name_errors(self, name: str) -> list[str]:
        return dns1035_label_errors(name)

    # defaults ------------------------------------------------------------
    @staticmethod
    def _defaults(obj: JSON) -> None:
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        if spec.get("sessionAffinity") in (None, ""):
            spec["sessionAffinity"] = "None"
        for port in spec.get("ports") or []:
            if isinstance(port, dict):
                if not port.get("protocol"):
                    port["protocol"] = "TCP"
                if port.get("targetPort") in (None, 0, "") and "port" in port:
                    port["targetPort"] = port["port"]
        if _needs_cluster_ip(spec):
            spec.setdefault("internalTrafficPolicy", "Cluster")
            if not spec.get("clusterIP") and spec.get("clusterIPs"):
                spec["clusterIP"] = spec["clusterIPs"][0]
        if spec["type"] in ("NodePort", "LoadBalancer"):
            spec.setdefault("externalTrafficPolicy", "Cluster")
        if spec["type"] == "LoadBalancer":
            spec.setdefault("allocateLoadBalancerNodePorts", True)

    def prepare_create(self, store: StoreHooks, obj: JSON, rt: ResourceType) -> None:
        self._defaults(obj)
        obj["status"] = {"loadBalancer": {}}

    def prepare_update(self, store: StoreHooks, new: JSON, old: JSON, rt: ResourceType) -> None:
        self._defaults(new)
        spec, old_spec = new["spec"], old.get("spec") or {}
        if _needs_cluster_ip(old_spec) and _needs_cluster_ip(spec):
            if not spec.get("clusterIP") and old_spec.get("clusterIP"):
                spec["clusterIP"] = old_spec["clusterIP"]
            if not spec.get("clusterIPs") and old_spec.get("clusterIPs"):
                spec["clusterIPs"] = list(old_spec["clusterIPs"])
            for key in ("ipFamilies", "ipFamilyPolicy"):
                if key not in spec and key in old_spec:
                    spec[key] = copy.deepcopy(old_spec[key])
        if not _needs_cluster_ip(spec):
            for key in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy", "internalTrafficPolicy"):
                if spec.get(key) == old_spec.get(key):
                    spec.pop(key, None)
        if _needs_node_ports(old_spec) and _needs_node_ports(spec):
            new_ports = [p for p in spec.get("ports") or [] if isinstance(p, dict)]
            used = {p.get("nodePort") for p in old_spec.get("ports") or []} & {p.get("nodePort") for p in new_ports}
            by_name = {p.get("name", ""): p.get("nodePort") for p in old_spec.get("ports") or []}
            for port in new_ports:
                if not port.get("nodePort"):
                    old_value = by_name.get(port.get("name", ""))
                    if old_value and old_value not in used:
                        port["nodePort"] = old_value
        elif not _needs_node_ports(spec) and spec.get("type") != "LoadBalancer":
            for port in spec.get("ports") or []:
                if isinstance(port, dict) and port.get("nodePort") and any(
                        port.get("nodePort") == p.get("nodePort") for p in old_spec.get("ports") or []):
                    port.pop("nodePort", None)

    # validation ----------------------------------------------------------
    def _ip_errors(self, spec: Mapping[str, Any], old_spec: Mapping[str, Any] | None) -> list[FieldError]:
        errors: list[FieldError] = []
        ip = spec.get("clusterIP")
        ips = spec.get("clusterIPs")
        stype = spec.get("type", "ClusterIP")
        if ips and ip and ips[0] != ip:
            errors.append(FieldError.invalid("spec.clusterIPs", ips, "first value must match `clusterIP`"))
        if stype == "ExternalName":
            if ip and (old_spec is None or ip != old_spec.get("clusterIP")):
                errors.append(FieldError.invalid("spec.clusterIPs", [ip], "may not be set for ExternalName services"))
            return errors
        if not ip:
            return errors
        if ip == "None":
            if stype != "ClusterIP":
                errors.append(FieldError.invalid("spec.clusterIPs[0]", "None",
                                                 f"may not be set to 'None' for {stype} services"))
            if old_spec is not None and old_spec.get("clusterIP") not in (None, "", "None"):
                errors.append(FieldError.invalid("spec.clusterIPs[0]", ["None"], "may not change once set"))
            return errors
        try:
            address = ipaddress.ip_address(ip)
        except ValueError:
            errors.append(FieldError.invalid("spec.clusterIPs[0]", ip, "must be a valid IP address, (e.g. "
                                             "10.9.8.7 or 2001:db8::ffff)"))
            return errors
        if old_spec is not None and old_spec.get("clusterIP") and old_spec.get("clusterIP") != ip and \
                _needs_cluster_ip(old_spec):
            errors.append(FieldError.invalid("spec.clusterIPs[0]", [ip], "may not change once set"))
            return errors
        if old_spec is None or old_spec.get("clusterIP") != ip:
            if address not in SERVICE_CIDR:
                errors.append(FieldError.invalid(
                    "spec.clusterIPs", [ip],
                    f"failed to allocate IP {ip}: the provided IP ({ip}) is not in the valid range. "
                    f"The range of valid IPs is {SERVICE_CIDR}"))
            elif int(address) in self.allocated_ips:
                errors.append(FieldError.invalid("spec.clusterIPs", [ip],
                                                 f"failed to allocate IP {ip}: provided IP is already allocated"))
        return errors

    def validate(self, store: StoreHooks, obj: JSON, old: JSON | None, rt: ResourceType) -> list[FieldError]:
        errors: list[FieldError] = []
        spec = obj.get("spec") or {}
        old_spec = (old or {}).get("spec") if old is not None else None
        stype = spec.get("type", "ClusterIP")
        supported = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]
        if stype not in supported:
            errors.append(FieldError.not_supported("spec.type", stype, supported))
        if spec.get("sessionAffinity") not in ("None", "ClientIP"):
            errors.append(FieldError.not_supported("spec.sessionAffinity", spec.get("sessionAffinity"),
                                                   ["ClientIP", "None"]))
        ports = spec.get("ports") or []
        if stype == "ExternalName":
            name = spec.get("externalName")
            if not name:
                errors.append(FieldError.required("spec.externalName"))
            else:
                errors.extend(FieldError.invalid("spec.externalName", name, m)
                              for m in dns1123_subdomain_errors(str(name).rstrip(".")))
        elif not ports and spec.get("clusterIP") != "None":
            errors.append(FieldError.required("spec.ports"))
        names: set[str] = set()
        keys: set[tuple[Any, Any]] = set()
        for i, port in enumerate(ports):
            path = f"spec.ports[{i}]"
            if not isinstance(port, dict):
                continue
            pname = port.get("name") or ""
            if len(ports) > 1 and not pname:
                errors.append(FieldError.required(f"{path}.name"))
            elif pname:
                errors.extend(FieldError.invalid(f"{path}.name", pname, m) for m in dns1123_label_errors(pname))
                if pname in names:
                    errors.append(FieldError.duplicate(f"{path}.name", pname))
                names.add(pname)
            if _port_number_errors(port.get("port")):
                errors.append(FieldError.invalid(f"{path}.port", port.get("port"),
                                                 "must be between 1 and 65535, inclusive"))
            protocol = port.get("protocol")
            if protocol not in ("TCP", "UDP", "SCTP"):
                errors.append(FieldError.not_supported(f"{path}.protocol", protocol, ["SCTP", "TCP", "UDP"]))
            key = (port.get("port"), protocol)
            if key in keys:
                errors.append(FieldError.duplicate(path, {"port": port.get("port"), "protocol": protocol}))
            keys.add(key)
            target = port.get("targetPort")
            if isinstance(target, int) and not isinstance(target, bool) and _port_number_errors(target):
                errors.append(FieldError.invalid(f"{path}.targetPort", target, "must be between 1 and 65535, "
                                                 "inclusive"))
            elif isinstance(target, str) and target:
                errors.extend(FieldError.invalid(f"{path}.targetPort", target, m) for m in port_name_errors(target))
            node_port = port.get("nodePort")
            if node_port:
                if stype == "ClusterIP":
                    errors.append(FieldError.forbidden(f"{path}.nodePort", "may not be used when `type` is "
                                                       "'ClusterIP'"))
                elif not NODE_PORT_RANGE[0] <= node_port <= NODE_PORT_RANGE[1]:
                    errors.append(FieldError.invalid(
                        f"{path}.nodePort", node_port,
                        f"provided port is not in the valid range. The range of valid ports is "
                        f"{NODE_PORT_RANGE[0]}-{NODE_PORT_RANGE[1]}"))
                else:
                    old_ports = {p.get("nodePort") for p in (old_spec or {}).get("ports") or []}
                    if node_port in self.allocated_ports and node_port not in old_ports:
                        errors.append(FieldError.invalid(f"{path}.nodePort", node_port,
                                                         "provided port is already allocated"))
        errors.extend(service_selector_errors(spec))
        errors.extend(self._ip_errors(spec, old_spec))
        return errors

    # allocation ----------------------------------------------------------
    def _allocate_ip(self) -> str:
        for _ in range(self._size):
            offset = self._next_ip
            self._next_ip = self._next_ip + 1 if self._next_ip + 1 < self._size else 2
            value = self._base + offset
            if value not in self.allocated_ips:
                self.allocated_ips.add(value)
                return str(ipaddress.ip_address(value))
        raise ApiError(500, "InternalError", "Internal error occurred: failed to allocate a serviceIP: range is full")

    def _allocate_port(self) -> int:
        span = NODE_PORT_RANGE[1] - NODE_PORT_RANGE[0] + 1
        for _ in range(span):
            port = self._next_port
            self._next_port = port + 1 if port < NODE_PORT_RANGE[1] else NODE_PORT_RANGE[0]
            if port not in self.allocated_ports:
                self.allocated_ports.add(port)
                return port
        raise ApiError(500, "InternalError", "Internal error occurred: failed to allocate a nodePort: range is full")

    def _assign(self, spec: JSON) -> None:
        if _needs_cluster_ip(spec):
            ip = spec.get("clusterIP")
            if not ip:
                ip = self._allocate_ip()
            elif ip != "None":
                self.allocated_ips.add(int(ipaddress.ip_address(ip)))
            spec["clusterIP"] = ip
            spec["clusterIPs"] = [ip]
            spec.setdefault("ipFamilyPolicy", "SingleStack")
            if ip != "None" and spec["ipFamilyPolicy"] in ("PreferDualStack", "RequireDualStack"):
                # Dual-stack (Kubernetes "IPv4/IPv6 dual-stack"): IPv4 primary, IPv6 secondary.
                self._next_ip6 += 1
                spec["clusterIPs"] = [ip, str(SERVICE_CIDR_V6.network_address + self._next_ip6)]
                spec["ipFamilies"] = ["IPv4", "IPv6"]
            else:
                spec["ipFamilies"] = ["IPv4"]
        if _needs_node_ports(spec):
            for port in spec.get("ports") or []:
                if isinstance(port, dict):
                    if port.get("nodePort"):
                        self.allocated_ports.add(int(port["nodePort"]))
                    else:
                        port["nodePort"] = self._allocate_port()
        else:
            for port in spec.get("ports") or []:
                if isinstance(port, dict) and port.get("nodePort"):
                    self.allocated_ports.add(int(port["nodePort"]))

    def _release(self, spec: Mapping[str, Any], keep: Mapping[str, Any] | None = None) -> None:
        keep = keep or {}
        ip = spec.get("clusterIP")
        if ip and ip != "None" and ip != keep.get("clusterIP"):
            self.allocated_ips.discard(int(ipaddress.ip_address(ip)))
        kept_ports = {p.get("nodePort") for p in keep.get("ports") or [] if isinstance(p, dict)}
        for port in spec.get("ports") or []:
            if isinstance(port, dict) and port.get("nodePort") and port["nodePort"] not in kept_ports:
                self.allocated_ports.discard(int(port["nodePort"]))

    def commit_create(self, store: StoreHooks, obj: JSON) -> None:
        self._assign(obj["spec"])

    def commit_update(self, store: StoreHooks, new: JSON, old: JSON) -> None:
        self._assign(new["spec"])
        self._release(old.get("spec") or {}, new["spec"])

    def on_removed(self, store: StoreHooks, obj: JSON) -> None:
        self._release(obj.get("spec") or {})


class EndpointsStrategy(Strategy):
    """Endpoints (PUT may create, as in kube-apiserver)."""

    plural = "endpoints"
    kind = "Endpoints"
    allow_create_on_update = True

    def validate(self, store: StoreHooks, obj: JSON, old: JSON | None, rt: ResourceType) -> list[FieldError]:
        errors: list[FieldError] = []
        for i, subset in enumerate(obj.get("subsets") or []):
            for field_name in ("addresses", "notReadyAddresses"):
                for j, address in enumerate((subset or {}).get(field_name) or []):
                    ip = (address or {}).get("ip")
                    try:
                        ipaddress.ip_address(str(ip))
                    except ValueError:
                        errors.append(FieldError.invalid(f"subsets[{i}].{field_name}[{j}].ip", ip,
                                                         "must be a valid IP address"))
        return errors


class EventStrategy(Strategy):
    """Events, stored as ``v1`` and also served as ``events.k8s.io/v1`` (field names converted)."""

    plural = "events"
    kind = "Event"
    allow_create_on_update = True
    extra_fields = ("involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
                    "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
                    "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type")
    _V1_FIELD_ALIASES = {
        "regarding.kind": "involvedObject.kind", "regarding.namespace": "involvedObject.namespace",
        "regarding.name": "involvedObject.name", "regarding.uid": "involvedObject.uid",
        "regarding.apiVersion": "involvedObject.apiVersion",
        "regarding.resourceVersion": "involvedObject.resourceVersion",
        "regarding.fieldPath": "involvedObject.fieldPath", "reportingController": "reportingComponent",
        "deprecatedSource": "source",
    }
    # events.k8s.io/v1 name -> core/v1 name
    _RENAMES = (("regarding", "involvedObject"), ("note", "message"), ("reportingController", "reportingComponent"),
                ("deprecatedSource", "source"), ("deprecatedFirstTimestamp", "firstTimestamp"),
                ("deprecatedLastTimestamp", "lastTimestamp"), ("deprecatedCount", "count"))

    def storage_api_version(self, rt: ResourceType) -> str:
        return "v1"

    def to_version(self, obj: JSON, rt: ResourceType) -> JSON:
        if rt.group != "events.k8s.io":
            return obj
        out = dict(obj)
        out["apiVersion"] = rt.api_version
        for new_name, old_name in self._RENAMES:
            if old_name in out:
                out[new_name] = out.pop(old_name)
        if isinstance(out.get("source"), dict):
            out.pop("source")
        return out

    def from_version(self, obj: JSON, rt: ResourceType) -> JSON:
        if rt.group == "events.k8s.io":
            for new_name, old_name in self._RENAMES:
                if new_name in obj:
                    obj[old_name] = obj.pop(new_name)
        obj["apiVersion"] = "v1"
        obj["kind"] = "Event"
        return obj

    def field_values(self, obj: Mapping[str, Any]) -> dict[str, str]:
        values = super().field_values(obj)
        source = obj.get("source") or {}
        values["source"] = str(source.get("component", "")) if isinstance(source, Mapping) else ""
        for alias, target in self._V1_FIELD_ALIASES.items():
            values[alias] = values.get(target, "")
        return values

    def supports_field(self, name: str, rt: ResourceType) -> bool:
        return super().supports_field(name, rt) or name in self._V1_FIELD_ALIASES

    def name_errors(self, name: str) -> list[str]:
        """core/v1 Event names follow only the path-segment rules (events.k8s.io adds DNS-1123 in validate)."""
        return path_segment_name_errors(name)

    def validate(self, store: StoreHooks, obj: JSON, old: JSON | None, rt: ResourceType) -> list[FieldError]:
        return event_errors(obj, old, rt.group)


class LeaseStrategy(Strategy):
    """coordination.k8s.io/v1 Leases (``acquireTime``/``renewTime`` are MicroTime)."""

    group = "coordination.k8s.io"
    plural = "leases"
    kind = "Lease"

    def validate(self, store: StoreHooks, obj: JSON, old: JSON | None, rt: ResourceType) -> list[FieldError]:
        return lease_spec_errors(obj.get("spec") or {})


class EndpointSliceStrategy(Strategy):
    """discovery.k8s.io/v1 EndpointSlices; endpoint and port rules in :mod:`zkop_testing.apiserver_discovery`."""

    group = "discovery.k8s.io"
    plural = "endpointslices"
    kind = "EndpointSlice"
    has_generation = True

    def prepare_create(self, store: StoreHooks, obj: JSON, rt: ResourceType) -> None:
        default_endpoint_slice(obj)

    def prepare_update(self, store: StoreHooks, new: JSON, old: JSON, rt: ResourceType) -> None:
        default_endpoint_slice(new)

    def validate(self, store: StoreHooks, obj: JSON, old: JSON | None, rt: ResourceType) -> list[FieldError]:
        errors: list[FieldError] = []
        address_type = obj.get("addressType")
        if not address_type:
            errors.append(FieldError.required("addressType"))
        elif address_type not in ("IPv4", "IPv6", "FQDN"):
            errors.append(FieldError.not_supported("addressType", address_type, ["FQDN", "IPv4", "IPv6"]))
        if old is not None and old.get("addressType") != address_type:
            errors.append(FieldError.invalid("addressType", address_type, "field is immutable"))
        errors.extend(endpoint_slice_errors(obj))
        return errors


class ServiceCIDRStrategy(Strategy):
    """networking.k8s.io/v1 ServiceCIDRs (cluster-scoped; ``spec.cidrs`` immutable, at most one per family)."""

    group = "networking.k8s.io"
    plural = "servicecidrs"
    kind = "ServiceCIDR"
    namespaced = False
    has_generation = True

    def validate(self, store: StoreHooks, obj: JSON, old: JSON | None, rt: ResourceType) -> list[FieldError]:
        errors: list[FieldError] = []
        cidrs = (obj.get("spec") or {}).get("cidrs") or []
        if not 1 <= len(cidrs) <= 2:
            errors.append(FieldError.invalid("spec.cidrs", cidrs, "at least one and at most two CIDRs are allowed"))
        families = set()
        for i, cidr in enumerate(cidrs):
            try:
                network = ipaddress.ip_network(str(cidr), strict=True)
            except ValueError:
                errors.append(FieldError.invalid(f"spec.cidrs[{i}]", cidr, "must be a valid CIDR value"))
                continue
            families.add(network.version)
        if len(families) < len(cidrs) and not errors:
            errors.append(FieldError.invalid("spec.cidrs", cidrs, "may specify no more than one IP for each IP family"))
        if old is not None and (old.get("spec") or {}).get("cidrs") != cidrs:
            errors.append(FieldError.invalid("spec.cidrs", cidrs, "field is immutable"))
        return errors


# ----------------------------------------------------------------- CRDs and custom resources


def _crd_versions(crd: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [v for v in (crd.get("spec") or {}).get("versions") or [] if isinstance(v, Mapping)]


def _storage_version(crd: Mapping[str, Any]) -> str:
    for version in _crd_versions(crd):
        if version.get("storage"):
            return str(version.get("name"))
    versions = _crd_versions(crd)
    return str(versions[0].get("name")) if versions else ""


class CustomResourceDefinitionStrategy(Strategy):
    """apiextensions.k8s.io/v1 CRDs: names defaulted, status computed, cleanup finalizer, served dynamically."""

    group = "apiextensions.k8s.io"
    plural = "customresourcedefinitions"
    kind = "CustomResourceDefinition"
    namespaced = False
    has_generation = True
    allow_unconditional_update = False
    return_deleted_object = True

    def name_errors(self, name: str) -> list[str]:
        return []  # checked against spec in validate()

    @staticmethod
    def _defaults(obj: JSON) -> None:
        spec = obj.setdefault("spec", {})
        names = spec.setdefault("names", {})
        if names.get("kind"):
            names.setdefault("singular", str(names["kind"]).lower())
            names.setdefault("listKind", f"{names['kind']}List")
        spec.setdefault("conversion", {"strategy": "None"})
        for version in spec.get("versions") or []:
            if isinstance(version, dict):
                version.setdefault("served", True)
                version.setdefault("storage", False)

    @staticmethod
    def _status(obj: JSON, old_status: Mapping[str, Any] | None) -> JSON:
        spec = obj["spec"]
        now = now_time()
        stored = list((old_status or {}).get("storedVersions") or [])
        storage = _storage_version(obj)
        if storage and storage not in stored:
            stored.append(storage)
        conditions = [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": now},
        ]
        if old_status:
            conditions = copy.deepcopy(list(old_status.get("conditions") or conditions))
        return {"conditions": conditions, "acceptedNames": copy.deepcopy(spec.get("names") or {}),
                "storedVersions": stored}

    def prepare_create(self, store: StoreHooks, obj: JSON, rt: ResourceType) -> None:
        self._defaults(obj)
        finalizers = obj["metadata"].setdefault("finalizers", [])
        if CRD_CLEANUP_FINALIZER not in finalizers:
            finalizers.append(CRD_CLEANUP_FINALIZER)
        obj["status"] = self._status(obj, None)

    def prepare_update(self, store: StoreHooks, new: JSON, old: JSON, rt: ResourceType) -> None:
        self._defaults(new)
        status = new.get("status") or {}
        new["status"] = self._status(new, status if status else None)

    def validate(self, store: StoreHooks, obj: JSON, old: JSON | None, rt: ResourceType) -> list[FieldError]:
        errors: list[FieldError] = []
        spec = obj.get("spec") or {}
        names = spec.get("names") or {}
        group = spec.get("group") or ""
        plural = names.get("plural") or ""
        name = (obj.get("metadata") or {}).get("name")
        if name != f"{plural}.{group}":
            errors.append(FieldError.invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group'))
        if not group:
            errors.append(FieldError.required("spec.group"))
        elif "." not in group:
            errors.append(FieldError.invalid("spec.group", group, "should be a domain with at least one dot"))
        else:
            errors.extend(FieldError.invalid("spec.group", group, m) for m in dns1123_subdomain_errors(group))
        for key in ("plural", "singular"):
            value = names.get(key)
            if key == "plural" and not value:
                errors.append(FieldError.required("spec.names.plural"))
            elif value:
                errors.extend(FieldError.invalid(f"spec.names.{key}", value, m) for m in dns1123_label_errors(value))
        for key in ("kind", "listKind"):
            value = names.get(key)
            if not value:
                errors.append(FieldError.required(f"spec.names.{key}"))
            elif not re.fullmatch(r"[A-Za-z][-A-Za-z0-9]*", str(value)):
                errors.append(FieldError.invalid(f"spec.names.{key}", value, "may have mixed case, but should "
                                                 "otherwise match: [a-z]([-a-z0-9]*[a-z0-9])?"))
        for i, short in enumerate(names.get("shortNames") or []):
            errors.extend(FieldError.invalid(f"spec.names.shortNames[{i}]", short, m)
                          for m in dns1123_label_errors(str(short)))
        scope = spec.get("scope")
        if scope not in ("Cluster", "Namespaced"):
            if not scope:
                errors.append(FieldError.required("spec.scope"))
            else:
                errors.append(FieldError.not_supported("spec.scope", scope, ["Cluster", "Namespaced"]))
        versions = spec.get("versions") or []
        if not versions:
            errors.append(FieldError.required("spec.versions", "must have exactly one version marked as storage "
                                              "version"))
        elif sum(1 for v in versions if isinstance(v, dict) and v.get("storage")) != 1:
            errors.append(FieldError.invalid("spec.versions", [v.get("name") for v in versions if isinstance(v, dict)],
                                             "must have exactly one version marked as storage version"))
        seen: set[str] = set()
        for i, version in enumerate(versions):
            if not isinstance(version, dict):
                continue
            vname = version.get("name") or ""
            if not vname:
                errors.append(FieldError.required(f"spec.versions[{i}].name"))
            elif dns1035_label_errors(vname):
                errors.append(FieldError.invalid(f"spec.versions[{i}].name", vname,
                                                 dns1035_label_errors(vname)[0]))
            if vname in seen:
                errors.append(FieldError.invalid("spec.versions", vname, "must appear only once"))
            seen.add(vname)
            schema = ((version.get("schema") or {}).get("openAPIV3Schema"))
            spath = f"spec.versions[{i}].schema.openAPIV3Schema"
            if not isinstance(schema, dict):
                errors.append(FieldError.required(spath, "schemas are required"))
            else:
                errors.extend(check_schema(schema, spath))
        if old is not None:
            old_spec = old.get("spec") or {}
            if old_spec.get("scope") != scope:
                errors.append(FieldError.invalid("spec.scope", scope, "field is immutable"))
            if old_spec.get("group") != group:
                errors.append(FieldError.invalid("spec.group", group, "field is immutable"))
        return errors

    def after_create(self, store: StoreHooks, obj: JSON) -> None:
        store.register_crd(obj)

    def after_update(self, store: StoreHooks, new: JSON, old: JSON) -> None:
        store.register_crd(new)
        if new.get("spec") != old.get("spec"):
            # crdHandler.updateCustomResourceDefinition: a changed spec tears down the storage
            # of the custom resources, which ends their watches.
            store.end_watches(new)

    def on_removed(self, store: StoreHooks, obj: JSON) -> None:
        store.unregister_crd(obj)

    def can_finalize(self, store: StoreHooks, obj: Mapping[str, Any]) -> bool:
        return not store.crd_has_objects(obj)

    def on_terminating(self, obj: JSON) -> None:
        status = obj.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "Terminating"]
        conditions.append({"type": "Terminating", "status": "True", "reason": "InstanceDeletionInProgress",
                           "message": "CustomResource deletion is in progress", "lastTransitionTime": now_time()})
        status["conditions"] = conditions

    def after_terminating(self, store: StoreHooks, obj: JSON) -> None:
        store.delete_crd_objects(obj)


class CustomResourceStrategy(Strategy):
    """Objects of a CRD: structural pruning, defaulting and schema validation; 415 for strategic merge."""

    has_generation = True
    allow_unconditional_update = False
    return_deleted_object = True
    strategic_merge = False

    def __init__(self, group: str, plural: str, kind: str, namespaced: bool, storage_version: str,
                 crd_name: str) -> None:
        self.group = group
        self.plural = plural
        self.kind = kind
        self.namespaced = namespaced
        self.storage_version = storage_version
        self.crd_name = crd_name
        self.terminating = False

    def storage_api_version(self, rt: ResourceType) -> str:
        return f"{self.group}/{self.storage_version}"

    def decode(self, obj: JSON, rt: ResourceType) -> JSON:
        """ObjectMeta pruning, then structural pruning and defaulting (done while decoding, as kube does)."""
        obj = super().decode(obj, rt)
        if rt.schema is not None:
            rt.schema.prune(obj)
            rt.schema.apply_defaults(obj)
        return obj

    def prepare_create(self, store: StoreHooks, obj: JSON, rt: ResourceType) -> None:
        if rt.has_status:
            obj.pop("status", None)

    def read_defaults(self, obj: JSON, rt: ResourceType) -> None:
        """Defaults of the object an update starts from (it was read, so defaulted: see :meth:`to_version`)."""
        if rt.schema is not None:
            rt.schema.apply_defaults(obj)

    def to_version(self, obj: JSON, rt: ResourceType) -> JSON:
        """Read-time defaulting: kube-apiserver decodes every custom resource read from etcd with the
        current schema's defaults (``customresource_handler.go``, ``unstructuredDefaulter``), but stores
        them only on the next write. So a ``status`` default shows right after a create that dropped the
        status, and defaults a CRD gains later appear on old objects."""
        out = super().to_version(obj, rt)
        if rt.schema is None:
            return out
        view: JSON = rt.schema.defaulted(out)
        return view

    def validate(self, store: StoreHooks, obj: JSON, old: JSON | None, rt: ResourceType) -> list[FieldError]:
        """Schema validation; on update with ratcheting against the old object as read (defaulted)."""
        if rt.schema is None:
            return []
        if old is None:
            errors = rt.schema.validate(obj) + list_errors(obj, rt.schema.schema)
            return errors + rule_errors(rt.schema.rules, obj, None, errors)
        old_view = rt.schema.defaulted(old)
        # strategy.go ValidateUpdate: list-type uniqueness only if the old object kept it
        lists = list_errors(obj, rt.schema.schema) if not list_errors(old_view, rt.schema.schema) else []
        errors = rt.schema.validate_update(obj, old_view) + lists
        return errors + rule_errors(rt.schema.rules, obj, old_view, errors)

    def validate_status(self, store: StoreHooks, obj: JSON, old: JSON, rt: ResourceType) -> list[FieldError]:
        """``/status`` validates ``status`` only, against its own schema, with ratcheting
        (``status_strategy.go`` ValidateUpdate, ``validator.go`` ValidateStatusUpdate); metadata
        rules are checked by the store."""
        if rt.schema is None or "status" not in obj:
            return []
        status_schema = (rt.schema.schema.get("properties") or {}).get("status")
        if not isinstance(status_schema, Mapping):
            return []
        schema = CustomResourceSchema(status_schema, resource=False)
        old_view = rt.schema.defaulted(old)
        lists = list_errors(obj, rt.schema.schema) if not list_errors(old_view, rt.schema.schema) else []
        errors = schema.validate_update(obj["status"], old_view.get("status"), "status") + lists
        # The rules run over the whole object (an unchanged spec ratchets).
        return errors + rule_errors(rt.schema.rules, obj, old_view, errors)


def custom_resource_types(crd: Mapping[str, Any], previous: CustomResourceStrategy | None) -> list[ResourceType]:
    """The endpoints (one per served version) a CRD defines; the strategy is reused across updates."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = str(spec.get("group"))
    plural = str(names.get("plural"))
    kind = str(names.get("kind"))
    namespaced = spec.get("scope") == "Namespaced"
    storage = _storage_version(crd)
    strategy = previous or CustomResourceStrategy(group, plural, kind, namespaced, storage,
                                                  str((crd.get("metadata") or {}).get("name")))
    strategy.kind = kind
    strategy.storage_version = storage
    types = []
    for version in _crd_versions(crd):
        if not version.get("served", True):
            continue
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        selectable = tuple(str(f.get("jsonPath", "")).lstrip(".") for f in version.get("selectableFields") or []
                           if isinstance(f, Mapping))
        types.append(ResourceType(
            group=group, version=str(version.get("name")), plural=plural,
            singular=str(names.get("singular") or kind.lower()), kind=kind, namespaced=namespaced,
            strategy=strategy, has_status="status" in (version.get("subresources") or {}),
            short_names=tuple(names.get("shortNames") or ()), categories=tuple(names.get("categories") or ()),
            schema=CustomResourceSchema(schema) if isinstance(schema, Mapping) else None,
            selectable_fields=selectable, builtin=False,
        ))
    return types


# ----------------------------------------------------------------- registry of built-ins


@dataclass
class BuiltinSet:
    """The built-in strategies of one store (they hold allocation state)."""

    namespaces: NamespaceStrategy = field(default_factory=NamespaceStrategy)
    services: ServiceStrategy = field(default_factory=ServiceStrategy)
    crds: CustomResourceDefinitionStrategy = field(default_factory=CustomResourceDefinitionStrategy)


def builtin_resource_types(builtins: BuiltinSet) -> list[ResourceType]:
    """All built-in endpoints served by the in-memory server."""
    events = EventStrategy()
    return [
        ResourceType("", "v1", "namespaces", "namespace", "Namespace", False, builtins.namespaces,
                     has_status=True, short_names=("ns",), model="V1Namespace",
                     verbs=("create", "delete", "get", "list", "patch", "update", "watch")),
        ResourceType("", "v1", "services", "service", "Service", True, builtins.services, has_status=True,
                     short_names=("svc",), categories=("all",), model="V1Service"),
        ResourceType("", "v1", "configmaps", "configmap", "ConfigMap", True, ConfigMapStrategy(),
                     short_names=("cm",), model="V1ConfigMap"),
        ResourceType("", "v1", "secrets", "secret", "Secret", True, SecretStrategy(), model="V1Secret"),
        ResourceType("", "v1", "events", "event", "Event", True, events, short_names=("ev",),
                     model="CoreV1Event"),
        ResourceType("", "v1", "endpoints", "endpoints", "Endpoints", True, EndpointsStrategy(),
                     short_names=("ep",), model="V1Endpoints"),
        ResourceType("events.k8s.io", "v1", "events", "event", "Event", True, events, short_names=("ev",),
                     model="EventsV1Event"),
        ResourceType("coordination.k8s.io", "v1", "leases", "lease", "Lease", True, LeaseStrategy(),
                     model="V1Lease"),
        ResourceType("discovery.k8s.io", "v1", "endpointslices", "endpointslice", "EndpointSlice", True,
                     EndpointSliceStrategy(), model="V1EndpointSlice"),
        ResourceType("networking.k8s.io", "v1", "servicecidrs", "servicecidr", "ServiceCIDR", False,
                     ServiceCIDRStrategy(), has_status=True, model="V1ServiceCIDR"),
        ResourceType("apiextensions.k8s.io", "v1", "customresourcedefinitions", "customresourcedefinition",
                     "CustomResourceDefinition", False, builtins.crds, has_status=True,
                     short_names=("crd", "crds"), categories=("api-extensions",),
                     model="V1CustomResourceDefinition"),
    ]


def metadata_errors(meta: Mapping[str, Any]) -> list[FieldError]:
    """``ValidateObjectMeta`` checks shared by all kinds: labels, annotation keys, finalizer names."""
    errors: list[FieldError] = []
    for key, value in (meta.get("labels") or {}).items():
        errors.extend(FieldError.invalid("metadata.labels", key, m) for m in qualified_name_errors(str(key)))
        errors.extend(FieldError.invalid("metadata.labels", value, m) for m in label_value_errors(str(value)))
    total = 0
    for key, value in (meta.get("annotations") or {}).items():
        errors.extend(FieldError.invalid("metadata.annotations", key, m)
                      for m in qualified_name_errors(str(key).lower()))
        total += len(str(key)) + len(str(value))
    if total > 256 * 1024:
        errors.append(FieldError.too_long("metadata.annotations", 256 * 1024))
    for i, finalizer in enumerate(meta.get("finalizers") or []):
        errors.extend(FieldError.invalid(f"metadata.finalizers[{i}]", finalizer, m)
                      for m in qualified_name_errors(str(finalizer)))
    for i, ref in enumerate(meta.get("ownerReferences") or []):
        for key in ("apiVersion", "kind", "name", "uid"):
            if not (ref or {}).get(key):
                errors.append(FieldError.invalid(f"metadata.ownerReferences[{i}].{key}", (ref or {}).get(key, ""),
                                                 f"{key} must not be empty"))
    return errors
