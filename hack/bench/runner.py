"""The runner: the scenarios in order, the report, the command line."""

from __future__ import annotations

import argparse
import compileall
import contextlib
import json
import logging
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from pathlib import Path

from zkop_testing.operator import OperatorProcess
from zkop_testing.zookeeper import ZooKeeperServer

from . import REPO
from .bridge import bridge
from .cold_sync import cold_sync, cold_sync_baseline
from .drift_latency import drift_latency
from .ensembles import ensembles, parse_counts
from .floor import floor, floor_client
from .go_peer import DEFAULT_WORKERS, GoPeerMissing, go_peer_binary, parse_workers, peers, plot
from .harness import Harness
from .instructions import DEFAULT_SIZES, ValgrindMissing, instructions, parse_sizes, valgrind_version
from .measure import zk_client
from .memory import memory
from .params import (
    JSON,
    MAIN_CHROOT,
    REFERENCE_CHROOT,
    SCALE_CPU_REFERENCE_N,
    SCALE_M,
    SCALE_N,
    Params,
)
from .realistic import realistic
from .realplane import RealApi, cached_minor, plane_idle
from .report import brief, cluster_targets, cold_sync_target, cpu_target, render_table, scale_targets, target, targets
from .resync import resync
from .tree import tree_scenario
from .update_latency import update_latency
from .warm_restart import warm_restart

log = logging.getLogger("bench")




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


def machine_load() -> JSON:
    """The machine's load now: ``/proc/loadavg`` (1, 5, 15 minutes) and ``uptime``'s line."""
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            one, five, fifteen = (float(x) for x in f.read().split()[:3])
    except OSError:
        return {}
    try:
        line = subprocess.run(["uptime"], capture_output=True, text=True, timeout=5, check=False).stdout.strip()
    except OSError:
        line = ""
    return {"load_1m": one, "load_5m": five, "load_15m": fifteen, "uptime": line}


def cpu_reference(h: Harness) -> JSON:
    """Scenario ``cpu_reference``: a ``cold_sync`` at ``Params.cpu_reference_n`` objects, in a cluster
    seeded the same way (its own API server and chroot), run before the main ``cold_sync``: the
    CPU per object the scale run is judged against, measured on the same machine in the same run."""
    sub = h.child(replace(h.p, n=h.p.cpu_reference_n, cpu_reference_n=0), REFERENCE_CHROOT)
    with zk_client(h.server) as zk:
        zk.ensure_path(REFERENCE_CHROOT)
    sub.api, sub.kubeconfig = sub.new_api("reference")
    operator = sub.new_operator(["--workers", str(sub.p.workers)], "reference")
    try:
        result = cold_sync(sub, operator)
    finally:
        h.stop_operator(operator)
        sub.api.stop()
    sub.results.pop("_memory_after_cold_sync", None)
    return result


def _begin_run(h: Harness) -> float:
    """Start a run of scenarios on ZooKeeper: record the git revision and the machine's load, start the
    benchmark's ZooKeeper server (``h.zk``); returns the run's start (``time.monotonic()`` seconds)."""
    run_started = time.monotonic()
    h.git = git_revision()
    h.load_before = machine_load()
    h.zk = ZooKeeperServer()
    h.zk.start()
    return run_started


