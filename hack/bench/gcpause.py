"""The ``gc.freeze()`` lever (issue #26): a full collection's pause with N objects cached, before and after.

``python -m hack.bench.gcpause [--n 50000] [--m 20000] [--churn 200000]`` builds, in one fresh process, what
zkop's caches hold after its initial sync -- N ZooKeeperConfigs and M Services, each decoded from JSON and
passed through zkop's default informer transform (:func:`zkop.runtime.cache.transform.default_transform`)
into an :class:`~zkop.runtime.cache.indexer.Indexer` -- and times ``gc.collect()`` (a full, generation-2
collection, what set the 50,000-object scale run's drift p99) before and after ``gc.freeze()``.

The leak check: ``gc.freeze()`` moves every object alive at that moment out of the collector's reach, so
a reference cycle among them that later becomes garbage is never freed. After the freeze the cached objects
are replaced ``--churn`` times by new versions (as watch events replace them), each replaced object left
as garbage; the RSS growth is compared with an unfrozen control doing the same. Reference counting frees the
replaced dicts either way (they hold no cycles), so the two should grow alike. The full collection is timed
again after the churn: objects allocated after the freeze are tracked as ever, so the pause comes back as the
cache is replaced (``--churn`` at least N replaces every cached ZooKeeperConfig once).

One JSON object on stdout; the figures go to docs/performance.md ("Levers: gc.freeze()").
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from zkop_testing.apiserver_realistic import managed_fields_for

from zkop.runtime.cache.indexer import Indexer, meta_namespace_key
from zkop.runtime.cache.transform import default_transform

from .params import cr_manifest, svc_manifest

JSON = dict[str, Any]


def _rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _decoded(body: JSON, i: int) -> JSON:
    body["metadata"].update({"uid": f"uid-{i:08d}", "resourceVersion": str(1000 + i), "generation": 1,
                             "creationTimestamp": "2026-01-01T00:00:00Z"})
    body["metadata"]["managedFields"] = managed_fields_for(body)
    body["status"] = {"state": "Synced", "observedGeneration": 1, "message": f"znode {i} in sync",
                      "lastSyncedTime": "2026-01-01T00:00:00Z"}
    decoded: JSON = json.loads(json.dumps(body))  # decoded from the wire, as the reflector does
    return decoded


def _full_collections_ms(rounds: int = 5) -> list[float]:
    out = []
    for _ in range(rounds):
        started = time.perf_counter()
        gc.collect()
        out.append(round((time.perf_counter() - started) * 1000, 2))
    return out


def measure(n: int, m: int, churn: int, freeze: bool) -> JSON:
    """Build the caches, time full collections, freeze (if asked), time again, churn; the figures."""
    crs, services = Indexer(), Indexer()
    for i in range(n):
        crs.upsert(default_transform(_decoded(cr_manifest(i), i)))
    for i in range(m):
        services.upsert(default_transform(_decoded(svc_manifest(i), i)))
    gc.collect()
    before = _full_collections_ms()
    rss_synced = _rss_mb()
    if freeze:
        gc.freeze()
    after = _full_collections_ms()
    # Churn: each watch event replaces a cached object; the old one becomes garbage.
    for k in range(churn):
        i = k % n
        obj = _decoded(cr_manifest(i), i)
        obj["metadata"]["resourceVersion"] = str(10_000_000 + k)
        crs.upsert(default_transform(obj))
    churned = _full_collections_ms()  # the replaced objects are new: tracked again, frozen or not
    keys = len(crs.list()) + len(services.list())
    return {"freeze": freeze, "objects": keys, "full_collection_ms_before": before,
            "full_collection_ms_after": after, "median_before_ms": statistics.median(before),
            "median_after_ms": statistics.median(after), "full_collection_ms_after_churn": churned,
            "median_after_churn_ms": statistics.median(churned), "rss_mb_synced": round(rss_synced, 1),
            "rss_mb_after_churn": round(_rss_mb(), 1), "rss_growth_mb": round(_rss_mb() - rss_synced, 1),
            "frozen_objects": gc.get_freeze_count(), "example_key": meta_namespace_key(crs.list()[0])}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: the frozen and the unfrozen run, each in a fresh process; prints the JSON report."""
    parser = argparse.ArgumentParser(prog="python -m hack.bench.gcpause", description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50000, help="ZooKeeperConfigs cached (default 50000)")
    parser.add_argument("--m", type=int, default=20000, help="Services cached (default 20000)")
    parser.add_argument("--churn", type=int, default=200000, help="cached objects replaced after the freeze")
    parser.add_argument("--one", choices=("frozen", "unfrozen"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.n, args.m, args.churn, args.one == "frozen")))
        return 0
    runs = {}
    for kind in ("unfrozen", "frozen"):
        done = subprocess.run([sys.executable, "-m", "hack.bench.gcpause", "--n", str(args.n), "--m", str(args.m),
                               "--churn", str(args.churn), "--one", kind], capture_output=True, text=True,
                              check=True, cwd=os.getcwd())
        runs[kind] = json.loads(done.stdout)
    print(json.dumps({"params": {"n": args.n, "m": args.m, "churn": args.churn, "python": sys.version.split()[0]},
                      **runs}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
