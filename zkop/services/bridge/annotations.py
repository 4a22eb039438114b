"""What a Service's annotations ask the bridge for, validated and bounded; pure.

Every annotation the bridge reads beyond the sync switch lives under one prefix, :data:`PREFIX`
(``zookeeper.platform.example.com/``):

======================================  ==================================================================
annotation                              meaning
======================================  ==================================================================
``…/format``                            ``json``, ``curator`` or ``dubbo``: this Service's format
                                        (default ``--service-bridge-format``)
``…/dubbo-interfaces``                  comma-separated Java interface names the Service provides (Dubbo)
``…/dubbo-application``                 Dubbo ``application`` (default ``<namespace>-<name>``)
``…/dubbo-version``, ``…/dubbo-group``  Dubbo ``version`` and ``group`` URL parameters
``…/dubbo-protocol``                    the URL scheme (``dubbo``, ``tri``…; default ``dubbo``)
``…/dubbo-port``                        the Service port (name or number) behind the protocol (default:
                                        a port named like the protocol, else the first)
``…/dubbo-registration``                ``interface``, ``application`` or ``all`` (default, as Dubbo 3.3
                                        providers register): interface-level URLs, application-level
                                        instances with the interface → application mapping, or both
``…/meta-<key>``                        one metadata entry ``<key>`` → the value, into every format
======================================  ==================================================================

A tenant who can annotate a Service in one namespace controls all of these, so each is checked
before anything is rendered, and what fails is dropped with a sentence for a Warning Event
(``InvalidAnnotation``), never an exception:

* an interface is a Java binary name (``[A-Za-z_$][A-Za-z0-9_$]*`` segments joined by ``.``, at most
  :data:`MAX_INTERFACE_LENGTH` characters), so it holds no ``/``, ``..``, ``%``, ``&``, ``?`` or ``=``
  and can neither leave the Dubbo root nor add URL parameters; at most :data:`MAX_INTERFACES` per Service; the
  names of the nodes Dubbo keeps beside the interfaces (:data:`DUBBO_RESERVED_NODES`: ``mapping``, ``metadata``,
  ``config``) are refused, so an interface node never stands where Dubbo's mapping or metadata live;
* ``…/dubbo-registration`` is one of :data:`REGISTRATIONS`, else the default (``all``);
* application, version, group, protocol and port match :data:`TOKEN` (letters, digits, ``.``, ``_``, ``-``;
  at most 64 characters);
* metadata keys make valid annotation names (:func:`zkop.services.metadata.valid_key`, the importer's rule too)
  and are not one of the keys zkop writes itself (:data:`RESERVED_META`: ownership, identity, health, Dubbo's
  routing parameters); values are UTF-8 of at most
  :data:`MAX_META_VALUE_BYTES` bytes without control characters; at most :data:`MAX_META_KEYS` keys and
  :data:`MAX_META_BYTES` bytes in all (keys and values), the rest dropped (in key order).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from zkop.services.metadata import MAX_BYTES, MAX_KEY_LENGTH, MAX_KEYS, MAX_VALUE_BYTES, META_PREFIX, valid_key

__all__ = [
    "DUBBO_APPLICATION",
    "DUBBO_GROUP",
    "DUBBO_INTERFACES",
    "DUBBO_PORT",
    "DUBBO_PROTOCOL",
    "DUBBO_REGISTRATION",
    "DUBBO_RESERVED_NODES",
    "DUBBO_VERSION",
    "FORMAT",
    "MAX_INTERFACES",
    "MAX_INTERFACE_LENGTH",
    "MAX_META_BYTES",
    "MAX_META_KEYS",
    "MAX_META_VALUE_BYTES",
    "META",
    "PREFIX",
    "REGISTRATIONS",
    "RESERVED_META",
    "TOKEN",
    "DubboSettings",
    "ServiceAnnotations",
    "read_annotations",
]

#: The prefix of every annotation below.
PREFIX = "zookeeper.platform.example.com/"
FORMAT = PREFIX + "format"
DUBBO_INTERFACES = PREFIX + "dubbo-interfaces"
DUBBO_APPLICATION = PREFIX + "dubbo-application"
DUBBO_VERSION = PREFIX + "dubbo-version"
DUBBO_GROUP = PREFIX + "dubbo-group"
DUBBO_PROTOCOL = PREFIX + "dubbo-protocol"
DUBBO_PORT = PREFIX + "dubbo-port"
DUBBO_REGISTRATION = PREFIX + "dubbo-registration"
#: ``…/dubbo-registration`` values: what Dubbo 3.3's ``dubbo.application.register-mode`` calls ``interface``,
#: ``instance`` (here ``application``) and ``all``.
REGISTRATIONS = ("interface", "application", "all")
#: Nodes Dubbo keeps beside the interfaces under its root (the interface → application mapping, the metadata
#: report, the config centre): never an interface name.
DUBBO_RESERVED_NODES = frozenset({"mapping", "metadata", "config"})
#: ``META + key`` annotations carry metadata (the importer's prefix too: :data:`zkop.services.metadata.META_PREFIX`).
META = META_PREFIX

MAX_INTERFACES = 8
MAX_INTERFACE_LENGTH = 255
#: Metadata bounds, one set for both directions (:mod:`zkop.services.metadata`).
MAX_META_KEYS = MAX_KEYS
MAX_META_VALUE_BYTES = MAX_VALUE_BYTES
MAX_META_BYTES = MAX_BYTES

_JAVA_NAME = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*(\.[A-Za-z_$][A-Za-z0-9_$]*)*")
#: Application, version, group, protocol, port: letters, digits, ``.``, ``_``, ``-``; at most 64 characters.
TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: Keys zkop writes itself in some format, or that change how a Dubbo consumer treats the provider.
RESERVED_META = frozenset({
    "managedBy", "clusterId", "uid", "namespace", "service", "type", "instance_status",
    "interface", "side", "category", "enabled", "disabled", "weight", "version", "group", "application",
    "protocol", "anyhost", "dynamic", "methods", "release", "timestamp", "pid", "path", "register",
    "dubbo", "token", "accesslog", "serialization", "deprecated", "tag", "dubbo.tag",
})
FORMATS = ("json", "curator", "dubbo")


@dataclass(frozen=True)
class DubboSettings:
    """A Service's Dubbo provider settings (see the module docstring); empty ``interfaces``: none named."""

    interfaces: tuple[str, ...] = ()
    application: str | None = None
    version: str | None = None
    group: str | None = None
    protocol: str = "dubbo"
    port: str | None = None
    registration: str = "all"

    @property
    def interface_level(self) -> bool:
        """Whether provider URLs are published under ``/dubbo/<interface>/providers``."""
        return self.registration in ("interface", "all")

    @property
    def application_level(self) -> bool:
        """Whether application-level instances, metadata and the interface → application mapping are published."""
        return self.registration in ("application", "all")


