"""Scenario ``cold_sync``: N CRs exist, ``zkop run`` starts; time until all are Synced, ratio to the floor.

CPU per converged object is reported three ways (``zkop_cpu``), because zkop's whole-process
figure carries costs that do not grow with N (interpreter start, imports, the ZooKeeper session
and start-up probe, the first LIST request) and the floor's client measures only its loop:

* ``whole_process_ms_per_cr``: zkop's CPU from spawn until every object is Synced, ÷ N (the
  historical ``zkop_cpu_ms_per_cr``);
* ``marginal_ms_per_cr``: the same minus a cold sync of ``baseline.n`` = N/10 objects run just
  before in an environment of its own (API server and chroot), ÷ (N − N/10): every cost that
  grows with N (LIST pages and their decoding, watch events, reconciles, Events) and none that
  does not. This is the figure compared with the floor's;
* ``after_ready_ms_per_cr``: CPU from ``/readyz`` 200 (informers listed, ZooKeeper probed) until
  the last status, ÷ the objects synced in that window: the reconcile phase alone.
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
from collections.abc import Callable

from zkop_testing.operator import OperatorProcess

from .harness import Api, Harness
from .measure import (
    api_summary,
    machine_busy,
    machine_cpu,
    per,
    proc_context_switches,
    proc_cpu_seconds,
    proc_cpu_split,
    proc_memory_mb,
    server_latency_ms,
    zk_client,
)
from .params import CONTROLLER, JSON, throttle_args
from .realplane import RealApi, cost_delta
from .watches import watch_figures

log = logging.getLogger("bench")

#: Chroot of the small cold sync whose CPU is subtracted as fixed cost.
BASELINE_CHROOT = "/cpu-baseline"


def baseline_n(n: int) -> int:
    """Objects of the baseline cold sync for a run of ``n``: ``n // 10``, at least 2."""
    return max(2, n // 10)


def cold_sync_baseline(h: Harness) -> JSON:
    """zkop's whole-process CPU for a cold sync of :func:`baseline_n` objects, in an API server and chroot of its own.

    Started, probed and polled exactly like :func:`cold_sync` (so its fixed costs are the same),
    stopped once every object is Synced. Returns ``{"n", "seconds", "zkop_cpu_s"}``.
    """
    p = h.p
    n0 = baseline_n(p.n)
    api, kubeconfig = h.new_api("cpu-baseline", n0)
    with zk_client(h.server) as zk:
        zk.ensure_path(BASELINE_CHROOT)
    h.operator_count += 1
    operator = OperatorProcess(kubeconfig, f"{h.server.hosts}{BASELINE_CHROOT}",
                               [*throttle_args(p), "--workers", str(p.workers)],
                               log_path=str(h.workdir / f"zkop-{h.operator_count}-cpu-baseline.log"))
    h.operators.append(operator)
    try:
        started = time.monotonic()
        operator.start(wait_ready=False)
        assert operator.proc is not None
        with h.apiserver_profile(api, f"cold_sync-{n0}"):
            cpu, _, synced_at, _ = _until_synced(h, operator, api, n0, started)
    finally:
        h.stop_operator(operator)
        api.stop()
    return {"n": n0, "seconds": round(synced_at - started, 3), "zkop_cpu_s": round(cpu, 3)}


def _until_synced(h: Harness, operator: OperatorProcess, api: Api, n: int, started: float,
                  on_ready: Callable[[], None] | None = None) -> tuple[float, float | None, float, tuple[float, int]]:
    """Poll ``/readyz`` (every 50 ms), then the store, until all ``n`` objects are Synced.

    Returns:
        zkop's CPU seconds when synced, the monotonic time ``/readyz`` was first 200 (``None`` if
        never seen), the time all were synced, and (CPU seconds, objects Synced) when ready was seen.
    """
    assert operator.proc is not None
    pid = operator.proc.pid
    ready_at: float | None = None
    at_ready = (0.0, 0)
    deadline = started + h.timeout_for(0.2, n)
    last_log = started
    while True:
        now = time.monotonic()
        if operator.proc.poll() is not None:
            raise RuntimeError(f"zkop exited with {operator.proc.returncode}:\n{operator.log_tail()}")
        ready_cpu: float | None = None
        if ready_at is None and operator.probe() == 200:
            ready_at = time.monotonic()
            ready_cpu = proc_cpu_seconds(pid)
        states = h.states(api)
        if ready_cpu is not None:
            at_ready = (ready_cpu, states.get("Synced", 0))
            if on_ready is not None:
                on_ready()
        if states.get("Synced", 0) == n:
            return proc_cpu_seconds(pid), ready_at, time.monotonic(), at_ready
        if now - last_log > 5:
            log.info("cold_sync: %s", dict(states))
            last_log = now
        if now > deadline:
            raise TimeoutError(f"cold sync incomplete after {now - started:.0f} s: {dict(states)}\n"
                               f"{operator.log_tail(30)}")
        # Poll often only near the end: the API server shares this process's interpreter.
        time.sleep(0.05 if ready_at is None else 0.1 if states.get("Synced", 0) >= 0.9 * n else 0.25)


def cold_sync(h: Harness, operator: OperatorProcess) -> JSON:
    """Scenario ``cold_sync``: starts ``operator`` (left running for the next scenarios)."""
    p = h.p
    api = h.main_api
    api.clear_request_log()
    cost0 = api.cost() if isinstance(api, RealApi) else None
    before = h.snapshot()
    machine_before = machine_cpu()
    started = time.monotonic()
    operator.start(wait_ready=False)
    assert operator.proc is not None
    pid = operator.proc.pid
    profilers: list[subprocess.Popen[bytes]] = []

    def on_ready() -> None:
        profilers.extend(h.start_profilers({"zkop": pid, "bench-apiserver": os.getpid()}))

    try:
        with h.apiserver_profile(api, f"cold_sync-{p.n}"):
            cpu_operator, ready_at, synced_at, (cpu_at_ready, synced_at_ready) = _until_synced(
                h, operator, api, p.n, started, on_ready)
        machine_after = machine_cpu()
        cpu_split = proc_cpu_split(pid)
        switches = proc_context_switches(pid)
    finally:
        h.stop_profilers(profilers)
    if ready_at is None:  # synced before /readyz was seen
        ready_at, cpu_at_ready, synced_at_ready = synced_at, cpu_operator, p.n
    settled_at, metrics = h.wait_settled(operator, min_reconciles=p.n, timeout=h.timeout_for(0.1, p.n))
    after = h.snapshot(operator)
    cluster = cost_delta(cost0, api.cost(), p.n) if isinstance(api, RealApi) and cost0 is not None else None
    records = api.request_log[before.log_len:after.log_len]
    with zk_client(h.server) as zk:
        wrong = h.check_znodes(zk, h.chroot)
    if wrong:
        raise RuntimeError(f"cold sync: {wrong} znodes do not hold their bytes")
    seconds = synced_at - started
    converge = synced_at - ready_at
    floor_rate = h.results["floor"].get("cr_per_s")  # None: no floor run (--floor-runs 0)
    reconciles = metrics.total("controller_runtime_reconcile_total", controller=CONTROLLER)
    result: JSON = {
        "params": {"n": p.n, "workers": p.workers, "sync_period_s": 600},
        "seconds": round(seconds, 3),
        "ready_seconds": round(ready_at - started, 3),
        "converge_seconds_after_ready": round(converge, 3),
        "settled_seconds": round(settled_at - started, 3),
        "cr_per_s": round(p.n / seconds, 1),
        "cr_per_s_after_ready": round(p.n / max(converge, 1e-6), 1),
        "ratio_to_floor": None if floor_rate is None else round(p.n / seconds / float(floor_rate), 3),
        "ratio_to_floor_after_ready": (None if floor_rate is None
                                       else round(p.n / max(converge, 1e-6) / float(floor_rate), 3)),
        "reconciles_per_cr": per(reconciles, p.n),
        **api_summary(records, p.n),
        "zookeeper_ops_per_cr": per(sum(metrics.zookeeper_ops().values()), p.n),
        "zookeeper_ops_by_operation": {k: int(v) for k, v in sorted(metrics.zookeeper_ops().items())},
        "zookeeper_packets_per_cr": per(after.packets - before.packets, p.n),
        "zkop_cpu_ms_per_cr": round(cpu_operator * 1000 / p.n, 2),
        "zkop_cpu": _cpu_per_cr(h, cpu_operator, cpu_at_ready, synced_at_ready),
        "zkop_cpu_split_s": cpu_split,
        "zkop_context_switches_per_cr": per(switches, p.n, 1),
        "machine_cpu_busy_percent": machine_busy(machine_before, machine_after),
        "reconcile_mean_ms": metrics.mean_ms("controller_runtime_reconcile_time_seconds",
                                             controller=CONTROLLER)["mean_ms"],
        "zookeeper_mean_ms_by_operation": metrics.mean_ms("zkop_zookeeper_request_duration_seconds", "operation"),
        "zookeeper_server_mean_ms": server_latency_ms(before.zk_stats, after.zk_stats),
        # What an API request costs zkop (client-go's rest_client_request_duration_seconds), by HTTP verb.
        "api_mean_ms_by_verb": metrics.mean_ms("rest_client_request_duration_seconds", "verb"),
        "garbage_collection": h.gc_report(before, after),
        "cpu_seconds_until_synced": {"zkop": round(cpu_operator, 2),
                                     "bench_process_incl_apiserver": round(after.bench_cpu - before.bench_cpu, 2),
                                     "zookeeper": round(after.zk_cpu - before.zk_cpu, 2)},
    }
    if cluster is not None:
        # From spawn to settled (the Events zkop writes after the last status included).
        result["cluster"] = cluster
    h.txn_window(result, before, after, p.n)
    result.update(watch_figures(h.server, metrics.zookeeper_ops(), p.n))
    h.results["_memory_after_cold_sync"] = proc_memory_mb(pid)
    return result


def _cpu_per_cr(h: Harness, cpu: float, cpu_at_ready: float, synced_at_ready: int) -> JSON:
    """zkop's CPU per converged object three ways (see the module docstring), milliseconds."""
    n = h.p.n
    base = h.results.get("_cold_sync_baseline")
    marginal = None
    if base is not None and n > int(base["n"]):
        marginal = round((cpu - float(base["zkop_cpu_s"])) * 1000 / (n - int(base["n"])), 3)
    return {
        "whole_process_ms_per_cr": round(cpu * 1000 / n, 3),
        "marginal_ms_per_cr": marginal,
        "after_ready_ms_per_cr": round((cpu - cpu_at_ready) * 1000 / max(n - synced_at_ready, 1), 3),
        "until_ready_s": round(cpu_at_ready, 3),
        "synced_when_ready": synced_at_ready,
        "whole_process_s": round(cpu, 3),
        "baseline": base,
    }