def run_all(h: Harness) -> JSON:
    """Run every scenario; returns the report."""
    p = h.p
    run_started = _begin_run(h)
    try:
        log.info("ZooKeeper %s (pid %s)", h.server.hosts, h.server.pid)
        with zk_client(h.server) as zk:
            zk.ensure_path(MAIN_CHROOT)
        _run_floor(h)
        if p.cpu_reference_n > 0:
            log.info("scenario cpu_reference (cold sync at N = %d)", p.cpu_reference_n)
            h.results["cpu_reference"] = cpu_reference(h)
            log.info("cpu_reference: %s", brief(h.results["cpu_reference"]))
        h.api, h.kubeconfig = h.new_api("main")
        _run_plane_idle(h)
        base_args = ["--workers", str(p.workers)]
        operator = h.new_operator(base_args, "cold")
        try:
            _run_cold_sync(h, operator)
            _run_zkop_idle(h, operator)
            log.info("scenario update_latency")
            h.results["update_latency"] = update_latency(h, operator)
            log.info("update_latency: %s", brief(h.results["update_latency"]))
            log.info("scenario drift_latency")
            h.results["drift_latency"] = drift_latency(h, operator)
            log.info("drift_latency: %s", brief(h.results["drift_latency"]))
        finally:
            h.stop_operator(operator)
        log.info("scenario warm_restart")
        h.results["warm_restart"] = warm_restart(h, h.new_operator(base_args, "warm"))
        log.info("warm_restart: %s", brief(h.results["warm_restart"]))
        log.info("scenario resync")
        h.results["resync"] = resync(h, float(h.results["warm_restart"]["settled_seconds"]))
        log.info("resync: %s", brief(h.results["resync"]))
        log.info("scenario bridge")
        bridge_result, bridge_operator = bridge(h)
        h.results["bridge"] = bridge_result
        if bridge_operator is not None:
            h.stop_operator(bridge_operator)
        log.info("bridge: %s", brief(bridge_result))
        h.results["memory"] = memory(h, bridge_operator is not None)
        log.info("reading the transaction log")
        h.count_txns()
        report = _report(h, time.monotonic() - run_started)
    finally:
        _stop_everything(h)
    return report


def _run_floor(h: Harness) -> None:
    """Scenario ``floor`` into ``h.results``."""
    if h.p.floor_runs == 0:  # the floor-relative targets are then not judged (met: null)
        log.info("scenario floor skipped (--floor-runs 0)")
        h.results["floor"] = {"skipped": "--floor-runs 0"}
        return
    log.info("scenario floor")
    h.results["floor"] = floor(h)
    log.info("floor: %s", brief(h.results["floor"]))


def _run_plane_idle(h: Harness) -> None:
    """Scenario ``plane_idle`` (real control plane only): the main plane alone, before zkop starts."""
    if isinstance(h.api, RealApi):
        seconds = 2.0 if h.p.smoke else 10.0
        log.info("scenario plane_idle (%.0f s)", seconds)
        h.results["plane_idle"] = plane_idle(h.api, seconds)
        log.info("plane_idle: %s", brief(h.results["plane_idle"]))


def _run_zkop_idle(h: Harness, operator: OperatorProcess) -> None:
    """Scenario ``zkop_idle`` (real control plane only): zkop after its cold sync, everything in sync, left
    alone; what it costs the cluster, read against ``plane_idle``."""
    if isinstance(h.api, RealApi):
        before = h.snapshot(operator)
        idle = h.idle(operator, before, until=time.monotonic() + (2.0 if h.p.smoke else 10.0))
        if idle is not None:
            h.results["zkop_idle"] = idle
            log.info("zkop_idle: %s", brief(idle))


def _run_cold_sync(h: Harness, operator: OperatorProcess) -> None:
    """The fixed-cost baseline (a cold sync of N/10), then scenario ``cold_sync``, into ``h.results``."""
    log.info("cold_sync baseline (fixed CPU costs)")
    h.results["_cold_sync_baseline"] = cold_sync_baseline(h)
    log.info("scenario cold_sync")
    h.results["cold_sync"] = cold_sync(h, operator)
    log.info("cold_sync: %s", brief(h.results["cold_sync"]))


def _stop_everything(h: Harness) -> None:
    """Stop every operator the run started (errors ignored), then the API server and ZooKeeper."""
    for operator in h.operators:
        with contextlib.suppress(Exception):
            operator.stop(timeout=10)
    if h.api is not None:
        h.api.stop()
    if h.zk is not None:
        h.zk.stop()


