"""The manager behind ``zkop run``: wires clients, informers, controllers, probes and leader election.

Start-up order (controller-runtime's ``Manager.Start``): metrics and health
servers; the ZooKeeper session; informers (standbys keep a warm cache too);
then, once this replica leads (or at once without ``--leader-elect``), the
controllers' workers. Shutdown: stop taking work, drain in-flight reconciles
(bounded), release the Lease, stop informers, close the session.

A leader that cannot renew its Lease stops its workers at once and the
process exits with code 1, so it never writes to ZooKeeper after another
replica may have taken over (controller-runtime: "leader election lost").
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prometheus_client import REGISTRY
from tenacity import Retrying, retry_if_exception_type, stop_any, wait_exponential
from tenacity.stop import stop_base

from zkop import __version__
from zkop.kube.client import JSON, KubeClient, load_api_client
from zkop.kube.events import EventRecorder
from zkop.runtime import metrics
from zkop.runtime.controller import Controller
from zkop.runtime.informer import Informer, ResourceRef, meta_namespace_key
from zkop.runtime.serving import HealthServer
from zkop.services.bridge.options import BridgeOptions
from zkop.services.importer.options import ImportOptions
from zkop.zkconfig.reconciler import (
    PATH_INDEX,
    REF_INDEX,
    ReconcilerOptions,
    ZooKeeperConfigReconciler,
    index_by_path,
    index_by_ref,
)
from zkop.zkconfig.spec import DEFAULT_MAX_DATA_BYTES, GROUP, PLURAL, VERSION
from zkop.zkconfig.status_metrics import ZooKeeperConfigStatusCollector
from zkop.zookeeper.adapter import ConnectionOptions, ZooKeeperAdapter, ZooKeeperError, ZooKeeperUnavailable

if TYPE_CHECKING:
    from zkop.services.bridge.builder import ServiceBridge
    from zkop.services.importer.builder import ServiceImporter

__all__ = ["Manager", "ManagerOptions"]

log = logging.getLogger(__name__)

ZOOKEEPERCONFIGS = ResourceRef(GROUP, VERSION, PLURAL)
CONFIGMAPS = ResourceRef("", "v1", "configmaps")
SECRETS = ResourceRef("", "v1", "secrets")


@dataclass
class ManagerOptions:
    """Everything ``zkop run`` can be told; see ``docs/operations.md`` for each flag.

    Durations are seconds.
    """

    kubeconfig: str | None = None
    zookeeper: ConnectionOptions = field(default_factory=ConnectionOptions)
    namespaces: list[str] = field(default_factory=list)
    workers: int = 4
    metrics_bind_address: str = ":8080"
    health_probe_bind_address: str = ":8081"
    leader_elect: bool = False
    leader_election_id: str = "zkop-leader"
    leader_election_namespace: str | None = None
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    sync_period: float = 600.0
    graceful_shutdown_timeout: float = 30.0
    max_data_bytes: int = DEFAULT_MAX_DATA_BYTES
    watch_inactivity_timeout: float = 90.0
    cluster_id: str = "default"
    registry_root: str = "/zkop/owners"
    startup_probe: bool = True
    bridge: BridgeOptions | None = None
    importer: ImportOptions | None = None


def default_leader_election_namespace() -> str:
    """The pod's namespace: ``$POD_NAMESPACE``, else the service-account namespace file, else ``default``."""
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace", encoding="utf-8") as f:
            return f.read().strip() or "default"
    except OSError:
        return "default"


class _StopWhenSet(stop_base):
    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def __call__(self, retry_state: object) -> bool:
        return self.event.is_set()


