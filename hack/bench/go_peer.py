"""Scenario ``peers`` (issue 42): zkop beside a minimal Go controller-runtime operator, per worker count.

The Go peer (``hack/bench/peers``, built by ``hack/build-bench-peers.sh`` into a version-keyed cache; the bench
never builds it) does zkop's core job and nothing more: finalizer, create/update the znode with its parents, status
only on change, delete through the finalizer (docs/performance.md, "Go peer (issue 42)", lists what it leaves out).

For each ``--workers`` count of :attr:`Params.peer_workers` and each of :attr:`Params.peer_repeats` repeats, zkop
and the Go peer each run one cold sync of N ZooKeeperConfigs, in turn (which goes first alternates from one pair
to the next), each on a fresh real control plane (:class:`~.realplane.RealApi`: its own etcd, kube-apiserver and
audit log) and in a fresh ZooKeeper chroot of the bench's one server, both unthrottled on the client side
(``--kube-api-qps -1``) and without leader election. Each run measures, from spawn:

* throughput: N / seconds until every object is ``Synced`` at its generation (the bench's own watch);
* the operator's CPU per object: process CPU seconds (all threads, ``/proc``) until then, / N;
* what it cost the cluster until settled: kube-apiserver CPU per object, etcd puts per object (etcd's
  ``/metrics``), API writes per object (the audit log);
* RSS when synced and its peak;
* update latency: a short stream of ``spec.data`` changes (``--update-rate`` for ``--update-seconds``), the
  PATCH sent to ZooKeeper's watch event of the new bytes, p50/p99.

The report gives every run, the medians over repeats and the ratios zkop / Go of the medians per worker count.
"""

from __future__ import annotations

import base64
import logging
import os
import statistics
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from zkop_testing.operator import OperatorProcess

from zkop.kube.client import MERGE_PATCH, KubeClient, resource_path
from zkop.zkconfig.spec import GROUP, PLURAL, VERSION

from . import REPO
from .harness import Api, Harness
from .measure import (
    api_summary,
    latency_summary,
    proc_context_switches,
    proc_cpu_seconds,
    proc_cpu_split,
    proc_memory_mb,
    server_packets,
    zk_client,
)
from .observer import ZnodeObserver, equals
from .params import BENCH_AGENT, CONTROLLER, JSON, NAMESPACE, Params, cr_name, cr_path, throttle_args
from .realplane import RealApi, cost_delta
from .update_latency import _paced

log = logging.getLogger("bench")

#: The build script of the Go peer.
BUILD_SCRIPT = REPO / "hack" / "build-bench-peers.sh"
#: The operators compared, in the order of a pair's first run.
KINDS = ("zkop", "go")
#: Chroots of the runs: ``/peers/<kind>-w<workers>-r<repeat>``.
PEERS_CHROOT = "/peers"
#: Figures of a run whose medians and ratios the report gives.
FIGURES = ("cr_per_s", "cpu_ms_per_cr", "apiserver_cpu_ms_per_cr", "api_writes_per_cr", "etcd_puts_per_cr",
           "rss_mb", "update_p99_ms", "cpu_user_ms_per_cr", "cpu_system_ms_per_cr", "context_switches_per_cr",
           "threads", "zookeeper_packets_per_cr")
#: The default worker counts of ``--workers-list``.
DEFAULT_WORKERS = (1, 2, 4, 8, 16, 32, 64)


class GoPeerMissing(RuntimeError):
    """The Go peer is not built (``hack/build-bench-peers.sh``)."""


def go_peer_binary() -> Path:
    """The built Go peer (``hack/build-bench-peers.sh --cached``, which builds nothing).

    Raises:
        GoPeerMissing: it is not built.
    """
    done = subprocess.run(["bash", str(BUILD_SCRIPT), "--cached"], capture_output=True, text=True, check=False)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise GoPeerMissing("the Go peer is not built: run hack/build-bench-peers.sh (about 2.5 minutes cold)")
    return Path(lines[-1]) / "zkop-go-peer"


