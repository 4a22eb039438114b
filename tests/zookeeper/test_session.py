"""The ZooKeeper session against a real server: chroot, unreachable servers, the select handler."""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.zookeeper.adapter import (
    ConnectionOptions,
    ZooKeeperAdapter,
    ZooKeeperUnavailable,
    split_chroot,
)

#: Runs on every ZooKeeper line under test (ZKOP_ZOOKEEPER_LINES, tests/conftest.py).
pytestmark = pytest.mark.zookeeper_semantics


def test_missing_chroot_is_a_clear_error(zk_server: ZooKeeperServer, zk_base: str) -> None:
    a = ZooKeeperAdapter(ConnectionOptions(hosts=f"{zk_server.hosts}{zk_base}/does-not-exist", connect_timeout=10))
    with pytest.raises(ZooKeeperUnavailable, match=r"chroot .*does-not-exist does not exist"):
        a.start()
    a.stop()


def test_unreachable_server_is_unavailable() -> None:
    from zkop_testing.zookeeper import free_port

    a = ZooKeeperAdapter(ConnectionOptions(hosts=f"127.0.0.1:{free_port()}", connect_timeout=1))
    with pytest.raises(ZooKeeperUnavailable, match="could not connect"):
        a.start()
    a.stop()


def test_split_chroot() -> None:
    assert split_chroot("h1:1,h2:2/app/x") == ("h1:1,h2:2", "/app/x")
    assert split_chroot("h1:1") == ("h1:1", "")


def test_select_handler_falls_back_past_fd_setsize() -> None:
    import os
    import resource
    import socket

    from zkop.zookeeper.handler import SelectHandler

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1100:
        pytest.skip(f"cannot open a descriptor past FD_SETSIZE (hard limit {hard})")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1100), hard))
    left, right = socket.socketpair()
    high = os.dup2(left.fileno(), 1050)
    try:
        right.send(b"x")
        handler = SelectHandler()
        readable, _, _ = handler.select([high], [], [], 1.0)
        assert readable == [high]  # plain select(2) cannot take fd 1050: the stock selector answered
        assert handler.select([left], [], [], 0)[0] == [left]
    finally:
        os.close(high)
        left.close()
        right.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_one_mapping_from_kazoo_errors() -> None:
    from kazoo.exceptions import (
        AuthFailedError,
        BadVersionError,
        ConnectionClosedError,
        ConnectionLoss,
        NoAuthError,
        NoNodeError,
        OperationTimeoutError,
        SessionExpiredError,
    )
    from kazoo.handlers.threading import KazooTimeoutError

    from zkop.zookeeper.errors import ZooKeeperNoAuth, map_kazoo_error

    for unavailable in (ConnectionLoss(), SessionExpiredError(), ConnectionClosedError(), OperationTimeoutError(),
                        KazooTimeoutError()):
        mapped = map_kazoo_error(unavailable, "get", "/x")
        assert isinstance(mapped, ZooKeeperUnavailable)
        assert str(mapped) == f"ZooKeeper get /x failed: {type(unavailable).__name__}"
    refused = map_kazoo_error(NoAuthError(), "set", "/x")
    assert isinstance(refused, ZooKeeperNoAuth)
    assert str(refused) == "ZooKeeper refused set on /x: not authorised (NoAuth)"
    assert isinstance(map_kazoo_error(AuthFailedError(), "connect", "h:1"), ZooKeeperNoAuth)
    # Conflicts mean different things to different requests: the caller decides.
    assert map_kazoo_error(NoNodeError(), "get", "/x") is None
    assert map_kazoo_error(BadVersionError(), "set", "/x") is None


def test_a_refused_request_is_mapped_and_counted(adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str,
                                                 request: pytest.FixtureRequest) -> None:
    from kazoo.security import make_acl
    from prometheus_client import REGISTRY

    from zkop.zookeeper.errors import ZooKeeperNoAuth

    zk.create(zk_base + "/locked", b"secret", acl=[make_acl("digest", "ops:hash", all=True)])
    request.addfinalizer(lambda: zk.delete(zk_base + "/locked"))
    labels = {"operation": "get", "error": "NoAuthError"}
    before = REGISTRY.get_sample_value("zkop_zookeeper_request_errors_total", labels) or 0.0
    with pytest.raises(ZooKeeperNoAuth, match="refused get on /locked"):
        adapter.read("/locked")
    assert REGISTRY.get_sample_value("zkop_zookeeper_request_errors_total", labels) == before + 1


def test_mapped_times_every_request_and_passes_conflicts_through(adapter: ZooKeeperAdapter) -> None:
    from kazoo.exceptions import ConnectionLoss, NoNodeError
    from prometheus_client import REGISTRY

    def sample(name: str, **labels: str) -> float:
        return REGISTRY.get_sample_value(name, {"operation": "mapped-test", **labels}) or 0.0

    session = adapter._session
    timed, lost = sample("zkop_zookeeper_request_duration_seconds_count"), sample(
        "zkop_zookeeper_request_errors_total", error="ConnectionLoss")
    conflict = NoNodeError()
    with pytest.raises(NoNodeError) as passed, session.mapped("mapped-test", "/x"):
        raise conflict  # the caller decides what a conflict means: unchanged, not counted
    assert passed.value is conflict
    with pytest.raises(ZooKeeperUnavailable, match="ZooKeeper mapped-test /x failed: ConnectionLoss") as mapped, \
            session.mapped("mapped-test", "/x"):
        raise ConnectionLoss()
    assert isinstance(mapped.value.__cause__, ConnectionLoss)
    with session.mapped("mapped-test", "/x"):
        pass
    assert sample("zkop_zookeeper_request_duration_seconds_count") == timed + 3
    assert sample("zkop_zookeeper_request_errors_total", error="ConnectionLoss") == lost + 1
    assert sample("zkop_zookeeper_request_errors_total", error="NoNodeError") == 0.0
