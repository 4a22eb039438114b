"""Scenario ``tree`` (``--scenario tree``): one ZooKeeperConfigTree of N properties beside N ZooKeeperConfigs
(issue #39, item 5).

Two runs, each with an API server of its own (the real control plane where built, else the in-memory double, as
every scenario), its own ZooKeeper chroot and its own ``zkop run --config-trees --workers W`` (client-side QPS
lifted, :data:`~.params.UNTHROTTLED`):

* ``tree``: one ConfigMap whose key ``application.properties`` holds N properties (``prop.<i>=value-<i>``) and one
  ZooKeeperConfigTree expanding it (``format: properties``) at :data:`TREE_ROOT`; created by the bench before zkop
  starts (not counted);
* ``configs``: N ZooKeeperConfigs, the bench's usual ones (:func:`~.params.cr_manifest`).

Each run measures, from spawn until everything converged (the tree ``Ready=True`` with N children synced at its
generation; every ZooKeeperConfig ``Synced``): seconds, zkop's CPU seconds (whole process, and from ``/readyz``
200 on: the reconcile phase alone), per child or object, zkop's RSS (``VmRSS`` then, ``VmHWM`` peak), ZooKeeper
write transactions and writes (the server's transaction log) and zkop's API requests and writes (the request log;
the audit log on the real plane). Then a one-line change: one property's value in the ConfigMap (the tree) or one
ZooKeeperConfig's ``spec.data`` (the configs), the bench's write → the new bytes seen on the znode (a watch), and
the ZooKeeper and API writes zkop made for it until it settled. Every znode is checked afterwards.
"""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml
from kazoo.exceptions import NoNodeError
from zkop_testing.crds import crd_established
from zkop_testing.operator import OperatorProcess
from zkop_testing.waiting import wait_for

from zkop.kube.client import MERGE_PATCH, ApiException, KubeClient, resource_path
from zkop.zkconfig.spec import GROUP, PLURAL, VERSION

from . import REPO
from .ensembles import _settle
from .harness import Api, Harness
from .measure import api_summary, proc_cpu_seconds, proc_memory_mb, zk_client
from .observer import ZnodeObserver, equals
from .params import API_WRITE_VERBS, BENCH_AGENT, JSON, NAMESPACE, cr_data, cr_name, cr_path
from .realplane import RealApi
from .txns import TxnWindow

log = logging.getLogger("bench")

TREE_CRD_FILE = REPO / "manifests" / "crd" / "zookeeperconfigtrees.yaml"
TREE_CRD = "zookeeperconfigtrees.platform.example.com"
TREES = (GROUP, VERSION, "zookeeperconfigtrees")
#: The tree's root (inside its run's chroot), its name and its ConfigMap's.
TREE_ROOT = "/bench/tree"
TREE_NAME = "bench-tree"
TREE_CONFIGMAP = "bench-properties"
PROPERTIES_KEY = "application.properties"
#: Chroots of the two runs on the bench's ZooKeeper server.
TREE_CHROOT, CONFIGS_CHROOT = "/tree-run", "/configs-run"


def prop_name(i: int) -> str:
    """The ``i``-th property's name (one child of the tree)."""
    return f"prop.{i:06d}"


def properties(n: int, changed: int | None = None) -> str:
    """``application.properties`` with ``n`` properties; property ``changed`` with the one-line change."""
    return "".join(f"{prop_name(i)}={'changed' if i == changed else f'value-{i}'}\n" for i in range(n))


def tree_manifest() -> JSON:
    """The ZooKeeperConfigTree expanding the ConfigMap's ``application.properties``."""
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ZooKeeperConfigTree",
            "metadata": {"name": TREE_NAME, "namespace": NAMESPACE},
            "spec": {"path": TREE_ROOT, "from": [{"configMapRef": {"name": TREE_CONFIGMAP}, "key": PROPERTIES_KEY,
                                                  "format": "properties"}]}}


