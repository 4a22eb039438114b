"""An ensemble that lost its data: zkop rebuilds it from the cluster, with no restart of zkop.

``zkop run`` as a separate process (as its ServiceAccount on the real kube-apiserver, in the test's namespace),
real ZooKeeper wiped and restarted on the same addresses: a standalone server, and a
3-member ensemble whose members are all wiped. The wiped servers refuse zkop's old session
(it has seen zxids they do not have); zkop declares the session LOST once it has been
SUSPENDED for the session timeout (the time rule) or at once when the ensemble is asked and refuses
it (the refusal), makes a new one from scratch, and rewrites every managed znode, ownership record and
Service record. The time each fault took to converge is logged, not asserted: the refusal case shows
its path in the log instead.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import conditions, create, create_service_with_endpoints, get, synced, zkc
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperEnsemble, ZooKeeperServer

from zkop.kube.client import KubeClient, resource_path

log = logging.getLogger(__name__)

SESSION_TIMEOUT = 3.0  # the time rule; with 30 s the servers' refusal is what resets the session
CONFIGS = {f"flag-{i}": (f"/app/flags/flag-{i}", f"v{i}".encode()) for i in range(6)}
BRIDGE = ["--service-bridge", "--service-bridge-endpoints", "--service-bridge-endpoints-debounce", "0.1"]


def _args(session_timeout: float, namespace: str) -> list[str]:
    return ["--workers", "4", "--zk-session-timeout", f"{session_timeout:g}", *BRIDGE, "--namespace", namespace]


def _service_record(namespace: str) -> str:
    """The bridge's record of the Service ``web`` of ``namespace``."""
    return f"/kubernetes/services/{namespace}-web"


@pytest.fixture
def server() -> Iterator[ZooKeeperServer]:
    """A standalone server of this test's own, to be wiped (no chroot: a chroot would be wiped too)."""
    with ZooKeeperServer() as s:
        yield s


@pytest.fixture
def ensemble() -> Iterator[ZooKeeperEnsemble]:
    """A 3-member ensemble of this test's own, to be wiped."""
    with ZooKeeperEnsemble(3) as e:
        yield e


def _declare_everything(kube: KubeClient, namespace: str) -> None:
    for name, (path, data) in CONFIGS.items():
        create(kube, zkc(name, path, data, namespace=namespace))
    create_service_with_endpoints(kube, namespace=namespace)


def _missing(client: KazooClient, namespace: str) -> list[str]:
    """What of the managed state is not (yet) in ZooKeeper: znodes with their bytes, records, the Service."""
    missing = []
    for name, (path, data) in CONFIGS.items():
        try:
            if client.get(path)[0] != data:
                missing.append(path)
            record = json.loads(client.get("/zkop/owners" + path)[0])
            if record.get("name") != name:
                missing.append("/zkop/owners" + path)
        except NoNodeError as err:
            missing.append(f"{path} ({err.__class__.__name__})")
    if client.exists(_service_record(namespace)) is None:
        missing.append(_service_record(namespace))
    return missing


def _created_ms(client: KazooClient, namespace: str) -> dict[str, int]:
    """The creation time (``Stat.ctime``, ms since the epoch, the server's clock) of every managed znode,
    ownership record and the Service record."""
    paths = [p for path, _ in CONFIGS.values() for p in (path, "/zkop/owners" + path)] + [_service_record(namespace)]
    return {path: client.get(path)[1].ctime for path in paths}


@contextlib.contextmanager
def _observer(hosts: str) -> Iterator[KazooClient]:
    """A reading client. Only its session creation is a transaction: opened once, after the wipe, it leaves
    the wiped ensemble's zxid far below zkop's (every new session would raise it, and a server ahead of
    zkop's zxid takes the old session back as expired: the easy case, not the one tested here)."""
    client = KazooClient(hosts=hosts, timeout=10)
    client.start(timeout=30)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def _all_synced(kube: KubeClient, namespace: str) -> bool:
    return all(synced(kube, name, namespace) for name in CONFIGS)


def _resets(operator: OperatorProcess) -> float:
    for line in operator.metrics().splitlines():
        if line.startswith("zkop_zookeeper_session_resets_total "):
            return float(line.split()[-1])
    return 0.0


