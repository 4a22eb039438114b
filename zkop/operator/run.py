"""``zkop run`` in-process: options → API client, ZooKeeper session, Manager → every enabled feature of the
registry (:mod:`zkop.operator.registry`) → ``manager.run()`` (controller-runtime's ``main.go``).

The Manager owns start order, leader election and shutdown (see :mod:`zkop.runtime.manager`). Besides the
features, this module adds the flags' ZooKeeper session (opened and probed by a
:class:`~zkop.feature.session.ZooKeeperStartup` runnable: retried while ZooKeeper is unreachable, fatal with
exit code 2 when ZooKeeper refuses the probe), one per ZooKeeperEnsemble a feature runs on
(:func:`zkop.ensembles.startup.open_ensemble`), the resync of each feature after its session comes back
(:func:`~zkop.feature.session.resync_on_new_session`), and the probes ``ping`` and ``workers``
(``/healthz``) and ``informers-and-zookeeper`` (``/readyz``).

``--dry-run`` reaches every feature once, through ``FeatureSettings.dry_run``: each builds the writer that
plans, logs and counts its changes and makes none; the start-up probe (which writes a scratch znode) is
skipped; every adapter refuses every write (:attr:`ZooKeeperAdapter.refuse_writes`), and the API client
refuses every write but those docs/operations.md's rule allows (:data:`DRY_RUN_WRITES`), so a code path that
missed the seam fails loudly instead of writing.
"""

from __future__ import annotations

import logging
import socket
import uuid
from collections.abc import Sequence
from dataclasses import replace

from zkop import __version__
from zkop.ensembles.spec import FINALIZER as ENSEMBLE_FINALIZER
from zkop.ensembles.startup import EnsembleUnusable, open_ensemble
from zkop.feature.context import DRY_RUN, FeatureContext
from zkop.feature.session import ZooKeeperStartup, resync_on_new_session
from zkop.kube.client import KubeClient, load_api_client
from zkop.kube.events import EventRecorder
from zkop.kube.flowcontrol import client_rate_limiter
from zkop.kube.writepolicy import DryRunWrites
from zkop.operator.options import OperatorOptions, default_leader_election_namespace
from zkop.operator.registry import FEATURES, Feature, enabled_features
from zkop.runtime.manager import LeaderElectionOptions, Manager
from zkop.zkconfig.spec import FINALIZER as ZKCONFIG_FINALIZER
from zkop.zkconfig.spec import GROUP
from zkop.zookeeper.adapter import ZooKeeperAdapter

__all__ = ["API_CONNECTIONS_BESIDE_WORKERS", "DRY_RUN_WRITES", "IDLE_CONNECTIONS_PER_HOST", "ConfigurationError",
           "Operator", "api_pool_size"]

log = logging.getLogger(__name__)

#: The API client's net under ``--dry-run``: only the writes docs/operations.md's dry-run rule allows (the
#: status of zkop's kinds, the removal of zkop's finalizers, Events, the Lease, the metrics auth reviews).
DRY_RUN_WRITES = DryRunWrites(own_groups=(GROUP,), own_finalizers=(ZKCONFIG_FINALIZER, ENSEMBLE_FINALIZER))

#: client-go keeps up to this many idle connections to one API server (``transport/cache.go``
#: ``idleConnsPerHost``); zkop's pool keeps at least as many.
IDLE_CONNECTIONS_PER_HOST = 25
#: What may hold an API connection at once besides the workers: the informers' watches (one connection
#: each for the watch's life: ZooKeeperConfigs, Namespaces, Secrets, ConfigMaps, Services, EndpointSlices,
#: ZooKeeperEnsembles, ZooKeeperMirrors, ...), the Lease renewal, the Event writer and the ensemble
#: controllers' own reconciles.
API_CONNECTIONS_BESIDE_WORKERS = 16


class ConfigurationError(Exception):
    """``zkop run``'s options name something that cannot be used (a ZooKeeperEnsemble that is absent or
    invalid); the command line reports it as a usage error."""


def api_pool_size(options: OperatorOptions) -> int:
    """Connections the API client keeps open to the API server: one per thread that may use one at once.

    Every enabled feature's workers (:attr:`zkop.operator.registry.Feature.api_workers`) plus
    :data:`API_CONNECTIONS_BESIDE_WORKERS`, and never below client-go's :data:`IDLE_CONNECTIONS_PER_HOST`.
    urllib3 opens a connection beyond the pool when every kept one is in use, and closes it after the
    request with a "Connection pool is full" warning; a pool this size keeps a busy operator from paying a
    new TLS handshake per request. ZooKeeperEnsembles add none: their controllers share the ZooKeeperConfig
    feature's worker pool (:class:`zkop.runtime.workerpool.WorkerPool`).
    """
    workers = sum(feature.api_workers(options) for feature, _ in enabled_features(options))
    return max(IDLE_CONNECTIONS_PER_HOST, workers + API_CONNECTIONS_BESIDE_WORKERS)


