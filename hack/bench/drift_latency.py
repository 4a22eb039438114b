"""Scenario ``drift_latency``: hand edits of managed znodes, edit -> restored."""

from __future__ import annotations

import time

from zkop_testing.operator import OperatorProcess

from .harness import Harness
from .measure import api_summary, latency_summary, ops_delta, per, per_item, quiet_heap, zk_client
from .observer import ZnodeObserver, equals
from .params import JSON, MAIN_CHROOT, cr_data, cr_path
from .txns import TxnWindow


def drift_latency(h: Harness, operator: OperatorProcess) -> JSON:
    """Scenario ``drift_latency`` (``operator`` running, everything in sync)."""
    p = h.p
    first = max(1, min(100, p.n // 2))
    indices = list(range(first, min(p.n, first + 100))) or [0]
    total = max(1, int(p.drift_rate * p.drift_seconds))
    base_mtimes: dict[int, int] = {}
    quiet_heap()
    with zk_client(h.server) as zk:
        observer = ZnodeObserver(zk)
        observer.watch([f"{MAIN_CHROOT}{cr_path(i)}" for i in indices])
        time.sleep(0.5)
        before = h.snapshot(operator)
        bench_session = int(zk.client_id[0])
        started = time.monotonic()
        for k in range(total):
            delay = started + k / p.drift_rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            i = indices[k % len(indices)]
            path = f"{MAIN_CHROOT}{cr_path(i)}"
            original = cr_data(i)
            observer.expect(path, equals(original), label=k, skip_fires=1)
            stat = zk.set(path, f"hand-edit-{k}".encode())
            base_mtimes[k] = int(stat.mtime)
        elapsed = time.monotonic() - started
        completed = observer.wait(h.scaled_timeout(30, 0.001))
    samples = [(o.observed_mono - o.sent_mono) * 1000 for o in observer.observations]
    server = [float(o.mtime_ms - base_mtimes[o.label]) for o in observer.observations
              if o.mtime_ms is not None and o.label in base_mtimes]
    h.wait_settled(operator, min_reconciles=0, timeout=h.scaled_timeout(120, 0.01))
    after = h.snapshot(operator)
    result: JSON = {
        "params": {"rate_per_s": p.drift_rate, "seconds": p.drift_seconds, "edits": total,
                   "distinct_znodes": len(indices), "workers": p.workers,
                   "measured": "hand edit (kazoo set) sent -> ZooKeeper watch event of the restored bytes"},
        "achieved_rate_per_s": round(total / elapsed if elapsed > 0 else float(total), 1),
        **latency_summary(samples),
        "server_side": {k: v for k, v in latency_summary(server).items() if k != "samples"},
        "not_restored": total - len(observer.observations),
        "all_restored": completed,
        "reconciles_per_edit": per(after.reconciles - before.reconciles, total),
        **per_item(api_summary(h.main_api.request_log[before.log_len:after.log_len], total), "edit"),
        "zookeeper_ops_by_operation": ops_delta(after.ops, before.ops),
        "zkop_cpu_ms_per_edit": round((after.op_cpu - before.op_cpu) * 1000 / total, 2),
        "garbage_collection": h.gc_report(before, after),
    }
    # The window's write transactions include the bench's own hand edits: they are taken out.
    h.txn_windows.append(TxnWindow(result, before.zxid, after.zxid, total, MAIN_CHROOT, "edit",
                                       bench_session))
    return result
