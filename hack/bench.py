"""zkop's benchmark: convergence speed and idle quietness, measured against the API server's own floor.

Absolute times on shared machines are noise; ratios taken in one run on one machine are not.
This script starts a real ZooKeeper (:mod:`zkop_testing.zookeeper`) and the in-memory API
server (:mod:`zkop_testing.apiserver`, in this process), runs ``zkop run`` as its own
process (:mod:`zkop_testing.operator`), runs every scenario and prints one JSON object
(``--table``: a readable table instead)::

    .venv/bin/python hack/bench.py                    # N = 2,000 CRs, M = 1,000 Services (minutes)
    .venv/bin/python hack/bench.py --n 10000 --m 5000 # the scale run
    .venv/bin/python hack/bench.py --smoke            # N = 50, M = 20: CI's check that this still runs

Scenarios (each reports its parameters under ``params``; ``docs/performance.md`` explains them):

* ``floor`` — a bare client (its own process, 8 threads) doing exactly what a new CR
  minimally costs: finalizer merge patch, znode create (parents exist), status merge patch.
* ``cold_sync`` — N CRs exist, ``zkop run --workers 8`` starts: time until every status is
  ``Synced`` at its generation (and every znode holds its bytes); ratio to ``floor``; API
  requests, ZooKeeper operations and ZooKeeper write transactions per CR.
* ``update_latency`` — ``spec.data`` changes at a fixed rate: API write → znode change
  (seen by a ZooKeeper watch), p50/p99.
* ``drift_latency`` — hand edits of managed znodes: edit → restored, p50/p99.
* ``warm_restart`` — everything in sync, zkop restarts: API and ZooKeeper writes, time to ready.
* ``resync`` — one full periodic resync of N in-sync CRs: writes, ZooKeeper reads per CR.
* ``bridge`` — M Services → time until all are published, then churn (updates, deletes)
  throughput; ``{"skipped": ...}`` when ``zkop run --service-bridge`` does not exist.
* ``memory`` — RSS (``/proc/<pid>/status`` VmRSS) of ``zkop run`` with N CRs and M Services cached.

Counting: API requests come from the API server's request log; ZooKeeper operations from
zkop's own ``zkop_zookeeper_request_duration_seconds_count{operation}`` and ZooKeeper's
``mntr`` (``zk_packets_received``); ZooKeeper *writes* from the server's transaction log read
with ZooKeeper's ``TxnLogToolkit`` (:mod:`zkop_testing.txnlog`), counted between the zxids
that open and close each scenario. Scenarios use their own chroot (``/floor``, ``/main``) and
their own API server, so they do not see each other's objects.

Logs go to stderr. The exit code is 0 even when targets are missed (they are reported); it
is non-zero only when the benchmark itself breaks.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import functools
import gc
import json
import logging
import math
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # runnable from a checkout without the editable install
    sys.path.insert(0, str(REPO))

from zkop_testing.apiserver import ApiServer, RequestRecord  # noqa: E402
from zkop_testing.crds import install_crds  # noqa: E402
from zkop_testing.operator import OperatorProcess  # noqa: E402
from zkop_testing.txnlog import Txn, read_txn_log  # noqa: E402
from zkop_testing.zookeeper import ZooKeeperServer  # noqa: E402

from zkop.kube.client import MERGE_PATCH, KubeClient, load_api_client, resource_path  # noqa: E402
from zkop.zkconfig.plan import Outcome  # noqa: E402
from zkop.zkconfig.spec import FINALIZER, GROUP, PLURAL, VERSION  # noqa: E402
from zkop.zkconfig.status import desired_status  # noqa: E402
from zkop.zookeeper.handler import SelectHandler  # noqa: E402

log = logging.getLogger("bench")

JSON = dict[str, Any]
NAMESPACE = "default"
SERVICE_NAMESPACE = "bench"
BRIDGE_ROOT = "/kubernetes/services"
REGISTRY_ROOT = "/zkop/owners"
PROBE_ROOT = "/zkop/probe"
FLOOR_CHROOT = "/floor"
MAIN_CHROOT = "/main"
API_WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
ZK_READ_OPS = ("get", "exists", "get_acls", "get_children")
SESSION_TXNS = frozenset({"createSession", "closeSession", "createContainer", "deleteContainer"})
#: Transaction-log entries that change no znode: sessions, failed writes, a multi's ``check`` preconditions.
NOT_WRITES = SESSION_TXNS | {"error", "check"}
CONTROLLER = "zookeeperconfig"
#: User-Agent of the bench's own API requests (left out of zkop's counts).
BENCH_AGENT = "zkop-bench"
BRIDGE_CONTROLLER = "service-bridge"


# --------------------------------------------------------------------------- parameters


@dataclass(frozen=True)
class Params:
    """What one benchmark run is asked to do.

    Attributes:
        n: ZooKeeperConfig objects.
        m: Services (bridge and memory scenarios).
        workers: ``zkop run --workers`` (and ``--service-bridge-workers``).
        floor_threads: client threads of the floor.
        floor_runs: floor runs; the median is the floor.
        update_rate: ``spec.data`` changes per second in ``update_latency``.
        update_seconds: how long the update stream runs.
        drift_rate: hand edits per second in ``drift_latency``.
        drift_seconds: how long hand edits go on.
        min_sync_period: smallest ``--sync-period`` used for the resync window, seconds.
        quiet: seconds without new reconciles or API requests that count as "settled".
        smoke: the CI mode (small N and M, short streams).
    """

    n: int = 2000
    m: int = 1000
    workers: int = 8
    floor_threads: int = 8
    floor_runs: int = 3
    update_rate: float = 50.0
    update_seconds: float = 10.0
    drift_rate: float = 10.0
    drift_seconds: float = 10.0
    min_sync_period: float = 5.0
    quiet: float = 1.0
    smoke: bool = False


# --------------------------------------------------------------------------- naming of test objects


def cr_name(i: int) -> str:
    """Name of the ``i``-th ZooKeeperConfig."""
    return f"cr-{i:06d}"


def cr_path(i: int) -> str:
    """``spec.path`` of the ``i``-th ZooKeeperConfig (inside the scenario's chroot)."""
    return f"/bench/app/{cr_name(i)}"


def cr_data(i: int) -> bytes:
    """Initial bytes of the ``i``-th ZooKeeperConfig."""
    return f"value-{i}".encode()


def cr_manifest(i: int) -> JSON:
    """The ``i``-th ZooKeeperConfig."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ZooKeeperConfig",
        "metadata": {"name": cr_name(i), "namespace": NAMESPACE},
        "spec": {"path": cr_path(i), "data": base64.b64encode(cr_data(i)).decode()},
    }


def svc_name(i: int) -> str:
    """Name of the ``i``-th Service."""
    return f"svc-{i:06d}"


def svc_manifest(i: int) -> JSON:
    """The ``i``-th Service (ClusterIP, one port)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": svc_name(i), "namespace": SERVICE_NAMESPACE, "labels": {"app": svc_name(i)}},
        "spec": {"selector": {"app": svc_name(i)}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
    }


def svc_record_path(i: int) -> str:
    """Where the bridge publishes the ``i``-th Service (flat layout, default root), inside the chroot."""
    return f"{BRIDGE_ROOT}/{SERVICE_NAMESPACE}-{svc_name(i)}"


# --------------------------------------------------------------------------- small measurement helpers


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100) with linear interpolation; ``None`` for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def rounded(value: float | None, digits: int = 3) -> float | None:
    """``round`` that lets ``None`` through."""
    return None if value is None else round(value, digits)


def latency_summary(samples_ms: Sequence[float]) -> JSON:
    """p50/p90/p99/max (milliseconds) of a list of latencies."""
    return {
        "samples": len(samples_ms),
        "p50_ms": rounded(percentile(samples_ms, 50), 1),
        "p90_ms": rounded(percentile(samples_ms, 90), 1),
        "p99_ms": rounded(percentile(samples_ms, 99), 1),
        "max_ms": rounded(max(samples_ms) if samples_ms else None, 1),
    }