def parse_workers(text: str) -> tuple[int, ...]:
    """``"1,2,4"`` → ``(1, 2, 4)``.

    Raises:
        ValueError: not a comma-separated list of positive integers.
    """
    try:
        counts = tuple(int(part) for part in text.split(","))
    except ValueError:
        counts = ()
    if not counts or min(counts) < 1:
        raise ValueError(f"--workers-list must be positive integers separated by commas, not {text!r}")
    return counts


class GoPeerProcess(OperatorProcess):
    """The Go peer as a process, with :class:`~zkop_testing.operator.OperatorProcess`'s ports, log, probes, scrape
    and stop (``/metrics`` is controller-runtime's: the same ``controller_runtime_*`` and ``workqueue_*`` series)."""

    def __init__(self, binary: Path, kubeconfig: str, zk_hosts: str, args: Sequence[str], *, log_path: str) -> None:
        super().__init__(kubeconfig, zk_hosts, args, log_path=log_path)
        self.binary = binary

    def _launch(self) -> None:
        cmd = [str(self.binary), "--kubeconfig", self.kubeconfig, "--zk-servers", self.zk_hosts,
               "--metrics-bind-address", f"127.0.0.1:{self.metrics_port}",
               "--health-probe-bind-address", f"127.0.0.1:{self.health_port}", *self.args]
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _peer_args(p: Params, workers: int) -> list[str]:
    """The Go peer's flags: the same client-side limit as zkop's (none, or zkop's default 50/100)."""
    qps = ["--kube-api-qps", "50", "--kube-api-burst", "100"] if p.default_qps else ["--kube-api-qps", "-1"]
    return [*qps, "--workers", str(workers)]


def peers(h: Harness) -> JSON:
    """Scenario ``peers``: every run, medians over repeats and ratios zkop / Go per worker count.

    Raises:
        GoPeerMissing: the Go peer is not built.
        RuntimeError: a run did not converge every object, or left a znode without its bytes.
    """
    p = h.p
    binary = go_peer_binary()
    runs: dict[int, dict[str, list[JSON]]] = {w: {kind: [] for kind in KINDS} for w in p.peer_workers}
    pair = 0
    for workers in p.peer_workers:
        for repeat in range(p.peer_repeats):
            order = KINDS if pair % 2 == 0 else KINDS[::-1]
            pair += 1
            for kind in order:
                result = peer_run(h, kind, workers, repeat, binary)
                result["first_of_pair"] = kind == order[0]
                runs[workers][kind].append(result)
                log.info("peers %s workers=%d repeat=%d: %.1f CR/s, %.3f ms CPU per CR, update p99 %s ms", kind,
                         workers, repeat + 1, result["cr_per_s"], result["cpu_ms_per_cr"], result["update_p99_ms"])
    by_workers: JSON = {}
    for workers, kinds in runs.items():
        medians = {kind: _medians(kinds[kind]) for kind in KINDS}
        by_workers[str(workers)] = {
            "median": medians,
            "zkop_over_go": {f: _ratio(medians["zkop"][f], medians["go"][f]) for f in FIGURES},
            "runs": kinds,
        }
    return {
        "params": {"n": p.n, "workers": list(p.peer_workers), "repeats": p.peer_repeats,
                   "update_rate_per_s": p.update_rate, "update_seconds": p.update_seconds,
                   "go_peer": str(binary),
                   "measured": "each run on a fresh control plane and chroot, zkop and the Go peer alternating "
                               "first; cr_per_s and cpu_ms_per_cr from spawn until every object is Synced; "
                               "cluster figures from spawn until settled"},
        "figures": list(FIGURES),
        "by_workers": by_workers,
    }


def _medians(runs: Sequence[JSON]) -> JSON:
    out: JSON = {}
    for figure in FIGURES:
        values = [float(r[figure]) for r in runs if r.get(figure) is not None]
        out[figure] = round(statistics.median(values), 3) if values else None
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else round(a / b, 3)


