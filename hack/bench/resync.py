"""Scenario ``resync``: one full periodic resync of N in-sync CRs: writes and reads per CR."""

from __future__ import annotations

import logging
import math
import time

from .harness import Harness
from .measure import api_summary, ops_delta, per, scrape
from .params import CONTROLLER, JSON, ZK_READ_OPS

log = logging.getLogger("bench")


def resync(h: Harness, warm_settle_seconds: float) -> JSON:
    """Scenario ``resync``: one periodic resync window of an in-sync world."""
    p = h.p
    period = float(max(p.min_sync_period, math.ceil(3 * warm_settle_seconds + 1)))
    operator = h.new_operator(["--workers", str(p.workers), "--sync-period", str(period)], "resync")
    started = time.monotonic()
    operator.start(wait_ready=False)
    h.wait_ready(operator, started)
    h.wait_settled(operator, min_reconciles=p.n, timeout=h.timeout_for(0.1, p.n))
    before = h.snapshot(operator)
    clean = before.mono - started < 0.9 * period
    if not clean:
        log.warning("resync: start-up took %.1f s of a %.0f s period; the window may overlap it",
                    before.mono - started, period)
    idle = h.idle(operator, before, until=started + 0.85 * period)
    first_at: float | None = None
    deadline = started + 1.2 * period + h.timeout_for(0.1, p.n)
    while True:
        metrics = scrape(operator)
        total = metrics.total("controller_runtime_reconcile_total", controller=CONTROLLER)
        if first_at is None and total > before.reconciles:
            first_at = time.monotonic()
        if total >= before.reconciles + p.n:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"no full resync within {1.2 * period:.0f} s ({total - before.reconciles:.0f} "
                               f"of {p.n} reconciles)")
        time.sleep(0.05)
    done_at, metrics = h.wait_settled(operator, min_reconciles=before.reconciles + p.n,
                                          timeout=h.timeout_for(0.1, p.n))
    after = h.snapshot(operator)
    records = h.main_api.request_log[before.log_len:after.log_len]
    h.stop_operator(operator)
    ops = ops_delta(after.ops, before.ops)
    reads = sum(v for k, v in ops.items() if k in ZK_READ_OPS)
    result: JSON = {
        "params": {"n": p.n, "workers": p.workers, "sync_period_s": period,
                   "znode_cache_max_age_s": period * 0.5},
        "resync_seconds": round(done_at - (first_at or done_at), 3),
        "reconciles": int(after.reconciles - before.reconciles),
        **api_summary(records, p.n),
        "zookeeper_reads_per_cr": per(reads, p.n),
        "zookeeper_ops_by_operation": ops,
        "zookeeper_packets_per_cr": per(after.packets - before.packets, p.n),
        "zkop_cpu_seconds": round(after.op_cpu - before.op_cpu, 2),
        "idle_before_resync": idle,
        "window_clean": clean,
    }
    h.txn_window(result, before, after, p.n)
    return result
