"""Scenario ``ensembles`` (``--scenario ensembles``): what each ZooKeeperEnsemble costs zkop (issue #25, item 8).

For each size k of :attr:`~.params.Params.ensembles` (default 1, 5, 20): k ZooKeeperEnsembles, each on a real
ZooKeeper server of its own (the test harness's :class:`zkop_testing.zookeeper.ZooKeeperServer`, started once
for the largest k and reused, each size on a fresh chroot ``/size-<k>``), and
:attr:`~.params.Params.objects_per_ensemble` ZooKeeperConfigs naming each (``spec.ensembleRef``), in a fresh
API server (the real control plane where built, else the in-memory double). Then ``zkop run
--zookeeper-ensembles --workers W`` starts (client-side QPS lifted, :data:`~.params.UNTHROTTLED`); the
flags' own ensemble (``--zk-hosts``, the bench's main server, chroot ``/ensembles-default``) holds no object,
but it has its session like any other: zkop runs k + 1 sessions.

Measured from ``/proc/<pid>`` of zkop, for each k: cold-sync time (spawn → every object ``Synced`` at its
generation), CPU seconds until then, the thread count (the most seen while converging and once settled),
peak RSS (``VmHWM``) and settled RSS (``VmRSS`` after the idle window), and zkop's CPU over an idle window
(:attr:`~.params.Params.ensemble_idle_seconds`, default 60 s) with everything in sync, plus the API requests
it made meanwhile. Every znode is checked on its own server afterwards. ``per_ensemble`` gives the slopes
between the smallest and the largest k: threads, RSS and idle CPU per added ensemble, and whether cold-sync
CPU per object grows with k (it should not).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial

from kazoo.exceptions import NoNodeError
from zkop_testing.crds import crd_established
from zkop_testing.ensembles import ZKE, ensemble, install_ensemble_crd
from zkop_testing.operator import OperatorProcess
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import ApiException, KubeClient, resource_path
from zkop.zkconfig.spec import GROUP, PLURAL, VERSION

from .harness import Api, Harness
from .measure import api_summary, proc_cpu_seconds, proc_memory_mb, scrape, zk_client
from .params import JSON, NAMESPACE, cr_data, cr_manifest, cr_path
from .realplane import RealApi

log = logging.getLogger("bench")

#: Chroot of the flags' own ensemble (``--zk-hosts``), which holds no object in this scenario.
DEFAULT_CHROOT = "/ensembles-default"
ENSEMBLE_CRD = "zookeeperensembles.platform.example.com"


def parse_counts(text: str) -> tuple[int, ...]:
    """``"1,5,20"`` → ``(1, 5, 20)``, sorted and deduplicated.

    Raises:
        ValueError: not a comma-separated list of positive integers.
    """
    try:
        counts = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError as err:
        raise ValueError(f"--ensembles: not a list of integers: {text!r}") from err
    if not counts or counts[0] < 1:
        raise ValueError(f"--ensembles: want positive integers, got {text!r}")
    return tuple(counts)


def ensemble_name(j: int) -> str:
    """Name of the ``j``-th ZooKeeperEnsemble."""
    return f"bench-{j:03d}"


def proc_threads(pid: int) -> int:
    """Threads of ``pid`` (``/proc/<pid>/status`` ``Threads``)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise ValueError(f"no Threads line for pid {pid}")


def start_servers(count: int) -> list[ZooKeeperServer]:
    """``count`` ZooKeeper servers, started four at a time; all stopped again if one fails."""
    servers = [ZooKeeperServer() for _ in range(count)]
    try:
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda s: s.start(), servers))
    except BaseException:
        stop_servers(servers)
        raise
    return servers


def stop_servers(servers: Sequence[ZooKeeperServer]) -> None:
    """Stop every server (errors logged, not raised)."""
    for server in servers:
        try:
            server.stop()
        except Exception as err:
            log.warning("stopping ZooKeeper %s: %s", server.hosts, err)


def ensembles(h: Harness) -> JSON:
    """Scenario ``ensembles``: one :func:`one_size` per size of :attr:`Params.ensembles` on shared servers."""
    p = h.p
    started = time.monotonic()
    servers = start_servers(max(p.ensembles))
    log.info("%d ZooKeeper servers for the ensembles in %.1f s", len(servers), time.monotonic() - started)
    try:
        with zk_client(h.server) as zk:
            zk.ensure_path(DEFAULT_CHROOT)
        runs = [one_size(h, servers[:k]) for k in p.ensembles]
    finally:
        stop_servers(servers)
    return {
        "params": {"ensembles": list(p.ensembles), "objects_per_ensemble": p.objects_per_ensemble,
                   "workers_per_ensemble": p.workers, "idle_seconds": p.ensemble_idle_seconds,
                   "control_plane": p.control_plane, "sessions": "k ensembles + the flags' own (no objects)",
                   "source": "/proc/<pid>/status and /proc/<pid>/stat of zkop run"},
        "runs": runs,
        "per_ensemble": slopes(runs),
    }


