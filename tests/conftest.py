"""Shared fixtures: real ZooKeeper servers from :mod:`zkop_testing.zookeeper`.

- ``zk_server``: one standalone server for the whole session. Do not stop or restart it;
  build your own ``ZooKeeperServer()`` for that.
- ``zk_base``: a fresh znode path ``/t-<uuid hex>`` per test, deleted (recursively)
  afterwards. Put everything a test writes below it. For a chrooted client use
  ``f"{zk_server.hosts}{zk_base}"`` as connect string.
- ``zk``: a connected ``KazooClient`` on ``zk_server`` (not chrooted), per test.
- ``adapter``: a started :class:`~zkop.zookeeper.adapter.ZooKeeperAdapter` whose ``/`` is ``zk_base``.
- ``zk_ensemble``: a 3-member quorum shared by a module, started only if requested.
  Tests that stop members must call ``zk_ensemble.heal()`` (in a ``finally``).
- ``apiserver``: a fresh in-memory Kubernetes API server (:mod:`zkop_testing.apiserver`) per
  test, no CRDs installed; ``kube``: a :class:`~zkop.kube.client.KubeClient` on it (10 s timeout)
  for the test's own requests. Directories override ``kube`` where they need more (CRDs, a namespace).

Missing ``java``/ZooKeeper fails the tests (never skips): ``apt-get install -y zookeeper``.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from zkop_testing.apiserver import ApiServer
from zkop_testing.zookeeper import (
    ZooKeeperEnsemble,
    ZooKeeperNotInstalledError,
    ZooKeeperServer,
    connected_client,
    find_zookeeper,
)

from zkop.kube.client import KubeClient
from zkop.zookeeper.adapter import ConnectionOptions, ZooKeeperAdapter


def _require_zookeeper() -> None:
    try:
        find_zookeeper()
    except ZooKeeperNotInstalledError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def zk_server() -> Iterator[ZooKeeperServer]:
    _require_zookeeper()
    with ZooKeeperServer() as server:
        yield server


@pytest.fixture(scope="session")
def _zk_admin(zk_server: ZooKeeperServer) -> Iterator[KazooClient]:
    with connected_client(zk_server.hosts) as client:
        yield client


@pytest.fixture
def zk_base(_zk_admin: KazooClient) -> Iterator[str]:
    path = f"/t-{uuid.uuid4().hex}"
    _zk_admin.ensure_path(path)
    yield path
    with contextlib.suppress(NoNodeError):
        _zk_admin.delete(path, recursive=True)


@pytest.fixture
def zk(zk_server: ZooKeeperServer, zk_base: str) -> Iterator[KazooClient]:
    with connected_client(zk_server.hosts) as client:
        yield client


@pytest.fixture
def adapter(zk_server: ZooKeeperServer, zk_base: str) -> Iterator[ZooKeeperAdapter]:
    """An adapter whose ``/`` is this test's ``zk_base``."""
    a = ZooKeeperAdapter(ConnectionOptions(hosts=f"{zk_server.hosts}{zk_base}", connect_timeout=10))
    a.start()
    yield a
    a.stop()


@pytest.fixture(scope="module")
def zk_ensemble() -> Iterator[ZooKeeperEnsemble]:
    _require_zookeeper()
    with ZooKeeperEnsemble(3) as ensemble:
        yield ensemble


@pytest.fixture
def apiserver() -> Iterator[ApiServer]:
    """A fresh in-memory API server for this test."""
    with ApiServer() as server:
        yield server


@pytest.fixture
def kube(apiserver: ApiServer) -> Iterator[KubeClient]:
    """A client on ``apiserver`` for the test's own requests."""
    client = KubeClient(apiserver.api_client(), default_timeout=10)
    yield client
    client.close()