class Operator:
    """``zkop run`` in-process: build with options, call :meth:`run`; :meth:`stop` from a signal handler.

    Attributes:
        manager: the generic Manager everything is added to.
        zookeeper: the ZooKeeper adapter of the flags' ensemble (tests reach its session).
        features: each enabled feature's parts by its registry name (``zookeeperconfig``,
            ``zookeeperensemble``, ``service-bridge``, ``service-import``, ``zookeeper-mirror``).

    ``features`` is the registry the run is built from (:data:`zkop.operator.registry.FEATURES`).

    Raises (from the constructor):
        ConfigurationError: a ZooKeeperEnsemble a feature runs on cannot be used.
        kubernetes.config.ConfigException: no usable Kubernetes configuration.
    """

    def __init__(self, options: OperatorOptions, features: Sequence[Feature] = FEATURES) -> None:
        self.options = options
        self.identity = f"{socket.gethostname()}_{uuid.uuid4()}"
        limiter = client_rate_limiter(options.kube_api_qps, options.kube_api_burst)
        self.client = KubeClient(load_api_client(options.kubeconfig, pool_size=api_pool_size(options)),
                                 user_agent=f"zkop-operator/{__version__}", rate_limiter=limiter,
                                 refuse_writes=DRY_RUN_WRITES if options.dry_run else None)
        self._rate_limited = limiter is not None
        # The net under the features' dry-run writers: a write that gets here raises. Each periodic resync
        # (jittered ±10 %) re-reads every znode once, catching ACL drift.
        self.zookeeper = ZooKeeperAdapter(options.zookeeper, refuse_writes=DRY_RUN if options.dry_run else None,
                                          known_max_age=options.sync_period * 0.5)
        self._ensemble_adapters: dict[str, ZooKeeperAdapter] = {}  # --service-bridge-ensemble, --import-ensemble
        election = None
        if options.leader_elect:
            election = LeaderElectionOptions(
                namespace=options.leader_election_namespace or default_leader_election_namespace(),
                name=options.leader_election_id, identity=self.identity, lease_duration=options.lease_duration,
                renew_deadline=options.renew_deadline, retry_period=options.retry_period,
            )
        self.manager = Manager(replace(options.manager, leader_election=election, gc_freeze_after_sync=True),
                               self.client)
        self.startup = ZooKeeperStartup(self.zookeeper, options.probe_root(),
                                        probe=options.startup_probe and not options.dry_run, on_fatal=self.manager.fail)
        self.manager.add(self.startup, needs_leader=False)
        self.recorder = EventRecorder(self.client)
        self.manager.add(self.recorder, needs_leader=False)
        context = FeatureContext(self.manager, self.client, self.recorder, self.zookeeper, options.feature_settings(),
                                 self._ensemble_zookeeper)
        self.features: dict[str, object] = {}
        for feature, feature_options in enabled_features(options, features):
            parts = feature.setup()(context, feature_options)
            context.built(parts)
            self.features[feature.name] = parts
        for zookeeper, hooks in context.session_hooks():
            resync_on_new_session(zookeeper, hooks)
        self.manager.add_healthz_check("ping", lambda: None)
        self.manager.add_healthz_check("workers", self.manager.runnables_healthy)
        self.manager.add_readyz_check("informers-and-zookeeper", self._ready)

    def _ensemble_zookeeper(self, name: str) -> ZooKeeperAdapter:
        """The adapter on ZooKeeperEnsemble ``name`` as it is at start-up, one per ensemble (shared by the
        bridge and the importer).

        Raises:
            ConfigurationError: no such ensemble, a Secret or key it names missing, or an invalid spec.
        """
        adapter = self._ensemble_adapters.get(name)
        if adapter is None:
            try:
                adapter = open_ensemble(name, client=self.client, base=self.options.zookeeper,
                                        secret_namespace=self.options.secret_namespace(),
                                        dry_run=self.options.dry_run, manager=self.manager)
            except EnsembleUnusable as err:
                raise ConfigurationError(str(err)) from None
            self._ensemble_adapters[name] = adapter
        return adapter

    def _ready(self) -> str | None:
        unsynced = [name for name in self.manager.not_synced() if name != self.startup.name]
        if unsynced:
            return f"informers not synced: {', '.join(unsynced)}"
        return self.startup.readiness()

    def bind(self) -> None:
        """Bind the probe and metrics addresses before anything starts (:meth:`zkop.runtime.manager.Manager.bind`).

        Raises:
            OSError: an address cannot be bound (its ``strerror`` names the server and the address).
            zkop.runtime.certs.CertificateError: no usable metrics serving certificate.
        """
        self.manager.bind()

    def run(self) -> int:
        """Run until :meth:`stop` (SIGTERM/SIGINT), a lost Lease or a fatal probe; return the exit code.

        Raises:
            zkop.runtime.certs.CertificateError: no usable metrics serving certificate.
        """
        if self._rate_limited:
            log.info("Kubernetes API client: at most %g requests/s, bursts of %d", self.options.kube_api_qps,
                     self.options.kube_api_burst)
        else:
            log.info("Kubernetes API client: no client-side rate limit (--kube-api-qps %g)", self.options.kube_api_qps)
        if self.options.dry_run:
            log.warning("dry run: changes are planned and logged; nothing is written to ZooKeeper, Services or "
                        "EndpointSlices, and the start-up write probe is skipped")
        try:
            return self.manager.run()
        finally:
            self.client.close()

    def stop(self) -> None:
        """Ask :meth:`run` to shut down cleanly (thread- and signal-safe)."""
        self.manager.stop()