def run_cpu(h: Harness) -> JSON:
    """Only ``floor`` and ``cold_sync`` with its baseline (``--scenario cpu``): the CPU-per-object figures
    (on the real control plane also ``plane_idle`` and ``zkop_idle``: what it costs the cluster)."""
    p = h.p
    run_started = _begin_run(h)
    try:
        with zk_client(h.server) as zk:
            zk.ensure_path(MAIN_CHROOT)
        _run_floor(h)
        h.api, h.kubeconfig = h.new_api("main")
        _run_plane_idle(h)
        operator = h.new_operator(["--workers", str(p.workers)], "cold")
        try:
            _run_cold_sync(h, operator)
            _run_zkop_idle(h, operator)
        finally:
            h.stop_operator(operator)
        h.count_txns()
    finally:
        _stop_everything(h)
    floor_result, cold = h.results["floor"], h.results["cold_sync"]
    scenarios: JSON = {"floor": floor_result, "cold_sync": cold}
    scenarios.update({k: h.results[k] for k in ("plane_idle", "zkop_idle") if k in h.results})
    return {
        "params": {**asdict(p), "python": platform.python_version(), "cpus": os.cpu_count(), "git": h.git,
                   "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "duration_s": round(time.monotonic() - run_started, 1), "zkop_client_qps": _qps_param(p),
                   "machine_load": {"start": h.load_before, "end": machine_load()}},
        "scenarios": scenarios,
        "targets": {
            "cold_sync_vs_floor": cold_sync_target(cold),
            "cpu_per_object_vs_floor": cpu_target(floor_result, cold),
            **cluster_targets(scenarios, p),
        },
    }


def _run_params(h: Harness, run_started: float) -> JSON:
    """The report's ``params`` of a run of one scenario: the run's parameters, the machine, the revision, when and how
    long, the client's QPS and the machine's load at both ends."""
    return {**asdict(h.p), "python": platform.python_version(), "cpus": os.cpu_count(), "git": h.git,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "duration_s": round(time.monotonic() - run_started, 1), "zkop_client_qps": _qps_param(h.p),
            "machine_load": {"start": h.load_before, "end": machine_load()}}


def _run_only(h: Harness, name: str, what: str, scenario: Callable[[Harness], JSON],
              summary: Callable[[JSON], object]) -> JSON:
    """Run scenario ``name`` alone (``--scenario name``; ``what`` says what it measures in the log line,
    ``summary`` what the last log line shows of its result); the report, without targets."""
    run_started = _begin_run(h)
    try:
        log.info("scenario %s (%s)", name, what)
        result = scenario(h)
        log.info("%s: %s", name, summary(result))
    finally:
        _stop_everything(h)
    return {"params": _run_params(h, run_started), "scenarios": {name: result}, "targets": {}}


def run_ensembles(h: Harness) -> JSON:
    """Only the ``ensembles`` scenario (``--scenario ensembles``, issue #25 item 8); returns the report."""
    return _run_only(h, "ensembles", f"{h.p.ensembles} ensembles of {h.p.objects_per_ensemble} objects", ensembles,
                     lambda result: result["per_ensemble"])


def run_tree(h: Harness) -> JSON:
    """Only the ``tree`` scenario (``--scenario tree``, issue #39 item 5); returns the report."""
    return _run_only(h, "tree", f"one ZooKeeperConfigTree of {h.p.n} properties, then {h.p.n} ZooKeeperConfigs",
                     tree_scenario, lambda result: result["tree_vs_configs"])


def run_peers(h: Harness) -> JSON:
    """Only the ``peers`` scenario (``--scenario peers``, issue 42): zkop beside the Go controller-runtime peer per
    worker count; returns the report."""
    return _run_only(h, "peers", f"N = {h.p.n}, workers {h.p.peer_workers}, {h.p.peer_repeats} repeats", peers,
                     lambda result: {w: r["zkop_over_go"] for w, r in result["by_workers"].items()})


