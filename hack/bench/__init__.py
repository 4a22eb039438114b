"""zkop's benchmark: convergence speed and idle quietness, measured against the API server's own floor.

Absolute times on shared machines are noise; ratios taken in one run on one machine are not.
This package starts a real ZooKeeper (:mod:`zkop_testing.zookeeper`) and the in-memory API
server (:mod:`zkop_testing.apiserver`, in this process) -- or, with ``--control-plane real`` (the
default where built), a real etcd + kube-apiserver + kube-controller-manager per environment
(:mod:`hack.bench.realplane`; seeded like a real cluster by server-side apply where asked,
:mod:`hack.bench.realseed`) --, runs ``zkop run`` as its own
process (:mod:`zkop_testing.operator`), runs every scenario and prints one JSON object
(``--table``: a readable table instead)::

    .venv/bin/python -m hack.bench                    # N = 2,000 CRs, M = 1,000 Services (minutes)
    .venv/bin/python -m hack.bench --n 10000 --m 5000 # the scale run
    .venv/bin/python -m hack.bench --smoke            # N = 50, M = 20: CI's check that this still runs
    .venv/bin/python -m hack.bench --scale            # issue #17: N = 50,000, M = 20,000, realistic cluster
    .venv/bin/python -m hack.bench --realistic-cluster  # every scenario in a cluster seeded like a real one
    .venv/bin/python -m hack.bench --scenario instructions  # instructions per object under callgrind
    .venv/bin/python -m hack.bench --control-plane double   # on the in-memory API server
    .venv/bin/python -m hack.bench --scenario ensembles     # zkop with 1, 5 and 20 ZooKeeperEnsembles (issue #25)
    .venv/bin/python -m hack.bench.gcpause            # the gc.freeze() lever (issue #26)

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
* ``plane_idle``, ``zkop_idle`` — real control plane only: kube-apiserver and etcd CPU and etcd
  writes per second with the plane alone, then with zkop idle after its cold sync.
* ``memory`` — RSS (``/proc/<pid>/status`` VmRSS) of ``zkop run`` with N CRs and M Services cached.
* ``cpu_reference`` (``--scale``, or ``--cpu-reference-n``) — a ``cold_sync`` at N = 2,000 in a cluster
  seeded alike (own API server and chroot): the CPU per object the scale run is judged against.
* ``realistic`` (only with ``--scenario realistic``) — the same in a cluster seeded like a real one
  (``kube-root-ca.crt`` per namespace, 2,000 Helm release Secrets of 50 KB, ``managedFields``
  everywhere): zkop's RSS and its start-up LIST load (objects and bytes per resource).
* ``instructions`` (only with ``--scenario instructions``, needs valgrind) — zkop's cold sync, the
  floor and the controller floor under callgrind at two sizes (``--instructions-n``, default
  100,600): instructions per run, marginal instructions per object, and their ratios.
* ``ensembles`` (only with ``--scenario ensembles``) — k ZooKeeperEnsembles (``--ensembles``, default
  1,5,20), each on a real ZooKeeper server of its own, with ``--objects-per-ensemble`` (1,000)
  ZooKeeperConfigs each, one ``zkop run --zookeeper-ensembles`` per k: cold-sync time and CPU, threads,
  peak and settled RSS, idle CPU, and their slopes per ensemble (:mod:`hack.bench.ensembles`).

Counting: API requests come from the API server's request log; ZooKeeper operations from
zkop's own ``zkop_zookeeper_request_duration_seconds_count{operation}`` and ZooKeeper's
``mntr`` (``zk_packets_received``); ZooKeeper *writes* from the server's transaction log read
with ZooKeeper's ``TxnLogToolkit`` (:mod:`zkop_testing.txnlog`), counted between the zxids
that open and close each scenario. Scenarios use their own chroot (``/floor``, ``/main``) and
their own API server, so they do not see each other's objects.

Logs go to stderr. The exit code is 0 even when targets are missed (they are reported); it

Layout: one module per scenario (``floor``, ``cold_sync``, ``update_latency``,
``drift_latency``, ``warm_restart``, ``resync``, ``bridge``, ``memory``, ``realistic``,
``instructions``, ``ensembles``), what they share
(``harness``: servers, operators, snapshots, waits; ``measure``, ``observer``, ``txns``,
``params``; ``realplane`` and ``realseed``: the real control plane and its seeding),
the runner and command line (``runner``) and ``report`` (targets, table).
Run it from the repository root (``python -m hack.bench``); results of past runs are kept
in ``docs/bench/*.json``.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # runnable from a checkout without the editable install
    sys.path.insert(0, str(REPO))

from .report import render_table, targets  # noqa: E402

__all__ = ["REPO", "render_table", "targets"]
