"""A ZooKeeperConfigTree's spec, parsed and expanded into its children (pure: the ConfigMaps and Secrets are given).

A tree declares a root (``spec.path``) and children below it: inline ``entries`` (relative path → ``data`` |
``stringData``) and ``from`` sources, ConfigMaps or Secrets of its namespace expanded key by key, or one key parsed
as ``properties`` (``java.util.Properties.load``'s rules, by the ``javaproperties`` library), ``yaml`` or ``json``
(nested keys become path segments, a list item ``name[i]``, each scalar its text as written). A child path is
relative, whole segments, none empty, ``.`` or ``..``: a child never lands outside the root. The CRD schema
rejects what it can at apply time; what only the expansion shows (a property named ``../x``, two sources declaring
one path) is an :class:`InvalidSpec` in status.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import javaproperties
import yaml

from zkop.zookeeper.acls import acl_from_spec
from zkop.zookeeper.actions import OPEN_ACL, AclEntry
from zkop.zookeeper.paths import InvalidPath, validate_path

__all__ = [
    "FINALIZER",
    "GROUP",
    "KIND",
    "PLURAL",
    "VERSION",
    "Child",
    "InvalidSpec",
    "RefNotFound",
    "SourceRef",
    "TreeSpec",
    "expand",
    "parse_spec",
    "source_refs",
]

GROUP, VERSION, PLURAL, KIND = "platform.example.com", "v1alpha1", "zookeeperconfigtrees", "ZooKeeperConfigTree"
FINALIZER = "zookeeperconfigtrees.platform.example.com/finalizer"

SyncPolicy = Literal["createOrUpdate", "createOnly"]
DeletionPolicy = Literal["Delete", "Orphan"]
Format = Literal["properties", "yaml", "json"]


class InvalidSpec(ValueError):
    """The spec (or what it expands to) breaks a rule; retrying cannot help until it changes."""


class RefNotFound(LookupError):
    """A ConfigMap or Secret (or the key to parse) the spec names does not exist (yet)."""


@dataclass(frozen=True)
class SourceRef:
    """One ``spec.from`` item: ``kind`` (``ConfigMap`` or ``Secret``) ``name``, an optional ``key`` and ``format``,
    the ``prefix`` its children go under and their ACL (``None``: the tree's)."""

    kind: Literal["ConfigMap", "Secret"]
    name: str
    key: str | None = None
    format: Format | None = None
    prefix: str = ""
    acl: tuple[AclEntry, ...] | None = None


@dataclass(frozen=True)
class TreeSpec:
    """The parsed spec, before its sources are expanded."""

    root: str
    sources: tuple[SourceRef, ...]
    inline: tuple[tuple[str, bytes, tuple[AclEntry, ...] | None], ...]
    acl: tuple[AclEntry, ...] | None
    sync_policy: SyncPolicy = "createOrUpdate"
    deletion_policy: DeletionPolicy = "Delete"
    prune: bool = True
    adopt_existing: bool = False
    ensemble: str = ""


@dataclass(frozen=True)
class Child:
    """One declared child: its absolute ``path``, its bytes, its ACL and whether its value is a Secret's."""

    path: str
    data: bytes
    acl: tuple[AclEntry, ...] = OPEN_ACL
    secret: bool = False


def _relative(value: str, what: str) -> str:
    """``value`` as a relative path of whole segments, or :class:`InvalidSpec` naming ``what``."""
    if not value or value.startswith("/") or value.endswith("/"):
        raise InvalidSpec(f"{what} {value!r} is not a relative path (no leading or trailing '/', not empty)")
    for segment in value.split("/"):
        if segment in ("", ".", ".."):
            raise InvalidSpec(f"{what} {value!r} has an empty, '.' or '..' segment: a child stays below the root")
    return value


def _acl(raw: Any, what: str) -> tuple[AclEntry, ...] | None:
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise InvalidSpec(f"{what} must be a list")
    try:
        return acl_from_spec(raw)
    except ValueError as err:
        raise InvalidSpec(f"{what}: {err}") from err


def parse_spec(obj: Mapping[str, Any]) -> TreeSpec:
    """Parse ``obj``'s spec (no sources read).

    Raises:
        InvalidSpec: a rule the CRD schema could not check (or an object that bypassed it) is broken.
    """
    spec = obj.get("spec") or {}
    root = spec.get("path")
    if not isinstance(root, str):
        raise InvalidSpec("spec.path must be a string")
    try:
        root = validate_path(root)
    except InvalidPath as err:
        raise InvalidSpec(f"spec.path: {err}") from err
    if root == "/":
        raise InvalidSpec("spec.path: the root znode '/' cannot be a tree's root")
    inline: list[tuple[str, bytes, tuple[AclEntry, ...] | None]] = []
    for index, entry in enumerate(spec.get("entries") or []):
        if not isinstance(entry, dict):
            raise InvalidSpec(f"spec.entries[{index}] must be an object")
        path = _relative(str(entry.get("path", "")), f"spec.entries[{index}].path")
        if ("data" in entry) == ("stringData" in entry):
            raise InvalidSpec(f"spec.entries[{index}]: exactly one of data and stringData must be set")
        if "data" in entry:
            try:
                data = base64.b64decode(str(entry["data"]), validate=True)
            except (binascii.Error, ValueError) as err:
                raise InvalidSpec(f"spec.entries[{index}].data is not base64: {err}") from err
        else:
            data = str(entry["stringData"]).encode()
        inline.append((path, data, _acl(entry.get("acl"), f"spec.entries[{index}].acl")))
    sources: list[SourceRef] = []
    for index, item in enumerate(spec.get("from") or []):
        if not isinstance(item, dict):
            raise InvalidSpec(f"spec.from[{index}] must be an object")
        cm, secret = item.get("configMapRef"), item.get("secretRef")
        if (cm is None) == (secret is None):
            raise InvalidSpec(f"spec.from[{index}]: exactly one of configMapRef and secretRef must be set")
        ref = cm if cm is not None else secret
        name = (ref or {}).get("name") if isinstance(ref, dict) else None
        if not isinstance(name, str) or not name:
            raise InvalidSpec(f"spec.from[{index}]: the reference needs a name")
        fmt = item.get("format")
        if fmt not in (None, "properties", "yaml", "json"):
            raise InvalidSpec(f"spec.from[{index}].format must be properties, yaml or json")
        key = item.get("key")
        if fmt is not None and not key:
            raise InvalidSpec(f"spec.from[{index}]: format needs the key to parse")
        prefix = item.get("prefix")
        sources.append(SourceRef("ConfigMap" if cm is not None else "Secret", name,
                                 str(key) if key else None, fmt,
                                 _relative(str(prefix), f"spec.from[{index}].prefix") if prefix is not None else "",
                                 _acl(item.get("acl"), f"spec.from[{index}].acl")))
    ensemble = (spec.get("ensembleRef") or {}).get("name") or ""
    return TreeSpec(root, tuple(sources), tuple(inline), _acl(spec.get("acl"), "spec.acl"),
                    "createOnly" if spec.get("syncPolicy") == "createOnly" else "createOrUpdate",
                    "Orphan" if spec.get("deletionPolicy") == "Orphan" else "Delete",
                    spec.get("prune", True) is not False, bool(spec.get("adoptExisting")), str(ensemble))


def source_refs(obj: Mapping[str, Any]) -> list[str]:
    """``ConfigMap/<ns>/<name>`` and ``Secret/<ns>/<name>`` of every source ``obj`` names (for an informer index;
    an invalid spec names none)."""
    namespace = (obj.get("metadata") or {}).get("namespace")
    refs: list[str] = []
    for item in (obj.get("spec") or {}).get("from") or []:
        if not isinstance(item, dict):
            continue
        for field, kind in (("configMapRef", "ConfigMap"), ("secretRef", "Secret")):
            ref = item.get(field)
            if isinstance(ref, dict) and isinstance(ref.get("name"), str):
                refs.append(f"{kind}/{namespace}/{ref['name']}")
    return refs


def _source_values(source: SourceRef, obj: Mapping[str, Any]) -> dict[str, bytes]:
    """A ConfigMap's ``data`` (UTF-8) and ``binaryData``, or a Secret's ``data``, decoded."""
    values: dict[str, bytes] = {}
    for key, value in (obj.get("data") or {}).items():
        values[key] = base64.b64decode(value) if source.kind == "Secret" else str(value).encode()
    if source.kind == "ConfigMap":
        for key, value in (obj.get("binaryData") or {}).items():
            values[key] = base64.b64decode(value)
    return values


def _yaml_leaves(node: yaml.Node, prefix: str) -> Iterator[tuple[str, str]]:
    """``(relative path, scalar text)`` of every leaf of a composed YAML node (mapping keys as segments, list items
    as ``name[i]``)."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode):
                raise InvalidSpec(f"a mapping key below {prefix or 'the top'} is not a scalar")
            yield from _yaml_leaves(value, f"{prefix}/{key.value}" if prefix else str(key.value))
    elif isinstance(node, yaml.SequenceNode):
        if not prefix:
            raise InvalidSpec("the document is a list, not a mapping of keys")
        for index, item in enumerate(node.value):
            yield from _yaml_leaves(item, f"{prefix}[{index}]")
    else:
        if not prefix:
            raise InvalidSpec("the document is a scalar, not a mapping of keys")
        yield prefix, str(node.value)


def _json_leaves(value: Any, prefix: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _json_leaves(item, f"{prefix}/{key}" if prefix else str(key))
    elif isinstance(value, list):
        if not prefix:
            raise InvalidSpec("the document is a list, not an object")
        for index, item in enumerate(value):
            yield from _json_leaves(item, f"{prefix}[{index}]")
    else:
        if not prefix:
            raise InvalidSpec("the document is a scalar, not an object")
        text = {True: "true", False: "false", None: ""}.get(value, value) if not isinstance(value, str) else value
        yield prefix, str(text)


def _parse(fmt: Format, raw: bytes) -> list[tuple[str, str]]:
    """The ``(relative path, text)`` pairs one value holds in ``fmt``.

    Raises:
        InvalidSpec: the value is not valid in that format.
    """
    try:
        text = raw.decode()
    except UnicodeDecodeError as err:
        raise InvalidSpec(f"not UTF-8 text: {err}") from err
    if fmt == "properties":
        try:
            return list(javaproperties.loads(text).items())
        except ValueError as err:
            raise InvalidSpec(f"not a properties file: {err}") from err
    if fmt == "json":
        try:
            # Numbers keep the text they were written with (1.0 stays 1.0).
            document = json.loads(text, parse_float=lambda s: s, parse_int=lambda s: s,
                                  parse_constant=lambda s: s)
        except ValueError as err:
            raise InvalidSpec(f"not JSON: {err}") from err
        return list(_json_leaves(document, ""))
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as err:
        raise InvalidSpec(f"not YAML: {err}") from err
    return [] if node is None else list(_yaml_leaves(node, ""))


def _join(root: str, relative: str) -> str:
    return f"{root.rstrip('/')}/{relative}"


def expand(spec: TreeSpec, lookup: Callable[[SourceRef], Mapping[str, Any] | None]) -> list[Child]:
    """Every child ``spec`` declares, sorted by path: each source expanded, then the inline entries.

    Args:
        lookup: the ConfigMap or Secret a source names, from a cache (``None``: it does not exist).

    Raises:
        RefNotFound: a source, or the key it parses, does not exist.
        InvalidSpec: a child path is not a valid relative path below the root, two children share a path, a
            value does not parse in its format, or a Secret's value has no ACL to keep it (spec.acl, or the
            source's own): zkop never writes a Secret's value readable by everyone by default.
    """
    children: dict[str, Child] = {}

    def add(relative: str, data: bytes, acl: tuple[AclEntry, ...] | None, what: str, secret: bool) -> None:
        _relative(relative, what)
        path = _join(spec.root, relative)
        try:
            validate_path(path)
        except InvalidPath as err:
            raise InvalidSpec(f"{what}: {err}") from err
        if path in children:
            raise InvalidSpec(f"{what}: the child {relative!r} is declared twice")
        chosen = acl if acl is not None else spec.acl
        if secret and chosen is None:
            raise InvalidSpec(f"{what} comes from a Secret and no ACL keeps it (set spec.acl or the source's acl)")
        children[path] = Child(path, data, chosen if chosen is not None else OPEN_ACL, secret)

    for index, source in enumerate(spec.sources):
        obj = lookup(source)
        if obj is None:
            raise RefNotFound(f"{source.kind} {source.name} not found")
        values = _source_values(source, obj)
        where = f"spec.from[{index}] ({source.kind} {source.name})"
        prefix = f"{source.prefix}/" if source.prefix else ""
        secret = source.kind == "Secret"
        if source.key is not None and source.key not in values:
            raise RefNotFound(f"{source.kind} {source.name} has no key {source.key}")
        if source.format is not None:
            assert source.key is not None
            try:
                pairs = _parse(source.format, values[source.key])
            except InvalidSpec as err:
                raise InvalidSpec(f"{where} key {source.key}: {err}") from err
            for relative, text in pairs:
                add(prefix + relative, text.encode(), source.acl, f"{where} property {relative!r}", secret)
        else:
            for key, data in sorted(values.items()):
                if source.key is None or key == source.key:
                    add(prefix + key, data, source.acl, f"{where} key {key!r}", secret)
    for relative, data, acl in spec.inline:
        add(relative, data, acl, f"spec.entries {relative!r}", False)
    return [children[p] for p in sorted(children)]