def run_realistic(h: Harness) -> JSON:
    """Only the ``realistic`` scenario (``--scenario realistic``); returns the report."""
    run_started = _begin_run(h)
    try:
        log.info("scenario realistic")
        result = realistic(h)
        log.info("realistic: %s", brief(result))
    finally:
        _stop_everything(h)
    scale = h.p.n >= 10000 and h.p.m >= 5000 and h.p.realistic_secrets >= 2000
    unreferenced = result["configmaps_secrets_listed_unreferenced"]
    return {
        "params": {**asdict(h.p), "python": platform.python_version(), "cpus": os.cpu_count(), "git": h.git,
                   "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "duration_s": round(time.monotonic() - run_started, 1),
                   "machine_load": {"start": h.load_before, "end": machine_load()}},
        "scenarios": {"realistic": result},
        "targets": {
            "realistic_memory_rss": target(
                "< 150 MB RSS at N = 10,000, M = 5,000, 2,000 Helm Secrets of 50 KB, managedFields everywhere",
                result["rss_mb"], (result["rss_mb"] is not None and result["rss_mb"] < 150) if scale else None,
                "" if scale else "judged only at the scale parameters"),
            "realistic_no_unreferenced_list": target(
                "start-up lists no Secret or ConfigMap that no ZooKeeperConfig references",
                unreferenced, unreferenced == 0),
        },
    }


def run_instructions(h: Harness, sizes: tuple[int, int], valgrind: str) -> JSON:
    """Only the ``instructions`` scenario (``--scenario instructions``); returns the report."""
    run_started = time.monotonic()
    h.git = git_revision()
    load_before = machine_load()
    h.zk = ZooKeeperServer()
    h.zk.start()
    try:
        log.info("scenario instructions (callgrind, N = %d and %d)", *sizes)
        result = instructions(h, sizes)
        log.info("instructions: %s", result["ratios"])
    finally:
        _stop_everything(h)
    return {
        "params": {**asdict(h.p), "instructions_n": list(sizes), "python": platform.python_version(),
                   "cpus": os.cpu_count(), "git": h.git, "valgrind": valgrind,
                   "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "duration_s": round(time.monotonic() - run_started, 1),
                   "machine_load": {"start": load_before, "end": machine_load()}},
        "scenarios": {"instructions": result},
        "targets": {},
    }


def _report(h: Harness, seconds: float) -> JSON:
    p = h.p
    scenarios: dict[str, JSON] = {name: h.results[name] for name in
                 ("floor", "cpu_reference", "plane_idle", "cold_sync", "zkop_idle", "warm_restart", "resync",
                  "update_latency", "drift_latency", "bridge", "memory") if name in h.results}
    return {
        "params": {**asdict(p), "python": platform.python_version(), "cpus": os.cpu_count(),
                   "git": h.git,
                   "zookeeper": h.server.mntr().get("zk_version", "?").split(",")[0] if h.zk else "?",
                   "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "duration_s": round(seconds, 1),
                   "machine_load": {"start": h.load_before, "end": machine_load()},
                   "cluster": h.seeded or {"realistic": False},
                   "zkop_client_qps": _qps_param(p)},
        "scenarios": scenarios,
        "targets": {**targets(scenarios, p), **cluster_targets(scenarios, p), **scale_targets(scenarios, p)},
    }



