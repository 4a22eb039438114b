"""What a run is asked to do, the constants shared by the scenarios, and the objects they create."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from zkop.zkconfig.spec import GROUP, VERSION

JSON = dict[str, Any]
NAMESPACE = "default"
SERVICE_NAMESPACE = "bench"
BRIDGE_ROOT = "/kubernetes/services"
REGISTRY_ROOT = "/zkop/owners"
PROBE_ROOT = "/zkop/probe"
FLOOR_CHROOT = "/floor"
MAIN_CHROOT = "/main"
#: Chroot of the reference cold sync of a scale run (``Params.cpu_reference_n``).
REFERENCE_CHROOT = "/reference"
#: ``--scale``: the issue's scale run (#17).
SCALE_N = 50000
SCALE_M = 20000
#: N of the reference cold sync whose CPU per object a scale run must not exceed.
SCALE_CPU_REFERENCE_N = 2000
API_WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
ZK_READ_OPS = ("get", "exists", "get_acls", "get_children")
SESSION_TXNS = frozenset({"createSession", "closeSession", "createContainer", "deleteContainer"})
#: Transaction-log entries that change no znode: sessions, failed writes, a multi's ``check`` preconditions.
NOT_WRITES = SESSION_TXNS | {"error", "check"}
CONTROLLER = "zookeeperconfig"
#: User-Agent of the bench's own API requests (left out of zkop's counts).
BENCH_AGENT = "zkop-bench"
BRIDGE_CONTROLLER = "service-bridge"
#: Every ``zkop run`` of the bench turns the client-side rate limiter off (``--kube-api-qps -1``): the bench
#: measures what zkop itself costs against the floor client, which has no limiter either; at the default
#: 50 requests/s a cold sync would measure the limiter (about 25 objects/s).
UNTHROTTLED = ("--kube-api-qps", "-1")


def throttle_args(params: Params) -> tuple[str, ...]:
    """The client-side rate-limit flags of every ``zkop run`` of a run: none with
    :attr:`Params.default_qps` (zkop's own defaults), else :data:`UNTHROTTLED`."""
    return () if params.default_qps else UNTHROTTLED




@dataclass(frozen=True)
class Params:
    """What one benchmark run is asked to do.

    Attributes:
        n: ZooKeeperConfig objects.
        m: Services (bridge and memory scenarios).
        workers: ``zkop run --workers`` (and ``--service-bridge-workers``).
        floor_threads: client threads of the floor (the command line makes it ``workers``).
        floor_runs: floor runs; the median is the floor.
        update_rate: ``spec.data`` changes per second in ``update_latency``.
        update_seconds: how long the update stream runs.
        drift_rate: hand edits per second in ``drift_latency``.
        drift_seconds: how long hand edits go on.
        min_sync_period: smallest ``--sync-period`` used for the resync window, seconds.
        quiet: seconds without new reconciles or API requests that count as "settled".
        smoke: the CI mode (small N and M, short streams).
        realistic_secrets: Helm release Secrets the ``realistic`` scenario seeds.
        realistic_secret_kb: size of each, KB.
        realistic_namespaces: namespaces it seeds (besides the built-in four).
        realistic_refs: ZooKeeperConfigs there that read a ConfigMap or Secret.
        realistic_managed_fields: seed ``managedFields`` there (off: the control run).
        realistic_cluster: seed every scenario's API server like a real cluster
            (:func:`zkop_testing.apiserver_realistic.seed`, ``realistic_secrets`` Helm Secrets of
            ``realistic_secret_kb`` KB, ``managedFields`` on every object, the N ZooKeeperConfigs
            and M Services included), not only the ``realistic`` scenario's.
        scale: the scale run of issue #17 (``--scale``): N = 50,000, M = 20,000 in the realistic
            cluster, one floor run, and the ``scale_*`` targets.
        cpu_reference_n: when > 0, a reference ``cold_sync`` at this N (own API server seeded the
            same way, own chroot) measures the CPU per object the scale run is judged against.
        control_plane: ``"real"``: every environment is a real etcd + kube-apiserver +
            kube-controller-manager of ``k8s_minor`` (:mod:`hack.bench.realplane`); ``"double"``: the
            in-memory API server in the bench's process.
        k8s_minor: the Kubernetes minor of the real control plane.
        default_qps: run zkop with its default client-side QPS and burst instead of
            :data:`UNTHROTTLED` (the floor clients have no limiter either way).
        ensembles: ``--scenario ensembles``: the numbers of ZooKeeperEnsembles measured, one run each.
        objects_per_ensemble: ZooKeeperConfigs naming each ensemble there.
        ensemble_idle_seconds: the idle window after each run's cold sync, seconds.
        peer_workers: ``--scenario peers``: the ``--workers`` counts of zkop and the Go peer, one pair of runs
            per repeat each.
        peer_repeats: ``--scenario peers``: runs of each operator per worker count; the median is reported.
    """

    n: int = 2000
    m: int = 1000
    workers: int = 8
    floor_threads: int = 8
    floor_runs: int = 3
    update_rate: float = 50.0
    update_seconds: float = 10.0
    drift_rate: float = 10.0
    drift_seconds: float = 10.0
    min_sync_period: float = 5.0
    quiet: float = 1.0
    smoke: bool = False
    realistic_secrets: int = 2000
    realistic_secret_kb: int = 50
    realistic_namespaces: int = 20
    realistic_refs: int = 100
    realistic_managed_fields: bool = True
    realistic_cluster: bool = False
    scale: bool = False
    cpu_reference_n: int = 0
    control_plane: str = "double"
    k8s_minor: str = ""
    default_qps: bool = False
    ensembles: tuple[int, ...] = (1, 5, 20)
    objects_per_ensemble: int = 1000
    ensemble_idle_seconds: float = 60.0
    peer_workers: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
    peer_repeats: int = 3


# --------------------------------------------------------------------------- naming of test objects


def cr_name(i: int) -> str:
    """Name of the ``i``-th ZooKeeperConfig."""
    return f"cr-{i:06d}"


def cr_path(i: int) -> str:
    """``spec.path`` of the ``i``-th ZooKeeperConfig (inside the scenario's chroot)."""
    return f"/bench/app/{cr_name(i)}"


def cr_data(i: int) -> bytes:
    """Initial bytes of the ``i``-th ZooKeeperConfig."""
    return f"value-{i}".encode()


def cr_manifest(i: int) -> JSON:
    """The ``i``-th ZooKeeperConfig."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ZooKeeperConfig",
        "metadata": {"name": cr_name(i), "namespace": NAMESPACE},
        "spec": {"path": cr_path(i), "data": base64.b64encode(cr_data(i)).decode()},
    }


def svc_name(i: int) -> str:
    """Name of the ``i``-th Service."""
    return f"svc-{i:06d}"


def svc_manifest(i: int) -> JSON:
    """The ``i``-th Service (ClusterIP, one port)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": svc_name(i), "namespace": SERVICE_NAMESPACE, "labels": {"app": svc_name(i)}},
        "spec": {"selector": {"app": svc_name(i)}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
    }


def svc_record_path(i: int) -> str:
    """Where the bridge publishes the ``i``-th Service (flat layout, default root), inside the chroot."""
    return f"{BRIDGE_ROOT}/{SERVICE_NAMESPACE}-{svc_name(i)}"