class Manager:
    """Runs zkop until stopped. Build with options, call :meth:`run`.

    Args:
        options: configuration.
    """

    def __init__(self, options: ManagerOptions) -> None:
        self.options = options
        self.stop_event = threading.Event()
        self.exit_code = 0
        self.identity = f"{socket.gethostname()}_{uuid.uuid4()}"
        self.client = KubeClient(load_api_client(options.kubeconfig, pool_size=options.workers + 10),
                                 user_agent=f"zkop-operator/{__version__}")
        self.zookeeper = ZooKeeperAdapter(options.zookeeper)
        # Each periodic resync (jittered ±10 %) re-reads every znode once, catching ACL drift.
        self.zookeeper.known_max_age = options.sync_period * 0.5
        self.recorder = EventRecorder(self.client)
        namespaces = options.namespaces or None
        self.informer = Informer(
            self.client, ZOOKEEPERCONFIGS, name="zookeeperconfigs", namespaces=namespaces,
            indexers={PATH_INDEX: index_by_path, REF_INDEX: index_by_ref}, resync_period=options.sync_period,
            inactivity_timeout=options.watch_inactivity_timeout,
        )
        # ConfigMaps and Secrets feed spec.dataFrom; their own resync is off (the ZooKeeperConfig one covers it).
        self.configmaps = Informer(self.client, CONFIGMAPS, name="configmaps", namespaces=namespaces,
                                   resync_period=0, inactivity_timeout=options.watch_inactivity_timeout)
        self.secrets = Informer(self.client, SECRETS, name="secrets", namespaces=namespaces,
                                resync_period=0, inactivity_timeout=options.watch_inactivity_timeout)
        self.reconciler = ZooKeeperConfigReconciler(
            self.informer.indexer, self.client, self.zookeeper, self.recorder,
            ReconcilerOptions(max_data_bytes=options.max_data_bytes, cluster_id=options.cluster_id,
                              registry_root=options.registry_root),
            configmaps=self.configmaps.indexer, secrets=self.secrets.indexer,
        )
        controller = Controller("zookeeperconfig", self.reconciler, workers=options.workers)
        self.controllers: list[Controller] = [controller]
        controller.watch(self.informer, self._keys_sharing_path, update_filter=self.reconciler.wants_update)
        # An update held while our own write of it was in flight, and not its echo after all, is enqueued.
        self.reconciler.own_writes.release = controller.queue.add
        controller.watch(self.configmaps, lambda obj: self._keys_referencing("ConfigMap", obj))
        controller.watch(self.secrets, lambda obj: self._keys_referencing("Secret", obj))
        self.informers = [self.informer, self.configmaps, self.secrets]
        self.zookeeper.add_watch_listener(self._on_znode_changed)
        self._status_collector = ZooKeeperConfigStatusCollector(self.informer.indexer)
        self.bridge: ServiceBridge | None = None
        if options.bridge is not None:
            # Imported only when enabled: a process without the bridge starts faster.
            from zkop.services.bridge.builder import build_service_bridge

            self.bridge = build_service_bridge(
                self.client, self.zookeeper, self.recorder, options.bridge, cluster_id=options.cluster_id,
                resync_period=options.sync_period, inactivity_timeout=options.watch_inactivity_timeout,
            )
            self.informers.extend(self.bridge.informers)
            self.controllers.extend(self.bridge.controllers)
        self.importer: ServiceImporter | None = None
        if options.importer is not None:
            from zkop.services.importer.builder import build_service_importer

            self.importer = build_service_importer(
                self.client, self.zookeeper, self.recorder, options.importer, cluster_id=options.cluster_id,
                resync_period=options.sync_period, inactivity_timeout=options.watch_inactivity_timeout,
            )
            self.informers.extend(self.importer.informers)
            self.controllers.extend(self.importer.controllers)
        self.leading = threading.Event()
        self._zookeeper_ready = threading.Event()
        self.health: HealthServer | None = None
        self._metrics_server: object | None = None
        self._session_lost = False
        self.zookeeper.add_session_listener(self._on_session_state)

    # --- event mapping (handlers only enqueue) ------------------------------------------------

    def _keys_sharing_path(self, obj: JSON) -> list[str]:
        """The object itself plus every other object declaring the same path (ownership may move)."""
        keys = [meta_namespace_key(obj)]
        for path in index_by_path(obj):
            keys.extend(k for k in self.informer.indexer.index_keys(PATH_INDEX, path) if k != keys[0])
        return keys

    def _keys_referencing(self, kind: str, obj: JSON) -> list[str]:
        meta = obj.get("metadata") or {}
        return self.informer.indexer.index_keys(REF_INDEX, f"{kind}/{meta.get('namespace')}/{meta.get('name')}")

    def _on_znode_changed(self, path: str) -> None:
        """A ZooKeeper watch fired (kazoo's event thread): enqueue the objects declaring that path."""
        registry = self.reconciler.registry
        managed = registry.managed_path(path) if registry.is_registry_path(path) else path
        if managed is None:
            return
        for key in self.informer.indexer.index_keys(PATH_INDEX, managed):
            self.controllers[0].queue.add(key)

    # --- probes ------------------------------------------------------------------------------

    def _ready(self) -> str | None:
        unsynced = [i.name for i in self.informers if not i.has_synced()]
        if unsynced:
            return f"informers not synced: {', '.join(unsynced)}"
        if not self._zookeeper_ready.is_set():
            return "ZooKeeper start-up (session and probe) not complete"
        if not self.zookeeper.connected:
            return "ZooKeeper session not connected"
        return None

    def _alive(self) -> str | None:
        if self.stop_event.is_set():
            return None
        for controller in self.controllers:
            if controller.started.is_set() and not controller.queue.shutting_down():
                dead = [t.name for t in controller._threads if not t.is_alive()]
                if dead:
                    return f"worker threads died: {', '.join(dead)}"
        return None

    def _on_session_state(self, state: str) -> None:
        if state in ("LOST", "SUSPENDED"):
            self._session_lost = True
        elif state == "CONNECTED" and self._session_lost:
            # Back after an outage: after a LOST session every watch is gone and the data may have
            # changed; after SUSPENDED, keys may sit in long backoffs. Either way: resync everything
            # (cheap where the watch-validated cache still holds).
            self._session_lost = False
            log.info("ZooKeeper session re-established; resyncing everything")
            self.informer.resync()
            if self.bridge is not None:
                self.bridge.on_session_reconnected()
            if self.importer is not None:
                self.importer.on_session_reconnected()

    # --- lifecycle ---------------------------------------------------------------------------

    def _start_servers(self) -> None:
        bind = metrics.parse_bind_address(self.options.health_probe_bind_address)
        if bind is not None:
            self.health = HealthServer(*bind)
            self.health.liveness["ping"] = lambda: None
            self.health.liveness["workers"] = self._alive
            self.health.readiness["informers-and-zookeeper"] = self._ready
            self.health.start()
            log.info("health probes on %s:%d", bind[0], self.health.port)
        with contextlib.suppress(ValueError):  # already registered by another in-process manager (tests)
            REGISTRY.register(self._status_collector)
        self._metrics_server = metrics.start_metrics_server(self.options.metrics_bind_address)

    def _connect_zookeeper(self) -> bool:
        """Open the session and run the start-up probe, retrying while ZooKeeper is unavailable.

        Only a probe that ZooKeeper refuses (credentials that cannot read what they write) is
        fatal (exit code 2); connection trouble — an ensemble electing a leader — is retried.
        """
        probe_root = f"{self.options.registry_root.rsplit('/', 1)[0] or '/zkop'}/probe"

        started = threading.Event()

        def connect_and_probe() -> None:
            if not started.is_set():
                self.zookeeper.start()  # safe to repeat after it raised (kazoo stops itself on timeout)
                started.set()
            if not self.zookeeper.connected:
                raise ZooKeeperUnavailable("ZooKeeper session not connected yet")
            if self.options.startup_probe:
                self.zookeeper.probe(probe_root)

        retrying = Retrying(
            retry=retry_if_exception_type(ZooKeeperUnavailable),
            wait=wait_exponential(multiplier=0.5, max=10),
            stop=stop_any(_StopWhenSet(self.stop_event)),
            reraise=True,
            before_sleep=lambda rs: log.warning("ZooKeeper not reachable yet: %s", rs.outcome.exception()
                                                if rs.outcome else ""),
        )
        try:
            for attempt in retrying:
                with attempt:
                    connect_and_probe()
        except ZooKeeperUnavailable:
            return False  # stopped while waiting
        except ZooKeeperError as err:
            log.error("ZooKeeper start-up probe failed: %s", err)
            self.exit_code = 2
            return False
        self._zookeeper_ready.set()
        return True

    def start_controllers(self) -> None:
        """Wait for caches, then start every controller's workers (called when leading)."""
        for informer in self.informers:
            while not informer.wait_for_sync(1.0):
                if self.stop_event.is_set():
                    return
        self.reconciler.learn_absent()
        for controller in self.controllers:
            controller.start()
        log.info("controllers started")

    def run(self) -> int:
        """Run until :meth:`stop` (SIGTERM/SIGINT) or a lost Lease; return the exit code."""
        self._start_servers()
        self.recorder.start()
        for informer in self.informers:
            informer.start()
        if not self._connect_zookeeper():
            self._shutdown(drain=False)
            return self.exit_code
        elector = None
        if self.options.leader_elect:
            from zkop.runtime.leaderelection import LeaderElector

            elector = LeaderElector(
                self.client,
                namespace=self.options.leader_election_namespace or default_leader_election_namespace(),
                name=self.options.leader_election_id,
                identity=self.identity,
                lease_duration=self.options.lease_duration,
                renew_deadline=self.options.renew_deadline,
                retry_period=self.options.retry_period,
                on_started_leading=self._on_started_leading,
                on_stopped_leading=self._on_stopped_leading,
            )
            threading.Thread(target=elector.run, args=(self.stop_event,), name="leader-election",
                             daemon=True).start()
        else:
            self._on_started_leading()
        self.stop_event.wait()
        self._shutdown(drain=self.exit_code == 0)
        if elector is not None and self.exit_code == 0:
            elector.release()
        self._close()
        return self.exit_code

    def _on_started_leading(self) -> None:
        self.leading.set()
        threading.Thread(target=self.start_controllers, name="start-controllers", daemon=True).start()

    def _on_stopped_leading(self) -> None:
        if self.stop_event.is_set() and self.exit_code == 0:
            return  # a clean shutdown released the Lease
        if not self.leading.is_set():
            return
        log.error("leader election lost; stopping workers and exiting")
        for controller in self.controllers:
            controller.queue.shutdown()
        self.exit_code = 1
        self.stop_event.set()

    def stop(self) -> None:
        """Ask :meth:`run` to shut down cleanly (thread- and signal-safe)."""
        self.stop_event.set()

    def _shutdown(self, *, drain: bool) -> None:
        timeout = self.options.graceful_shutdown_timeout if drain else 0.0
        for controller in self.controllers:
            if controller.started.is_set():
                controller.stop(timeout)
            else:
                controller.queue.shutdown()

    def _close(self) -> None:
        for informer in self.informers:
            informer.stop(1.0)
        self.recorder.stop()
        with contextlib.suppress(Exception):
            self.zookeeper.stop()
        with contextlib.suppress(KeyError):
            REGISTRY.unregister(self._status_collector)
        if self.health is not None:
            self.health.shutdown()
        shutdown = getattr(self._metrics_server, "shutdown", None)
        if shutdown is not None:
            shutdown()
