"""zkop's API client keeps a connection for every thread that may hold one at once.

urllib3 opens a connection beyond its pool when every kept one is in use and, when the request ends,
closes it with a "Connection pool is full, discarding connection" warning: a busy operator would pay a
new TLS handshake for each such request and log a warning for each. The pool is sized by
:func:`zkop.operator.run.api_pool_size` (every controller's workers and the watches, never below
client-go's 25 idle connections per host), and grown by each ZooKeeperEnsemble's workers when it starts
(:meth:`zkop.kube.client.KubeClient.reserve_connections`). Here as many watches as the pool holds are open
at once through the operator's own client, on the real API server, and each ends at the server's
``timeoutSeconds``: every connection goes back to the pool, none is discarded.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from zkop.kube.client import KubeClient
from zkop.operator.options import OperatorOptions
from zkop.operator.run import IDLE_CONNECTIONS_PER_HOST, Operator, api_pool_size
from zkop.runtime.manager import ManagerOptions
from zkop.services.bridge.options import BridgeOptions
from zkop.zookeeper.adapter import ConnectionOptions

WATCH_PATH = "/apis/platform.example.com/v1alpha1/zookeeperconfigs"


def hold_connections(client: KubeClient, count: int, caplog: pytest.LogCaptureFixture) -> list[str]:
    """Open ``count`` watches at once through ``client`` and read each to its end; urllib3's discard warnings."""
    opened = threading.Barrier(count)

    def hold_a_connection(i: int) -> int:
        # The server ends each watch after timeoutSeconds; reading it to its end gives the connection back.
        stream = client.watch(WATCH_PATH, query={"timeoutSeconds": 3, "resourceVersion": "0"}, timeout=(10, 30))
        opened.wait(timeout=60)  # all of them open at once
        return sum(1 for _ in stream.lines())

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="urllib3"), ThreadPoolExecutor(max_workers=count) as pool:
        list(pool.map(hold_a_connection, range(count)))
    return [r.getMessage() for r in caplog.records if "Connection pool is full" in r.getMessage()]


def test_pool_holds_every_worker_and_watch(kubeconfig: str, caplog: pytest.LogCaptureFixture) -> None:
    options = OperatorOptions(kubeconfig=kubeconfig, zookeeper=ConnectionOptions(hosts="127.0.0.1:1"),
                              manager=ManagerOptions(metrics_bind_address="0", health_probe_bind_address="0"),
                              workers=8,
                              ensembles=True, mirrors=True, bridge=BridgeOptions(workers=6))
    size = api_pool_size(options)
    assert size == 8 * 3 + 6 + 16  # the ZooKeeperConfig, ensemble and mirror workers, the bridge's, the watches
    assert api_pool_size(OperatorOptions(workers=1)) == IDLE_CONNECTIONS_PER_HOST
    operator = Operator(options)  # not run: only its API client is used
    try:
        assert hold_connections(operator.client, size, caplog) == []
        # A ZooKeeperEnsemble's workers, starting later, get their room; a second reservation of one holder
        # adds nothing (the beyond-the-room watch below is discarded, and said so).
        operator.client.reserve_connections("zookeeperensemble/a", 10)
        operator.client.reserve_connections("zookeeperensemble/a", 10)
        discarded = hold_connections(operator.client, size + 11, caplog)
        assert len(discarded) == 1, discarded
    finally:
        operator.client.close()
