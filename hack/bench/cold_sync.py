"""Scenario ``cold_sync``: N CRs exist, ``zkop run`` starts; time until all are Synced, ratio to the floor."""

from __future__ import annotations

import logging
import os
import subprocess
import time

from zkop_testing.operator import OperatorProcess

from .harness import Harness
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
from .params import CONTROLLER, JSON, MAIN_CHROOT
from .watches import watch_figures

log = logging.getLogger("bench")


def cold_sync(h: Harness, operator: OperatorProcess) -> JSON:
    """Scenario ``cold_sync``: starts ``operator`` (left running for the next scenarios)."""
    p = h.p
    api = h.main_api
    api.clear_request_log()
    before = h.snapshot()
    machine_before = machine_cpu()
    started = time.monotonic()
    operator.start(wait_ready=False)
    assert operator.proc is not None
    pid = operator.proc.pid
    ready_at: float | None = None
    synced_at: float | None = None
    profilers: list[subprocess.Popen[bytes]] = []
    deadline = started + h.timeout_for(0.2, p.n)
    last_log = started
    try:
        while synced_at is None:
            now = time.monotonic()
            if operator.proc.poll() is not None:
                raise RuntimeError(f"zkop exited with {operator.proc.returncode}:\n{operator.log_tail()}")
            if ready_at is None and operator.probe() == 200:
                ready_at = time.monotonic()
                profilers = h.start_profilers({"zkop": pid, "bench-apiserver": os.getpid()})
            states = h.states(api)
            if states.get("Synced", 0) == p.n:
                synced_at = time.monotonic()
                break
            if now - last_log > 5:
                log.info("cold_sync: %s", dict(states))
                last_log = now
            if now > deadline:
                raise TimeoutError(f"cold sync incomplete after {now - started:.0f} s: {dict(states)}\n"
                                   f"{operator.log_tail(30)}")
            # Poll often only near the end: the API server shares this process's interpreter.
            time.sleep(0.05 if ready_at is None else 0.1 if states.get("Synced", 0) >= 0.9 * p.n else 0.25)
        cpu_operator = proc_cpu_seconds(pid)
        machine_after = machine_cpu()
        cpu_split = proc_cpu_split(pid)
        switches = proc_context_switches(pid)
    finally:
        h.stop_profilers(profilers)
    assert synced_at is not None
    if ready_at is None:  # synced before /readyz was seen
        ready_at = synced_at
    settled_at, metrics = h.wait_settled(operator, min_reconciles=p.n, timeout=h.timeout_for(0.1, p.n))
    after = h.snapshot(operator)
    records = api.request_log[before.log_len:after.log_len]
    with zk_client(h.server) as zk:
        wrong = h.check_znodes(zk, MAIN_CHROOT)
    if wrong:
        raise RuntimeError(f"cold sync: {wrong} znodes do not hold their bytes")
    seconds = synced_at - started
    converge = synced_at - ready_at
    floor_rate = float(h.results["floor"]["cr_per_s"])
    reconciles = metrics.total("controller_runtime_reconcile_total", controller=CONTROLLER)
    result: JSON = {
        "params": {"n": p.n, "workers": p.workers, "sync_period_s": 600},
        "seconds": round(seconds, 3),
        "ready_seconds": round(ready_at - started, 3),
        "converge_seconds_after_ready": round(converge, 3),
        "settled_seconds": round(settled_at - started, 3),
        "cr_per_s": round(p.n / seconds, 1),
        "cr_per_s_after_ready": round(p.n / max(converge, 1e-6), 1),
        "ratio_to_floor": round(p.n / seconds / floor_rate, 3),
        "ratio_to_floor_after_ready": round(p.n / max(converge, 1e-6) / floor_rate, 3),
        "reconciles_per_cr": per(reconciles, p.n),
        **api_summary(records, p.n),
        "zookeeper_ops_per_cr": per(sum(metrics.zookeeper_ops().values()), p.n),
        "zookeeper_ops_by_operation": {k: int(v) for k, v in sorted(metrics.zookeeper_ops().items())},
        "zookeeper_packets_per_cr": per(after.packets - before.packets, p.n),
        "zkop_cpu_ms_per_cr": round(cpu_operator * 1000 / p.n, 2),
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
    h.txn_window(result, before, after, p.n)
    result.update(watch_figures(h.server, metrics.zookeeper_ops(), p.n))
    h.results["_memory_after_cold_sync"] = proc_memory_mb(pid)
    return result