def configmap_manifest(n: int, changed: int | None = None) -> JSON:
    """The ConfigMap of ``n`` properties."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": TREE_CONFIGMAP, "namespace": NAMESPACE},
            "data": {PROPERTIES_KEY: properties(n, changed)}}


def tree_scenario(h: Harness) -> JSON:
    """Scenario ``tree``: the ``tree`` run, then the ``configs`` run (see the module's docstring)."""
    p = h.p
    with zk_client(h.server) as zk:
        for chroot in (TREE_CHROOT, CONFIGS_CHROOT):
            zk.ensure_path(chroot)
    tree = _one_run(h, "tree")
    configs = _one_run(h, "configs")
    h.count_txns()
    return {
        "params": {"n": p.n, "workers": p.workers, "control_plane": p.control_plane,
                   "tree": f"one ZooKeeperConfigTree, one ConfigMap key '{PROPERTIES_KEY}' of N properties",
                   "configs": "N ZooKeeperConfigs",
                   "source": "/proc/<pid> of zkop run; ZooKeeper's transaction log; the API server's request log"},
        "tree": tree,
        "configs": configs,
        "tree_vs_configs": _ratios(tree, configs),
    }


def _ratios(tree: JSON, configs: JSON) -> JSON:
    """The tree's figure ÷ the ZooKeeperConfigs' for the figures that compare."""
    def ratio(get: Callable[[JSON], Any]) -> float | None:
        a, b = get(tree), get(configs)
        if isinstance(a, int | float) and isinstance(b, int | float) and b:
            return round(float(a) / float(b), 3)
        return None

    return {
        "cold_sync_seconds": ratio(lambda r: r["cold_sync_seconds"]),
        "cpu_ms_per_item": ratio(lambda r: r["cpu_ms_per_item"]),
        "cpu_after_ready_ms_per_item": ratio(lambda r: r["cpu_after_ready_ms_per_item"]),
        "rss_peak_mb": ratio(lambda r: r["rss_peak_mb"]),
        "zookeeper_writes": ratio(lambda r: r["cold_sync_zookeeper"].get("zookeeper_writes")),
        "zookeeper_write_transactions": ratio(
            lambda r: r["cold_sync_zookeeper"].get("zookeeper_write_transactions_per_item")),
        "api_writes": ratio(lambda r: r["cold_sync_api"]["api_writes"]),
    }


def _one_run(h: Harness, kind: str) -> JSON:
    """One run (``tree`` or ``configs``) in its own API server and chroot; its figures."""
    p = h.p
    n = p.n
    chroot = TREE_CHROOT if kind == "tree" else CONFIGS_CHROOT
    sub = h.child(replace(p, n=n), chroot)
    api, kubeconfig = sub.new_api(kind, 0 if kind == "tree" else n)
    sub.api, sub.kubeconfig = api, kubeconfig
    kube = api.kube if isinstance(api, RealApi) else KubeClient(api.api_client(), user_agent=BENCH_AGENT)
    operator: OperatorProcess | None = None
    try:
        _install_tree_crd(kube)  # in both runs: zkop runs with --config-trees in both
        if kind == "tree":
            _seed_tree(kube, n)
        api.clear_request_log()
        operator = sub.new_operator(["--workers", str(p.workers), "--config-trees"], f"tree-{kind}")
        converged: Callable[[], bool] = ((lambda: _tree_synced(kube, n)) if kind == "tree"
                                         else (lambda: sub.states(api).get("Synced", 0) >= n))
        before = sub.snapshot()
        started = time.monotonic()
        operator.start(wait_ready=False)
        assert operator.proc is not None
        pid = operator.proc.pid
        profilers = h.start_profilers({f"tree-{kind}": pid})
        ready_cpu: float | None = None
        ready_at: float | None = None
        deadline = started + sub.scaled_timeout(180, 0.05)
        while True:
            if operator.proc.poll() is not None:
                raise RuntimeError(f"zkop exited with {operator.proc.returncode}:\n{operator.log_tail()}")
            if ready_at is None and operator.probe() == 200:
                ready_at, ready_cpu = time.monotonic(), proc_cpu_seconds(pid)
            if converged():
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"{kind}: not converged after {time.monotonic() - started:.0f} s\n"
                                   f"{operator.log_tail(30)}")
            time.sleep(0.05 if ready_at is None else 0.25)
        synced_at = time.monotonic()
        cpu = proc_cpu_seconds(pid)
        memory = proc_memory_mb(pid)
        h.stop_profilers(profilers)
        after = sub.snapshot()
        cold_api = _zkop_requests(api, 0, len(api.request_log))
        log.info("tree scenario, %s run: converged in %.1f s, %.1f CPU s, RSS %s", kind, synced_at - started, cpu,
                 memory)
        _settle(sub, api, operator, quiet=max(1.0, p.quiet * 2))
        change = _one_line_change(sub, api, kube, operator, kind, chroot)
        wrong = _wrong_znodes(sub, kind, chroot, n)
        memory_end = proc_memory_mb(pid)
    finally:
        if operator is not None:
            sub.stop_operator(operator)
        if not isinstance(api, RealApi):
            kube.close()
        api.stop()
    after_ready = cpu - (ready_cpu or 0.0)
    result: JSON = {
        "items": n,
        "cold_sync_seconds": round(synced_at - started, 2),
        "ready_seconds": round(ready_at - started, 2) if ready_at is not None else None,
        "cpu_s": round(cpu, 2),
        "cpu_ms_per_item": round(cpu * 1000 / n, 3),
        "cpu_after_ready_s": round(after_ready, 2),
        "cpu_after_ready_ms_per_item": round(after_ready * 1000 / n, 3),
        "rss_synced_mb": memory.get("VmRSS"),
        "rss_peak_mb": memory_end.get("VmHWM"),
        "cold_sync_zookeeper": {},
        "cold_sync_api": cold_api,
        "one_line_change": change,
        "znodes_wrong": wrong,
    }
    h.txn_windows.append(TxnWindow(result["cold_sync_zookeeper"], before.zxid, after.zxid, n, chroot, "item"))
    return result