def slopes(runs: Sequence[JSON]) -> JSON:
    """Threads, RSS and idle CPU per added ensemble between the smallest and the largest run, and the
    cold-sync CPU per object at each size (``{}`` with a single size)."""
    if len(runs) < 2:
        return {}
    first, last = runs[0], runs[-1]
    dk = last["ensembles"] - first["ensembles"]

    def slope(key: str, digits: int = 2) -> float:
        return float(round((float(last[key]) - float(first[key])) / dk, digits))

    return {
        "between": [first["ensembles"], last["ensembles"]],
        "threads_settled": slope("threads_settled"),
        "threads_max": slope("threads_max"),
        "rss_settled_mb": slope("rss_settled_mb"),
        "rss_peak_mb": slope("rss_peak_mb"),
        "idle_cpu_percent": slope("idle_cpu_percent", 3),
        "cold_sync_cpu_ms_per_object": {str(r["ensembles"]): r["cold_sync_cpu_ms_per_object"] for r in runs},
    }


def one_size(h: Harness, servers: Sequence[ZooKeeperServer]) -> JSON:
    """k = ``len(servers)`` ensembles of :attr:`Params.objects_per_ensemble` objects: one zkop's cold sync,
    settle and idle window (see the module's docstring); returns the figures of this size."""
    p = h.p
    k, per = len(servers), p.objects_per_ensemble
    total = k * per
    chroot = f"/size-{k}"
    for server in servers:
        with zk_client(server) as zk:
            zk.ensure_path(chroot)
    sub = h.child(replace(p, n=total), DEFAULT_CHROOT)
    api, kubeconfig = sub.new_api(f"ensembles-{k}", 0)
    sub.api, sub.kubeconfig = api, kubeconfig
    operator: OperatorProcess | None = None
    try:
        seeded = time.monotonic()
        _seed(api, servers, chroot, per)
        log.info("ensembles k=%d: %d ZooKeeperEnsembles and %d ZooKeeperConfigs created in %.1f s", k, k, total,
                 time.monotonic() - seeded)
        api.clear_request_log()
        operator = sub.new_operator(["--workers", str(p.workers), "--zookeeper-ensembles",
                                     "--ensemble-secret-namespace", NAMESPACE], f"ensembles-{k}")
        started = time.monotonic()
        operator.start(wait_ready=False)
        assert operator.proc is not None
        pid, log_path = operator.proc.pid, operator.log_path
        threads_max = 0
        deadline = started + sub.scaled_timeout(180, 0.05)
        while True:
            if operator.proc.poll() is not None:
                raise RuntimeError(f"zkop exited with {operator.proc.returncode}:\n{operator.log_tail()}")
            threads_max = max(threads_max, proc_threads(pid))
            if sub.states(api).get("Synced", 0) >= total:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"k={k}: {dict(sub.states(api))} after {time.monotonic() - started:.0f} s\n"
                                   f"{operator.log_tail(30)}")
            time.sleep(0.25)
        synced_at = time.monotonic()
        sync_cpu = proc_cpu_seconds(pid)
        memory_synced = proc_memory_mb(pid)
        sync_requests = api_summary(list(api.request_log), total)
        log.info("ensembles k=%d: %d objects Synced in %.1f s, %.1f CPU s", k, total, synced_at - started, sync_cpu)
        settled_at = _settle(sub, api, operator, quiet=max(2.0, p.quiet * 2))
        threads_max = max(threads_max, proc_threads(pid))
        settled_cpu = proc_cpu_seconds(pid)
        requests_before = len(api.request_log)
        idle_started = time.monotonic()
        time.sleep(p.ensemble_idle_seconds)
        idle_elapsed = time.monotonic() - idle_started
        idle_cpu = proc_cpu_seconds(pid) - settled_cpu
        idle_requests = len(api.request_log) - requests_before
        memory = proc_memory_mb(pid)
        threads_settled = proc_threads(pid)
        ready = _ensembles_ready(api, k)
        wrong = _wrong_znodes(servers, chroot, per)
    finally:
        if operator is not None:
            sub.stop_operator(operator)
        api.stop()
    result: JSON = {
        "ensembles": k, "objects": total, "sessions": k + 1,
        "cold_sync_seconds": round(synced_at - started, 2),
        "cold_sync_cpu_s": round(sync_cpu, 2),
        "cold_sync_cpu_ms_per_object": round(sync_cpu * 1000 / total, 3),
        "settle_seconds": round(settled_at - synced_at, 2),
        "threads_max": threads_max, "threads_settled": threads_settled,
        "rss_synced_mb": memory_synced.get("VmRSS"),
        "rss_peak_mb": memory.get("VmHWM"), "rss_settled_mb": memory.get("VmRSS"),
        "idle_seconds": round(idle_elapsed, 1),
        "idle_cpu_s": round(idle_cpu, 3),
        "idle_cpu_percent": round(idle_cpu / idle_elapsed * 100, 3),
        "idle_api_requests": idle_requests,
        "ensembles_ready": ready, "znodes_wrong": wrong,
        "cold_sync_api": sync_requests,
        "zkop_log": log_counts(log_path),
        "machine_load_1m": os.getloadavg()[0],
    }
    log.info("ensembles k=%d: %s", k, result)
    return result


