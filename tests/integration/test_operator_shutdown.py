"""A graceful shutdown leaves nothing running: in-process, and ``zkop run`` on SIGTERM.

Real ZooKeeper and the real kube-apiserver (zkop as its ServiceAccount, in the test's namespace; its Lease one
of the test's own in ``zkop-system``). In-process, the threads alive after :meth:`Operator.run` returns are
compared with those before it started (only threads running zkop's or kazoo's code count: the test's own
clients' threads run neither). The ``zkop run`` process runs under a small wrapper that prints the threads still
alive once ``main`` has returned, then exits with its code. In both, a ZooKeeper session listener takes 2 s over
the final LOST, standing for a feature's work on a state change: the shutdown must wait for it, not leave it
running (2 s outlasts the rest of the shutdown after the session closed, the probe and metrics servers' ends
included, so on main the listener's thread is still running when ``run`` returns).
"""

from __future__ import annotations

import json
import signal
import sys
import threading

from kazoo.client import KazooClient
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import create, read, synced, zkc
from zkop_testing.threads import zkop_threads
from zkop_testing.waiting import EVENTUALLY, wait_for
from zkop_testing.zkop_install import ZKOP_NAMESPACE
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import KubeClient
from zkop.operator.options import OperatorOptions
from zkop.operator.run import Operator
from zkop.runtime.manager import ManagerOptions
from zkop.zookeeper.adapter import ConnectionOptions

#: Seconds the session listener takes over LOST.
BUSY = 2.0

#: Runs ``python -m zkop <args>`` in-process (its arguments follow ``-c``: the interpreter, ``-m``,
#: ``zkop``, then zkop's) with a slow LOST listener on the ZooKeeper session, and prints
#: ``THREADS <json list>`` of the threads alive once it returned.
WRAPPER = f"""
import json, sys, threading
from zkop.cmd.main import main
from zkop.zookeeper.adapter import ZooKeeperAdapter
init = ZooKeeperAdapter.__init__
def slow_lost(state):
    if state == "LOST":
        threading.Event().wait({BUSY})
def with_slow_listener(self, *args, **kwargs):
    init(self, *args, **kwargs)
    self.add_session_listener(slow_lost)
ZooKeeperAdapter.__init__ = with_slow_listener
code = main(sys.argv[4:])
left = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
print("THREADS " + json.dumps(left), flush=True)
sys.exit(code)
"""


def slow_lost(state: str) -> None:
    if state == "LOST":
        threading.Event().wait(BUSY)


def test_operator_run_returns_with_no_thread_of_its_own_left(kubeconfig: str, kube: KubeClient,
                                                             zk_server: ZooKeeperServer, zk_base: str,
                                                             zk: KazooClient, namespace: str, lease: str) -> None:
    options = OperatorOptions(
        kubeconfig=kubeconfig, zookeeper=ConnectionOptions(hosts=f"{zk_server.hosts}{zk_base}", session_timeout=4),
        manager=ManagerOptions(metrics_bind_address="127.0.0.1:0", health_probe_bind_address="127.0.0.1:0"), workers=2,
        leader_elect=True, leader_election_namespace=ZKOP_NAMESPACE, leader_election_id=lease, lease_duration=30,
        renew_deadline=20, retry_period=0.5, namespaces=[namespace],
    )
    before = set(threading.enumerate())
    operator = Operator(options)
    operator.zookeeper.add_session_listener(slow_lost)
    codes: list[int] = []
    runner = threading.Thread(target=lambda: codes.append(operator.run()), name="test-operator-run")
    runner.start()
    try:
        create(kube, zkc("flag", "/app/flag", b"true", namespace=namespace))
        wait_for(lambda: synced(kube, "flag", namespace), message="synced")
        assert read(zk, zk_base + "/app/flag") == b"true"
        running = {t.name for t in threading.enumerate() if t not in before}
        # Spot checks that the comparison sees the threads of each owner.
        assert {"zk-session-events", "zk-session-watchdog", "leader-election", "event-recorder"} <= running, running
    finally:
        operator.stop()
        runner.join(EVENTUALLY)
    assert not runner.is_alive()
    assert codes == [0]
    assert zkop_threads(before) == []


def test_sigterm_exits_0_with_the_work_drained_and_no_thread_left(kubeconfig: str, kube: KubeClient,
                                                                  zk_server: ZooKeeperServer, zk_base: str,
                                                                  zk: KazooClient, namespace: str, lease: str) -> None:
    names = [f"flag-{i}" for i in range(12)]
    proc = OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", ["--workers", "4", "--leader-elect",
                                                                       "--leader-election-namespace", ZKOP_NAMESPACE,
                                                                       "--leader-election-id", lease,
                                                                       "--namespace", namespace],
                           command_prefix=[sys.executable, "-c", WRAPPER])
    with proc:
        create(kube, zkc("first", "/app/first", b"1", namespace=namespace))
        wait_for(lambda: synced(kube, "first", namespace), message="first synced")
        for name in names:
            create(kube, zkc(name, f"/app/{name}", b"v", namespace=namespace))
        # SIGTERM while the new objects are being reconciled.
        wait_for(lambda: any(read(zk, f"{zk_base}/app/{n}") is not None for n in names),
                 message="reconciles under way")
        proc.signal(signal.SIGTERM)
        code = proc.wait(EVENTUALLY)
    log = proc.log_tail(400)
    assert code == 0, log
    assert "received SIGTERM; shutting down" in log
    assert "still running" not in log, log  # no owner gave up waiting for a thread
    left = [line for line in log.splitlines() if line.startswith("THREADS ")]
    assert left, log
    assert json.loads(left[-1].removeprefix("THREADS ")) == []
    # Drained: a reconcile in flight at SIGTERM finished, so no znode was written without its status.
    half_done = [n for n in names if read(zk, f"{zk_base}/app/{n}") is not None and not synced(kube, n, namespace)]
    assert half_done == []
