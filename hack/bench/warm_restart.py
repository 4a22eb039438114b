"""Scenario ``warm_restart``: everything in sync, zkop restarts: writes and time to ready."""

from __future__ import annotations

import time

from zkop_testing.operator import OperatorProcess

from .harness import Harness
from .measure import api_summary, per, quiet_heap
from .params import JSON, ZK_READ_OPS


def warm_restart(h: Harness, operator: OperatorProcess) -> JSON:
    """Scenario ``warm_restart``: start ``operator`` on an in-sync world, stop it when settled."""
    p = h.p
    h.main_api.clear_request_log()
    quiet_heap()
    before = h.snapshot()
    started = time.monotonic()
    operator.start(wait_ready=False)
    ready_at = h.wait_ready(operator, started)
    settled_at, metrics = h.wait_settled(operator, min_reconciles=p.n, timeout=h.timeout_for(0.1, p.n))
    after = h.snapshot(operator)
    records = h.main_api.request_log[before.log_len:after.log_len]
    h.stop_operator(operator)
    reads = sum(v for k, v in metrics.zookeeper_ops().items() if k in ZK_READ_OPS)
    states = h.states(h.main_api)
    result: JSON = {
        "params": {"n": p.n, "workers": p.workers},
        "ready_seconds": round(ready_at - started, 3),
        "settled_seconds": round(settled_at - started, 3),
        **api_summary(records, p.n),
        "zookeeper_reads_per_cr": per(reads, p.n),
        "zookeeper_ops_by_operation": {k: int(v) for k, v in sorted(metrics.zookeeper_ops().items())},
        "zookeeper_packets_per_cr": per(after.packets - before.packets, p.n),
        "zkop_cpu_seconds_since_start": round(after.op_cpu, 2),
        "all_synced": states.get("Synced", 0) == p.n,
    }
    h.txn_window(result, before, after, p.n)
    return result
