"""Scenario ``floor``: a bare client doing what a new CR minimally costs (its own process).

Two clients, each in its own process, each run :attr:`Params.floor_runs` times:

* **the floor** (``floor_client``): per object a finalizer merge PATCH, a znode ``create``, a status merge
  PATCH, from as many threads as zkop has workers. It reads nothing: it is told the names.
* **the controller floor** (the same with ``"informer": true``): what any client-go-style controller
  must add to that before it decides anything -- zkop's own :class:`~zkop.runtime.cache.informer.Informer`
  (paginated LIST, then a watch from its resourceVersion, the default transform, the cache) feeding a
  queue of keys; the threads take a key, read the object from the cache and make the floor's three
  calls; the run ends when the watch has delivered both echoes of every object (the finalizer's and
  the status's), as it does for a controller. No index, no reconcile, no ownership record, no Event.
  Its CPU per object over the floor's is the least any informer-based controller built on this client
  stack pays over the floor (``controller_floor_vs_floor`` in the ``cpu_per_object_vs_floor`` target).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from kazoo.client import KazooClient

from zkop.kube.client import MERGE_PATCH, KubeClient, load_api_client, resource_path
from zkop.runtime.cache.indexer import meta_namespace_key
from zkop.runtime.cache.informer import FuncHandler, Informer
from zkop.runtime.cache.reflector import ResourceRef
from zkop.zkconfig.plan import Outcome
from zkop.zkconfig.spec import FINALIZER, GROUP, PLURAL, VERSION
from zkop.zkconfig.status import desired_status
from zkop.zookeeper.handler import SelectHandler

from . import REPO
from .harness import Harness
from .measure import api_summary, per, proc_context_switches, proc_cpu_split, zk_client
from .params import FLOOR_CHROOT, JSON, NAMESPACE, cr_data, cr_name, cr_path
from .realplane import RealApi, cost_delta
from .txns import TxnWindow

log = logging.getLogger("bench")


# --------------------------------------------------------------------------- the floor client (own process)


def floor_client(spec: JSON) -> JSON:
    """The floor: finalizer patch, znode create, status patch for each CR, from ``threads`` threads.

    Runs in its own process (``python -m hack.bench --floor-client SPEC``), like zkop does, so it does
    not share the bench's interpreter (and GIL) with the in-memory API server. With ``"informer": true``
    in ``spec`` it is the controller floor (see the module docstring).

    Returns:
        ``{"seconds", "cpu_seconds", "context_switches", "cpu_split_s"}``: wall-clock and process CPU
        (all threads) of the loop only (the informer's LIST and watch included for the controller floor).
    """
    n = int(spec["n"])
    threads = int(spec["threads"])
    kube = KubeClient(load_api_client(str(spec["kubeconfig"]), pool_size=threads + 2), user_agent="zkop-bench-floor")
    zk = KazooClient(hosts=str(spec["zk_hosts"]), timeout=10.0, handler=SelectHandler())
    zk.start(timeout=15)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    def one(i: int) -> None:
        write(cr_name(i), cr_path(i), cr_data(i))

    def write(name: str, path: str, data: bytes) -> None:
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
    if spec.get("informer"):
        _controller_loop(kube, n, threads, write, float(spec.get("echo_timeout", 600)))
    else:
        with ThreadPoolExecutor(threads) as pool:
            for future in [pool.submit(one, i) for i in range(n)]:
                future.result()
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu0
    split = {k: round(v - split0[k], 2) for k, v in proc_cpu_split(os.getpid()).items()}
    switches = proc_context_switches(os.getpid()) - switches0
    zk.stop()
    zk.close()
    kube.close()
    return {"seconds": seconds, "cpu_seconds": cpu, "context_switches": switches, "cpu_split_s": split}


def _controller_loop(kube: KubeClient, n: int, threads: int, write: Callable[[str, str, bytes], None],
                     echo_timeout: float) -> None:
    """The controller floor's loop: an informer feeds keys to ``threads`` threads that :func:`write` each
    object read from the cache; returns once the watch has delivered ``2 n`` updates (both echoes of
    every write) and the threads have stopped.

    Raises:
        RuntimeError: the echoes did not all arrive within ``echo_timeout`` seconds.
    """
    keys: queue.Queue[str | None] = queue.Queue()
    echoes = [0]
    all_echoed = threading.Event()

    def on_update(old: JSON, new: JSON) -> bool:
        echoes[0] += 1  # the informer's thread only
        if echoes[0] >= 2 * n:
            all_echoed.set()
        return False  # an echo enqueues nothing

    informer = Informer(kube, ResourceRef(GROUP, VERSION, PLURAL), resync_period=0, name="floor")
    informer.add_event_handler(FuncHandler(lambda obj: keys.put(meta_namespace_key(obj)), update_filter=on_update))

    def worker() -> None:
        while (key := keys.get()) is not None:
            obj = informer.indexer.get(key)
            if obj is None:
                continue
            name = str(obj["metadata"]["name"])
            spec = obj["spec"]
            write(name, str(spec["path"]), base64.b64decode(spec["data"]))

    pool = [threading.Thread(target=worker, name=f"floor-worker-{i}", daemon=True) for i in range(threads)]
    for thread in pool:
        thread.start()
    informer.start()
    try:
        if not all_echoed.wait(echo_timeout):
            raise RuntimeError(f"controller floor: {echoes[0]} of {2 * n} echoes after {echo_timeout:.0f} s")
    finally:
        for _ in pool:
            keys.put(None)
        for thread in pool:
            thread.join(30)
        informer.stop()


def floor(h: Harness) -> JSON:
    """Scenario ``floor``: :attr:`Params.floor_runs` runs, each with a fresh API server and chroot.

    The floor is a limit, and noise only ever slows a run down; the median of the runs is
    reported (``cr_per_s``) and every run beside it. Counts are the last run's.
    """
    p = h.p
    runs = [floor_once(h, k) for k in range(p.floor_runs)]
    rates = [r["cr_per_s"] for r in runs]
    median = sorted(rates)[len(rates) // 2]
    result = next(r for r in runs if r["cr_per_s"] == median)
    result["params"]["runs"] = p.floor_runs
    result["cr_per_s_runs"] = rates
    # CPU per CR: the median of the runs too (the median-rate run's own figure stays in client_cpu_ms_per_cr).
    cpus = [r["client_cpu_ms_per_cr_exact"] for r in runs]
    result["client_cpu_ms_per_cr_runs"] = cpus
    result["client_cpu_ms_per_cr_median"] = sorted(cpus)[len(cpus) // 2]
    controller = [floor_once(h, k, informer=True) for k in range(p.floor_runs)]
    controller_cpus = [r["client_cpu_ms_per_cr_exact"] for r in controller]
    median_cpu = sorted(controller_cpus)[len(controller_cpus) // 2]
    result["controller_floor"] = {
        "per_cr": "LIST + watch into an informer cache (zkop's Informer, default transform), a queue of keys, "
                  "then the floor's three calls per object read from the cache; ends when both echoes of every "
                  "object arrived",
        "client_cpu_ms_per_cr_runs": controller_cpus,
        "client_cpu_ms_per_cr_median": median_cpu,
        "cr_per_s_runs": [r["cr_per_s"] for r in controller],
        "client_cpu_split_s": [r["client_cpu_split_s"] for r in controller],
        "client_context_switches_per_cr": [r["client_context_switches_per_cr"] for r in controller],
        "vs_floor": round(median_cpu / result["client_cpu_ms_per_cr_median"], 3),
    }
    if "cluster" in result:
        result["cluster_median"] = cluster_median(runs)
        result["controller_floor"]["cluster_median"] = cluster_median(controller)
        result["controller_floor"]["cluster_runs"] = [r["cluster"] for r in controller]
    return result


def cluster_median(runs: Sequence[JSON]) -> JSON:
    """Per figure of the runs' ``cluster`` (:func:`~.realplane.cost_delta`), the median over the runs."""
    keys = ("apiserver_cpu_ms_per_cr", "etcd_cpu_ms_per_cr", "etcd_puts_per_cr")
    out: JSON = {}
    for key in keys:
        values = sorted(float(r["cluster"][key]) for r in runs)
        out[key] = values[len(values) // 2]
    return out



def floor_once(h: Harness, k: int, *, informer: bool = False, command_prefix: Sequence[str] = (),
               timeout: float | None = None) -> JSON:
    """One run of the floor client (the controller floor with ``informer``) on a fresh API server and
    chroot (``/floor-<k>``, ``/floor-c<k>``); its figures.

    Args:
        command_prefix: run the client's process under this wrapper (``valgrind …``:
            :mod:`hack.bench.instructions`).
        timeout: seconds the client may take (default 60 s + 0.2 s per object), also the controller
            floor's wait for its echoes.
    """
    p = h.p
    timeout = h.timeout_for(0.2, p.n) if timeout is None else timeout
    label = f"controller-floor-{k}" if informer else f"floor-{k}"
    chroot = f"{FLOOR_CHROOT}-c{k}" if informer else f"{FLOOR_CHROOT}-{k}"
    api, kubeconfig = h.new_api(label)
    try:
        with zk_client(h.server) as zk:
            zk.ensure_path(f"{chroot}/bench/app")
        spec_path = h.workdir / f"{label}-spec.json"
        spec_path.write_text(json.dumps({"n": p.n, "threads": p.floor_threads, "kubeconfig": kubeconfig,
                                         "zk_hosts": f"{h.server.hosts}{chroot}", "informer": informer,
                                         "echo_timeout": timeout}))
        before = h.snapshot()
        cost0 = api.cost() if isinstance(api, RealApi) else None
        log_before = len(api.request_log)
        with h.apiserver_profile(api, f"{label}-{p.n}"):
            proc = subprocess.run([*command_prefix, sys.executable, "-m", "hack.bench", "--floor-client",
                                   str(spec_path)], capture_output=True, text=True, timeout=timeout, check=False,
                                  cwd=REPO)
        if proc.returncode != 0:
            raise RuntimeError(f"floor client failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        client = json.loads(proc.stdout)
        after = h.snapshot()
        cluster = cost_delta(cost0, api.cost(), p.n) if isinstance(api, RealApi) and cost0 is not None else None
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
    if cluster is not None:
        result["cluster"] = cluster
    if not informer:
        h.txn_windows.append(TxnWindow(result, before.zxid, after.zxid, p.n, chroot))
    log.info("%s run %d: %.1f CR/s, %.3f ms CPU per CR", "controller floor" if informer else "floor", k + 1,
             p.n / seconds, float(client["cpu_seconds"]) * 1000 / p.n)
    return result
