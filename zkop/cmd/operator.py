"""``zkop run``: options → ZooKeeper adapter and session wiring → :class:`~zkop.runtime.manager.Manager`
→ each feature's ``setup(manager, ...)`` → ``manager.run()`` (controller-runtime's ``main.go``).

Every feature wires itself the same way (controller-runtime's ``SetupWithManager``): its module's
``setup`` builds its informers, controller and reconciler, adds them to the Manager, and returns
its parts, whose ``on_session_reconnected`` is hooked to the ZooKeeper session here.

The Manager owns start order, leader election and shutdown (see :mod:`zkop.runtime.manager`).
This module adds what is specific to zkop: the ZooKeeper session, opened and probed by the
:class:`ZooKeeperStartup` runnable (retried while ZooKeeper is unreachable, fatal with exit code 2
when ZooKeeper refuses the probe); the resync after a ZooKeeper session comes back
(:func:`resync_on_new_session`); and the probes ``ping`` and ``workers`` (``/healthz``) and
``informers-and-zookeeper`` (``/readyz``).

``dry_run`` (``zkop run --dry-run``) reaches every controller: the ZooKeeperConfig reconciler, the
service bridge, the service importer and the mirror are built with a writer that plans, logs and
counts their changes and makes none; the
start-up probe (which writes a scratch znode) is skipped; and the adapter refuses every write
(:attr:`ZooKeeperAdapter.refuse_writes`), so a code path that forgot the dry run fails loudly
instead of writing.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

from tenacity import Retrying, retry_if_exception_type, stop_any, wait_exponential
from tenacity.stop import stop_base

from zkop import __version__
from zkop.cmd.flags import EXIT_ERROR, GRACEFUL_SHUTDOWN_TIMEOUT, UsageError
from zkop.cmd.kube_flags import DEFAULT_KUBE_API_BURST, DEFAULT_KUBE_API_QPS
from zkop.kube.client import JSON, KubeClient, load_api_client
from zkop.kube.events import EventRecorder
from zkop.kube.flowcontrol import client_rate_limiter
from zkop.runtime.certs import CertificateError
from zkop.runtime.manager import LeaderElectionOptions, Manager, ManagerOptions
from zkop.services.bridge.options import BridgeOptions
from zkop.services.importer.options import ImportOptions
from zkop.services.wiring import ServiceSync
from zkop.zkconfig import controller as zkconfig_controller
from zkop.zkconfig.reconciler import ReconcilerOptions
from zkop.zkconfig.spec import DEFAULT_MAX_DATA_BYTES
from zkop.zkconfig.tenancy import TenancyPolicy
from zkop.zookeeper.adapter import ConnectionOptions, ZooKeeperAdapter, ZooKeeperError, ZooKeeperUnavailable

__all__ = ["Operator", "OperatorOptions", "ZooKeeperStartup", "default_leader_election_namespace",
           "resync_on_new_session"]

log = logging.getLogger(__name__)

_O = TypeVar("_O", BridgeOptions, ImportOptions)
_O_contra = TypeVar("_O_contra", contravariant=True)


class _ServiceSetup(Protocol[_O_contra]):
    """:func:`zkop.services.bridge.builder.setup` and :func:`zkop.services.importer.builder.setup`: the same
    signature over their own options."""

    def __call__(self, manager: Manager, client: KubeClient, zookeeper: ZooKeeperAdapter, recorder: EventRecorder,
                 options: _O_contra, *, cluster_id: str, resync_period: float,
                 inactivity_timeout: float) -> ServiceSync[Any]: ...

@dataclass
class OperatorOptions:
    """Everything ``zkop run`` can be told; see ``docs/operations.md`` for each flag.

    Durations are seconds. ``kube_api_qps``/``kube_api_burst`` are the API client's token bucket
    (``--kube-api-qps``, negative: none; :func:`zkop.kube.flowcontrol.client_rate_limiter`).
    """

    kubeconfig: str | None = None
    kube_api_qps: float = DEFAULT_KUBE_API_QPS
    kube_api_burst: int = DEFAULT_KUBE_API_BURST
    zookeeper: ConnectionOptions = field(default_factory=ConnectionOptions)
    namespaces: list[str] = field(default_factory=list)
    workers: int = 4
    metrics_bind_address: str = ":8080"
    metrics_secure: bool = False
    metrics_cert_dir: str | None = None
    metrics_cert_name: str = "tls.crt"
    metrics_key_name: str = "tls.key"
    health_probe_bind_address: str = ":8081"
    leader_elect: bool = False
    leader_election_id: str = "zkop-leader"
    leader_election_namespace: str | None = None
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    sync_period: float = 600.0
    graceful_shutdown_timeout: float = GRACEFUL_SHUTDOWN_TIMEOUT
    max_data_bytes: int = DEFAULT_MAX_DATA_BYTES
    watch_inactivity_timeout: float = 90.0
    cluster_id: str = "default"
    registry_root: str = "/zkop/owners"
    acl_check_period: float = 60.0
    startup_probe: bool = True
    bridge: BridgeOptions | None = None
    importer: ImportOptions | None = None
    mirrors: bool = False
    ensembles: bool = False
    ensemble_secret_namespace: str | None = None
    bridge_ensemble: str | None = None
    import_ensemble: str | None = None
    dry_run: bool = False
    #: The default ensemble's tenancy rules and adoption mode (``--tenancy-policy-file``); ``None``: none,
    #: every namespace may manage every path and pre-existing znodes are adopted.
    tenancy: TenancyPolicy | None = None


#: client-go keeps up to this many idle connections to one API server (``transport/cache.go``
#: ``idleConnsPerHost``); zkop's pool keeps at least as many.
IDLE_CONNECTIONS_PER_HOST = 25
#: What may hold an API connection at once besides the workers: the informers' watches (one connection
#: each for the watch's life: ZooKeeperConfigs, Namespaces, Secrets, ConfigMaps, Services, EndpointSlices,
#: ZooKeeperEnsembles, ZooKeeperMirrors, ...), the Lease renewal, the Event writer and the ensemble
#: controllers' own reconciles.
API_CONNECTIONS_BESIDE_WORKERS = 16


def api_pool_size(options: OperatorOptions) -> int:
    """Connections the API client keeps open to the API server: one per thread that may use one at once.

    Every controller's workers (the ZooKeeperConfig workers; the ZooKeeperMirror and ZooKeeperEnsemble
    controllers' as many again; the service bridge's and the importer's) plus
    :data:`API_CONNECTIONS_BESIDE_WORKERS`, and never below client-go's :data:`IDLE_CONNECTIONS_PER_HOST`.
    urllib3 opens a connection beyond the pool when every kept one is in use, and closes it after the
    request with a "Connection pool is full" warning; a pool this size keeps a busy operator from paying a
    new TLS handshake per request. Each ZooKeeperEnsemble's own workers get their room when it starts
    (:meth:`zkop.kube.client.KubeClient.reserve_connections`).
    """
    workers = options.workers * (1 + int(options.mirrors) + int(options.ensembles))
    for feature in (options.bridge, options.importer):
        if feature is not None:
            workers += feature.workers
    return max(IDLE_CONNECTIONS_PER_HOST, workers + API_CONNECTIONS_BESIDE_WORKERS)


def default_leader_election_namespace() -> str:
    """The pod's namespace: ``$POD_NAMESPACE``, else the service-account namespace file, else ``default``."""
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace", encoding="utf-8") as f:
            return f.read().strip() or "default"
    except OSError:
        return "default"