def peer_run(h: Harness, kind: str, workers: int, repeat: int, binary: Path) -> JSON:
    """One cold sync of N objects by ``kind`` (``"zkop"`` or ``"go"``) on a fresh control plane and chroot, then a
    short update stream; the run's figures (:data:`FIGURES` and their parts).

    Raises:
        RuntimeError: the operator exited, or left a znode without its bytes.
        TimeoutError: the cold sync or settling took too long.
    """
    p = h.p
    label = f"peers-{kind}-w{workers}-r{repeat}"
    chroot = f"{PEERS_CHROOT}/{kind}-w{workers}-r{repeat}"
    api, kubeconfig = h.new_api(label)
    operator: OperatorProcess | None = None
    try:
        with zk_client(h.server) as zk:
            zk.ensure_path(chroot)
        h.operator_count += 1
        log_path = str(h.workdir / f"{kind}-{h.operator_count}-{label}.log")
        hosts = f"{h.server.hosts}{chroot}"
        if kind == "zkop":
            operator = OperatorProcess(kubeconfig, hosts, [*throttle_args(p), "--workers", str(workers)],
                                       log_path=log_path)
        else:
            operator = GoPeerProcess(binary, kubeconfig, hosts, _peer_args(p, workers), log_path=log_path)
        h.operators.append(operator)
        result = _cold_sync(h, api, operator, chroot, label if kind == "zkop" else None)
        result.update(_updates(h, api, chroot))
        result["params"] = {"kind": kind, "workers": workers, "repeat": repeat, "chroot": chroot}
        return result
    finally:
        if operator is not None:
            h.stop_operator(operator)
        api.stop()


def _cold_sync(h: Harness, api: Api, operator: OperatorProcess, chroot: str, profile: str | None = None) -> JSON:
    """Start ``operator``, wait until every object is Synced, then settled; the cold sync's figures. With ``--py-spy
    DIR`` a Python operator (``profile``: its label; ``None`` for the Go peer) is profiled until every object is
    Synced (``DIR/cold_sync-<label>.txt``)."""
    n = h.p.n
    assert isinstance(api, RealApi)
    cost0 = api.cost()
    storage0 = api.storage_requests()
    packets0 = server_packets(h.server)
    log_len = len(api.request_log)
    started = time.monotonic()
    operator.start(wait_ready=False)
    assert operator.proc is not None
    pid = operator.proc.pid
    profilers = h.start_profilers({profile: pid}) if profile is not None else []
    deadline = started + h.timeout_for(0.2, n)
    while True:
        if operator.proc.poll() is not None:
            raise RuntimeError(f"{operator.args} exited with {operator.proc.returncode}:\n{operator.log_tail()}")
        synced = h.states(api).get("Synced", 0)
        if synced == n:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"cold sync incomplete: {dict(h.states(api))}\n{operator.log_tail(30)}")
        time.sleep(0.1 if synced >= 0.9 * n else 0.25)
    synced_at = time.monotonic()
    cpu = proc_cpu_seconds(pid)
    packets = server_packets(h.server) - packets0
    split = proc_cpu_split(pid)
    switches = proc_context_switches(pid)
    memory = proc_memory_mb(pid)
    h.stop_profilers(profilers)
    settled_at, _ = h.wait_settled(operator, min_reconciles=n, timeout=h.timeout_for(0.1, n), controller=CONTROLLER,
                                   api=api)
    cluster = cost_delta(cost0, api.cost(), n)
    storage = api.storage_requests()
    storage.subtract(storage0)
    cluster["etcd_requests_by_kind"] = {k: v for k, v in sorted(storage.items()) if v}
    records = api.request_log[log_len:]
    with zk_client(h.server) as zk:
        wrong = h.check_znodes(zk, chroot)
    if wrong:
        raise RuntimeError(f"{wrong} of {n} znodes under {chroot} do not hold their bytes")
    seconds = synced_at - started
    summary = api_summary(records, n)
    return {
        "seconds": round(seconds, 3),
        "settled_seconds": round(settled_at - started, 3),
        "cr_per_s": round(n / seconds, 1),
        "synced": n,
        "znodes_wrong": wrong,
        "cpu_s": round(cpu, 3),
        "cpu_ms_per_cr": round(cpu * 1000 / n, 3),
        "cpu_ms_per_cr_settled": round(proc_cpu_seconds(pid) * 1000 / n, 3),
        "cpu_user_ms_per_cr": round(split["user"] * 1000 / n, 3),
        "cpu_system_ms_per_cr": round(split["system"] * 1000 / n, 3),
        "context_switches_per_cr": round(switches / n, 2),
        "threads": len(os.listdir(f"/proc/{pid}/task")),
        "zookeeper_packets_per_cr": round(packets / n, 2),
        "apiserver_cpu_ms_per_cr": cluster["apiserver_cpu_ms_per_cr"],
        "etcd_puts_per_cr": cluster["etcd_puts_per_cr"],
        "api_writes_per_cr": summary["api_writes_per_cr"],
        "api_requests_by_kind": summary["api_requests_by_kind"],
        "cluster": cluster,
        "rss_mb": memory.get("VmRSS"),
        "rss_peak_mb": memory.get("VmHWM"),
    }


