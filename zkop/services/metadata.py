"""Registration metadata ↔ ``zookeeper.platform.example.com/meta-<key>`` annotations: the importer's rules; pure.

The bridge writes a Service's ``…/meta-<key>`` annotations into every format (Curator ``payload.metadata``, the JSON
record's ``metadata``, Dubbo URL parameters: :mod:`zkop.services.bridge.annotations`); the importer reads them back
from any registration into annotations of the same name on the Service it creates. Who can write a registration is
not who may annotate a Service, so nothing but :data:`META_PREFIX` annotations ever comes from a registration:

* **what is read** (the codecs, :func:`string_entries`): Curator ``payload.metadata`` (Spring Cloud Zookeeper's and
  Dubbo 3's ``ZookeeperInstance``, zkop's own), or, for another payload object, its own top-level fields but
  ``@class``; the JSON record's ``metadata`` object; every Dubbo URL parameter. Only string values count, and not
  the keys zkop or the registries set for themselves (:data:`RESERVED_KEYS`, and :data:`RESERVED_PREFIXES`: Dubbo's
  ``dubbo.*`` internals, the bridge's ``port.*`` and ``label.*``), at most :data:`MAX_ENTRIES_READ` per instance (in
  key order);
* **which instances decide** (:func:`shared_entries`): a key becomes an annotation only when *every* imported
  instance of the service has it, with one value — the annotation describes the Service, so a key the instances
  disagree on (``zone=a`` and ``zone=b``, a version mid-rollout) or that some lack is left out; no instance: none;
* **which keys** (:func:`metadata_annotations`): the annotation name ``zookeeper.platform.example.com/meta-<key>``
  must be a valid Kubernetes qualified name, so a key is 1 to :data:`MAX_KEY_LENGTH` letters, digits, ``.``, ``_``,
  ``-``, starting and ending with a letter or digit (no ``/``: it can never name another annotation, a label, nor
  another prefix);
* **bounds**, the bridge's: a value is at most :data:`MAX_VALUE_BYTES` bytes of UTF-8 without control characters;
  at most :data:`MAX_KEYS` annotations and :data:`MAX_BYTES` bytes (keys and values) in all, taken in key order.

What a rule drops is not an error of the service (its instances are still imported): each dropped key or value is
one sentence in :attr:`MetadataAnnotations.problems`, for a Warning Event; a key left out because instances differ is
not a problem.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "MAX_BYTES",
    "MAX_ENTRIES_READ",
    "MAX_KEYS",
    "MAX_KEY_LENGTH",
    "MAX_VALUE_BYTES",
    "META_PREFIX",
    "RESERVED_KEYS",
    "RESERVED_PREFIXES",
    "MetadataAnnotations",
    "is_meta_annotation",
    "is_reserved",
    "metadata_annotations",
    "shared_entries",
    "string_entries",
    "valid_key",
]

#: Every annotation a registration's metadata becomes starts with this (the bridge's ``…/meta-`` prefix).
META_PREFIX = "zookeeper.platform.example.com/meta-"
#: An annotation name's part after ``/`` holds at most 63 characters; ``meta-`` takes 5.
MAX_KEY_LENGTH = 63 - len("meta-")
#: At most this many annotations from metadata on one Service (as the bridge reads at most as many).
MAX_KEYS = 16
#: The longest value, bytes of UTF-8.
MAX_VALUE_BYTES = 256
#: Keys and values of all of a Service's metadata annotations together, bytes of UTF-8.
MAX_BYTES = 2048
#: Entries read from one instance (in key order); the rest are never looked at.
MAX_ENTRIES_READ = 64

_KEY = re.compile(rf"[A-Za-z0-9]([A-Za-z0-9._-]{{0,{MAX_KEY_LENGTH - 2}}}[A-Za-z0-9])?")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: Keys that are not metadata: zkop's owner stamp and identity entries, health, and the parameters by which the
#: registries (Dubbo above all) describe a provider rather than the service (a superset of the keys the bridge refuses
#: in a ``…/meta-<key>`` annotation).
RESERVED_KEYS = frozenset({
    # zkop's stamp and the bridge's identity entries
    "managedBy", "clusterId", "uid", "namespace", "service", "type", "owner",
    # health
    "instance_status", "enabled", "disabled", "weight",
    # Dubbo's provider URL parameters (2.7 and 3.x)
    "interface", "side", "category", "version", "group", "application", "protocol", "anyhost", "dynamic", "methods",
    "release", "timestamp", "pid", "path", "register", "dubbo", "token", "accesslog", "serialization", "deprecated",
    "tag", "generic", "background", "revision", "default", "metadata-type", "register-mode", "service-name-mapping",
    "executor-management-mode", "file-cache", "prefer.serialization", "bind.ip", "bind.port", "qos.enable",
    "qos.port", "qos.accept.foreign.ip", "meta-v",
})
#: Key prefixes that are not metadata: Dubbo 3's ``dubbo.*`` instance internals (``dubbo.endpoints``,
#: ``dubbo.metadata.revision``…), the bridge's ``port.<name>`` and ``label.<key>`` identity entries.
RESERVED_PREFIXES = ("dubbo.", "port.", "label.")


def valid_key(key: str) -> bool:
    """Whether ``META_PREFIX + key`` is a valid annotation name (Kubernetes' qualified-name rule for its name part,
    63 characters at most with ``meta-``: a key of 1 to :data:`MAX_KEY_LENGTH` characters, alphanumeric at both ends,
    ``-``, ``_`` and ``.`` between)."""
    return _KEY.fullmatch(key) is not None


def is_reserved(key: str) -> bool:
    """Whether ``key`` is the registry's or zkop's own (:data:`RESERVED_KEYS`, :data:`RESERVED_PREFIXES`), not
    metadata."""
    return key in RESERVED_KEYS or key.startswith(RESERVED_PREFIXES)


def string_entries(raw: object, *, skip: Iterable[str] = ()) -> tuple[tuple[str, str], ...]:
    """The metadata candidates of ``raw`` (a decoded JSON object; anything else: none): its string-valued entries but
    reserved keys (:func:`is_reserved`) and those in ``skip``, sorted by key, at most :data:`MAX_ENTRIES_READ`."""
    if not isinstance(raw, Mapping):
        return ()
    skipped = set(skip)
    found = sorted((k, v) for k, v in raw.items()
                   if isinstance(k, str) and isinstance(v, str) and k not in skipped and not is_reserved(k))
    return tuple(found[:MAX_ENTRIES_READ])


def shared_entries(per_instance: Sequence[Sequence[tuple[str, str]]]) -> tuple[tuple[str, str], ...]:
    """The entries every instance has with the same value, sorted by key (no instance: none)."""
    if not per_instance:
        return ()
    common = dict(per_instance[0])
    for entries in per_instance[1:]:
        other = dict(entries)
        common = {k: v for k, v in common.items() if other.get(k) == v}
    return tuple(sorted(common.items()))


def is_meta_annotation(name: str) -> bool:
    """Whether annotation ``name`` is one the importer manages from metadata (starts with :data:`META_PREFIX`)."""
    return name.startswith(META_PREFIX)


@dataclass(frozen=True)
class MetadataAnnotations:
    """The annotations a service's metadata gives, and what the rules dropped.

    Attributes:
        annotations: ``{META_PREFIX + key: value}``, in key order.
        problems: one sentence per dropped entry (for a Warning Event), in key order.
    """

    annotations: dict[str, str]
    problems: tuple[str, ...] = ()


def metadata_annotations(entries: Iterable[tuple[str, str]]) -> MetadataAnnotations:
    """The ``…/meta-<key>`` annotations of ``entries`` (a service's shared metadata), by the rules of the module
    docstring; never raises."""
    annotations: dict[str, str] = {}
    problems: list[str] = []
    total = 0
    for key, value in sorted(entries):
        if is_reserved(key):
            continue  # the registry's or zkop's own, not metadata: not a problem
        if not _KEY.fullmatch(key):
            problems.append(f"metadata key {key[:80]!r} is not 1 to {MAX_KEY_LENGTH} letters, digits, '.', '_' or "
                            "'-' starting and ending with a letter or digit; not an annotation")
            continue
        size = len(value.encode("utf-8"))
        if size > MAX_VALUE_BYTES or _CONTROL.search(value):
            problems.append(f"metadata {key!r}: the value is longer than {MAX_VALUE_BYTES} bytes or holds control "
                            "characters; not an annotation")
            continue
        if len(annotations) == MAX_KEYS or total + len(key) + size > MAX_BYTES:
            problems.append(f"metadata {key!r}: more than {MAX_KEYS} keys or {MAX_BYTES} bytes; this key and later "
                            "ones are not annotations")
            break
        annotations[META_PREFIX + key] = value
        total += len(key) + size
    return MetadataAnnotations(annotations, tuple(problems))
