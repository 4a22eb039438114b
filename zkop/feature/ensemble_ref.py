"""Which ensemble a namespaced object names (``spec.ensembleRef.name``); pure, shared by every kind that has one
(ZooKeeperConfig, ZooKeeperMirror)."""

from __future__ import annotations

from zkop.kube.types import JSON

__all__ = ["DEFAULT_ENSEMBLE", "ensemble_of"]

#: :func:`ensemble_of` for an object without ``spec.ensembleRef``: the ensemble zkop's ``--zk-*`` flags describe.
DEFAULT_ENSEMBLE = ""


def ensemble_of(obj: JSON) -> str:
    """The ZooKeeperEnsemble ``obj`` names in ``spec.ensembleRef.name``, or :data:`DEFAULT_ENSEMBLE` (the
    flags' ensemble) when it names none; a malformed reference (not a non-empty string) names none either."""
    ref = (obj.get("spec") or {}).get("ensembleRef")
    name = ref.get("name") if isinstance(ref, dict) else None
    return name if isinstance(name, str) and name else DEFAULT_ENSEMBLE
