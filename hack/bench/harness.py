"""The benchmark's environment, shared by every scenario (module ``hack.bench``)."""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from zkop_testing.apiserver import ApiServer
from zkop_testing.apiserver_realistic import SeedReport, managed_fields_for, seed
from zkop_testing.crds import install_crds
from zkop_testing.metrics import Metrics
from zkop_testing.operator import OperatorProcess
from zkop_testing.txnlog import read_txn_log
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import KubeClient
from zkop.zkconfig.spec import GROUP, PLURAL, VERSION

from .measure import (
    GcPauses,
    ops_delta,
    per_item,
    proc_cpu_seconds,
    quiet_heap,
    scrape,
    server_packets,
    server_stats,
    server_zxid,
    state_counts,
)
from .params import (
    CONTROLLER,
    JSON,
    MAIN_CHROOT,
    NAMESPACE,
    SERVICE_NAMESPACE,
    Params,
    cr_data,
    cr_manifest,
    cr_path,
    svc_manifest,
    throttle_args,
)
from .realplane import ApiserverProfile, RealApi, cost_rates
from .realseed import REAL_SEEDING, put_many, seed_real
from .txns import TxnWindow, txn_summary

#: An environment's API server: the in-memory double or a real control plane.
Api = ApiServer | RealApi

log = logging.getLogger("bench")


@dataclass
class Snapshot:
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



