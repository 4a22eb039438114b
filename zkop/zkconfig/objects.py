"""Facts read off a ZooKeeperConfig object (a dict, as the API server returns it); pure.

Used by the decisions (:mod:`zkop.zkconfig.decide`), the reconciler and the ACL check.
"""

from __future__ import annotations

from typing import Any

from zkop.feature.ensemble_ref import DEFAULT_ENSEMBLE, ensemble_of
from zkop.kube.client import JSON
from zkop.zookeeper.paths import validate_path

__all__ = ["DEFAULT_ENSEMBLE", "adopt_existing", "ensemble_of", "finalizers", "synced_znode_version", "unsynced_path",
           "was_synced_at_generation"]


def finalizers(obj: JSON) -> list[str]:
    """``metadata.finalizers`` (a new list)."""
    return list((obj.get("metadata") or {}).get("finalizers") or [])


def adopt_existing(obj: JSON) -> bool:
    """``spec.adoptExisting``: the object asks to adopt a pre-existing znode no zkop installation owns.

    Only ``true`` asks (the CRD types it boolean; anything else, as absent, does not).
    """
    return (obj.get("spec") or {}).get("adoptExisting") is True


def was_synced_at_generation(obj: JSON) -> bool:
    """True if status says Synced at the object's current generation (the spec did not change since)."""
    status: dict[str, Any] = obj.get("status") or {}
    return bool(
        status.get("state") == "Synced"
        and status.get("observedGeneration") == (obj.get("metadata") or {}).get("generation")
    )


def synced_znode_version(obj: JSON) -> int | None:
    """``status.znodeVersion``: the znode's data version when zkop last synced it (``None``: not recorded)."""
    version = (obj.get("status") or {}).get("znodeVersion")
    return version if isinstance(version, int) and not isinstance(version, bool) else None


def unsynced_path(obj: JSON) -> str | None:
    """The valid ``spec.path`` of an object whose next pass probably finds its znode and record absent.

    Those are the objects not being deleted and not Synced at their generation: all of
    them on a first start, none on a warm restart. ``None`` for any other object.
    """
    if (obj.get("metadata") or {}).get("deletionTimestamp") or was_synced_at_generation(obj):
        return None
    path = (obj.get("spec") or {}).get("path")
    try:
        return validate_path(path) if isinstance(path, str) else None
    except ValueError:
        return None