def proc_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all threads) from ``/proc/<pid>/stat``."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_cpu_split(pid: int) -> dict[str, float]:
    """User and system CPU seconds of ``pid``."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return {"user": round(int(fields[11]) / tick, 2), "system": round(int(fields[12]) / tick, 2)}


def machine_cpu() -> list[int]:
    """The ``cpu`` line of ``/proc/stat`` (jiffies: user nice system idle iowait irq softirq steal …)."""
    with open("/proc/stat", encoding="ascii") as f:
        return [int(x) for x in f.readline().split()[1:]]


def machine_busy(before: Sequence[int], after: Sequence[int]) -> JSON:
    """Share of all CPUs busy between two :func:`machine_cpu` readings, and the share stolen by the hypervisor."""
    delta = [a - b for a, b in zip(after, before, strict=False)]
    total = sum(delta[:8]) or 1
    idle = delta[3] + delta[4]
    return {"busy": round((total - idle) * 100 / total, 1), "steal": round(delta[7] * 100 / total, 1)}


def proc_context_switches(pid: int) -> int:
    """Voluntary + involuntary context switches of every thread of ``pid`` (live threads only)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError), open(task / "status", encoding="ascii") as f:
            for line in f:
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    total += int(line.split()[1])
    return total


class GcPauses:
    """Durations of this process's garbage collections (``gc.callbacks``), for the API server's pauses."""

    def __init__(self) -> None:
        self.pauses: list[tuple[int, float]] = []
        self._started = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses.append((int(info.get("generation", 0)), time.perf_counter() - self._started))

    def summary(self, since: int) -> JSON:
        """Collections since index ``since`` of :attr:`pauses`: count, total and longest pause."""
        window = self.pauses[since:]
        return {"collections": len(window), "gen2": sum(1 for g, _ in window if g == 2),
                "total_ms": round(sum(d for _, d in window) * 1000, 1),
                "max_ms": round(max((d for _, d in window), default=0.0) * 1000, 1)}


def quiet_heap() -> None:
    """Collect, then freeze this process's heap (``gc.freeze``).

    The in-memory API server lives in this process. Its store, watch history and request log
    hold hundreds of thousands of objects, and a full collection of them stops it for 100 ms
    and more at N = 10,000 — a pause kube-apiserver (Go, concurrent GC) does not have and
    that would show up as zkop's latency. Freezing before each scenario keeps collections
    to what the scenario itself allocates; the pauses left are reported
    (``garbage_collection.apiserver_process``).
    """
    gc.collect()
    gc.freeze()


def proc_memory_mb(pid: int) -> dict[str, float]:
    """``VmRSS`` and ``VmHWM`` (peak RSS) of ``pid`` in MiB."""
    result: dict[str, float] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                result[key] = round(int(value.split()[0]) / 1024.0, 1)
    return result


class Metrics:
    """One scrape of a Prometheus text exposition, queried by sample name and labels."""

    def __init__(self, text: str) -> None:
        self.samples: list[tuple[str, dict[str, str], float]] = [
            (s.name, dict(s.labels), float(s.value))
            for family in text_string_to_metric_families(text) for s in family.samples
        ]

    def total(self, sample: str, /, **labels: str) -> float:
        """Sum of the samples called ``sample`` whose labels include ``labels``."""
        return sum(v for n, ls, v in self.samples if n == sample and all(ls.get(k) == x for k, x in labels.items()))

    def by_label(self, sample: str, label: str, /, **labels: str) -> dict[str, float]:
        """Samples called ``sample`` (matching ``labels``) summed per value of ``label``."""
        out: dict[str, float] = {}
        for n, ls, v in self.samples:
            if n == sample and label in ls and all(ls.get(k) == x for k, x in labels.items()):
                out[ls[label]] = out.get(ls[label], 0.0) + v
        return out

    def mean_ms(self, histogram: str, label: str | None = None, **labels: str) -> JSON:
        """Mean of a histogram in milliseconds (``_sum / _count``), overall or per value of ``label``."""
        if label is None:
            count = self.total(f"{histogram}_count", **labels)
            return {"mean_ms": round(self.total(f"{histogram}_sum", **labels) / count * 1000, 2) if count else None}
        sums = self.by_label(f"{histogram}_sum", label, **labels)
        counts = self.by_label(f"{histogram}_count", label, **labels)
        return {k: round(sums.get(k, 0.0) / c * 1000, 2) for k, c in sorted(counts.items()) if c}

    def zookeeper_ops(self) -> dict[str, float]:
        """zkop's ZooKeeper requests by operation (``get``, ``exists``, ``create``, ``set``…)."""
        return self.by_label("zkop_zookeeper_request_duration_seconds_count", "operation")


def scrape(operator: OperatorProcess) -> Metrics:
    """Scrape ``/metrics`` of a running operator."""
    return Metrics(operator.metrics())


def ops_delta(after: Mapping[str, float], before: Mapping[str, float]) -> dict[str, int]:
    """Per-key difference of two operation counters, zero entries left out."""
    keys = sorted(set(after) | set(before))
    return {k: int(after.get(k, 0) - before.get(k, 0)) for k in keys if after.get(k, 0) - before.get(k, 0)}


def per(count: float, n: int, digits: int = 3) -> float:
    """``count / n`` rounded."""
    return round(count / max(n, 1), digits)


def request_kind(record: RequestRecord) -> str:
    """``"patch zookeeperconfigs/status"``-style label of one API request."""
    resource = record.resource + (f"/{record.subresource}" if record.subresource else "")
    return f"{record.verb} {resource}"


def api_summary(records: Sequence[RequestRecord], n: int) -> JSON:
    """API requests of a window: totals, writes, per CR and by kind."""
    kinds = Counter(request_kind(r) for r in records)
    writes = [r for r in records if r.verb in API_WRITE_VERBS]
    on_crs = [r for r in writes if r.resource == PLURAL]
    return {
        "api_requests": len(records),
        "api_requests_per_cr": per(len(records), n),
        "api_writes": len(writes),
        "api_writes_per_cr": per(len(writes), n),
        "api_writes_on_zookeeperconfigs_per_cr": per(len(on_crs), n),
        "api_status_writes": sum(1 for r in writes if r.resource == PLURAL and r.subresource == "status"),
        "api_requests_by_kind": dict(sorted(kinds.items())),
    }


# --------------------------------------------------------------------------- ZooKeeper server probes


def server_zxid(server: ZooKeeperServer) -> int:
    """The server's last zxid (``srvr``)."""
    match = re.search(r"^Zxid: (0x[0-9a-f]+)", server.srvr(), re.MULTILINE)
    if match is None:
        raise RuntimeError("srvr reported no Zxid")
    return int(match.group(1), 16)


_LATENCY_KEYS = ("zk_sum_readlatency", "zk_cnt_readlatency", "zk_sum_updatelatency", "zk_cnt_updatelatency")


def server_stats(server: ZooKeeperServer) -> dict[str, float]:
    """``zk_packets_received`` and the read/update latency sums and counts (ms) from one ``mntr``."""
    mntr = server.mntr()
    return {k: float(mntr.get(k, 0)) for k in ("zk_packets_received", *_LATENCY_KEYS)}


def server_latency_ms(before: Mapping[str, float], after: Mapping[str, float]) -> JSON:
    """ZooKeeper's own mean request latency (ms) between two :func:`server_stats` readings."""
    out: JSON = {}
    for kind in ("read", "update"):
        count = after[f"zk_cnt_{kind}latency"] - before[f"zk_cnt_{kind}latency"]
        total = after[f"zk_sum_{kind}latency"] - before[f"zk_sum_{kind}latency"]
        out[kind] = round(total / count, 2) if count else None
    return out


def server_packets(server: ZooKeeperServer) -> int:
    """``zk_packets_received`` from ``mntr``: every request packet, reads, writes and pings."""
    return int(server.mntr()["zk_packets_received"])