class Harness:
    """What every scenario shares: the ZooKeeper server, the main API server, operators, snapshots and waits.

    Args:
        params: what to run.
        workdir: operator logs, kubeconfigs, scratch files.
    """

    def __init__(self, params: Params, workdir: Path, *, py_spy: Path | None = None,
                 apiserver_pprof: Path | None = None) -> None:
        self.p = params
        self.workdir = workdir
        self.py_spy = py_spy
        #: ``--apiserver-pprof DIR``: kube-apiserver CPU profiles of each cold sync and floor run (real plane only).
        self.apiserver_pprof = apiserver_pprof
        self.zk: ZooKeeperServer | None = None
        self.api: Api | None = None
        self.kubeconfig = ""
        self.txn_windows: list[TxnWindow] = []
        self.results: dict[str, JSON] = {}
        self.operators: list[OperatorProcess] = []
        self.operator_count = 0
        self.git: JSON = {}
        self.gc = GcPauses()
        #: The ZooKeeper chroot of :attr:`api`'s operators (``zkop run --zk-hosts host:port<chroot>``).
        self.chroot = MAIN_CHROOT
        #: What the realistic seeding created in the last :meth:`new_api` (``None``: not seeded).
        self.seeded: JSON | None = None
        #: :func:`hack.bench.runner.machine_load` when the run started.
        self.load_before: JSON = {}

    def child(self, params: Params, chroot: str) -> Harness:
        """A harness for a side run (another N, its own chroot and API server) sharing this one's
        ZooKeeper, transaction-log windows, operator list, GC pause log and floor result."""
        sub = copy.copy(self)
        sub.p = params
        sub.chroot = chroot
        sub.api = None
        sub.kubeconfig = ""
        sub.results = {k: v for k, v in self.results.items() if k == "floor"}
        return sub

    # --- environment ------------------------------------------------------------------------

    @property
    def server(self) -> ZooKeeperServer:
        """The ZooKeeper server (after :meth:`run` started it)."""
        assert self.zk is not None
        return self.zk

    @property
    def main_api(self) -> Api:
        """The API server of every scenario but the floor."""
        assert self.api is not None
        return self.api

    def new_api(self, name: str, n: int | None = None) -> tuple[Api, str]:
        """A fresh in-memory API server with zkop's CRDs and ``n`` (default N) ZooKeeperConfigs (straight into
        its store); returns it and its kubeconfig.

        With :attr:`Params.control_plane` ``"real"`` it is a fresh real control plane instead
        (:class:`~.realplane.RealApi`), the ZooKeeperConfigs created over HTTP by the bench's own identity
        (not counted), before anything is measured.

        With :attr:`Params.realistic_cluster` it is seeded like a real cluster first
        (:func:`zkop_testing.apiserver_realistic.seed`) and the ZooKeeperConfigs carry three
        managers' ``managedFields``; on the real plane through kube-apiserver, the ZooKeeperConfigs
        server-side applied (:func:`~.realseed.seed_real`, :func:`~.realseed.put_many`).
        Its watch history holds at least 2 n events, so that a
        paginated LIST or a watch resumed during a burst of n status writes is not answered 410
        merely because the double keeps less history than etcd's compaction window would.
        """
        n = self.p.n if n is None else n
        if self.p.control_plane == "real":
            return self._new_real_api(name, n)
        api = ApiServer(history_size=max(10000, 2 * n)).start()
        kubeconfig = str(api.write_kubeconfig(self.workdir / f"kubeconfig-{name}"))
        client = KubeClient(api.api_client())
        try:
            install_crds(client)
        finally:
            client.close()
        started = time.monotonic()
        if self.p.realistic_cluster:
            report = self.seed_cluster(api)
            self.seeded = {"namespaces": len(report.namespaces), "root_ca_configmaps": report.configmaps,
                           "helm_secrets": report.secrets, "helm_secret_mb": round(report.secret_bytes / 2**20, 1),
                           "managed_fields": self.p.realistic_managed_fields}
        rt = api.store.resolve(GROUP, VERSION, PLURAL)
        assert rt is not None
        for i in range(n):
            api.store.create(rt, NAMESPACE, self.realistic(cr_manifest(i)), {})
        log.info("%s API server %s: %d ZooKeeperConfigs created in %.1f s%s", name, api.url, n,
                 time.monotonic() - started, " (realistic cluster)" if self.p.realistic_cluster else "")
        api.clear_request_log()
        quiet_heap()
        return api, kubeconfig

    def _new_real_api(self, name: str, n: int) -> tuple[Api, str]:
        started = time.monotonic()
        real = RealApi(self.p.k8s_minor, self.workdir / f"plane-{name}")
        kubeconfig = str(real.write_kubeconfig(self.workdir / f"kubeconfig-{name}"))
        rt = real.store.resolve(GROUP, VERSION, PLURAL)
        if self.p.realistic_cluster:
            # Seeded through kube-apiserver like a real cluster: hack.bench.realseed.
            report = seed_real(real, namespaces=self.p.realistic_namespaces, helm_secrets=self.p.realistic_secrets,
                               secret_kb=self.p.realistic_secret_kb, managed_fields=self.p.realistic_managed_fields)
            self.seeded = {"namespaces": len(report.namespaces), "root_ca_configmaps": report.configmaps,
                           "helm_secrets": report.secrets, "helm_secret_mb": round(report.secret_bytes / 2**20, 1),
                           "managed_fields": self.p.realistic_managed_fields,
                           "how": REAL_SEEDING if self.p.realistic_managed_fields else "plain creates"}
            put_many(real, rt, NAMESPACE, (cr_manifest(i) for i in range(n)),
                     managed_fields=self.p.realistic_managed_fields)
        else:
            real.store.create_many(rt, NAMESPACE, (cr_manifest(i) for i in range(n)))
        wait_for(lambda: sum(real.states().values()) == n, timeout=self.scaled_timeout(60, 0.01),
                 message=f"{n} ZooKeeperConfigs in the bench's watch")
        log.info("%s control plane %s (Kubernetes %s): %d ZooKeeperConfigs created in %.1f s", name, real.url,
                 self.p.k8s_minor, n, time.monotonic() - started)
        real.clear_request_log()
        return real, kubeconfig

    def seed_cluster(self, api: ApiServer) -> SeedReport:
        """Seed ``api`` like a real cluster with the run's ``--realistic-*`` parameters
        (:func:`zkop_testing.apiserver_realistic.seed`)."""
        return seed(api, namespaces=self.p.realistic_namespaces, helm_secrets=self.p.realistic_secrets,
                    secret_kb=self.p.realistic_secret_kb, managed_fields=self.p.realistic_managed_fields)

    def realistic(self, body: JSON) -> JSON:
        """``body`` with three managers' ``managedFields`` when the cluster is seeded realistically."""
        if self.p.realistic_cluster and self.p.realistic_managed_fields:
            body["metadata"]["managedFields"] = managed_fields_for(body)
        return body

    def create_services(self, api: Api, m: int) -> None:
        """Namespace ``bench`` and the M Services, straight into the store (not timed, not logged; on the real
        control plane over HTTP by the bench's own identity, not counted)."""
        if isinstance(api, RealApi):
            if self.p.realistic_cluster:  # applied by the GitOps tool's field manager (hack.bench.realseed)
                applied = self.p.realistic_managed_fields
                put_many(api, api.store.resolve("", "v1", "namespaces"), None, [
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SERVICE_NAMESPACE}}],
                    managed_fields=applied)
                put_many(api, api.store.resolve("", "v1", "services"), SERVICE_NAMESPACE,
                         (svc_manifest(i) for i in range(m)), managed_fields=applied)
                return
            api.store.create(api.store.resolve("", "v1", "namespaces"), None,
                             {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SERVICE_NAMESPACE}}, {})
            api.store.create_many(api.store.resolve("", "v1", "services"), SERVICE_NAMESPACE,
                                  (svc_manifest(i) for i in range(m)))
            return
        store = api.store
        ns_rt = store.resolve("", "v1", "namespaces")
        svc_rt = store.resolve("", "v1", "services")
        assert ns_rt is not None and svc_rt is not None
        store.create(ns_rt, None, self.realistic(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SERVICE_NAMESPACE}}), {})
        for i in range(m):
            store.create(svc_rt, SERVICE_NAMESPACE, self.realistic(svc_manifest(i)), {})

    def scaled_timeout(self, base: float, per_object: float) -> float:
        """``base`` seconds plus ``per_object`` seconds for each of the N ZooKeeperConfigs.

        Every wait the bench does for zkop is bounded by one of these (or :meth:`timeout_for`),
        so that nothing sized for N = 2,000 cuts a run at N = 50,000 short.
        """
        return base + per_object * self.p.n

    def states(self, api: Api) -> Counter[str]:
        """``status.state`` of every ZooKeeperConfig, read from the store (no HTTP, not in the request log;
        on the real control plane from the bench's watch, :meth:`~.realplane.RealApi.states`).

        An object counts as ``Synced`` only when its status is at its current generation.
        """
        if isinstance(api, RealApi):
            return api.states()
        rt = api.store.resolve(GROUP, VERSION, PLURAL)
        assert rt is not None
        return state_counts(api.store.iter_objects(rt))

    def new_operator(self, args: Sequence[str], label: str, *, command_prefix: Sequence[str] = ()) -> OperatorProcess:
        """A ``zkop run`` (not started; :data:`~.params.UNTHROTTLED`) on :attr:`kubeconfig` and :attr:`chroot`,
        its log in the workdir, stopped by :func:`hack.bench.runner` at the end; ``command_prefix`` runs it
        under a wrapper (``valgrind …``: :mod:`hack.bench.instructions`)."""
        self.operator_count += 1
        log_path = self.workdir / f"zkop-{self.operator_count}-{label}.log"
        operator = OperatorProcess(self.kubeconfig, f"{self.server.hosts}{self.chroot}",
                                   [*throttle_args(self.p), *args], log_path=str(log_path),
                                   command_prefix=command_prefix)
        self.operators.append(operator)
        return operator

    def stop_operator(self, operator: OperatorProcess) -> None:
        code = operator.stop()
        if code not in (0, None):
            log.warning("zkop exited with %s; log %s", code, operator.log_path)

    def snapshot(self, operator: OperatorProcess | None = None, controller: str = CONTROLLER) -> Snapshot:
        stats = server_stats(self.server)
        snap = Snapshot(
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

    def wait_settled(self, operator: OperatorProcess, *, min_reconciles: float, timeout: float,
                      controller: str = CONTROLLER, api: Api | None = None) -> tuple[float, Metrics]:
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

    def gc_report(self, before: Snapshot, after: Snapshot) -> JSON:
        """Garbage collections in a window: zkop's (counts, from its metrics) and the API server's (pauses)."""
        return {"zkop_collections_by_generation": ops_delta(after.op_gc, before.op_gc),
                "apiserver_process": self.gc.summary(before.gc_index)}

    def txn_window(self, result: JSON, before: Snapshot, after: Snapshot, n: int) -> None:
        self.txn_windows.append(TxnWindow(result, before.zxid, after.zxid, n, self.chroot))

    def timeout_for(self, per_item: float, items: int, floor: float = 60.0) -> float:
        return floor + per_item * items

    # --- scenarios ------------------------------------------------------------------------

    def start_profilers(self, pids: Mapping[str, int]) -> list[subprocess.Popen[bytes]]:
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
            # ZKOP_BENCH_PYSPY_RATE: samples per second (default 200; more for a short run).
            rate = os.environ.get("ZKOP_BENCH_PYSPY_RATE", "200")
            procs.append(subprocess.Popen([exe, "record", "--pid", str(pid), "--format", "raw", "--rate", rate,
                                           "--gil", "--nonblocking", "--output", str(out)],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            log.info("py-spy recording %s (pid %d) to %s", name, pid, out)
        return procs

    def apiserver_profile(self, api: Api, label: str) -> contextlib.AbstractContextManager[object]:
        """kube-apiserver's CPU profile of a window into ``--apiserver-pprof DIR``/``label``-*.pb.gz
        (:class:`~.realplane.ApiserverProfile`); nothing without the flag or on the in-memory API server."""
        if self.apiserver_pprof is None or not isinstance(api, RealApi):
            return contextlib.nullcontext()
        return ApiserverProfile(api, self.apiserver_pprof / label, slice_seconds=1 if self.p.smoke else 5)

    @staticmethod
    def stop_profilers(procs: Sequence[subprocess.Popen[bytes]]) -> None:
        for proc in procs:
            proc.send_signal(signal.SIGINT)
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()

    def check_znodes(self, zk: KazooClient, chroot: str) -> int:
        """Number of the N znodes that do not hold their expected bytes (asynchronous reads)."""
        results = [(i, zk.get_async(f"{chroot}{cr_path(i)}")) for i in range(self.p.n)]
        wrong = 0
        for i, result in results:
            try:
                data, _ = result.get(timeout=30)
            except NoNodeError:
                data = None
            if data != cr_data(i) and not self.expected_override(i, data):
                wrong += 1
        return wrong

    def expected_override(self, i: int, data: bytes | None) -> bool:
        # After update_latency some CRs hold update-<k> values: those are right too.
        return data is not None and data.startswith(b"update-")

    def wait_ready(self, operator: OperatorProcess, started: float) -> float:
        """Wait until ``/readyz`` of ``operator`` answers 200; returns that monotonic time.

        Raises:
            TimeoutError: not ready within 120 s + 10 ms per ZooKeeperConfig of ``started``.
        """
        limit = self.scaled_timeout(120, 0.01)
        deadline = started + limit
        while True:
            if operator.proc is not None and operator.proc.poll() is not None:
                raise RuntimeError(f"zkop exited with {operator.proc.returncode}:\n{operator.log_tail()}")
            if operator.probe() == 200:
                return time.monotonic()
            if time.monotonic() > deadline:
                raise TimeoutError(f"zkop not ready after {limit:.0f} s\n{operator.log_tail(30)}")
            time.sleep(0.02)

    def idle(self, operator: OperatorProcess, before: Snapshot, *, until: float) -> JSON | None:
        """zkop left alone, everything in sync, until ``until`` (monotonic): CPU, API requests, packets.

        Nothing is scraped meanwhile (a scrape costs zkop CPU). ``None`` if less than 1 s is left.
        """
        seconds = until - time.monotonic()
        if seconds < 1.0 or operator.proc is None:
            return None
        real = self.main_api if isinstance(self.main_api, RealApi) else None
        cost0 = real.cost() if real is not None else None
        slept = time.monotonic()
        time.sleep(seconds)
        elapsed = time.monotonic() - before.mono
        cpu = proc_cpu_seconds(operator.proc.pid) - before.op_cpu
        packets = server_packets(self.server) - before.packets
        out: JSON = {"seconds": round(elapsed, 1), "zkop_cpu_percent": round(cpu / elapsed * 100, 2),
                     "api_requests": len(self.main_api.request_log) - before.log_len,
                     "zookeeper_packets_per_s": round(packets / elapsed, 2)}
        if real is not None and cost0 is not None:
            # What the cluster pays while zkop idles, beside the plane alone (scenario cluster_idle).
            out["cluster"] = cost_rates(cost0, real.cost(), time.monotonic() - slept)
        return out

    def count_txns(self) -> None:
        txns = read_txn_log(self.server.data_dir)
        for window in self.txn_windows:
            inside = [t for t in txns if window.zxid_from < t.zxid <= window.zxid_to]
            window.result.update(per_item(txn_summary(inside, window.n, window.chroot, window.bench_session),
                                           window.item))