@dataclass(frozen=True)
class ServiceAnnotations:
    """Everything the bridge read from one Service's annotations.

    Attributes:
        format: the ``…/format`` annotation if valid, else ``None`` (the flag's format).
        dubbo: the Dubbo settings.
        metadata: valid metadata, sorted by key.
        problems: one sentence per dropped annotation or entry (for a Warning Event).
    """

    format: str | None = None
    dubbo: DubboSettings = DubboSettings()
    metadata: tuple[tuple[str, str], ...] = ()
    problems: tuple[str, ...] = ()


def _token(annotations: Mapping[str, str], name: str, problems: list[str]) -> str | None:
    raw = annotations.get(name)
    if raw is None:
        return None
    value = raw.strip()
    if not TOKEN.fullmatch(value):
        problems.append(f"{name}={raw[:80]!r} is not 1 to 64 letters, digits, '.', '_' or '-'; ignored")
        return None
    return value


def _interfaces(raw: str | None, problems: list[str]) -> tuple[str, ...]:
    if raw is None:
        return ()
    found: list[str] = []
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        if len(item) > MAX_INTERFACE_LENGTH or not _JAVA_NAME.fullmatch(item):
            problems.append(f"{DUBBO_INTERFACES}: {item[:80]!r} is not a Java interface name; ignored")
            continue
        if item in DUBBO_RESERVED_NODES:
            problems.append(f"{DUBBO_INTERFACES}: {item!r} is the name of a node Dubbo keeps beside the interfaces; "
                            "ignored")
            continue
        if item in found:
            continue
        if len(found) == MAX_INTERFACES:
            problems.append(f"{DUBBO_INTERFACES}: more than {MAX_INTERFACES} interfaces; {item!r} and later ignored")
            break
        found.append(item)
    return tuple(found)