def _survive_data_loss(operator: OperatorProcess, kube: KubeClient, hosts: str, wipe: object, what: str,
                       session_timeout: float, namespace: str) -> float:
    """Converge, wipe, and return the seconds from the wipe until everything is back."""
    _declare_everything(kube, namespace)
    wait_for(lambda: _all_synced(kube, namespace), timeout=30, message="synced before the fault")
    with _observer(hosts) as before:
        wait_for(lambda: not _missing(before, namespace), timeout=15, message="everything written before the fault")
        created_before = _created_ms(before, namespace)
    assert _resets(operator) == 0
    assert operator.proc is not None
    pid = operator.proc.pid
    started = time.monotonic()
    wiped_at_ms = time.time() * 1000  # the servers run on this machine: the same clock as Stat.ctime
    assert max(created_before.values()) < wiped_at_ms
    wipe()  # type: ignore[operator]
    with _observer(hosts) as after:
        wait_for(lambda: not _missing(after, namespace), timeout=session_timeout + 60,
                 message=f"{what}: every znode, ownership record and Service record rewritten\n"
                         f"{operator.log_tail(40)}")
        # The data really was gone and everything is zkop's rewrite, not a survivor: each was created
        # after the wipe began. (Not "missing right after the wipe": zkop may rewrite it all before an
        # observer that connects after a slow wipe reads anything.)
        created_after = _created_ms(after, namespace)
    assert all(ms >= wiped_at_ms for ms in created_after.values()), (wiped_at_ms, created_after)
    converged = time.monotonic() - started
    log.warning("%s: everything rewritten %.1f s after the wipe began (session timeout %g s)",
                what, converged, session_timeout)
    # The same zkop process, one session given up and replaced from scratch.
    assert operator.proc.pid == pid and operator.proc.poll() is None, "zkop was not restarted"
    assert _resets(operator) == 1
    lines = operator.log_tail(5000).splitlines()
    given_up = [line for line in lines if "given up:" in line]
    assert len(given_up) == 1 and "Declaring it LOST and starting a new session from scratch" in given_up[0]
    if session_timeout > 20:
        # Not the time rule (it would have waited out the 30 s session timeout): the ensemble was asked, refused
        # the session twice in a row, and that refusal is the reason the session was given up.
        session_lines = "\n".join(line for line in lines if "session" in line or "refus" in line)
        assert "the ensemble refuses the session" in given_up[0], session_lines
        assert not [line for line in lines if "longer than the session timeout" in line], session_lines
        second_refusal = [i for i, line in enumerate(lines) if "refuses the suspended session (check 2 of 2)" in line]
        assert second_refusal and second_refusal[-1] < lines.index(given_up[0]), session_lines
    wait_for(lambda: operator.probe() == 200, timeout=10, message="ready again")
    wait_for(lambda: _all_synced(kube, namespace), timeout=15, message="still Synced")
    return converged


@pytest.mark.parametrize("session_timeout", [SESSION_TIMEOUT, 30.0], ids=["time-rule", "refusal"])
def test_standalone_server_wiped_and_restarted(kubeconfig: str, kube: KubeClient, server: ZooKeeperServer,
                                               session_timeout: float, namespace: str) -> None:
    with OperatorProcess(kubeconfig, server.hosts, _args(session_timeout, namespace)) as operator:
        _survive_data_loss(operator, kube, server.hosts, server.wipe_and_restart, "standalone server wiped",
                           session_timeout, namespace)


@pytest.mark.parametrize("session_timeout", [SESSION_TIMEOUT, 30.0], ids=["time-rule", "refusal"])
def test_ensemble_wiped_and_restarted(kubeconfig: str, kube: KubeClient, ensemble: ZooKeeperEnsemble,
                                      session_timeout: float, namespace: str) -> None:
    with OperatorProcess(kubeconfig, ensemble.hosts, _args(session_timeout, namespace)) as operator:
        _survive_data_loss(operator, kube, ensemble.hosts, ensemble.wipe_and_restart, "3-node ensemble wiped",
                           session_timeout, namespace)


def test_while_the_reset_lasts_readiness_and_status_say_so(kubeconfig: str, kube: KubeClient,
                                                           server: ZooKeeperServer, namespace: str) -> None:
    with OperatorProcess(kubeconfig, server.hosts, _args(SESSION_TIMEOUT, namespace)) as operator:
        create(kube, zkc("flag", "/app/flag", b"on", namespace=namespace))
        wait_for(lambda: synced(kube, "flag", namespace), timeout=15, message="synced")
        server.kill()  # gone for now; it comes back empty
        wait_for(lambda: "session reset in progress" in _readyz(operator), timeout=4 * SESSION_TIMEOUT,
                 message="readiness names the reset")
        # A change zkop cannot write meanwhile says why in status.
        kube.request("PATCH", resource_path("platform.example.com", "v1alpha1", "zookeeperconfigs", namespace,
                                            "flag"), body={"spec": {"data": "b2Zm"}},
                     content_type="application/merge-patch+json")

        def unavailable() -> str | None:
            ready = conditions(get(kube, "flag", namespace)).get("Ready", {})
            return ready.get("message") if ready.get("reason") == "ZooKeeperUnavailable" else None

        message = wait_for(unavailable, timeout=30, message="status says ZooKeeper is unavailable")
        assert "session reset in progress" in message
        server.wipe_and_restart()
        wait_for(lambda: operator.probe() == 200, timeout=30, message="ready again")
        wait_for(lambda: synced(kube, "flag", namespace), timeout=30, message="written after the reset")


def _readyz(operator: OperatorProcess) -> str:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{operator.health_port}/readyz?verbose", timeout=2) as r:
            return str(r.read().decode())
    except urllib.error.HTTPError as err:
        return str(err.read().decode())
    except OSError:
        return ""
