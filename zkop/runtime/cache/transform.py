"""Trim objects before they enter a cache: client-go ``SharedIndexInformer.SetTransform``.

Like client-go's ``TransformFunc`` (``tools/cache/shared_informer.go``), the transform runs on every
object of a LIST or a watch event before it is stored or handed to a handler. zkop's informers use
:func:`default_transform` unless told otherwise: :func:`strip_unused_fields`, then :func:`compact`.

Dropped, as nothing of zkop reads them from a cache (its writes are merge patches of its own
fields, never a PUT of a cached object): ``metadata.managedFields`` (controller-runtime's
``cache.TransformStripManagedFields``), the ``kubectl.kubernetes.io/last-applied-configuration``
annotation, ``metadata.selfLink``.

:func:`compact` rebuilds the object with interned keys and short values, so that all cached
objects share one copy of each (:mod:`json` shares keys only within one document) -- what Go gets
from decoding into typed structs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from zkop.kube.client import JSON

__all__ = [
    "INTERN_MAX",
    "LAST_APPLIED",
    "Transform",
    "compact",
    "default_transform",
    "default_transform_copy",
    "strip_unused_fields",
]

#: ``func(obj) -> obj``: may modify ``obj`` in place and return it (client-go ``TransformFunc``).
Transform = Callable[[JSON], JSON]
#: kubectl's client-side apply annotation (``k8s.io/kubectl`` ``LastAppliedConfigAnnotation``).
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
#: String values up to this many characters are interned by :func:`compact` (longer ones are
#: nearly always unique: uids are 36, paths and data longer).
INTERN_MAX = 32


def strip_unused_fields(obj: JSON) -> JSON:
    """Drop ``managedFields``, ``selfLink`` and the last-applied annotation from ``obj`` (in place)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
        meta.pop("selfLink", None)
        annotations = meta.get("annotations")
        if isinstance(annotations, dict) and LAST_APPLIED in annotations:
            del annotations[LAST_APPLIED]
            if not annotations:
                del meta["annotations"]
    return obj


_intern = sys.intern


def _compact_dict(value: dict[str, Any]) -> dict[str, Any]:
    # Exact types first (all a JSON decoder makes): one type() per value, no call for a scalar.
    out: dict[str, Any] = {}
    for k, v in value.items():
        t = type(v)
        if t is str:
            out[_intern(k)] = _intern(v) if len(v) <= INTERN_MAX else v
        elif t is dict:
            out[_intern(k)] = _compact_dict(v)
        elif t is list:
            out[_intern(k)] = [_compact(x) for x in v]
        elif t is int or t is bool or t is float or v is None:
            out[_intern(k)] = v
        else:
            out[_intern(k)] = _compact(v)
    return out


def _compact(value: Any) -> Any:
    t = type(value)
    if t is dict:
        return _compact_dict(value)
    if t is str:
        return _intern(value) if len(value) <= INTERN_MAX else value
    if t is list:
        return [_compact(v) for v in value]
    if isinstance(value, dict):
        return {_intern(k): _compact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_compact(v) for v in value]
    if isinstance(value, str) and len(value) <= INTERN_MAX:
        return _intern(value)
    return value


def compact(obj: JSON) -> JSON:
    """A copy of ``obj`` with interned keys and short string values, dicts sized exactly (see the module docstring)."""
    result: JSON = _compact(obj)
    return result


def default_transform(obj: JSON) -> JSON:
    """What every zkop informer applies: :func:`strip_unused_fields`, then :func:`compact`."""
    return compact(strip_unused_fields(obj))


def default_transform_copy(obj: JSON) -> JSON:
    """:func:`default_transform` of ``obj`` that leaves ``obj`` itself untouched (e.g. a write's response
    its writer still uses): only the dicts :func:`strip_unused_fields` changes are copied before it
    runs, and :func:`compact` builds everything anew."""
    shallow = dict(obj)
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta = shallow["metadata"] = dict(meta)
        annotations = meta.get("annotations")
        if isinstance(annotations, dict):
            meta["annotations"] = dict(annotations)
    return default_transform(shallow)