_DESCRIPTION = "zkop's benchmark: convergence speed and idle quietness, measured against the API server's own floor."


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m hack.bench", description=_DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=None, help="ZooKeeperConfig objects (default 2000; smoke 50)")
    parser.add_argument("--m", type=int, default=None, help="Services (default 1000; smoke 20)")
    parser.add_argument("--smoke", action="store_true", help="N=50, M=20, short streams: for CI, well under 60 s")
    parser.add_argument("--scale", action="store_true",
                        help=f"issue #17's scale run: N={SCALE_N}, M={SCALE_M}, every scenario in the realistic "
                             f"cluster, one floor run, a reference cold sync at N={SCALE_CPU_REFERENCE_N} and the "
                             "scale_* targets (with --smoke: the same wiring at smoke size)")
    parser.add_argument("--realistic-cluster", action="store_true",
                        help="seed every scenario's API server like a real cluster (as --scenario realistic does): "
                             "kube-root-ca.crt per namespace, Helm release Secrets, managedFields everywhere")
    parser.add_argument("--cpu-reference-n", type=int, default=None,
                        help=f"run a reference cold sync at this N first (default {SCALE_CPU_REFERENCE_N} with "
                             "--scale, else none)")
    parser.add_argument("--floor-runs", type=int, default=None,
                        help="runs of the floor and of the controller floor, the median taken (default 3; "
                             "1 with --scale or --smoke; 0 skips the floor, its targets then not judged, not with "
                             "--scenario cpu or instructions)")
    parser.add_argument("--workers", type=int, default=8, help="zkop run --workers (default 8)")
    parser.add_argument("--update-rate", type=float, default=50.0, help="spec.data changes per second (default 50)")
    parser.add_argument("--update-seconds", type=float, default=None, help="length of the update stream (default 10)")
    parser.add_argument("--drift-rate", type=float, default=10.0, help="hand edits per second (default 10)")
    parser.add_argument("--drift-seconds", type=float, default=None, help="length of the hand edits (default 10)")
    parser.add_argument("--table", action="store_true", help="print a readable table instead of the JSON object")
    parser.add_argument("--output", type=Path, default=None, help="also write the JSON report to this file")
    parser.add_argument("--keep-workdir", action="store_true", help="keep operator logs and kubeconfigs")
    parser.add_argument("--apiserver-pprof", type=Path, default=None, metavar="DIR",
                        help="real control plane: kube-apiserver's CPU profile (/debug/pprof/profile) of every cold "
                             "sync and floor run into DIR/<run>-<n>-<i>.pb.gz (go tool pprof -top merges a run's)")
    parser.add_argument("--py-spy", type=Path, default=None, metavar="DIR",
                        help="profile zkop and the API server during cold_sync with py-spy (must be installed; "
                             "collapsed stacks go to DIR)")
    parser.add_argument("--scenario",
                        choices=("all", "realistic", "cpu", "instructions", "ensembles", "tree", "peers"),
                        default="all",
                        help="all: every scenario but realistic (default); realistic: only the realistic-cluster "
                             "footprint (RSS, start-up LIST load); cpu: only floor and cold_sync (CPU per object); "
                             "instructions: zkop's cold sync, the floor and the controller floor under callgrind "
                             "(needs valgrind); ensembles: threads, memory and CPU of zkop with --ensembles "
                             "ZooKeeperEnsembles (issue #25); tree: a cold sync of one ZooKeeperConfigTree of N "
                             "properties beside N ZooKeeperConfigs, and a one-line change of each (issue #39); peers: "
                             "zkop beside a minimal Go controller-runtime operator per --workers-list count, on the "
                             "real control plane (hack/build-bench-peers.sh builds the Go peer; issue 42)")
    parser.add_argument("--workers-list", default=",".join(map(str, DEFAULT_WORKERS)), metavar="W1,W2,...",
                        help="--scenario peers: the --workers counts, one pair of runs per repeat each "
                             "(default %(default)s; smoke 2)")
    parser.add_argument("--repeats", type=int, default=None,
                        help="--scenario peers: runs of each operator per worker count, medians reported "
                             "(default 3; smoke 1)")
    parser.add_argument("--plot", type=Path, default=None, metavar="FILE.png",
                        help="--scenario peers: also draw the worker-scaling curves into this PNG (needs "
                             "matplotlib: pip install -e '.[bench]')")
    parser.add_argument("--ensembles", default="1,5,20", metavar="K1,K2,...",
                        help="--scenario ensembles: the numbers of ZooKeeperEnsembles, one run each "
                             "(default %(default)s; smoke 2)")
    parser.add_argument("--objects-per-ensemble", type=int, default=None,
                        help="--scenario ensembles: ZooKeeperConfigs per ensemble (default 1000; smoke 5)")
    parser.add_argument("--idle-seconds", type=float, default=None,
                        help="--scenario ensembles: the idle window after each cold sync (default 60; smoke 2)")
    parser.add_argument("--instructions-n", default=",".join(map(str, DEFAULT_SIZES)), metavar="N1,N2",
                        help="--scenario instructions: the two sizes whose difference gives the marginal "
                             "instructions per object (default %(default)s)")
    parser.add_argument("--realistic-secrets", type=int, default=None,
                        help="Helm release Secrets seeded by the realistic scenario (default 2000; smoke 20)")
    parser.add_argument("--realistic-secret-kb", type=int, default=None, help="KB per Secret (default 50; smoke 5)")
    parser.add_argument("--realistic-no-managed-fields", action="store_true",
                        help="the realistic scenario without the seeded objects' three managers (a control run; "
                             "the API server still records its own managedFields)")
    parser.add_argument("--zk-watch-mode", choices=["auto", "persistent", "per-node"], default=None,
                        help="zkop run --zk-watch-mode for every zkop process (sets ZOOKEEPER_WATCH_MODE; "
                             "default: zkop's own, auto)")
    parser.add_argument("--control-plane", choices=("auto", "real", "double"), default="auto",
                        help="real: every environment is a real etcd + kube-apiserver + kube-controller-manager "
                             "(hack/control-plane/build.sh; never built by the bench); double: the in-memory API "
                             "server; auto (default): real where its binaries are built, else double")
    parser.add_argument("--k8s-version", default=None, metavar="MINOR",
                        help="Kubernetes minor of the real control plane (default: the newest built)")
    parser.add_argument("--zkop-default-qps", action="store_true",
                        help="run zkop with its default client-side QPS and burst (50/100) instead of lifting them")
    parser.add_argument("--floor-client", type=Path, default=None, help=argparse.SUPPRESS)
    return parser