@contextlib.contextmanager
def zk_client(server: ZooKeeperServer) -> Iterator[KazooClient]:
    """A connected, unchrooted kazoo client on ``server`` for the bench's own use."""
    client = KazooClient(hosts=server.hosts, timeout=10.0, handler=SelectHandler())
    client.start(timeout=15)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@dataclass
class Observation:
    """One expectation met: when the change was made and when ZooKeeper showed it."""

    path: str
    label: int
    sent_mono: float
    sent_wall: float
    observed_mono: float
    mtime_ms: int | None


@dataclass
class _Expectation:
    predicate: Callable[[bytes | None], bool]
    label: int
    sent_mono: float
    sent_wall: float
    skip_fires: int
    fired_at: float | None = None


class ZnodeObserver:
    """Watches znodes and timestamps when each reaches an expected state.

    Every watched path always has a ZooKeeper watch armed (a data watch, or an exists
    watch while absent); each event re-reads the node asynchronously and re-arms the
    watch. :meth:`expect` registers a predicate on the node's bytes (``None``: absent). The
    observed time is the arrival of the watch event that preceded the satisfying read (or
    that read's completion when no counted event preceded it), so the bench's own read
    round trip is not part of the latency.

    Callbacks run on kazoo's event thread and never block.
    """

    def __init__(self, client: KazooClient) -> None:
        self.client = client
        self._lock = threading.Condition()
        self._pending: dict[str, _Expectation] = {}
        self.observations: list[Observation] = []
        self.replaced = 0
        self.errors = 0

    def watch(self, paths: Sequence[str]) -> None:
        """Arm watches on ``paths`` (call before making changes)."""
        for path in paths:
            self._read(path)

    def expect(self, path: str, predicate: Callable[[bytes | None], bool], *, label: int,
               skip_fires: int = 0) -> None:
        """Expect ``path`` to satisfy ``predicate`` after a change made right after this call.

        Args:
            path: a watched path.
            predicate: called with the node's bytes (``None`` when absent).
            label: carried into the :class:`Observation`.
            skip_fires: watch events to ignore for timing (the bench's own edit of the node).
        """
        with self._lock:
            if path in self._pending:
                self.replaced += 1
            self._pending[path] = _Expectation(predicate, label, time.monotonic(), time.time(), skip_fires)

    def pending(self) -> int:
        """Expectations not met yet."""
        with self._lock:
            return len(self._pending)

    def wait(self, timeout: float) -> bool:
        """Wait until every expectation is met; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(min(left, 0.2))
        return True

    def _read(self, path: str) -> None:
        issued = time.monotonic()
        result = self.client.get_async(path, watch=self._on_event)
        result.rawlink(functools.partial(self._on_read, path, issued))

    def _on_event(self, event: Any) -> None:
        now = time.monotonic()
        path = str(event.path)
        with self._lock:
            exp = self._pending.get(path)
            if exp is not None:
                if exp.skip_fires > 0:
                    exp.skip_fires -= 1
                elif now >= exp.sent_mono:
                    exp.fired_at = now
        self._read(path)

    def _on_exists(self, path: str, result: Any) -> None:
        try:
            stat = result.get(block=False)
        except Exception:
            self.errors += 1
            return
        if stat is not None:  # created between our get and exists: read it
            self._read(path)

    def _on_read(self, path: str, issued: float, result: Any) -> None:
        now = time.monotonic()
        data: bytes | None
        mtime: int | None
        try:
            data, stat = result.get(block=False)
            mtime = int(stat.mtime)
        except NoNodeError:
            data, mtime = None, None
            self.client.exists_async(path, watch=self._on_event).rawlink(functools.partial(self._on_exists, path))
        except Exception:
            self.errors += 1
            return
        reread = False
        with self._lock:
            exp = self._pending.get(path)
            if exp is None or not exp.predicate(data):
                return
            if issued < exp.sent_mono:
                # A read sent before the change was announced: its answer may predate the change. Read again.
                reread = True
            else:
                del self._pending[path]
                observed = exp.fired_at if exp.fired_at is not None else now
                self.observations.append(Observation(path, exp.label, exp.sent_mono, exp.sent_wall, observed, mtime))
                self._lock.notify_all()
        if reread:
            self._read(path)


# --------------------------------------------------------------------------- the floor client (own process)


def floor_client(spec: JSON) -> JSON:
    """The floor: finalizer patch, znode create, status patch for each CR, from ``threads`` threads.

    Runs in its own process (``hack/bench.py --floor-client SPEC``), like zkop does, so it does
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


# --------------------------------------------------------------------------- the benchmark


