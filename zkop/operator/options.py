"""Everything ``zkop run`` can be told, as one value (:class:`OperatorOptions`), and the shared
:class:`~zkop.feature.context.FeatureSettings` and each feature's own options derived from it."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from zkop.configtree.options import DEFAULT_MAX_ZNODES as DEFAULT_TREE_MAX_ZNODES
from zkop.feature.context import FeatureSettings
from zkop.feature.gate import probe_root, reserved_roots
from zkop.feature.tenancy import TenancyPolicy
from zkop.mirror.options import DEFAULT_MAX_BYTES, DEFAULT_MAX_ZNODES
from zkop.runtime.manager import ManagerOptions
from zkop.services.bridge.options import BridgeOptions
from zkop.services.importer.kind.options import KindOptions
from zkop.services.importer.options import ImportOptions
from zkop.zkconfig.spec import DEFAULT_MAX_DATA_BYTES
from zkop.zookeeper.connection import ConnectionOptions

__all__ = ["DEFAULT_KUBE_API_BURST", "DEFAULT_KUBE_API_QPS", "GRACEFUL_SHUTDOWN_TIMEOUT", "OperatorOptions",
           "default_leader_election_namespace"]

#: ``--graceful-shutdown-timeout``'s default, seconds: how long SIGTERM waits for in-flight reconciles before
#: their API requests are cancelled. Well inside the kubelet's default ``terminationGracePeriodSeconds`` (30 s),
#: so a pod spec that sets none still sees zkop drain, release its Lease and exit 0 before SIGKILL; the
#: install's Deployment sets 30 s with a 40 s grace period. (controller-runtime's ``GracefulShutdownTimeout``
#: is 30 s, but it cancels the reconciles' context at once, so a request in flight does not wait for it.)
GRACEFUL_SHUTDOWN_TIMEOUT = 20.0
#: Requests per second and burst of the API client (Flux's controllers' defaults).
DEFAULT_KUBE_API_QPS = 50.0
DEFAULT_KUBE_API_BURST = 100


@dataclass
class OperatorOptions:
    """Everything ``zkop run`` can be told; see ``docs/operations.md`` for each flag.

    Durations are seconds. ``kube_api_qps``/``kube_api_burst`` are the API client's token bucket
    (``--kube-api-qps``, negative: none; :func:`zkop.kube.flowcontrol.client_rate_limiter`). A feature is
    enabled by its options: ``bridge``/``importer``/``service_imports`` set, ``mirrors``/``ensembles``/``config_trees``
    true (:mod:`zkop.operator.registry`).
    """

    kubeconfig: str | None = None
    kube_api_qps: float = DEFAULT_KUBE_API_QPS
    kube_api_burst: int = DEFAULT_KUBE_API_BURST
    zookeeper: ConnectionOptions = field(default_factory=ConnectionOptions)
    namespaces: list[str] = field(default_factory=list)
    workers: int = 4
    #: The Manager's own settings (metrics and probe servers, the graceful-shutdown drain); leader election and the
    #: heap freeze are set from the fields below by :class:`zkop.operator.run.Operator`.
    manager: ManagerOptions = field(default_factory=lambda: ManagerOptions(
        graceful_shutdown_timeout=GRACEFUL_SHUTDOWN_TIMEOUT))
    leader_elect: bool = False
    leader_election_id: str = "zkop-leader"
    leader_election_namespace: str | None = None
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    sync_period: float = 600.0
    max_data_bytes: int = DEFAULT_MAX_DATA_BYTES
    watch_inactivity_timeout: float = 90.0
    cluster_id: str = "default"
    registry_root: str = "/zkop/owners"
    acl_check_period: float = 60.0
    startup_probe: bool = True
    bridge: BridgeOptions | None = None
    importer: ImportOptions | None = None
    #: ``--service-imports``: ZooKeeperServiceImport objects (``None``: off).
    service_imports: KindOptions | None = None
    mirrors: bool = False
    mirror_max_znodes: int = DEFAULT_MAX_ZNODES
    mirror_max_bytes: int = DEFAULT_MAX_BYTES
    config_trees: bool = False
    config_tree_max_znodes: int = DEFAULT_TREE_MAX_ZNODES
    ensembles: bool = False
    ensemble_secret_namespace: str | None = None
    dry_run: bool = False
    #: The default ensemble's tenancy rules and adoption mode (``--tenancy-policy-file``); ``None``: none,
    #: every namespace may manage every path and pre-existing znodes are adopted.
    tenancy: TenancyPolicy | None = None

    def feature_settings(self) -> FeatureSettings:
        """The settings every feature shares."""
        return FeatureSettings(
            namespaces=tuple(self.namespaces) or None, workers=self.workers, sync_period=self.sync_period,
            inactivity_timeout=self.watch_inactivity_timeout, acl_check_period=self.acl_check_period,
            cluster_id=self.cluster_id, registry_root=self.registry_root, dry_run=self.dry_run,
            reserved=reserved_roots(registry_root=self.registry_root, probe_root=self.probe_root(),
                                    bridge_root=self.bridge.root if self.bridge is not None else None,
                                    import_root=self.importer.root if self.importer is not None else None))

    def probe_root(self) -> str:
        """Where the start-up probe writes its scratch znodes: ``probe`` beside the ownership registry's root."""
        return probe_root(self.registry_root)

    def secret_namespace(self) -> str:
        """Where ZooKeeperEnsembles' Secrets are read from: ``--ensemble-secret-namespace``, else the pod's."""
        return self.ensemble_secret_namespace or default_leader_election_namespace()


def default_leader_election_namespace() -> str:
    """The pod's namespace: ``$POD_NAMESPACE``, else the service-account namespace file, else ``default``."""
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace", encoding="utf-8") as f:
            return f.read().strip() or "default"
    except OSError:
        return "default"