def resync_on_new_session(zookeeper: ZooKeeperAdapter, callbacks: Sequence[Callable[[], None]]) -> None:
    """Call every callback when the ZooKeeper session is CONNECTED again after LOST or SUSPENDED.

    After a LOST session every watch is gone and the data may have changed; after SUSPENDED, keys
    may sit in long backoffs.  Either way each feature resyncs (cheap where the watch-validated
    cache still holds).  Callbacks run on kazoo's event thread and must only enqueue.
    """
    interrupted = threading.Event()

    def on_state(state: str) -> None:
        if state in ("LOST", "SUSPENDED"):
            interrupted.set()
        elif state == "CONNECTED" and interrupted.is_set():
            interrupted.clear()
            log.info("ZooKeeper session re-established; resyncing everything")
            for callback in callbacks:
                callback()

    zookeeper.add_session_listener(on_state)


class _StopWhenSet(stop_base):
    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def __call__(self, retry_state: object) -> bool:
        return self.event.is_set()


class ZooKeeperStartup:
    """Non-leader runnable: opens the ZooKeeper session and runs the start-up probe; closes it on stop.

    Retries while ZooKeeper is unavailable (an ensemble electing a leader), waiting 0.5 s doubling
    to 10 s, and logs each distinct reason once (docs/operations.md, "Connecting to a secured ensemble");
    only a probe ZooKeeper refuses (credentials that cannot read what they write) is fatal:
    ``on_fatal(2, reason)``.  :meth:`has_synced` is True once the session is up and the probe passed,
    so the Manager starts leader election only then.

    Args:
        zookeeper: the adapter (not started).
        probe_root: where the probe writes, e.g. ``/zkop/probe``.
        probe: False skips the probe (``--no-startup-probe``-style tests).
        on_fatal: ``(exit_code, reason)``, e.g. :meth:`zkop.runtime.manager.Manager.fail`.
        directory: removed on :meth:`stop` (a ZooKeeperEnsemble's files: ``--service-bridge-ensemble``).
    """

    name = "zookeeper"

    def __init__(self, zookeeper: ZooKeeperAdapter, probe_root: str, *, probe: bool,
                 on_fatal: Callable[[int, str], None], directory: Path | None = None) -> None:
        self.zookeeper = zookeeper
        self.directory = directory  # a ZooKeeperEnsemble's private TLS/SASL files, removed on stop
        self.probe_root = probe_root
        self.probe = probe
        self.on_fatal = on_fatal
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._fatal = False  # on_fatal was called: the run ends anyway
        self._thread: threading.Thread | None = None

    def has_synced(self) -> bool:
        """True once the session is open and the probe passed."""
        return self._ready.is_set()

    def health_check(self) -> str | None:
        """``None``, or what ended that the session needs: the start-up thread before the session was up
        (nothing would ever start), or one of the session's own threads (``ZooKeeperAdapter.health_check``)."""
        if self._stop.is_set():
            return None
        thread = self._thread
        if thread is not None and not thread.is_alive() and not self._ready.is_set() and not self._fatal:
            return f"its thread {thread.name} ended before the session was up"
        return self.zookeeper.health_check()

    def readiness(self) -> str | None:
        """``None`` when ready, else why ZooKeeper is not, with the last connection error (an untrusted
        certificate, a rejected SASL login), as docs/operations.md ("Connecting to a secured ensemble") shows.

        Before the first session: ``ZooKeeper session not connected: <reason>``, then, connected but not yet
        probed, ``ZooKeeper start-up probe not complete``. Later the session's own reason (how long it has
        been SUSPENDED, a reset in progress) followed by ``: <reason>``.
        """
        reason = self.zookeeper.last_connect_error
        if not self._ready.is_set():
            if not self.zookeeper.connected:
                return "ZooKeeper session not connected" + (f": {reason}" if reason else "")
            return "ZooKeeper start-up probe not complete"
        unavailable = self.zookeeper.unavailable_reason  # None while connected; names a session reset in progress
        if unavailable is None:
            return None
        return unavailable + (f": {reason}" if reason else "")

    def start(self) -> None:
        """Connect and probe on a thread; returns at once."""
        thread = threading.Thread(target=self._connect, name="zookeeper-startup", daemon=True)
        thread.start()  # then published: is_alive() is False until start()
        self._thread = thread

    def _connect(self) -> None:
        started = threading.Event()
        logged: set[str] = set()

        def log_once(error: BaseException | None) -> None:
            """Log why an attempt failed once per distinct reason, not at every retry; a connection error
            the connect guard logged already (``ZooKeeper connection failed: …``) only at debug."""
            text = str(error or "")
            guarded = self.zookeeper.last_connect_error
            if text in logged or (guarded and text.endswith(guarded)):
                log.debug("ZooKeeper not reachable yet: %s", text)
                return
            logged.add(text)
            log.warning("ZooKeeper not reachable yet: %s", text)

        def connect_and_probe() -> None:
            if not started.is_set():
                self.zookeeper.start()  # safe to repeat after it raised (kazoo stops itself on timeout)
                started.set()
            if not self.zookeeper.connected:
                reason = self.zookeeper.last_connect_error
                raise ZooKeeperUnavailable("ZooKeeper session not connected yet" + (f": {reason}" if reason else ""))
            if self.probe:
                self.zookeeper.probe(self.probe_root)

        retrying = Retrying(
            retry=retry_if_exception_type(ZooKeeperUnavailable),
            wait=wait_exponential(multiplier=0.5, max=10),
            stop=stop_any(_StopWhenSet(self._stop)),
            sleep=self._sleep,
            reraise=True,
            before_sleep=lambda rs: log_once(rs.outcome.exception() if rs.outcome else None),
        )
        try:
            for attempt in retrying:
                with attempt:
                    connect_and_probe()
        except ZooKeeperUnavailable:
            return  # stopped while waiting
        except ZooKeeperError as err:
            self._fatal = True
            self.on_fatal(2, f"ZooKeeper start-up probe failed: {err}")
            return
        self._ready.set()

    def _sleep(self, seconds: float) -> None:
        """Wait between attempts, returning early when stopped."""
        self._stop.wait(seconds)

    def stop(self, timeout: float, /) -> None:
        """End the retries, then close the session."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        try:
            self.zookeeper.stop()
        except Exception:
            log.debug("closing the ZooKeeper session failed", exc_info=True)
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)


class Operator:
    """``zkop run`` in-process: build with options, call :meth:`run`; :meth:`stop` from a signal handler.

    Attributes:
        manager: the generic Manager everything is added to.
        zookeeper: the ZooKeeper adapter (tests reach its session).
        zkconfig: the ZooKeeperConfig controller's parts (the flags' ensemble).
        ensembles: the ZooKeeperEnsemble controller's parts (``--zookeeper-ensembles``), else absent.
    """

    def __init__(self, options: OperatorOptions) -> None:
        self.options = options
        self.identity = f"{socket.gethostname()}_{uuid.uuid4()}"
        limiter = client_rate_limiter(options.kube_api_qps, options.kube_api_burst)
        self.client = KubeClient(load_api_client(options.kubeconfig, pool_size=api_pool_size(options)),
                                 user_agent=f"zkop-operator/{__version__}", rate_limiter=limiter)
        self._rate_limited = limiter is not None
        self.zookeeper = ZooKeeperAdapter(options.zookeeper)
        self._service_adapters: dict[str, ZooKeeperAdapter] = {}  # --service-bridge-ensemble, --import-ensemble
        if options.dry_run:
            # The net under the controllers' dry-run writers: a write that gets here raises.
            self.zookeeper.refuse_writes = "zkop run --dry-run"
        # Each periodic resync (jittered ±10 %) re-reads every znode once, catching ACL drift.
        self.zookeeper.known_max_age = options.sync_period * 0.5
        election = None
        if options.leader_elect:
            election = LeaderElectionOptions(
                namespace=options.leader_election_namespace or default_leader_election_namespace(),
                name=options.leader_election_id, identity=self.identity, lease_duration=options.lease_duration,
                renew_deadline=options.renew_deadline, retry_period=options.retry_period,
            )
        self.manager = Manager(ManagerOptions(
            metrics_bind_address=options.metrics_bind_address, metrics_secure=options.metrics_secure,
            metrics_cert_dir=options.metrics_cert_dir, metrics_cert_name=options.metrics_cert_name,
            metrics_key_name=options.metrics_key_name,
            health_probe_bind_address=options.health_probe_bind_address,
            leader_election=election, graceful_shutdown_timeout=options.graceful_shutdown_timeout,
            gc_freeze_after_sync=True,
        ), self.client)
        probe_root = f"{options.registry_root.rsplit('/', 1)[0] or '/zkop'}/probe"
        self.startup = ZooKeeperStartup(self.zookeeper, probe_root, probe=options.startup_probe and not options.dry_run,
                                        on_fatal=self.manager.fail)
        self.manager.add(self.startup, needs_leader=False)
        self.recorder = EventRecorder(self.client)
        self.manager.add(self.recorder, needs_leader=False)
        namespaces = options.namespaces or None
        self.zkconfig = zkconfig_controller.setup(
            self.manager, self.client, self.zookeeper, self.recorder,
            ReconcilerOptions(max_data_bytes=options.max_data_bytes, cluster_id=options.cluster_id,
                              registry_root=options.registry_root, dry_run=options.dry_run),
            namespaces=namespaces, workers=options.workers, sync_period=options.sync_period,
            inactivity_timeout=options.watch_inactivity_timeout, acl_check_period=options.acl_check_period,
            **self._tenancy(options.tenancy, ensembles=options.ensembles),
        )
        if options.ensembles:
            from zkop.ensembles import controller as ensembles

            self.ensembles = ensembles.setup(
                self.manager, self.client, self.recorder, self.zkconfig, self.zookeeper,
                self.zkconfig.reconciler.options,
                secret_namespace=options.ensemble_secret_namespace or default_leader_election_namespace(),
                workers=options.workers, acl_check_period=options.acl_check_period,
                inactivity_timeout=options.watch_inactivity_timeout, sync_period=options.sync_period,
                dry_run=options.dry_run,
            )
        on_new_session: list[Callable[[], None]] = [self.zkconfig.on_session_reconnected]
        # Each feature is imported only when enabled: a process without it starts faster.
        if options.bridge is not None:
            from zkop.services.bridge import builder as bridge

            on_new_session.extend(self._setup_service(bridge.setup, options.bridge, options.bridge_ensemble))
        if options.importer is not None:
            from zkop.services.importer import builder as importer

            on_new_session.extend(self._setup_service(importer.setup, options.importer, options.import_ensemble))
        if options.mirrors:
            from zkop.mirror import builder as mirror

            on_new_session.append(mirror.setup(
                self.manager, self.client, self.zookeeper, self.recorder, namespaces=namespaces,
                workers=options.workers, dry_run=options.dry_run, resync_period=options.sync_period,
                inactivity_timeout=options.watch_inactivity_timeout,
            ).on_session_reconnected)
        resync_on_new_session(self.zookeeper, on_new_session)
        self.manager.add_healthz_check("ping", lambda: None)
        self.manager.add_healthz_check("workers", self.manager.runnables_healthy)
        self.manager.add_readyz_check("informers-and-zookeeper", self._ready)

    @staticmethod
    def _tenancy(policy: TenancyPolicy | None, *, ensembles: bool = False) -> dict[str, Any]:
        """The tenancy arguments of :func:`zkop.zkconfig.controller.setup` for the default ensemble's policy:
        none at all without one (Namespaces are watched only for a ``namespaceSelector``). With
        ZooKeeperEnsembles (``--zookeeper-ensembles``) Namespaces are always watched: any ensemble's
        ``spec.tenancy`` may select namespaces by label, at any time (the component grants list/watch)."""
        arguments: dict[str, Any] = {"watch_namespaces": True} if ensembles else {}
        if policy is None:
            return arguments
        return {"policy_for": lambda obj: policy,
                "watch_namespaces": ensembles or policy.needs_namespace_labels}

    def _setup_service(self, setup: _ServiceSetup[_O], feature_options: _O,
                       ensemble: str | None = None) -> list[Callable[[], None]]:
        """Set one service direction up with the operator's cluster id, resync period and watch inactivity
        timeout (``--dry-run`` reaches the direction's own options), on the flags' ensemble or the
        ZooKeeperEnsemble ``ensemble``; its session-reconnected hook, for the flags' session (on another
        ensemble, the hook is that session's already: an empty list)."""
        if self.options.dry_run:
            feature_options = replace(feature_options, dry_run=True)
        zookeeper = self.zookeeper if not ensemble else self._ensemble_zookeeper(ensemble)
        hook = setup(self.manager, self.client, zookeeper, self.recorder, feature_options,
                     cluster_id=self.options.cluster_id, resync_period=self.options.sync_period,
                     inactivity_timeout=self.options.watch_inactivity_timeout).on_session_reconnected
        if zookeeper is self.zookeeper:
            return [hook]
        resync_on_new_session(zookeeper, [hook])
        return []

    def _ensemble_zookeeper(self, name: str) -> ZooKeeperAdapter:
        """An adapter on ZooKeeperEnsemble ``name`` as it is at start-up (one per ensemble, shared by the bridge
        and the importer), opened by a :class:`ZooKeeperStartup` of its own; its spec and Secrets are read once
        (a change takes a restart).

        Raises:
            UsageError: no such ensemble, a Secret or key it names missing, or an invalid spec.
        """
        if name in self._service_adapters:
            return self._service_adapters[name]
        import tempfile

        from zkop.ensembles.spec import GROUP as E_GROUP
        from zkop.ensembles.spec import PLURAL as E_PLURAL
        from zkop.ensembles.spec import VERSION as E_VERSION
        from zkop.ensembles.spec import InvalidEnsemble, SecretMissing, read_ensemble
        from zkop.kube.client import ApiException, resource_path

        namespace = self.options.ensemble_secret_namespace or default_leader_election_namespace()

        def get(path: str) -> JSON | None:
            try:
                found: JSON = self.client.request("GET", path)
            except ApiException as err:
                if err.status == 404:
                    return None
                raise
            return found

        def get_ensemble(ensemble: str) -> JSON | None:
            # A LIST narrowed to the one name, not a GET: the zookeeper-ensembles component grants list and
            # watch on the kind (its informer's verbs), not get (kube-apiserver answers a GET 403).
            found: JSON = self.client.request("GET", resource_path(E_GROUP, E_VERSION, E_PLURAL),
                                              query={"fieldSelector": f"metadata.name={ensemble}"})
            items: list[JSON] = list(found.get("items") or [])
            return items[0] if items else None

        directory = Path(tempfile.mkdtemp(prefix=f"zkop-ensemble-{name}-"))
        try:
            connection = read_ensemble(
                get_ensemble,
                lambda n: get(resource_path("", "v1", "secrets", namespace, n)),
                name, self.options.zookeeper, directory)
        except (SecretMissing, InvalidEnsemble, ApiException) as err:
            shutil.rmtree(directory, ignore_errors=True)
            raise UsageError(f"ZooKeeperEnsemble {name}: {err}") from None
        adapter = ZooKeeperAdapter(connection)
        if self.options.dry_run:
            adapter.refuse_writes = "zkop run --dry-run"
        startup = ZooKeeperStartup(adapter, "", probe=False, on_fatal=self.manager.fail, directory=directory)
        startup.name = f"zookeeper-{name}"
        self.manager.add(startup, needs_leader=False)
        self._service_adapters[name] = adapter
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

        No usable metrics serving certificate is a configuration error: logged, exit code 2.
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
        except CertificateError as err:
            log.error("cannot serve metrics securely: %s", err)
            return EXIT_ERROR
        finally:
            self.client.close()

    def stop(self) -> None:
        """Ask :meth:`run` to shut down cleanly (thread- and signal-safe)."""
        self.manager.stop()
