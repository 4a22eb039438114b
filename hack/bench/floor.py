"""Scenario ``floor``: a bare client doing what a new CR minimally costs (its own process)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from kazoo.client import KazooClient

from zkop.kube.client import MERGE_PATCH, KubeClient, load_api_client, resource_path
from zkop.zkconfig.plan import Outcome
from zkop.zkconfig.spec import FINALIZER, GROUP, PLURAL, VERSION
from zkop.zkconfig.status import desired_status
from zkop.zookeeper.handler import SelectHandler

from . import REPO
from .harness import Harness
from .measure import api_summary, per, proc_context_switches, proc_cpu_split, zk_client
from .params import FLOOR_CHROOT, JSON, NAMESPACE, cr_data, cr_name, cr_path
from .txns import TxnWindow

log = logging.getLogger("bench")


# --------------------------------------------------------------------------- the floor client (own process)


def floor_client(spec: JSON) -> JSON:
    """The floor: finalizer patch, znode create, status patch for each CR, from ``threads`` threads.

    Runs in its own process (``python -m hack.bench --floor-client SPEC``), like zkop does, so it does
    not share the bench's interpreter (and GIL) with the in-memory API server.
    """
    n = int(spec["n"])
    threads = int(spec["threads"])
    kube = KubeClient(load_api_client(str(spec["kubeconfig"]), pool_size=threads + 2), user_agent="zkop-bench-floor")
    zk = KazooClient(hosts=str(spec["zk_hosts"]), timeout=10.0, handler=SelectHandler())
    zk.start(timeout=15)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    def one(i: int) -> None:
        name, path, data = cr_name(i), cr_path(i), cr_data(i)
        kube.request("PATCH", resource_path(GROUP, VERSION, PLURAL, NAMESPACE, name),
                     body={"metadata": {"finalizers": [FINALIZER]}}, content_type=MERGE_PATCH)
        zk.create(path, data)
        outcome = Outcome("Synced", "Created", f"znode {path} created ({len(data)} bytes)", True)
        status = desired_status(None, outcome, 1, now, wrote=True)
        kube.request("PATCH", resource_path(GROUP, VERSION, PLURAL, NAMESPACE, name, "status"),
                     body={"status": status}, content_type=MERGE_PATCH)

    cpu0 = time.process_time()
    split0 = proc_cpu_split(os.getpid())
    switches0 = proc_context_switches(os.getpid())
    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        for future in [pool.submit(one, i) for i in range(n)]:
            future.result()
        seconds = time.perf_counter() - started
        cpu = time.process_time() - cpu0
        split = {k: round(v - split0[k], 2) for k, v in proc_cpu_split(os.getpid()).items()}
        switches = proc_context_switches(os.getpid()) - switches0  # while the pool's threads still exist
    zk.stop()
    zk.close()
    kube.close()
    return {"seconds": seconds, "cpu_seconds": cpu, "context_switches": switches, "cpu_split_s": split}


def floor(h: Harness) -> JSON:
    """Scenario ``floor``: :attr:`Params.floor_runs` runs, each with a fresh API server and chroot.

    The floor is a limit, and noise only ever slows a run down; the median of the runs is
    reported (``cr_per_s``) and every run beside it. Counts are the last run's.
    """
    p = h.p
    runs = [_floor_once(h, k) for k in range(p.floor_runs)]
    rates = [r["cr_per_s"] for r in runs]
    median = sorted(rates)[len(rates) // 2]
    result = next(r for r in runs if r["cr_per_s"] == median)
    result["params"]["runs"] = p.floor_runs
    result["cr_per_s_runs"] = rates
    # CPU per CR: the median of the runs too (the median-rate run's own figure stays in client_cpu_ms_per_cr).
    cpus = [r["client_cpu_ms_per_cr_exact"] for r in runs]
    result["client_cpu_ms_per_cr_runs"] = cpus
    result["client_cpu_ms_per_cr_median"] = sorted(cpus)[len(cpus) // 2]
    return result

def _floor_once(h: Harness, k: int) -> JSON:
    p = h.p
    chroot = f"{FLOOR_CHROOT}-{k}"
    api, kubeconfig = h.new_api(f"floor-{k}")
    try:
        with zk_client(h.server) as zk:
            zk.ensure_path(f"{chroot}/bench/app")
        spec_path = h.workdir / f"floor-spec-{k}.json"
        spec_path.write_text(json.dumps({"n": p.n, "threads": p.floor_threads, "kubeconfig": kubeconfig,
                                         "zk_hosts": f"{h.server.hosts}{chroot}"}))
        before = h.snapshot()
        log_before = len(api.request_log)
        proc = subprocess.run([sys.executable, "-m", "hack.bench", "--floor-client", str(spec_path)],
                              capture_output=True, text=True, timeout=h.timeout_for(0.2, p.n), check=False,
                              cwd=REPO)
        if proc.returncode != 0:
            raise RuntimeError(f"floor client failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        client = json.loads(proc.stdout)
        after = h.snapshot()
        records = api.request_log[log_before:]
        states = h.states(api)
        if states.get("Synced", 0) != p.n:
            raise RuntimeError(f"floor left states {dict(states)}")
    finally:
        api.stop()
    seconds = float(client["seconds"])
    result: JSON = {
        "params": {"n": p.n, "threads": p.floor_threads,
                   "per_cr": "finalizer merge patch + znode create (parents exist) + status merge patch"},
        "seconds": round(seconds, 3),
        "cr_per_s": round(p.n / seconds, 1),
        **api_summary(records, p.n),
        "zookeeper_packets_per_cr": per(after.packets - before.packets, p.n),
        "client_cpu_ms_per_cr": round(float(client["cpu_seconds"]) * 1000 / p.n, 2),
        "client_cpu_ms_per_cr_exact": round(float(client["cpu_seconds"]) * 1000 / p.n, 3),
        "client_cpu_split_s": client["cpu_split_s"],
        "client_context_switches_per_cr": per(float(client["context_switches"]), p.n, 1),
        "cpu_seconds": {"client": round(float(client["cpu_seconds"]), 2),
                        "bench_process_incl_apiserver": round(after.bench_cpu - before.bench_cpu, 2),
                        "zookeeper": round(after.zk_cpu - before.zk_cpu, 2)},
    }
    h.txn_windows.append(TxnWindow(result, before.zxid, after.zxid, p.n, chroot))
    log.info("floor run %d: %.1f CR/s", k + 1, p.n / seconds)
    return result