def params_from_args(args: argparse.Namespace) -> Params:
    """:class:`Params` from parsed flags (``--smoke`` picks the small defaults)."""
    return _ensemble_params(args, _params_from_args(args))


def _ensemble_params(args: argparse.Namespace, params: Params) -> Params:
    """``params`` with the ``--scenario ensembles`` fields from the flags (``--smoke``: 2 ensembles of 5 objects,
    2 s idle).

    Raises:
        SystemExit: ``--ensembles`` is not a list of positive integers, or ``--objects-per-ensemble`` < 1.
    """
    try:
        counts = parse_counts("2" if args.smoke and args.ensembles == "1,5,20" else args.ensembles)
    except ValueError as err:
        raise SystemExit(str(err)) from err
    per = _given(args.objects_per_ensemble, 5 if args.smoke else 1000)
    if per < 1:
        raise SystemExit("--objects-per-ensemble must be at least 1")
    idle = args.idle_seconds if args.idle_seconds is not None else (2.0 if args.smoke else 60.0)
    try:
        workers = parse_workers("2" if args.smoke and args.workers_list == ",".join(map(str, DEFAULT_WORKERS))
                                else args.workers_list)
    except ValueError as err:
        raise SystemExit(str(err)) from err
    repeats = _given(args.repeats, 1 if args.smoke else 3)
    if repeats < 1:
        raise SystemExit("--repeats must be at least 1")
    return replace(params, ensembles=counts, objects_per_ensemble=per, ensemble_idle_seconds=idle,
                   peer_workers=workers, peer_repeats=repeats)


