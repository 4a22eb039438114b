"""Scenario ``update_latency``: ``spec.data`` changes at a fixed rate, API write -> znode change."""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from zkop_testing.operator import OperatorProcess

from zkop.kube.client import MERGE_PATCH, KubeClient, resource_path
from zkop.zkconfig.spec import GROUP, PLURAL, VERSION

from .harness import Harness
from .measure import api_summary, latency_summary, ops_delta, per, per_item, quiet_heap, zk_client
from .observer import ZnodeObserver, equals
from .params import BENCH_AGENT, JSON, MAIN_CHROOT, NAMESPACE, cr_name, cr_path
from .txns import TxnWindow

log = logging.getLogger("bench")


def update_latency(h: Harness, operator: OperatorProcess) -> JSON:
    """Scenario ``update_latency`` (``operator`` running, everything in sync)."""
    p = h.p
    paths_count = max(1, min(100, p.n // 2))
    total = max(1, int(p.update_rate * p.update_seconds))
    kube = KubeClient(h.main_api.api_client(), user_agent=BENCH_AGENT)
    errors: list[str] = []
    patch_ms: list[float] = []
    quiet_heap()
    with zk_client(h.server) as zk:
        observer = ZnodeObserver(zk)
        observer.watch([f"{MAIN_CHROOT}{cr_path(i)}" for i in range(paths_count)])
        time.sleep(0.5)
        before = h.snapshot(operator)

        def send(k: int) -> None:
            i = k % paths_count
            value = f"update-{k}".encode()
            observer.expect(f"{MAIN_CHROOT}{cr_path(i)}", equals(value), label=k)
            sent = time.monotonic()
            try:
                kube.request("PATCH", resource_path(GROUP, VERSION, PLURAL, NAMESPACE, cr_name(i)),
                             body={"spec": {"data": base64.b64encode(value).decode()}}, content_type=MERGE_PATCH)
            except Exception as err:
                errors.append(repr(err))
            else:
                patch_ms.append((time.monotonic() - sent) * 1000)

        achieved = _paced(send, total, p.update_rate)
        completed = observer.wait(h.scaled_timeout(30, 0.001))
    kube.close()
    samples = [(o.observed_mono - o.sent_mono) * 1000 for o in observer.observations]
    server = [o.mtime_ms - o.sent_wall * 1000 for o in observer.observations if o.mtime_ms is not None]
    if errors:
        log.warning("update_latency: %d PATCH errors, first: %s", len(errors), errors[0])
    h.wait_settled(operator, min_reconciles=0, timeout=h.scaled_timeout(120, 0.01))
    after = h.snapshot(operator)
    # The bench's own PATCHes of spec.data are in the log too: leave them out.
    records = [r for r in h.main_api.request_log[before.log_len:after.log_len] if r.user_agent != BENCH_AGENT]
    result: JSON = {
        "params": {"rate_per_s": p.update_rate, "seconds": p.update_seconds, "changes": total,
                   "distinct_crs": paths_count, "workers": p.workers,
                   "measured": "PATCH spec.data sent -> ZooKeeper watch event of the new bytes"},
        "achieved_rate_per_s": round(achieved, 1),
        **latency_summary(samples),
        "server_side": {k: v for k, v in latency_summary(server).items() if k != "samples"},
        # The API server's share: the bench's PATCH sent -> its response (the write is in etcd by then).
        "api_patch_response": {k: v for k, v in latency_summary(patch_ms).items() if k != "samples"},
        "not_observed": total - len(observer.observations),
        "all_observed": completed,
        "patch_errors": len(errors),
        "reconciles_per_change": per(after.reconciles - before.reconciles, total),
        **per_item(api_summary(records, total), "change"),
        "zookeeper_ops_by_operation": ops_delta(after.ops, before.ops),
        "zkop_cpu_ms_per_change": round((after.op_cpu - before.op_cpu) * 1000 / total, 2),
        "garbage_collection": h.gc_report(before, after),
    }
    h.txn_windows.append(TxnWindow(result, before.zxid, after.zxid, total, MAIN_CHROOT, "change"))
    return result


def _paced(send: Callable[[int], None], total: int, rate: float) -> float:
    """Call ``send(k)`` for k in 0..total-1 at ``rate`` per second from a thread pool; return the achieved rate."""
    with ThreadPoolExecutor(8) as pool:
        started = time.monotonic()
        for k in range(total):
            delay = started + k / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            pool.submit(send, k)
        elapsed = time.monotonic() - started
    return total / elapsed if elapsed > 0 else float(total)
