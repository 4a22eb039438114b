"""Scenario ``bridge``: M Services published, then churn (updates, deletes)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

from kazoo.exceptions import NoNodeError
from zkop_testing.operator import OperatorProcess

from zkop.kube.client import MERGE_PATCH

from . import REPO
from .harness import Harness
from .measure import api_summary, ops_delta, per_item, proc_cpu_seconds, proc_memory_mb, quiet_heap, zk_client
from .observer import ZnodeObserver, absent, has_port_81
from .params import (
    BRIDGE_CONTROLLER,
    BRIDGE_ROOT,
    JSON,
    MAIN_CHROOT,
    SERVICE_NAMESPACE,
    svc_name,
    svc_record_path,
)
from .txns import TxnWindow


def bridge_available() -> bool:
    """True if this checkout's ``zkop run`` has ``--service-bridge``."""
    out = subprocess.run([sys.executable, "-m", "zkop", "run", "--help"], capture_output=True, text=True,
                         timeout=60, cwd=REPO, check=False)
    return "--service-bridge" in out.stdout


def bridge(h: Harness) -> tuple[JSON, OperatorProcess | None]:
    """Scenario ``bridge``; returns the still-running operator for ``memory`` (``None`` if skipped)."""
    p = h.p
    params = {"m": p.m, "n_zookeeperconfigs_present": p.n, "workers": p.workers,
              "service_bridge_workers": p.workers, "churn_updates": p.m // 2, "churn_deletes": p.m // 4,
              "layout": "flat", "format": "json", "max_deletes": "0 (no limit)"}
    if not bridge_available():
        return {"params": params, "skipped": "service bridge not available"}, None
    # the double's Store or the real plane's HttpStore: the same calls
    store: Any = h.main_api.store
    svc_rt = store.resolve("", "v1", "services")
    assert svc_rt is not None
    h.create_services(h.main_api, p.m)
    operator = h.new_operator(["--workers", str(p.workers), "--service-bridge", "--service-bridge-workers",
                               str(p.workers), "--service-bridge-max-deletes", "0"], "bridge")
    h.main_api.clear_request_log()
    quiet_heap()
    root = f"{MAIN_CHROOT}{BRIDGE_ROOT}"
    prefix = f"{SERVICE_NAMESPACE}-"
    with zk_client(h.server) as zk:
        before = h.snapshot()
        started = time.monotonic()
        operator.start(wait_ready=False)
        ready_at = h.wait_ready(operator, started)
        deadline = started + h.timeout_for(0.2, p.m)
        while True:
            try:
                published = sum(1 for c in zk.get_children(root) if c.startswith(prefix))
            except NoNodeError:
                published = 0
            if published >= p.m:
                break
            if operator.proc is not None and operator.proc.poll() is not None:
                raise RuntimeError(f"zkop exited:\n{operator.log_tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{published} of {p.m} Services published\n{operator.log_tail(30)}")
            time.sleep(0.1 if p.m <= 5000 else 0.5)  # listing 20,000 children is not free for ZooKeeper
        published_at = time.monotonic()
        assert operator.proc is not None
        cpu_published = proc_cpu_seconds(operator.proc.pid)
        h.wait_settled(operator, min_reconciles=p.m, controller=BRIDGE_CONTROLLER,
                           timeout=h.timeout_for(0.1, p.m))
        h.wait_settled(operator, min_reconciles=p.n, timeout=h.timeout_for(0.1, p.n))
        after = h.snapshot(operator, BRIDGE_CONTROLLER)
        publish: JSON = {
            "seconds": round(published_at - started, 3),
            "reconciles": int(after.reconciles),
            "zkop_cpu_seconds_until_published": round(cpu_published, 2),
            **per_item(api_summary(h.main_api.request_log[before.log_len:after.log_len], p.m), "service"),
            "zookeeper_ops_by_operation": {k: int(v) for k, v in sorted(after.ops.items())},
        }
        h.txn_windows.append(TxnWindow(publish, before.zxid, after.zxid, p.m, MAIN_CHROOT, "service"))
        memory = proc_memory_mb(operator.proc.pid)
        # churn: updates (port 80 -> 81) and deletes, applied to the store as one burst
        updates = list(range(p.m // 2))
        deletes = list(range(p.m // 2, p.m // 2 + p.m // 4))
        observer = ZnodeObserver(zk)
        observer.watch([f"{MAIN_CHROOT}{svc_record_path(i)}" for i in updates + deletes])
        time.sleep(0.5)
        before = h.snapshot(operator, BRIDGE_CONTROLLER)
        for i in updates:
            observer.expect(f"{MAIN_CHROOT}{svc_record_path(i)}", has_port_81, label=i)
        for i in deletes:
            observer.expect(f"{MAIN_CHROOT}{svc_record_path(i)}", absent, label=i)
        churn_started = time.monotonic()
        patch = json.dumps({"spec": {"ports": [{"name": "http", "port": 81, "targetPort": 8080}]}}).encode()
        for i in updates:
            store.patch(svc_rt, SERVICE_NAMESPACE, svc_name(i), patch, MERGE_PATCH, None, {})
        for i in deletes:
            store.delete(svc_rt, SERVICE_NAMESPACE, svc_name(i), {}, {})
        applied = time.monotonic() - churn_started
        if not observer.wait(h.timeout_for(0.2, len(updates) + len(deletes))):
            raise TimeoutError(f"churn: {observer.pending()} changes not reflected in ZooKeeper\n"
                               f"{operator.log_tail(30)}")
        last = max((o.observed_mono for o in observer.observations), default=churn_started)
    churn_ops = len(updates) + len(deletes)
    churn_seconds = last - churn_started
    h.wait_settled(operator, min_reconciles=0, controller=BRIDGE_CONTROLLER, timeout=h.scaled_timeout(120, 0.01))
    after = h.snapshot(operator, BRIDGE_CONTROLLER)
    churn: JSON = {
        "seconds": round(churn_seconds, 3),
        "applied_to_api_seconds": round(applied, 3),
        "reconciles": int(after.reconciles - before.reconciles),
        **per_item(api_summary(h.main_api.request_log[before.log_len:after.log_len], churn_ops), "change"),
        "zookeeper_ops_by_operation": ops_delta(after.ops, before.ops),
    }
    h.txn_windows.append(TxnWindow(churn, before.zxid, after.zxid, churn_ops, MAIN_CHROOT, "change"))
    result: JSON = {
        "params": params,
        "ready_seconds": round(ready_at - started, 3),
        "publish_seconds": publish["seconds"],
        "published_per_s": round(p.m / (published_at - started), 1),
        "churn_seconds": churn["seconds"],
        "churn_ops_per_s": round(churn_ops / churn_seconds, 1) if churn_seconds > 0 else None,
        "publish": publish,
        "churn": churn,
    }
    h.results["_memory_with_bridge"] = memory
    return result, operator