def git_revision() -> JSON:
    """The checkout being measured: commit and whether ``zkop/`` has uncommitted changes."""
    def git(*args: str) -> str:
        try:
            out = subprocess.run(["git", *args], capture_output=True, text=True, timeout=10, cwd=REPO, check=False)
        except OSError:
            return ""
        return out.stdout.strip() if out.returncode == 0 else ""

    commit = git("rev-parse", "--short=12", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=all", "--", "zkop")
    return {"commit": commit, "zkop_dirty": bool(dirty)}


def bridge_available() -> bool:
    """True if this checkout's ``zkop run`` has ``--service-bridge``."""
    out = subprocess.run([sys.executable, "-m", "zkop", "run", "--help"], capture_output=True, text=True,
                         timeout=60, cwd=REPO, check=False)
    return "--service-bridge" in out.stdout


@dataclass
class _TxnWindow:
    result: JSON
    zxid_from: int
    zxid_to: int
    n: int
    chroot: str
    item: str = "cr"
    bench_session: int | None = None


@dataclass
class _Snapshot:
    mono: float
    zxid: int
    packets: int
    log_len: int
    zk_cpu: float
    bench_cpu: float
    ops: dict[str, float] = field(default_factory=dict)
    reconciles: float = 0.0
    op_cpu: float = 0.0
    gc_index: int = 0
    op_gc: dict[str, float] = field(default_factory=dict)
    zk_stats: dict[str, float] = field(default_factory=dict)


class Bench:
    """Runs every scenario against one ZooKeeper server; see the module docstring.

    Args:
        params: what to run.
        workdir: operator logs, kubeconfigs, scratch files.
    """

    def __init__(self, params: Params, workdir: Path, *, py_spy: Path | None = None) -> None:
        self.p = params
        self.workdir = workdir
        self.py_spy = py_spy
        self.zk: ZooKeeperServer | None = None
        self.api: ApiServer | None = None
        self.kubeconfig = ""
        self.txn_windows: list[_TxnWindow] = []
        self.results: dict[str, JSON] = {}
        self.operators: list[OperatorProcess] = []
        self._operator_count = 0
        self.git: JSON = {}
        self.gc = GcPauses()

    # --- environment ------------------------------------------------------------------------

    @property
    def server(self) -> ZooKeeperServer:
        """The ZooKeeper server (after :meth:`run` started it)."""
        assert self.zk is not None
        return self.zk

    @property
    def main_api(self) -> ApiServer:
        """The API server of every scenario but the floor."""
        assert self.api is not None
        return self.api

    def _new_api(self, name: str) -> tuple[ApiServer, str]:
        api = ApiServer().start()
        kubeconfig = str(api.write_kubeconfig(self.workdir / f"kubeconfig-{name}"))
        client = KubeClient(api.api_client())
        try:
            install_crds(client)
        finally:
            client.close()
        started = time.monotonic()
        rt = api.store.resolve(GROUP, VERSION, PLURAL)
        assert rt is not None
        for i in range(self.p.n):
            api.store.create(rt, NAMESPACE, cr_manifest(i), {})
        log.info("%s API server %s: %d ZooKeeperConfigs created in %.1f s", name, api.url, self.p.n,
                 time.monotonic() - started)
        api.clear_request_log()
        quiet_heap()
        return api, kubeconfig

    def _states(self, api: ApiServer) -> Counter[str]:
        """``status.state`` of every ZooKeeperConfig, read from the store (no HTTP, not in the request log).

        An object counts as ``Synced`` only when its status is at its current generation.
        """
        rt = api.store.resolve(GROUP, VERSION, PLURAL)
        assert rt is not None
        states: Counter[str] = Counter()
        for obj in api.store.iter_objects(rt):
            status = obj.get("status") or {}
            state = str(status.get("state") or "none")
            if state == "Synced" and status.get("observedGeneration") != obj["metadata"].get("generation"):
                state = "Synced-stale"
            states[state] += 1
        return states

    def _operator(self, args: Sequence[str], label: str) -> OperatorProcess:
        self._operator_count += 1
        log_path = self.workdir / f"zkop-{self._operator_count}-{label}.log"
        operator = OperatorProcess(self.kubeconfig, f"{self.server.hosts}{MAIN_CHROOT}", list(args),
                                   log_path=str(log_path))
        self.operators.append(operator)
        return operator

    def _stop_operator(self, operator: OperatorProcess) -> None:
        code = operator.stop()
        if code not in (0, None):
            log.warning("zkop exited with %s; log %s", code, operator.log_path)

    def _snapshot(self, operator: OperatorProcess | None = None, controller: str = CONTROLLER) -> _Snapshot:
        stats = server_stats(self.server)
        snap = _Snapshot(
            mono=time.monotonic(), zxid=server_zxid(self.server), packets=int(stats["zk_packets_received"]),
            zk_stats=stats,
            log_len=len(self.main_api.request_log) if self.api is not None else 0,
            zk_cpu=proc_cpu_seconds(self.server.pid or 0), bench_cpu=time.process_time(),
            gc_index=len(self.gc.pauses),
        )
        if operator is not None:
            metrics = scrape(operator)
            snap.ops = metrics.zookeeper_ops()
            snap.reconciles = metrics.total("controller_runtime_reconcile_total", controller=controller)
            snap.op_gc = metrics.by_label("python_gc_collections_total", "generation")
            if operator.proc is not None:
                snap.op_cpu = proc_cpu_seconds(operator.proc.pid)
        return snap

    def _wait_settled(self, operator: OperatorProcess, *, min_reconciles: float, timeout: float,
                      controller: str = CONTROLLER, api: ApiServer | None = None) -> tuple[float, Metrics]:
        """Wait until ``controller`` has done ``min_reconciles`` and nothing moved for :attr:`Params.quiet` s.

        "Nothing moved": reconcile count and API request log length unchanged, work queue
        empty, no active worker. (ZooKeeper's packet count is no use here: every four-letter
        word the bench sends counts as a packet, and sessions ping.)

        Returns:
            The monotonic time at which it became quiet, and the last scrape.

        Raises:
            TimeoutError: not settled within ``timeout`` seconds.
            RuntimeError: the operator exited.
        """
        api = api or self.main_api
        deadline = time.monotonic() + timeout
        last: tuple[float, int] | None = None
        since = time.monotonic()
        while True:
            if operator.proc is not None and operator.proc.poll() is not None:
                raise RuntimeError(f"zkop exited with {operator.proc.returncode}:\n{operator.log_tail()}")
            metrics = scrape(operator)
            now = time.monotonic()
            total = metrics.total("controller_runtime_reconcile_total", controller=controller)
            busy = (metrics.total("workqueue_depth", name=controller)
                    + metrics.total("controller_runtime_active_workers", controller=controller))
            state = (total, len(api.request_log))
            if total >= min_reconciles and busy == 0 and state == last:
                if now - since >= self.p.quiet:
                    return since, metrics
            else:
                since = now
                last = state
            if now > deadline:
                raise TimeoutError(f"{controller} did not settle within {timeout:.0f} s "
                                   f"({total:.0f} reconciles, want {min_reconciles:.0f})\n{operator.log_tail(20)}")
            time.sleep(0.1)

    def _gc_report(self, before: _Snapshot, after: _Snapshot) -> JSON:
        """Garbage collections in a window: zkop's (counts, from its metrics) and the API server's (pauses)."""
        return {"zkop_collections_by_generation": ops_delta(after.op_gc, before.op_gc),
                "apiserver_process": self.gc.summary(before.gc_index)}

    def _txn_window(self, result: JSON, before: _Snapshot, after: _Snapshot, n: int) -> None:
        self.txn_windows.append(_TxnWindow(result, before.zxid, after.zxid, n, MAIN_CHROOT))

    def _timeout(self, per_item: float, items: int, floor: float = 60.0) -> float:
        return floor + per_item * items

    # --- scenarios ------------------------------------------------------------------------

    def floor(self) -> JSON:
        """Scenario ``floor``: :attr:`Params.floor_runs` runs, each with a fresh API server and chroot.

        The floor is a limit, and noise only ever slows a run down; the median of the runs is
        reported (``cr_per_s``) and every run beside it. Counts are the last run's.
        """
        p = self.p
        runs = [self._floor_once(k) for k in range(p.floor_runs)]
        rates = [r["cr_per_s"] for r in runs]
        median = sorted(rates)[len(rates) // 2]
        result = next(r for r in runs if r["cr_per_s"] == median)
        result["params"]["runs"] = p.floor_runs
        result["cr_per_s_runs"] = rates
        return result

    def _floor_once(self, k: int) -> JSON:
        p = self.p
        chroot = f"{FLOOR_CHROOT}-{k}"
        api, kubeconfig = self._new_api(f"floor-{k}")
        try:
            with zk_client(self.server) as zk:
                zk.ensure_path(f"{chroot}/bench/app")
            spec_path = self.workdir / f"floor-spec-{k}.json"
            spec_path.write_text(json.dumps({"n": p.n, "threads": p.floor_threads, "kubeconfig": kubeconfig,
                                             "zk_hosts": f"{self.server.hosts}{chroot}"}))
            before = self._snapshot()
            log_before = len(api.request_log)
            proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--floor-client", str(spec_path)],
                                  capture_output=True, text=True, timeout=self._timeout(0.2, p.n), check=False,
                                  cwd=REPO)
            if proc.returncode != 0:
                raise RuntimeError(f"floor client failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
            client = json.loads(proc.stdout)
            after = self._snapshot()
            records = api.request_log[log_before:]
            states = self._states(api)
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
            "client_cpu_split_s": client["cpu_split_s"],
            "client_context_switches_per_cr": per(float(client["context_switches"]), p.n, 1),
            "cpu_seconds": {"client": round(float(client["cpu_seconds"]), 2),
                            "bench_process_incl_apiserver": round(after.bench_cpu - before.bench_cpu, 2),
                            "zookeeper": round(after.zk_cpu - before.zk_cpu, 2)},
        }
        self.txn_windows.append(_TxnWindow(result, before.zxid, after.zxid, p.n, chroot))
        log.info("floor run %d: %.1f CR/s", k + 1, p.n / seconds)
        return result

    def cold_sync(self, operator: OperatorProcess) -> JSON:
        """Scenario ``cold_sync``: starts ``operator`` (left running for the next scenarios)."""
        p = self.p
        api = self.main_api
        api.clear_request_log()
        before = self._snapshot()
        machine_before = machine_cpu()
        started = time.monotonic()
        operator.start(wait_ready=False)
        assert operator.proc is not None
        pid = operator.proc.pid
        ready_at: float | None = None
        synced_at: float | None = None
        profilers: list[subprocess.Popen[bytes]] = []
        deadline = started + self._timeout(0.2, p.n)
        last_log = started
        try:
            while synced_at is None:
                now = time.monotonic()
                if operator.proc.poll() is not None:
                    raise RuntimeError(f"zkop exited with {operator.proc.returncode}:\n{operator.log_tail()}")
                if ready_at is None and operator.probe() == 200:
                    ready_at = time.monotonic()
                    profilers = self._start_profilers({"zkop": pid, "bench-apiserver": os.getpid()})
                states = self._states(api)
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
            self._stop_profilers(profilers)
        assert synced_at is not None
        if ready_at is None:  # synced before /readyz was seen
            ready_at = synced_at
        settled_at, metrics = self._wait_settled(operator, min_reconciles=p.n, timeout=self._timeout(0.1, p.n))
        after = self._snapshot(operator)
        records = api.request_log[before.log_len:after.log_len]
        with zk_client(self.server) as zk:
            wrong = self._check_znodes(zk, MAIN_CHROOT)
        if wrong:
            raise RuntimeError(f"cold sync: {wrong} znodes do not hold their bytes")
        seconds = synced_at - started
        converge = synced_at - ready_at
        floor_rate = float(self.results["floor"]["cr_per_s"])
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
            "garbage_collection": self._gc_report(before, after),
            "cpu_seconds_until_synced": {"zkop": round(cpu_operator, 2),
                                         "bench_process_incl_apiserver": round(after.bench_cpu - before.bench_cpu, 2),
                                         "zookeeper": round(after.zk_cpu - before.zk_cpu, 2)},
        }
        self._txn_window(result, before, after, p.n)
        self.results["_memory_after_cold_sync"] = proc_memory_mb(pid)
        return result

    def _start_profilers(self, pids: Mapping[str, int]) -> list[subprocess.Popen[bytes]]:
        """``py-spy record --gil`` (collapsed stacks of the thread holding the GIL) of each pid.

        Only with ``--py-spy DIR``. Both processes are bound by their interpreter lock, so the
        GIL holder's stack is where their CPU goes.
        """
        if self.py_spy is None:
            return []
        exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        self.py_spy.mkdir(parents=True, exist_ok=True)
        procs = []
        for name, pid in pids.items():
            out = self.py_spy / f"cold_sync-{name}.txt"
            procs.append(subprocess.Popen([exe, "record", "--pid", str(pid), "--format", "raw", "--rate", "200",
                                           "--gil", "--nonblocking", "--output", str(out)],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            log.info("py-spy recording %s (pid %d) to %s", name, pid, out)
        return procs

    @staticmethod
    def _stop_profilers(procs: Sequence[subprocess.Popen[bytes]]) -> None:
        for proc in procs:
            proc.send_signal(signal.SIGINT)
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()

    def _check_znodes(self, zk: KazooClient, chroot: str) -> int:
        """Number of the N znodes that do not hold their expected bytes (asynchronous reads)."""
        results = [(i, zk.get_async(f"{chroot}{cr_path(i)}")) for i in range(self.p.n)]
        wrong = 0
        for i, result in results:
            try:
                data, _ = result.get(timeout=30)
            except NoNodeError:
                data = None
            if data != cr_data(i) and not self._expected_override(i, data):
                wrong += 1
        return wrong

    def _expected_override(self, i: int, data: bytes | None) -> bool:
        # After update_latency some CRs hold update-<k> values: those are right too.
        return data is not None and data.startswith(b"update-")

    def update_latency(self, operator: OperatorProcess) -> JSON:
        """Scenario ``update_latency`` (``operator`` running, everything in sync)."""
        p = self.p
        paths_count = max(1, min(100, p.n // 2))
        total = max(1, int(p.update_rate * p.update_seconds))
        kube = KubeClient(self.main_api.api_client(), user_agent=BENCH_AGENT)
        errors: list[str] = []
        quiet_heap()
        with zk_client(self.server) as zk:
            observer = ZnodeObserver(zk)
            observer.watch([f"{MAIN_CHROOT}{cr_path(i)}" for i in range(paths_count)])
            time.sleep(0.5)
            before = self._snapshot(operator)

            def send(k: int) -> None:
                i = k % paths_count
                value = f"update-{k}".encode()
                observer.expect(f"{MAIN_CHROOT}{cr_path(i)}", _equals(value), label=k)
                try:
                    kube.request("PATCH", resource_path(GROUP, VERSION, PLURAL, NAMESPACE, cr_name(i)),
                                 body={"spec": {"data": base64.b64encode(value).decode()}}, content_type=MERGE_PATCH)
                except Exception as err:
                    errors.append(repr(err))

            achieved = self._paced(send, total, p.update_rate)
            completed = observer.wait(30.0)
        kube.close()
        samples = [(o.observed_mono - o.sent_mono) * 1000 for o in observer.observations]
        server = [o.mtime_ms - o.sent_wall * 1000 for o in observer.observations if o.mtime_ms is not None]
        if errors:
            log.warning("update_latency: %d PATCH errors, first: %s", len(errors), errors[0])
        self._wait_settled(operator, min_reconciles=0, timeout=120)
        after = self._snapshot(operator)
        # The bench's own PATCHes of spec.data are in the log too: leave them out.
        records = [r for r in self.main_api.request_log[before.log_len:after.log_len] if r.user_agent != BENCH_AGENT]
        result: JSON = {
            "params": {"rate_per_s": p.update_rate, "seconds": p.update_seconds, "changes": total,
                       "distinct_crs": paths_count, "workers": p.workers,
                       "measured": "PATCH spec.data sent -> ZooKeeper watch event of the new bytes"},
            "achieved_rate_per_s": round(achieved, 1),
            **latency_summary(samples),
            "server_side": {k: v for k, v in latency_summary(server).items() if k != "samples"},
            "not_observed": total - len(observer.observations),
            "all_observed": completed,
            "patch_errors": len(errors),
            "reconciles_per_change": per(after.reconciles - before.reconciles, total),
            **_per_item(api_summary(records, total), "change"),
            "zookeeper_ops_by_operation": ops_delta(after.ops, before.ops),
            "zkop_cpu_ms_per_change": round((after.op_cpu - before.op_cpu) * 1000 / total, 2),
            "garbage_collection": self._gc_report(before, after),
        }
        self.txn_windows.append(_TxnWindow(result, before.zxid, after.zxid, total, MAIN_CHROOT, "change"))
        return result

    def _paced(self, send: Callable[[int], None], total: int, rate: float) -> float:
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

    def drift_latency(self, operator: OperatorProcess) -> JSON:
        """Scenario ``drift_latency`` (``operator`` running, everything in sync)."""
        p = self.p
        first = max(1, min(100, p.n // 2))
        indices = list(range(first, min(p.n, first + 100))) or [0]
        total = max(1, int(p.drift_rate * p.drift_seconds))
        base_mtimes: dict[int, int] = {}
        quiet_heap()
        with zk_client(self.server) as zk:
            observer = ZnodeObserver(zk)
            observer.watch([f"{MAIN_CHROOT}{cr_path(i)}" for i in indices])
            time.sleep(0.5)
            before = self._snapshot(operator)
            bench_session = int(zk.client_id[0])
            started = time.monotonic()
            for k in range(total):
                delay = started + k / p.drift_rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                i = indices[k % len(indices)]
                path = f"{MAIN_CHROOT}{cr_path(i)}"
                original = cr_data(i)
                observer.expect(path, _equals(original), label=k, skip_fires=1)
                stat = zk.set(path, f"hand-edit-{k}".encode())
                base_mtimes[k] = int(stat.mtime)
            elapsed = time.monotonic() - started
            completed = observer.wait(30.0)
        samples = [(o.observed_mono - o.sent_mono) * 1000 for o in observer.observations]
        server = [float(o.mtime_ms - base_mtimes[o.label]) for o in observer.observations
                  if o.mtime_ms is not None and o.label in base_mtimes]
        self._wait_settled(operator, min_reconciles=0, timeout=120)
        after = self._snapshot(operator)
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
            **_per_item(api_summary(self.main_api.request_log[before.log_len:after.log_len], total), "edit"),
            "zookeeper_ops_by_operation": ops_delta(after.ops, before.ops),
            "zkop_cpu_ms_per_edit": round((after.op_cpu - before.op_cpu) * 1000 / total, 2),
            "garbage_collection": self._gc_report(before, after),
        }
        # The window's write transactions include the bench's own hand edits: they are taken out.
        self.txn_windows.append(_TxnWindow(result, before.zxid, after.zxid, total, MAIN_CHROOT, "edit",
                                           bench_session))
        return result

    def warm_restart(self, operator: OperatorProcess) -> JSON:
        """Scenario ``warm_restart``: start ``operator`` on an in-sync world, stop it when settled."""
        p = self.p
        self.main_api.clear_request_log()
        quiet_heap()
        before = self._snapshot()
        started = time.monotonic()
        operator.start(wait_ready=False)
        ready_at = self._wait_ready(operator, started)
        settled_at, metrics = self._wait_settled(operator, min_reconciles=p.n, timeout=self._timeout(0.1, p.n))
        after = self._snapshot(operator)
        records = self.main_api.request_log[before.log_len:after.log_len]
        self._stop_operator(operator)
        reads = sum(v for k, v in metrics.zookeeper_ops().items() if k in ZK_READ_OPS)
        states = self._states(self.main_api)
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
        self._txn_window(result, before, after, p.n)
        return result

    def _wait_ready(self, operator: OperatorProcess, started: float) -> float:
        deadline = started + 120
        while True:
            if operator.proc is not None and operator.proc.poll() is not None:
                raise RuntimeError(f"zkop exited with {operator.proc.returncode}:\n{operator.log_tail()}")
            if operator.probe() == 200:
                return time.monotonic()
            if time.monotonic() > deadline:
                raise TimeoutError(f"zkop not ready after 120 s\n{operator.log_tail(30)}")
            time.sleep(0.02)

    def resync(self, warm_settle_seconds: float) -> JSON:
        """Scenario ``resync``: one periodic resync window of an in-sync world."""
        p = self.p
        period = float(max(p.min_sync_period, math.ceil(3 * warm_settle_seconds + 1)))
        operator = self._operator(["--workers", str(p.workers), "--sync-period", str(period)], "resync")
        started = time.monotonic()
        operator.start(wait_ready=False)
        self._wait_ready(operator, started)
        self._wait_settled(operator, min_reconciles=p.n, timeout=self._timeout(0.1, p.n))
        before = self._snapshot(operator)
        clean = before.mono - started < 0.9 * period
        if not clean:
            log.warning("resync: start-up took %.1f s of a %.0f s period; the window may overlap it",
                        before.mono - started, period)
        idle = self._idle(operator, before, until=started + 0.85 * period)
        first_at: float | None = None
        deadline = started + 1.2 * period + self._timeout(0.1, p.n)
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
        done_at, metrics = self._wait_settled(operator, min_reconciles=before.reconciles + p.n,
                                              timeout=self._timeout(0.1, p.n))
        after = self._snapshot(operator)
        records = self.main_api.request_log[before.log_len:after.log_len]
        self._stop_operator(operator)
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
        self._txn_window(result, before, after, p.n)
        return result

    def _idle(self, operator: OperatorProcess, before: _Snapshot, *, until: float) -> JSON | None:
        """zkop left alone, everything in sync, until ``until`` (monotonic): CPU, API requests, packets.

        Nothing is scraped meanwhile (a scrape costs zkop CPU). ``None`` if less than 1 s is left.
        """
        seconds = until - time.monotonic()
        if seconds < 1.0 or operator.proc is None:
            return None
        time.sleep(seconds)
        elapsed = time.monotonic() - before.mono
        cpu = proc_cpu_seconds(operator.proc.pid) - before.op_cpu
        packets = server_packets(self.server) - before.packets
        return {"seconds": round(elapsed, 1), "zkop_cpu_percent": round(cpu / elapsed * 100, 2),
                "api_requests": len(self.main_api.request_log) - before.log_len,
                "zookeeper_packets_per_s": round(packets / elapsed, 2)}

    def bridge(self) -> tuple[JSON, OperatorProcess | None]:
        """Scenario ``bridge``; returns the still-running operator for ``memory`` (``None`` if skipped)."""
        p = self.p
        params = {"m": p.m, "n_zookeeperconfigs_present": p.n, "workers": p.workers,
                  "service_bridge_workers": p.workers, "churn_updates": p.m // 2, "churn_deletes": p.m // 4,
                  "layout": "flat", "format": "json", "max_deletes": "0 (no limit)"}
        if not bridge_available():
            return {"params": params, "skipped": "service bridge not available"}, None
        store = self.main_api.store
        ns_rt = store.resolve("", "v1", "namespaces")
        svc_rt = store.resolve("", "v1", "services")
        assert ns_rt is not None and svc_rt is not None
        store.create(ns_rt, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SERVICE_NAMESPACE}},
                     {})
        for i in range(p.m):
            store.create(svc_rt, SERVICE_NAMESPACE, svc_manifest(i), {})
        operator = self._operator(["--workers", str(p.workers), "--service-bridge", "--service-bridge-workers",
                                   str(p.workers), "--service-bridge-max-deletes", "0"], "bridge")
        self.main_api.clear_request_log()
        quiet_heap()
        root = f"{MAIN_CHROOT}{BRIDGE_ROOT}"
        prefix = f"{SERVICE_NAMESPACE}-"
        with zk_client(self.server) as zk:
            before = self._snapshot()
            started = time.monotonic()
            operator.start(wait_ready=False)
            ready_at = self._wait_ready(operator, started)
            deadline = started + self._timeout(0.2, p.m)
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
                time.sleep(0.1)
            published_at = time.monotonic()
            assert operator.proc is not None
            cpu_published = proc_cpu_seconds(operator.proc.pid)
            self._wait_settled(operator, min_reconciles=p.m, controller=BRIDGE_CONTROLLER,
                               timeout=self._timeout(0.1, p.m))
            self._wait_settled(operator, min_reconciles=p.n, timeout=self._timeout(0.1, p.n))
            after = self._snapshot(operator, BRIDGE_CONTROLLER)
            publish: JSON = {
                "seconds": round(published_at - started, 3),
                "reconciles": int(after.reconciles),
                "zkop_cpu_seconds_until_published": round(cpu_published, 2),
                **_per_item(api_summary(self.main_api.request_log[before.log_len:after.log_len], p.m), "service"),
                "zookeeper_ops_by_operation": {k: int(v) for k, v in sorted(after.ops.items())},
            }
            self.txn_windows.append(_TxnWindow(publish, before.zxid, after.zxid, p.m, MAIN_CHROOT, "service"))
            memory = proc_memory_mb(operator.proc.pid)
            # churn: updates (port 80 -> 81) and deletes, applied to the store as one burst
            updates = list(range(p.m // 2))
            deletes = list(range(p.m // 2, p.m // 2 + p.m // 4))
            observer = ZnodeObserver(zk)
            observer.watch([f"{MAIN_CHROOT}{svc_record_path(i)}" for i in updates + deletes])
            time.sleep(0.5)
            before = self._snapshot(operator, BRIDGE_CONTROLLER)
            for i in updates:
                observer.expect(f"{MAIN_CHROOT}{svc_record_path(i)}", _has_port_81, label=i)
            for i in deletes:
                observer.expect(f"{MAIN_CHROOT}{svc_record_path(i)}", _absent, label=i)
            churn_started = time.monotonic()
            patch = json.dumps({"spec": {"ports": [{"name": "http", "port": 81, "targetPort": 8080}]}}).encode()
            for i in updates:
                store.patch(svc_rt, SERVICE_NAMESPACE, svc_name(i), patch, MERGE_PATCH, None, {})
            for i in deletes:
                store.delete(svc_rt, SERVICE_NAMESPACE, svc_name(i), {}, {})
            applied = time.monotonic() - churn_started
            if not observer.wait(self._timeout(0.2, len(updates) + len(deletes))):
                raise TimeoutError(f"churn: {observer.pending()} changes not reflected in ZooKeeper\n"
                                   f"{operator.log_tail(30)}")
            last = max((o.observed_mono for o in observer.observations), default=churn_started)
        churn_ops = len(updates) + len(deletes)
        churn_seconds = last - churn_started
        self._wait_settled(operator, min_reconciles=0, controller=BRIDGE_CONTROLLER, timeout=120)
        after = self._snapshot(operator, BRIDGE_CONTROLLER)
        churn: JSON = {
            "seconds": round(churn_seconds, 3),
            "applied_to_api_seconds": round(applied, 3),
            "reconciles": int(after.reconciles - before.reconciles),
            **_per_item(api_summary(self.main_api.request_log[before.log_len:after.log_len], churn_ops), "change"),
            "zookeeper_ops_by_operation": ops_delta(after.ops, before.ops),
        }
        self.txn_windows.append(_TxnWindow(churn, before.zxid, after.zxid, churn_ops, MAIN_CHROOT, "change"))
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
        self.results["_memory_with_bridge"] = memory
        return result, operator

    # --- run ------------------------------------------------------------------------------

    def run(self) -> JSON:
        """Run every scenario; returns the report."""
        p = self.p
        run_started = time.monotonic()
        self.git = git_revision()
        self.zk = ZooKeeperServer()
        self.zk.start()
        try:
            log.info("ZooKeeper %s (pid %s)", self.server.hosts, self.server.pid)
            with zk_client(self.server) as zk:
                zk.ensure_path(MAIN_CHROOT)
            log.info("scenario floor")
            self.results["floor"] = self.floor()
            log.info("floor: %s", _brief(self.results["floor"]))
            self.api, self.kubeconfig = self._new_api("main")
            base_args = ["--workers", str(p.workers)]
            operator = self._operator(base_args, "cold")
            try:
                log.info("scenario cold_sync")
                self.results["cold_sync"] = self.cold_sync(operator)
                log.info("cold_sync: %s", _brief(self.results["cold_sync"]))
                log.info("scenario update_latency")
                self.results["update_latency"] = self.update_latency(operator)
                log.info("update_latency: %s", _brief(self.results["update_latency"]))
                log.info("scenario drift_latency")
                self.results["drift_latency"] = self.drift_latency(operator)
                log.info("drift_latency: %s", _brief(self.results["drift_latency"]))
            finally:
                self._stop_operator(operator)
            log.info("scenario warm_restart")
            self.results["warm_restart"] = self.warm_restart(self._operator(base_args, "warm"))
            log.info("warm_restart: %s", _brief(self.results["warm_restart"]))
            log.info("scenario resync")
            self.results["resync"] = self.resync(float(self.results["warm_restart"]["settled_seconds"]))
            log.info("resync: %s", _brief(self.results["resync"]))
            log.info("scenario bridge")
            bridge, bridge_operator = self.bridge()
            self.results["bridge"] = bridge
            if bridge_operator is not None:
                self._stop_operator(bridge_operator)
            log.info("bridge: %s", _brief(bridge))
            self.results["memory"] = self._memory(bridge_operator is not None)
            log.info("reading the transaction log")
            self._count_txns()
            report = self._report(time.monotonic() - run_started)
        finally:
            for operator in self.operators:
                with contextlib.suppress(Exception):
                    operator.stop(timeout=10)
            if self.api is not None:
                self.api.stop()
            self.zk.stop()
        return report

    def _memory(self, with_bridge: bool) -> JSON:
        p = self.p
        cold = self.results.pop("_memory_after_cold_sync", {})
        bridge = self.results.pop("_memory_with_bridge", {})
        current = bridge if with_bridge else cold
        return {
            "params": {"n": p.n, "m": p.m if with_bridge else 0, "service_bridge": with_bridge,
                       "source": "/proc/<pid>/status of zkop run"},
            "rss_mb": current.get("VmRSS"),
            "peak_rss_mb": current.get("VmHWM"),
            "rss_mb_zookeeperconfigs_only": cold.get("VmRSS"),
        }

    def _count_txns(self) -> None:
        txns = read_txn_log(self.server.data_dir)
        for window in self.txn_windows:
            inside = [t for t in txns if window.zxid_from < t.zxid <= window.zxid_to]
            window.result.update(_per_item(_txn_summary(inside, window.n, window.chroot, window.bench_session),
                                           window.item))

    def _report(self, seconds: float) -> JSON:
        p = self.p
        scenarios = {name: self.results[name] for name in
                     ("floor", "cold_sync", "warm_restart", "resync", "update_latency", "drift_latency", "bridge",
                      "memory")}
        return {
            "params": {**asdict(p), "python": platform.python_version(), "cpus": os.cpu_count(),
                       "git": self.git,
                       "zookeeper": self.server.mntr().get("zk_version", "?").split(",")[0] if self.zk else "?",
                       "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "duration_s": round(seconds, 1)},
            "scenarios": scenarios,
            "targets": targets(scenarios, p),
        }


def _per_item(summary: JSON, item: str) -> JSON:
    """Rename the ``*_per_cr`` keys of a summary to ``*_per_<item>``."""
    if item == "cr":
        return summary
    return {k.replace("_per_cr", f"_per_{item}"): v for k, v in summary.items()}


def _equals(expected: bytes) -> Callable[[bytes | None], bool]:
    def predicate(data: bytes | None) -> bool:
        return data == expected

    return predicate


def _has_port_81(data: bytes | None) -> bool:
    if data is None:
        return False
    try:
        record = json.loads(data)
    except ValueError:
        return False
    ports = record.get("ports") if isinstance(record, dict) else None
    return bool(ports) and isinstance(ports, list) and ports[0].get("port") == 81


def _absent(data: bytes | None) -> bool:
    return data is None


#: KeeperException codes of failed write transactions (``error <code>`` in the log).
_ERROR_CODES = {"-101": "NoNode", "-103": "BadVersion", "-110": "NodeExists", "-111": "NotEmpty", "-102": "NoAuth"}


def _txn_area(path: str, chroot: str) -> str:
    path = path.lstrip("'")  # TxnLogToolkit quotes the path of a delete
    inner = path[len(chroot):] if path.startswith(chroot) else path
    if inner == PROBE_ROOT.rsplit("/", 1)[0] or inner.startswith(PROBE_ROOT):
        return "startup_probe"
    if inner.startswith(REGISTRY_ROOT):
        return "ownership_registry"
    if inner.startswith(BRIDGE_ROOT):
        return "service_bridge"
    return "managed_znodes"


def _txn_summary(txns: Sequence[Txn], n: int, chroot: str, bench_session: int | None = None) -> JSON:
    """Write transactions of a window (session transactions left out), by operation and area.

    ``bench_session``: the bench's own ZooKeeper session (drift edits); its writes are counted
    apart (``bench_writes``) and left out of everything else.
    """
    bench = [t for t in txns if bench_session is not None and t.session == bench_session]
    txns = [t for t in txns if bench_session is None or t.session != bench_session]
    writes = [t for t in txns if t.op not in NOT_WRITES]
    failed = Counter(_ERROR_CODES.get(t.path, t.path) for t in txns if t.op == "error")
    areas = Counter(_txn_area(t.path, chroot) for t in writes)
    excluding_probe = sum(v for k, v in areas.items() if k != "startup_probe")
    summary: JSON = {
        "zookeeper_writes": len(writes),
        "zookeeper_writes_excluding_startup_probe": excluding_probe,
        "zookeeper_writes_per_cr": per(len(writes), n),
        # A multi is one transaction (one zxid) however many znodes it writes.
        "zookeeper_write_transactions_per_cr": per(len({t.zxid for t in writes}), n),
        "zookeeper_writes_by_op": dict(sorted(Counter(t.op for t in writes).items())),
        "zookeeper_writes_by_area": dict(sorted(areas.items())),
        "zookeeper_failed_write_txns": sum(failed.values()),
        "zookeeper_failed_write_txns_by_error": dict(sorted(failed.items())),
    }
    if bench_session is not None:
        summary["bench_writes_excluded"] = sum(1 for t in bench if t.op not in NOT_WRITES)
    if 0 < len(writes) <= 10:
        summary["zookeeper_writes_list"] = [f"{t.op} {t.path.lstrip(chr(39))}" for t in writes]
    return summary


def _brief(result: JSON) -> str:
    return ", ".join(f"{k}={v}" for k, v in result.items() if isinstance(v, (int, float, str)) and k != "params")


def _target(description: str, value: Any, met: bool | None, note: str = "") -> JSON:
    out: JSON = {"target": description, "value": value, "met": met}
    if note:
        out["note"] = note
    return out


def targets(s: Mapping[str, JSON], p: Params) -> JSON:
    """The issue's targets, each with the measured value and whether it is met (``None``: not measured)."""
    cold, warm, resync = s["cold_sync"], s["warm_restart"], s["resync"]
    update, drift, memory = s["update_latency"], s["drift_latency"], s["memory"]
    scale = p.n >= 10000 and p.m >= 5000 and bool(memory["params"]["service_bridge"])
    update_p99 = update.get("p99_ms")
    drift_p99 = drift.get("p99_ms")
    return {
        "cold_sync_vs_floor": _target(">= 0.8 x floor CR/s", cold["ratio_to_floor"], cold["ratio_to_floor"] >= 0.8),
        "warm_restart_zero_writes": _target(
            "0 API writes and 0 ZooKeeper writes",
            {"api_writes": warm["api_writes"], "zookeeper_writes": warm.get("zookeeper_writes_excluding_startup_probe"),
             "startup_probe_writes": warm.get("zookeeper_writes_by_area", {}).get("startup_probe", 0)},
            warm["api_writes"] == 0 and warm.get("zookeeper_writes_excluding_startup_probe") == 0,
            "ZooKeeper writes exclude the start-up probe's scratch znode under /zkop/probe, written and deleted "
            "on every start by design; they are reported beside it"),
        "resync_zero_writes": _target(
            "0 API writes and 0 ZooKeeper writes",
            {"api_writes": resync["api_writes"], "zookeeper_writes": resync.get("zookeeper_writes")},
            resync["api_writes"] == 0 and resync.get("zookeeper_writes") == 0),
        "resync_reads_per_cr": _target("<= 1 ZooKeeper read per CR", resync["zookeeper_reads_per_cr"],
                                       resync["zookeeper_reads_per_cr"] <= 1.0),
        "update_latency_p99": _target(
            f"p99 < 100 ms at 50 changes/s (run at {p.update_rate:g}/s)", update_p99,
            None if update_p99 is None else update_p99 < 100 and update["not_observed"] == 0),
        "drift_latency_p99": _target("p99 < 500 ms", drift_p99,
                                     None if drift_p99 is None else drift_p99 < 500 and drift["not_restored"] == 0),
        "memory_rss": _target(
            "< 200 MB RSS at N = 10,000 and M = 5,000", memory["rss_mb"],
            (memory["rss_mb"] is not None and memory["rss_mb"] < 200) if scale else None,
            "" if scale else "evaluated only in the scale run (--n 10000 --m 5000 with the service bridge)"),
        "api_writes_per_converged_cr": _target(
            "<= 2 API writes per CR (finalizer + status)",
            {"all_writes": cold["api_writes_per_cr"],
             "on_zookeeperconfigs": cold["api_writes_on_zookeeperconfigs_per_cr"]},
            cold["api_writes_per_cr"] <= 2.0,
            "all_writes includes Events; on_zookeeperconfigs is finalizer and status patches only"),
        "status_not_rewritten_when_unchanged": _target(
            "0 status writes in warm restart and resync",
            {"warm_restart": warm["api_status_writes"], "resync": resync["api_status_writes"]},
            warm["api_status_writes"] == 0 and resync["api_status_writes"] == 0),
    }


# --------------------------------------------------------------------------- output


def render_table(report: JSON) -> str:
    """A human-readable table of a report."""
    lines: list[str] = []
    params = report["params"]
    lines.append(f"zkop benchmark  N={params['n']} M={params['m']} workers={params['workers']} "
                 f"cpus={params['cpus']} python={params['python']} duration={params['duration_s']}s")
    lines.append("")
    lines.append(f"{'scenario':16} {'metric':42} value")
    lines.append(f"{'-' * 16} {'-' * 42} {'-' * 20}")
    for name, result in report["scenarios"].items():
        first = True
        for key, value in result.items():
            if key == "params" or isinstance(value, (dict, list)):
                continue
            lines.append(f"{name if first else '':16} {key:42} {value}")
            first = False
        if first:
            lines.append(f"{name:16} {'-':42} -")
    lines.append("")
    lines.append(f"{'target':36} {'met':5} {'value':40} wanted")
    lines.append(f"{'-' * 36} {'-' * 5} {'-' * 40} {'-' * 20}")
    for name, target in report["targets"].items():
        met = {True: "yes", False: "NO", None: "n/a"}[target["met"]]
        value = json.dumps(target["value"]) if isinstance(target["value"], dict) else str(target["value"])
        lines.append(f"{name:36} {met:5} {value:40} {target['target']}")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = argparse.ArgumentParser(prog="hack/bench.py", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=None, help="ZooKeeperConfig objects (default 2000; smoke 50)")
    parser.add_argument("--m", type=int, default=None, help="Services (default 1000; smoke 20)")
    parser.add_argument("--smoke", action="store_true", help="N=50, M=20, short streams: for CI, well under 60 s")
    parser.add_argument("--workers", type=int, default=8, help="zkop run --workers (default 8)")
    parser.add_argument("--update-rate", type=float, default=50.0, help="spec.data changes per second (default 50)")
    parser.add_argument("--update-seconds", type=float, default=None, help="length of the update stream (default 10)")
    parser.add_argument("--drift-rate", type=float, default=10.0, help="hand edits per second (default 10)")
    parser.add_argument("--drift-seconds", type=float, default=None, help="length of the hand edits (default 10)")
    parser.add_argument("--table", action="store_true", help="print a readable table instead of the JSON object")
    parser.add_argument("--output", type=Path, default=None, help="also write the JSON report to this file")
    parser.add_argument("--keep-workdir", action="store_true", help="keep operator logs and kubeconfigs")
    parser.add_argument("--py-spy", type=Path, default=None, metavar="DIR",
                        help="profile zkop and the API server during cold_sync with py-spy (must be installed; "
                             "collapsed stacks go to DIR)")
    parser.add_argument("--floor-client", type=Path, default=None, help=argparse.SUPPRESS)
    return parser


def params_from_args(args: argparse.Namespace) -> Params:
    """:class:`Params` from parsed flags (``--smoke`` picks the small defaults)."""
    if args.smoke:
        return Params(n=args.n or 50, m=args.m or 20, workers=args.workers, update_rate=args.update_rate,
                      update_seconds=args.update_seconds or 2.0, drift_rate=args.drift_rate,
                      drift_seconds=args.drift_seconds or 2.0, min_sync_period=3.0, quiet=0.5, smoke=True,
                      floor_runs=1)
    return Params(n=args.n or 2000, m=args.m or 1000, workers=args.workers, update_rate=args.update_rate,
                  update_seconds=args.update_seconds or 10.0, drift_rate=args.drift_rate,
                  drift_seconds=args.drift_seconds or 10.0)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = build_parser().parse_args(argv)
    if args.floor_client is not None:
        print(json.dumps(floor_client(json.loads(args.floor_client.read_text()))))
        return 0
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("kazoo").setLevel(logging.WARNING)
    params = params_from_args(args)
    if params.n < 2:
        raise SystemExit("--n must be at least 2")
    workdir = Path(tempfile.mkdtemp(prefix="zkop-bench-"))
    log.info("workdir %s; params %s", workdir, params)
    ok = False
    try:
        report = Bench(params, workdir, py_spy=args.py_spy).run()
        ok = True
    finally:
        if ok and not args.keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            log.info("operator logs kept in %s", workdir)
    text = json.dumps(report, indent=2)
    if args.output is not None:
        args.output.write_text(text + "\n")
    print(render_table(report) if args.table else text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