def _zkop_requests(api: Api, start: int, end: int) -> JSON:
    """zkop's API requests in the request log's ``[start, end)`` (the bench's own left out): totals and writes."""
    records = [r for r in api.request_log[start:end] if r.user_agent != BENCH_AGENT]
    summary = api_summary(records, 1)
    return {"api_requests": summary["api_requests"], "api_writes": summary["api_writes"],
            "api_status_writes": sum(1 for r in records if r.verb in API_WRITE_VERBS and r.subresource == "status"),
            "api_requests_by_kind": summary["api_requests_by_kind"]}


def _install_tree_crd(kube: KubeClient) -> None:
    """The ZooKeeperConfigTree CRD (``kubectl apply -f manifests/crd/zookeeperconfigtrees.yaml``), established."""
    crd = yaml.safe_load(Path(TREE_CRD_FILE).read_text(encoding="utf-8"))
    kube.request("POST", resource_path("apiextensions.k8s.io", "v1", "customresourcedefinitions"), body=crd)
    wait_for(lambda: crd_established(kube, TREE_CRD), message="the ZooKeeperConfigTree CRD established",
             ignore=(ApiException,))


def _seed_tree(kube: KubeClient, n: int) -> None:
    """The ConfigMap of ``n`` properties and the tree (the bench's writes, not counted)."""
    kube.request("POST", resource_path("", "v1", "configmaps", NAMESPACE), body=configmap_manifest(n))
    wait_for(lambda: kube.request("POST", resource_path(*TREES, NAMESPACE), body=tree_manifest()) is not None,
             message="the ZooKeeperConfigTree created", ignore=(ApiException,))


def _tree_status(kube: KubeClient) -> JSON:
    obj = kube.request("GET", resource_path(*TREES, NAMESPACE, TREE_NAME))
    status: JSON = obj.get("status") or {}
    status["_generation"] = obj["metadata"].get("generation")
    return status


def _tree_synced(kube: KubeClient, n: int, digest: str | None = None) -> bool:
    """The tree ``Ready=True`` at its generation with ``n`` children synced (and, given, another digest)."""
    status = _tree_status(kube)
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    return (ready and status.get("observedGeneration") == status["_generation"] and status.get("synced") == n
            and (digest is None or status.get("contentDigest") != digest))


def _one_line_change(h: Harness, api: Api, kube: KubeClient, operator: OperatorProcess, kind: str,
                     chroot: str) -> JSON:
    """One value changed by the bench (a property of the ConfigMap, or one ZooKeeperConfig's ``spec.data``): the
    latency until the znode holds it, and the writes zkop made for it until it settled."""
    n = h.p.n
    i = n // 2
    path = f"{chroot}{TREE_ROOT}/{prop_name(i)}" if kind == "tree" else f"{chroot}{cr_path(i)}"
    new = b"changed"
    with zk_client(h.server) as zk:
        observer = ZnodeObserver(zk)
        observer.watch([path])
        before = h.snapshot(operator)
        observer.expect(path, equals(new), label=0)
        start_log = len(api.request_log)
        sent = time.monotonic()
        if kind == "tree":
            kube.request("PUT", resource_path("", "v1", "configmaps", NAMESPACE, TREE_CONFIGMAP),
                         body=configmap_manifest(n, changed=i))
        else:
            kube.request("PATCH", resource_path(GROUP, VERSION, PLURAL, NAMESPACE, cr_name(i)),
                         body={"spec": {"data": base64.b64encode(new).decode()}}, content_type=MERGE_PATCH)
        observer.wait(60.0)
    seen = observer.observations
    latency_ms = (seen[0].observed_mono - sent) * 1000 if seen else None
    _settle(h, api, operator, quiet=max(1.0, h.p.quiet * 2))
    after = h.snapshot(operator)
    result: JSON = {"latency_ms": round(latency_ms, 1) if latency_ms is not None else None,
                    "measured": "the bench's API write -> the znode's watch event with the new bytes",
                    "zookeeper": {},
                    "api": _zkop_requests(api, start_log, len(api.request_log)),
                    "zkop_cpu_ms": round((after.op_cpu - before.op_cpu) * 1000, 1)}
    h.txn_windows.append(TxnWindow(result["zookeeper"], before.zxid, after.zxid, 1, chroot, "change"))
    return result


def _wrong_znodes(h: Harness, kind: str, chroot: str, n: int) -> int:
    """How many of the N znodes do not hold their bytes (after the one-line change)."""
    changed = n // 2
    with zk_client(h.server) as zk:
        if kind == "tree":
            paths = [f"{chroot}{TREE_ROOT}/{prop_name(i)}" for i in range(n)]
            expected = [b"changed" if i == changed else f"value-{i}".encode() for i in range(n)]
        else:
            paths = [f"{chroot}{cr_path(i)}" for i in range(n)]
            expected = [b"changed" if i == changed else cr_data(i) for i in range(n)]
        reads = [zk.get_async(path) for path in paths]
        wrong = 0
        for read, want in zip(reads, expected, strict=True):
            try:
                data, _ = read.get(timeout=30)
            except NoNodeError:
                data = None
            wrong += data != want
    return wrong


__all__ = ["tree_scenario"]
