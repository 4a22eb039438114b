"""``zkop run`` on SIGTERM while one of its API requests never gets an answer, on the real control plane.

CI once killed ``zkop run`` 30 s after SIGTERM (``test_an_instance_spring_cloud_zookeeper_registers_is_imported``):
the importer's full sync was deleting a Service whose ZooKeeper service node had gone (a genuine
reconcile), its request went unanswered for about 30 s, and the drain waited the whole
``--graceful-shutdown-timeout`` (then 30 s) for it, as long as the kubelet's default grace period
and the test's. zkop's API traffic goes here through a TCP proxy that is then frozen (a dead network
path: the request is sent, nothing comes back, no connection is closed), and the importer's
delete is made to hang the same way. With zkop's default flags it must still drain, cancel the
request, and exit 0 well inside the kubelet's default 30 s; the Services it imported stay (a
shutdown deletes nothing: the next leader takes them over).
"""

from __future__ import annotations

import time
from pathlib import Path

from kazoo.client import KazooClient
from zkop_testing.controlplane import ControlPlane
from zkop_testing.metrics import Metrics
from zkop_testing.operator import OperatorProcess
from zkop_testing.services import endpoints, events, get_service, register
from zkop_testing.tcpproxy import TcpProxy
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.cmd.flags import GRACEFUL_SHUTDOWN_TIMEOUT
from zkop.kube.client import KubeClient


def importing(proc: OperatorProcess) -> bool:
    """Whether a ``service-import`` reconcile is running (``controller_runtime_active_workers``)."""
    return Metrics(proc.metrics()).total("controller_runtime_active_workers", controller="service-import") > 0


#: The kubelet's default ``terminationGracePeriodSeconds``: SIGKILL follows SIGTERM after this long.
KUBELET_GRACE = 30.0


def test_sigterm_while_a_request_hangs_exits_0_inside_the_kubelets_default_grace(
        plane: ControlPlane, zkop_kubeconfig: str, kube: KubeClient, namespace: str, zk_server: ZooKeeperServer,
        zk_base: str, chrooted: KazooClient, tmp_path: Path) -> None:
    ns = namespace
    host, port = plane.url.removeprefix("https://").rsplit(":", 1)
    with TcpProxy((host, int(port))) as proxy:
        kubeconfig = tmp_path / "proxied.kubeconfig"
        kubeconfig.write_text(Path(zkop_kubeconfig).read_text().replace(plane.url, f"https://{proxy.address}"))
        args = ["--namespace", ns, "--import-services", "--import-namespace", ns, "--cluster-id", "prod"]
        proc = OperatorProcess(str(kubeconfig), f"{zk_server.hosts}{zk_base}", args).start()
        try:
            register(chrooted, "billing", "a", "10.30.0.5")
            gone = register(chrooted, "gone", "a", "10.30.0.7")
            wait_for(lambda: endpoints(kube, "billing", ns) == {"10.30.0.5": True}
                     and endpoints(kube, "gone", ns) == {"10.30.0.7": True}, message="both imported")
            # Their Imported Events written too, so that the request the freeze catches is the importer's.
            wait_for(lambda: len(events(kube, "Imported", ns)) == 2, message="both Imported Events written")
            proxy.freeze()
            # The service goes from ZooKeeper (its node with it): the full sync's deletes are sent and never answered.
            removal = chrooted.transaction()
            removal.delete(gone)
            removal.delete(gone.rsplit("/", 1)[0])
            removal.commit()
            wait_for(lambda: proxy.held > 0, message="the importer's delete sent into the frozen path")
            # ... and its reconcile blocked in it: the importer's worker busy at two scrapes 0.2 s apart (a pass
            # that only reads ZooKeeper takes milliseconds).
            busy: list[bool] = []

            def blocked() -> bool:
                busy.append(importing(proc))
                return busy[-2:] == [True, True]

            wait_for(blocked, interval=0.2, message="the importer's reconcile blocked in the frozen delete")
            started = time.monotonic()
            code = proc.stop(timeout=KUBELET_GRACE)  # SIGKILL after the kubelet's default grace
            took = time.monotonic() - started
        finally:
            proc.stop(timeout=KUBELET_GRACE)
    log = proc.log_tail(400)
    assert code == 0, log
    assert GRACEFUL_SHUTDOWN_TIMEOUT <= took < KUBELET_GRACE - 5, (took, log)
    assert (f"service-import: reconciles still running after the {GRACEFUL_SHUTDOWN_TIMEOUT:g} s drain; their API "
            "requests are cancelled") in log, log
    assert "Traceback" not in log, log
    # Nothing imported was deleted by the shutdown: the frozen deletes never reached the API server either.
    assert get_service(kube, "billing", ns) is not None and endpoints(kube, "billing", ns) == {"10.30.0.5": True}
    assert get_service(kube, "gone", ns) is not None