def _params_from_args(args: argparse.Namespace) -> Params:
    realistic_cluster = bool(args.realistic_cluster or args.scale)
    if args.smoke:
        n = args.n or 50
        return Params(n=n, m=args.m or 20, workers=args.workers, floor_threads=args.workers,
                      update_rate=args.update_rate,
                      update_seconds=args.update_seconds or 2.0, drift_rate=args.drift_rate,
                      drift_seconds=args.drift_seconds or 2.0, min_sync_period=3.0, quiet=0.5, smoke=True,
                      floor_runs=_given(args.floor_runs, 1), realistic_secrets=_given(args.realistic_secrets, 20),
                      realistic_secret_kb=_given(args.realistic_secret_kb, 5), realistic_namespaces=3,
                      realistic_refs=10, realistic_managed_fields=not args.realistic_no_managed_fields,
                      realistic_cluster=realistic_cluster, scale=args.scale,
                      cpu_reference_n=_given(args.cpu_reference_n, max(2, n // 2) if args.scale else 0))
    return Params(n=args.n or (SCALE_N if args.scale else 2000), m=args.m or (SCALE_M if args.scale else 1000),
                  workers=args.workers, floor_threads=args.workers, update_rate=args.update_rate,
                  update_seconds=args.update_seconds or 10.0, drift_rate=args.drift_rate,
                  drift_seconds=args.drift_seconds or 10.0, realistic_secrets=_given(args.realistic_secrets, 2000),
                  realistic_secret_kb=_given(args.realistic_secret_kb, 50),
                  realistic_managed_fields=not args.realistic_no_managed_fields,
                  floor_runs=_given(args.floor_runs, 1 if args.scale else 3), realistic_cluster=realistic_cluster,
                  scale=args.scale,
                  cpu_reference_n=_given(args.cpu_reference_n, SCALE_CPU_REFERENCE_N if args.scale else 0))


def _qps_param(p: Params) -> str:
    return "zkop's default (50 QPS, burst 100)" if p.default_qps else "lifted (--kube-api-qps -1)"


def choose_plane(args: argparse.Namespace, params: Params) -> Params:
    """``params`` with the control plane the flags ask for (``auto``: real where built, double otherwise; always
    the double for ``--scenario instructions``).

    Raises:
        SystemExit: ``real`` was asked for but no minor is built, or for ``--scenario instructions``.
    """
    wanted = args.control_plane
    # --scenario instructions counts zkop's and the clients' instructions, which do not depend on where the
    # API server runs: it keeps the double (not run under callgrind beside a real plane yet).
    if wanted == "double" or args.scenario == "instructions":
        if wanted == "real":
            raise SystemExit("--scenario instructions runs on the in-memory API server only")
        return replace(params, control_plane="double", default_qps=args.zkop_default_qps)
    minor = cached_minor((args.k8s_version,)) if args.k8s_version else cached_minor()
    if minor is None:
        if wanted == "real":
            raise SystemExit("--control-plane real: no control plane is built (hack/control-plane/build.sh)")
        return replace(params, control_plane="double", default_qps=args.zkop_default_qps)
    return replace(params, control_plane="real", k8s_minor=minor, default_qps=args.zkop_default_qps)


def _given(value: int | None, default: int) -> int:
    return default if value is None else value


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = build_parser().parse_args(argv)
    if args.floor_client is not None:
        print(json.dumps(floor_client(json.loads(args.floor_client.read_text()))))
        return 0
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("kazoo").setLevel(logging.WARNING)
    params = choose_plane(args, params_from_args(args))
    if args.zk_watch_mode is not None:
        os.environ["ZOOKEEPER_WATCH_MODE"] = args.zk_watch_mode  # inherited by every zkop process
    if params.n < 2:
        raise SystemExit("--n must be at least 2")
    if params.floor_runs < 0 or (params.floor_runs == 0 and args.scenario in ("cpu", "instructions")):
        raise SystemExit("--floor-runs must be at least 1 (0, no floor, only for the scenarios that do not "
                         "compare with it: all, realistic, ensembles)")
    if params.cpu_reference_n < 0 or params.cpu_reference_n == 1:
        raise SystemExit("--cpu-reference-n must be 0 (none) or at least 2")
    # SIGTERM (a test's or CI's timeout, `kill`) unwinds like Ctrl-C, in every scenario: the finally blocks stop
    # zkop, the floor clients, the API servers and ZooKeeper, and deal with the workdir.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    compile_zkop()
    if args.scenario == "instructions":
        return _main_instructions(args, params)
    if args.scenario == "peers":
        _check_peers(args, params)
    workdir = Path(tempfile.mkdtemp(prefix="zkop-bench-"))
    log.info("workdir %s; params %s", workdir, params)
    ok = False
    try:
        harness = Harness(params, workdir, py_spy=args.py_spy, apiserver_pprof=args.apiserver_pprof)
        run = {"realistic": run_realistic, "cpu": run_cpu, "ensembles": run_ensembles,
               "tree": run_tree, "peers": run_peers}.get(args.scenario, run_all)
        report = run(harness)
        ok = True
    finally:
        if ok and not args.keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            log.info("operator logs kept in %s", workdir)
    _print_report(args, report)
    if args.plot is not None and args.scenario == "peers":
        plot(report, args.plot)
        log.info("worker-scaling curves drawn into %s", args.plot)
    return 0


def compile_zkop() -> None:
    """Compile zkop's modules to bytecode in place (``__pycache__``, ignored by git), as ``pip install`` does for the
    image: the operators the bench starts then load them as a deployed zkop does. Without it, with
    ``PYTHONDONTWRITEBYTECODE`` set (this machine's environment, the image's too), every start from a source checkout
    compiles each module again: about 0.09 s of CPU per start, 0.05 ms per object at N = 2,000 (docs/performance.md,
    "Levers of issue 42")."""
    if not compileall.compile_dir(str(Path(__file__).resolve().parents[2] / "zkop"), quiet=1):
        raise SystemExit("zkop's modules do not compile")


def _check_peers(args: argparse.Namespace, params: Params) -> None:
    """``--scenario peers`` can run: the real control plane, the Go peer built, matplotlib there for ``--plot``.

    Raises:
        SystemExit: one of them is missing (the message says how to get it).
    """
    if params.control_plane != "real":
        raise SystemExit("--scenario peers runs on the real control plane only (hack/control-plane/build.sh)")
    try:
        go_peer_binary()
    except GoPeerMissing as err:
        raise SystemExit(str(err)) from err
    if args.plot is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError as err:
            raise SystemExit("--plot needs matplotlib: pip install -e '.[bench]'") from err


def _print_report(args: argparse.Namespace, report: JSON) -> None:
    text = json.dumps(report, indent=2)
    if args.output is not None:
        args.output.write_text(text + "\n")
    print(render_table(report) if args.table else text)


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _main_instructions(args: argparse.Namespace, params: Params) -> int:
    """``--scenario instructions``: exit 2 with one line when valgrind is missing or the sizes are wrong.

    Its workdir (callgrind files of tens of MB) is removed even when the run fails, unless
    ``--keep-workdir``; the errors carry zkop's log tail.
    """
    try:
        sizes = parse_sizes(args.instructions_n)
        valgrind = valgrind_version()
    except (ValueError, ValgrindMissing) as err:
        print(f"python -m hack.bench: error: {err}", file=sys.stderr)
        return 2
    params = replace(params, n=sizes[1])
    workdir = Path(tempfile.mkdtemp(prefix="zkop-bench-"))
    log.info("workdir %s; %s; sizes %s; params %s", workdir, valgrind, sizes, params)
    try:
        report = run_instructions(Harness(params, workdir), sizes, valgrind)
    finally:
        if args.keep_workdir:
            log.info("workdir kept: %s", workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    _print_report(args, report)
    return 0

