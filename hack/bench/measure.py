"""Small measurement helpers: percentiles, /proc readings, GC pauses, API request and ZooKeeper server counts."""

from __future__ import annotations

import contextlib
import gc
import math
import os
import re
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from zkop_testing.apiserver import RequestRecord
from zkop_testing.metrics import Metrics
from zkop_testing.operator import OperatorProcess
from zkop_testing.zookeeper import ZooKeeperServer, connected_client

from zkop.zkconfig.spec import PLURAL
from zkop.zookeeper.handler import SelectHandler

from .params import API_WRITE_VERBS, JSON

# --------------------------------------------------------------------------- small measurement helpers


def state_counts(objects: Iterable[JSON]) -> Counter[str]:
    """How many ZooKeeperConfigs are in each ``status.state``; ``Synced`` only at the object's current generation
    (``Synced-stale`` otherwise), ``none`` without a state."""
    states: Counter[str] = Counter()
    for obj in objects:
        status = obj.get("status") or {}
        state = str(status.get("state") or "none")
        if state == "Synced" and status.get("observedGeneration") != obj["metadata"].get("generation"):
            state = "Synced-stale"
        states[state] += 1
    return states


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


LATENCY_KEYS = ("zk_sum_readlatency", "zk_cnt_readlatency", "zk_sum_updatelatency", "zk_cnt_updatelatency")


def server_stats(server: ZooKeeperServer) -> dict[str, float]:
    """``zk_packets_received`` and the read/update latency sums and counts (ms) from one ``mntr``."""
    mntr = server.mntr()
    return {k: float(mntr.get(k, 0)) for k in ("zk_packets_received", *LATENCY_KEYS)}


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


def zk_client(server: ZooKeeperServer) -> contextlib.AbstractContextManager[KazooClient]:
    """A connected, unchrooted kazoo client on ``server`` for the bench's own use (``with`` it)."""
    return connected_client(server.hosts, timeout=10.0, handler=SelectHandler())



def per_item(summary: JSON, item: str) -> JSON:
    """Rename the ``*_per_cr`` keys of a summary to ``*_per_<item>``."""
    if item == "cr":
        return summary
    return {k.replace("_per_cr", f"_per_{item}"): v for k, v in summary.items()}