def _updates(h: Harness, api: Api, chroot: str) -> JSON:
    """A stream of ``spec.data`` changes to at most 100 objects at ``--update-rate``; latency to ZooKeeper."""
    p = h.p
    paths_count = max(1, min(100, p.n // 2))
    total = max(1, int(p.update_rate * p.update_seconds))
    kube = KubeClient(api.api_client(), user_agent=BENCH_AGENT)
    errors: list[str] = []
    try:
        with zk_client(h.server) as zk:
            observer = ZnodeObserver(zk)
            observer.watch([f"{chroot}{cr_path(i)}" for i in range(paths_count)])

            def send(k: int) -> None:
                i = k % paths_count
                value = f"update-{k}".encode()
                observer.expect(f"{chroot}{cr_path(i)}", equals(value), label=k)
                try:
                    kube.request("PATCH", resource_path(GROUP, VERSION, PLURAL, NAMESPACE, cr_name(i)),
                                 body={"spec": {"data": base64.b64encode(value).decode()}}, content_type=MERGE_PATCH)
                except Exception as err:  # counted in the report, not raised: the stream goes on
                    errors.append(repr(err))

            _paced(send, total, p.update_rate)
            completed = observer.wait(h.scaled_timeout(30, 0.001))
    finally:
        kube.close()
    samples = [(o.observed_mono - o.sent_mono) * 1000 for o in observer.observations]
    summary = latency_summary(samples)
    return {"update_latency": {**summary, "changes": total, "all_observed": completed, "patch_errors": len(errors)},
            "update_p99_ms": summary["p99_ms"]}


def plot(report: JSON, path: Path) -> None:
    """The worker-scaling curves of a ``peers`` report as a PNG at ``path``: throughput, CPU per object,
    kube-apiserver CPU per object and p99 update latency against workers, zkop's and the Go peer's medians.

    Raises:
        SystemExit: matplotlib is not installed (``pip install -e '.[bench]'``).
    """
    try:
        import matplotlib
    except ImportError as err:
        raise SystemExit("--plot needs matplotlib: pip install -e '.[bench]'") from err
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scenario = report["scenarios"]["peers"]
    workers = sorted(int(w) for w in scenario["by_workers"])
    panels = (("cr_per_s", "objects / s"), ("cpu_ms_per_cr", "operator CPU ms / object"),
              ("apiserver_cpu_ms_per_cr", "kube-apiserver CPU ms / object"), ("update_p99_ms", "update p99, ms"))
    fig, axes = plt.subplots(2, 2, figsize=(10, 7), constrained_layout=True)
    for ax, (figure, title) in zip(axes.flat, panels, strict=True):
        for kind, label in (("zkop", "zkop"), ("go", "Go controller-runtime peer")):
            values = [scenario["by_workers"][str(w)]["median"][kind][figure] for w in workers]
            ax.plot(workers, values, marker="o", label=label)
        ax.set_xscale("log", base=2)
        ax.set_xticks(workers, [str(w) for w in workers])
        ax.set_xlabel("--workers")
        ax.set_title(title)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    axes.flat[0].legend(loc="best")
    params = scenario["params"]
    fig.suptitle(f"Cold sync of N = {params['n']:,} ZooKeeperConfigs, medians of {params['repeats']} "
                 f"(Kubernetes {report['params'].get('k8s_minor', '?')})")
    fig.savefig(path, dpi=100)
    plt.close(fig)
