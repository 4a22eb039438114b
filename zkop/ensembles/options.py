"""The ZooKeeperEnsemble feature's own options (imported by the registry without loading the feature)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["EnsembleOptions"]


@dataclass(frozen=True)
class EnsembleOptions:
    """The ZooKeeperEnsemble feature's own options.

    Attributes:
        secret_namespace: the one namespace the ensembles' Secrets are read from (``--ensemble-secret-namespace``).
    """

    secret_namespace: str