#: Lines of zkop's log counted by :func:`log_counts`: what a run at scale showed going wrong (issue #25, item 8).
LOG_PATTERNS = {
    "tracebacks": "Traceback (most recent call last)",
    "conflicts_409": "ConflictException: (409)",
    "ensemble_not_usable_events": "EnsembleNotUsable:",
    "connection_pool_full": "Connection pool is full",
}


def log_counts(path: str | os.PathLike[str] | None) -> dict[str, int]:
    """How often each of :data:`LOG_PATTERNS` occurs in zkop's log at ``path`` (``{}`` without a log)."""
    if path is None or not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    return {name: text.count(pattern) for name, pattern in LOG_PATTERNS.items()}


def _seed(api: Api, servers: Sequence[ZooKeeperServer], chroot: str, per: int) -> None:
    """The ensemble CRD, k ZooKeeperEnsembles on ``servers`` (``chroot``) and ``per`` objects naming each, created
    by the bench (not counted); on the real plane waits until the bench's watch holds them all."""
    kube = api.kube if isinstance(api, RealApi) else KubeClient(api.api_client())
    try:
        install_ensemble_crd(kube)
        wait_for(lambda: crd_established(kube, ENSEMBLE_CRD), message="the ZooKeeperEnsemble CRD established",
                 ignore=(ApiException,))
        for j, server in enumerate(servers):
            body = ensemble(ensemble_name(j), server.hosts, chroot=chroot)
            wait_for(partial(_created, kube, body), message="ZooKeeperEnsemble created", ignore=(ApiException,))
    finally:
        if not isinstance(api, RealApi):
            kube.close()
    bodies = (_object(j * per + i, j) for j in range(len(servers)) for i in range(per))
    if isinstance(api, RealApi):
        api.store.create_many(api.store.resolve(GROUP, VERSION, PLURAL), NAMESPACE, bodies)
        total = len(servers) * per
        wait_for(lambda: sum(api.states().values()) == total, timeout=60 + 0.01 * total,
                 message=f"{total} ZooKeeperConfigs in the bench's watch")
        return
    rt = api.store.resolve(GROUP, VERSION, PLURAL)
    assert rt is not None
    for body in bodies:
        api.store.create(rt, NAMESPACE, body, {})


def _created(kube: KubeClient, body: JSON) -> bool:
    """POST ``body`` (a ZooKeeperEnsemble); True (a 404 right after the CRD is established raises, and is retried)."""
    kube.request("POST", resource_path(*ZKE), body=body)
    return True


def _object(i: int, j: int) -> JSON:
    """The ``i``-th ZooKeeperConfig, on the ``j``-th ensemble."""
    body = cr_manifest(i)
    body["spec"]["ensembleRef"] = {"name": ensemble_name(j)}
    return body


def _settle(h: Harness, api: Api, operator: OperatorProcess, *, quiet: float) -> float:
    """Wait until every work queue of zkop is empty with no worker active and its API requests stopped, for
    ``quiet`` seconds; returns when that began (monotonic). (Every object ``Synced`` is not enough: the echoes of
    the last status writes may still be queued, and their reconciles would land in the idle window.)"""
    last, since = len(api.request_log), time.monotonic()
    deadline = since + h.scaled_timeout(60, 0.01)
    while True:
        time.sleep(0.25)
        metrics = scrape(operator)
        busy = metrics.total("workqueue_depth") + metrics.total("controller_runtime_active_workers")
        now, count = time.monotonic(), len(api.request_log)
        if count != last or busy > 0:
            last, since = count, now
        elif now - since >= quiet:
            return since
        if operator.proc is not None and operator.proc.poll() is not None:
            raise RuntimeError(f"zkop exited with {operator.proc.returncode}:\n{operator.log_tail()}")
        if now > deadline:
            raise TimeoutError(f"zkop's API requests did not stop within {deadline - since:.0f} s")


def _ensembles_ready(api: Api, k: int) -> int:
    """How many of the k ZooKeeperEnsembles report ``Ready=True``."""
    kube = api.kube if isinstance(api, RealApi) else KubeClient(api.api_client())
    try:
        items = kube.request("GET", resource_path(*ZKE)).get("items") or []
    finally:
        if not isinstance(api, RealApi):
            kube.close()
    return sum(1 for item in items[:k] if any(c.get("type") == "Ready" and c.get("status") == "True"
                                              for c in (item.get("status") or {}).get("conditions") or []))


def _wrong_znodes(servers: Sequence[ZooKeeperServer], chroot: str, per: int) -> int:
    """How many objects' znodes do not hold their bytes, each read on its ensemble's server."""
    wrong = 0
    for j, server in enumerate(servers):
        with zk_client(server) as zk:
            reads = [(i, zk.get_async(f"{chroot}{cr_path(i)}")) for i in range(j * per, (j + 1) * per)]
            for i, result in reads:
                try:
                    data, _ = result.get(timeout=30)
                except NoNodeError:
                    data = None
                wrong += data != cr_data(i)
    return wrong


__all__ = ["ensembles", "parse_counts"]
