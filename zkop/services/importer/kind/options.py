"""The ZooKeeperServiceImport feature's own options (imported by the registry without loading the feature)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_MAX_SERVICES", "KindOptions"]

#: ``--service-import-max-services``' default: Services one ZooKeeperServiceImport may create.
DEFAULT_MAX_SERVICES = 100


@dataclass(frozen=True)
class KindOptions:
    """The ZooKeeperServiceImport feature's options.

    Attributes:
        max_services: Service names one object may select; more: ``LimitExceeded``, nothing imported (0: no limit).
        allowed_cidrs: ``--import-allowed-cidrs``, the cluster-wide confinement of imported addresses, which holds for
            every ZooKeeperServiceImport too (empty: any address the guard does not refuse).
        workers: concurrent reconciles of the ``service-imports`` controller.
    """

    max_services: int = DEFAULT_MAX_SERVICES
    allowed_cidrs: tuple[str, ...] = ()
    workers: int = 2
