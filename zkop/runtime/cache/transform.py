"""Trim objects before they enter a cache: client-go ``SharedIndexInformer.SetTransform``.

client-go (``tools/cache/shared_informer.go``, ``TransformFunc``) runs an informer's transform on
every object from a LIST or a watch event *before* it is stored or handed to a handler, so what
no controller reads never occupies memory. controller-runtime ships
``cache.TransformStripManagedFields`` (``pkg/cache/cache.go``) for exactly this, to be set as
``cache.Options.DefaultTransform``. zkop's informers all use :func:`strip_unused_fields` unless
told otherwise (:class:`~zkop.runtime.cache.informer.Informer` ``transform``).

Dropped, because no part of zkop reads them from a cached object (zkop writes with JSON merge
patches that name only its own fields, and never sends a cached object back with PUT):

* ``metadata.managedFields`` -- on a real cluster ~1 KB of JSON per object and manager
  (kube-apiserver records them on every write, ``fieldmanager.UpdateNoErrors``);
* the ``kubectl.kubernetes.io/last-applied-configuration`` annotation -- a full JSON copy of the
  object for everything ever ``kubectl apply``'d client-side;
* ``metadata.selfLink`` (no longer set since 1.20, harmless to drop).
"""

from __future__ import annotations

from collections.abc import Callable

from zkop.kube.client import JSON

__all__ = ["LAST_APPLIED", "Transform", "strip_unused_fields"]

#: ``func(obj) -> obj``: may modify ``obj`` in place and return it (client-go ``TransformFunc``).
Transform = Callable[[JSON], JSON]
#: kubectl's client-side apply annotation (``k8s.io/kubectl`` ``LastAppliedConfigAnnotation``).
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


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