def _metadata(annotations: Mapping[str, str], problems: list[str]) -> tuple[tuple[str, str], ...]:
    valid: list[tuple[str, str, str]] = []
    for name in sorted(n for n in annotations if n.startswith(META)):
        key, value = name[len(META):], annotations[name]
        if not valid_key(key):
            problems.append(f"{name}: the key {key[:80]!r} is not 1 to {MAX_KEY_LENGTH} letters, digits, '.', '_' or "
                            "'-' beginning and ending with a letter or digit; ignored")
            continue
        if key in RESERVED_META:
            problems.append(f"{name}: {key!r} is reserved (zkop or Dubbo sets it); ignored")
            continue
        size = len(value.encode("utf-8"))
        if size > MAX_META_VALUE_BYTES or _CONTROL.search(value):
            problems.append(f"{name}: the value is longer than {MAX_META_VALUE_BYTES} bytes or holds control "
                            "characters; ignored")
            continue
        valid.append((name, key, value))
    kept: list[tuple[str, str]] = []
    total = 0
    for name, key, value in valid:
        size = len(value.encode("utf-8"))
        if len(kept) == MAX_META_KEYS or total + len(key) + size > MAX_META_BYTES:
            problems.append(f"{name}: more than {MAX_META_KEYS} metadata keys or {MAX_META_BYTES} bytes; "
                            "this key and later ones ignored")
            break
        kept.append((key, value))
        total += len(key) + size
    return tuple(kept)


def read_annotations(annotations: Mapping[str, str]) -> ServiceAnnotations:
    """Read and validate the bridge's annotations of one Service (``metadata.annotations``); never raises."""
    problems: list[str] = []
    fmt = annotations.get(FORMAT)
    if fmt is not None and fmt.strip() not in FORMATS:
        problems.append(f"{FORMAT}={fmt[:80]!r} is not one of {', '.join(FORMATS)}; the default format is used")
        fmt = None
    protocol = _token(annotations, DUBBO_PROTOCOL, problems) or "dubbo"
    port = annotations.get(DUBBO_PORT)
    if port is not None and not TOKEN.fullmatch(port.strip()):
        problems.append(f"{DUBBO_PORT}={port[:80]!r} names no port; the default port is used")
        port = None
    registration = annotations.get(DUBBO_REGISTRATION)
    if registration is not None and registration.strip() not in REGISTRATIONS:
        problems.append(f"{DUBBO_REGISTRATION}={registration[:80]!r} is not one of {', '.join(REGISTRATIONS)}; "
                        "all is used")
        registration = None
    dubbo = DubboSettings(
        interfaces=_interfaces(annotations.get(DUBBO_INTERFACES), problems),
        application=_token(annotations, DUBBO_APPLICATION, problems),
        version=_token(annotations, DUBBO_VERSION, problems),
        group=_token(annotations, DUBBO_GROUP, problems),
        protocol=protocol.lower(),
        port=port.strip() if port is not None else None,
        registration=registration.strip() if registration is not None else "all",
    )
    return ServiceAnnotations(fmt.strip() if fmt is not None else None, dubbo, _metadata(annotations, problems),
                              tuple(problems))
