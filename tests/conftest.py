"""Shared fixtures: real ZooKeeper servers from :mod:`zkop_testing.zookeeper`.

- ``zk_server``: one standalone server for the whole session. Do not stop or restart it;
  build your own ``ZooKeeperServer()`` for that.
- ``zk_base``: a fresh znode path ``/t-<uuid hex>`` per test, deleted (recursively)
  afterwards. Put everything a test writes below it. For a chrooted client use
  ``f"{zk_server.hosts}{zk_base}"`` as connect string.
- ``zk``: a connected ``KazooClient`` on ``zk_server`` (not chrooted), per test; ``chrooted``: one chrooted
  at ``zk_base`` (an application's own session: its ephemeral znodes go when it closes).
- ``adapter``: a started :class:`~zkop.zookeeper.adapter.ZooKeeperAdapter` whose ``/`` is ``zk_base``.
- ``zk_ensemble``: a 3-member quorum shared by a module, started only if requested.
  Tests that stop members must call ``zk_ensemble.heal()`` (in a ``finally``).
- ``zookeeper_line``/``zookeeper_installation``: the ZooKeeper line the test runs on and its
  :class:`~zkop_testing.zookeeper.ZooKeeperInstallation` (for a test's own ``ZooKeeperServer(installation=…)``).
  ``default`` (the newest line, 3.9, from Maven Central; ``ZKOP_ZOOKEEPER_DEFAULT`` names another, or ``debian``
  for Debian's 3.8.0 jar: :func:`~zkop_testing.zookeeper.find_zookeeper`) everywhere, except in tests marked
  ``zookeeper_semantics``: those run once per line of :func:`~zkop_testing.zookeeper_lines.lines_under_test`
  (``ZKOP_ZOOKEEPER_LINES``, e.g. ``all``; ids ``zk-default``, ``zk-3.5.10`` …), and ``zk_server``, ``zk``,
  ``adapter``, ``zk_ensemble`` are then of that line. Unset, nothing is parametrized. The default and the lines
  missing from the cache are resolved from Maven Central (``hack/zookeeper-lines.sh``) before the first test runs.
- ``control_plane``: a real Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager built
  from source, :mod:`zkop_testing.controlplane`) shared by the session, of the first minor ``ZKOP_K8S_MINORS``
  names (default: the newest tested); ``control_plane_each``: the same, parametrized over every tested minor.
  Binaries missing from the cache are built before the first test runs (about 15 minutes per minor, once
  per machine). ``namespace``: a fresh namespace ``t-<hex>`` on ``control_plane`` per test, deleted afterwards.
- ``apiserver``: a fresh in-memory Kubernetes API server (:mod:`zkop_testing.apiserver`) per
  test, no CRDs installed; ``kube``: a :class:`~zkop.kube.client.KubeClient` on it (10 s timeout)
  for the test's own requests. Directories override ``kube`` where they need more (CRDs, a namespace).

A request handler's unexpected exception in any server of the test process (the doubles', zkop's own, a
test's own ``http.server``) fails the test phase it happened in (the plugin :mod:`zkop_testing.server_errors`);
a client that disconnects mid-response is no error.

Missing ``java``/ZooKeeper fails the tests (never skips): ``apt-get install -y zookeeper``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from zkop_testing import server_errors
from zkop_testing.apiserver import ApiServer
from zkop_testing.controlplane import ControlPlane, ControlPlaneError, binaries, fresh_namespace, minors_under_test
from zkop_testing.crds import install_crds
from zkop_testing.double_because import REAL_MARKER
from zkop_testing.zookeeper import (
    ZooKeeperEnsemble,
    ZooKeeperError,
    ZooKeeperInstallation,
    ZooKeeperServer,
    connected_client,
)
from zkop_testing.zookeeper_lines import DEFAULT, LINES, installation, lines_under_test

from zkop.kube.client import KubeClient
from zkop.zookeeper.adapter import ConnectionOptions, ZooKeeperAdapter

pytest_plugins = ["pytester"]


@pytest.hookimpl(tryfirst=True)  # before pytest's tmp_path plugin reads --basetemp
def pytest_configure(config: pytest.Config) -> None:
    """Give this session a base temporary directory of its own and remove it at the end.

    Without ``--basetemp`` pytest numbers its base directories in ``<tmp>/pytest-of-<user>`` and removes all
    but the newest 3 -- a concurrent session's among them. So a run without one gets
    ``<tmp>/zkop-pytest-<random>`` (``<tmp>``: ``PYTEST_DEBUG_TEMPROOT``, else :func:`tempfile.gettempdir`),
    removed when the session ends; a given ``--basetemp`` is the caller's and left alone.

    Registers :mod:`zkop_testing.server_errors` (a handler's traceback fails the test): as a module object, since
    this file imported it already (``pytest_plugins`` would warn that it cannot be assertion-rewritten)."""
    config.pluginmanager.register(server_errors, "zkop-server-errors")
    if config.option.basetemp is not None:
        return
    root = os.environ.get("PYTEST_DEBUG_TEMPROOT") or tempfile.gettempdir()
    basetemp = tempfile.mkdtemp(prefix="zkop-pytest-", dir=root)
    config.option.basetemp = basetemp
    config.add_cleanup(lambda: shutil.rmtree(basetemp, ignore_errors=True))


_build_errors: dict[str, str] = {}
#: ``(minor, start-up seconds)`` of each control plane the session started, for the summary.
_startups: list[tuple[str, float]] = []


def _minors_needed(items: list[pytest.Item]) -> list[str]:
    """The minors whose control plane the collected tests use: ``control_plane`` (the first minor under
    test; also a test of tests/integration marked ``real_control_plane``, whose ``kube`` asks for it) and every
    ``k8s-<minor>`` parameter (``control_plane_each``, the contract suite's ``cluster``)."""
    needed: set[str] = set()
    for item in items:
        if "control_plane" in getattr(item, "fixturenames", ()) or item.get_closest_marker(REAL_MARKER):
            needed.add(minors_under_test()[0])
        needed.update(re.findall(r"k8s-(\d+\.\d+)", item.nodeid))
    return [minor for minor in minors_under_test() if minor in needed]


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build the control-plane binaries the collected tests need before the first runs (per-test timeouts
    then never count a cold build, about 15 minutes a minor); a failed build fails those tests, not the run.
    The same for the ZooKeeper lines the ``zookeeper_semantics`` tests run on (under a minute, all lines cold)."""
    if session.config.option.collectonly:
        return
    for minor in _minors_needed(session.items):
        try:
            binaries(minor)
        except ControlPlaneError as err:
            _build_errors[minor] = str(err)
    needed = {param for item in session.items for param in re.findall(r"zk-(3\.\d+\.\d+)", item.nodeid)}
    for version in [DEFAULT, *sorted(needed)]:
        _resolve_zookeeper(version)  # a failure fails the tests of that line


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run each test marked ``zookeeper_semantics`` once per ZooKeeper line under test (``ZKOP_ZOOKEEPER_LINES``).

    The parameter is session-scoped: pytest orders the run so that each line's server starts once."""
    lines = lines_under_test()
    if (len(lines) > 1 and "zookeeper_line" in metafunc.fixturenames
            and metafunc.definition.get_closest_marker("zookeeper_semantics") is not None):
        metafunc.parametrize("zookeeper_line", lines, indirect=True, scope="session",
                             ids=lambda line: f"zk-{LINES.get(line, line)}")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say how long each real control plane took to start (etcd, kube-apiserver, kube-controller-manager)."""
    for minor, seconds in _startups:
        terminalreporter.write_line(f"Kubernetes {minor} control plane: ready in {seconds:.1f} s")


class _ControlPlanes:
    """The session's control planes, one per minor, started on first use and stopped at the end."""

    def __init__(self) -> None:
        self.planes: dict[str, ControlPlane] = {}

    def get(self, minor: str) -> ControlPlane:
        if minor in _build_errors:
            pytest.fail(_build_errors[minor], pytrace=False)
        if minor not in self.planes:
            plane = ControlPlane(minor)
            try:
                plane.start()
            except ControlPlaneError as err:
                plane.stop()
                pytest.fail(str(err), pytrace=False)
            with plane.admin() as kube:
                install_crds(kube)
            self.planes[minor] = plane
            _startups.append((minor, plane.startup_seconds))
        return self.planes[minor]

    def stop(self) -> None:
        for plane in self.planes.values():
            plane.stop()


@pytest.fixture(scope="session")
def _control_planes() -> Iterator[_ControlPlanes]:
    planes = _ControlPlanes()
    yield planes
    planes.stop()


@pytest.fixture(scope="session")
def control_plane(_control_planes: _ControlPlanes) -> ControlPlane:
    """A real control plane of the first minor under test, with zkop's CRD installed; shared by the session."""
    return _control_planes.get(minors_under_test()[0])


@pytest.fixture(scope="session", params=minors_under_test(), ids=lambda minor: f"k8s-{minor}")
def control_plane_each(request: pytest.FixtureRequest, _control_planes: _ControlPlanes) -> ControlPlane:
    """A real control plane of each minor under test (the test runs once per minor)."""
    return _control_planes.get(str(request.param))


@pytest.fixture
def namespace(control_plane: ControlPlane) -> Iterator[str]:
    """A fresh namespace on ``control_plane``; deleted afterwards, finalizers zkop can no longer remove cleared."""
    yield from fresh_namespace(control_plane)


_installations: dict[str, ZooKeeperInstallation | str] = {}


def _resolve_zookeeper(line: str) -> ZooKeeperInstallation | str:
    """The installation of ``line``, or why there is none (cached for the session)."""
    if line not in _installations:
        try:
            _installations[line] = installation(line)
        except ZooKeeperError as exc:
            _installations[line] = str(exc)
    return _installations[line]


def _zookeeper_installation(line: str) -> ZooKeeperInstallation:
    """The installation of ``line``; a missing ZooKeeper fails the test, never skips."""
    found = _resolve_zookeeper(line)
    if isinstance(found, str):
        pytest.fail(found, pytrace=False)
    return found


@pytest.fixture(scope="session")
def zookeeper_line(request: pytest.FixtureRequest) -> str:
    """The ZooKeeper line this test runs on: its ``zookeeper_semantics`` parameter, else ``default``."""
    return str(getattr(request, "param", DEFAULT))


@pytest.fixture(scope="session")
def zookeeper_installation(zookeeper_line: str) -> ZooKeeperInstallation:
    """Java and the class path of the ZooKeeper line this test runs on."""
    return _zookeeper_installation(zookeeper_line)


@pytest.fixture(scope="session")
def _zk_servers() -> Iterator[dict[str, ZooKeeperServer]]:
    """One standalone server per line, started on first use and kept for the session (a change of line
    between tests does not restart the default server)."""
    servers: dict[str, ZooKeeperServer] = {}
    yield servers
    for server in servers.values():
        server.stop()


@pytest.fixture(scope="session")
def zk_server(_zk_servers: dict[str, ZooKeeperServer], zookeeper_installation: ZooKeeperInstallation
              ) -> ZooKeeperServer:
    name = zookeeper_installation.name
    if name not in _zk_servers:
        server = ZooKeeperServer(installation=zookeeper_installation)
        server.start()
        _zk_servers[name] = server
    return _zk_servers[name]


@pytest.fixture(scope="module")
def _zk_admin(zk_server: ZooKeeperServer) -> Iterator[KazooClient]:
    """The client that makes and removes each test's ``zk_base``: one per module, not per session.

    A connected kazoo client's thread draws from the global ``random`` at every ping (its jitter,
    ``kazoo/protocol/connection.py``); kept for the whole session it would do so during the
    Hypothesis tests of later modules, which then warn "Do not use the `random` module inside
    strategies" in a full run only.
    """
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
def chrooted(zk_server: ZooKeeperServer, zk_base: str) -> Iterator[KazooClient]:
    """A kazoo client chrooted at ``zk_base`` (the registering side: legacy applications)."""
    with connected_client(f"{zk_server.hosts}{zk_base}") as client:
        yield client


@pytest.fixture
def adapter(zk_server: ZooKeeperServer, zk_base: str) -> Iterator[ZooKeeperAdapter]:
    """An adapter whose ``/`` is this test's ``zk_base``."""
    a = ZooKeeperAdapter(ConnectionOptions(hosts=f"{zk_server.hosts}{zk_base}", connect_timeout=10))
    a.start()
    yield a
    a.stop()


@pytest.fixture(scope="module")
def zk_ensemble(zookeeper_installation: ZooKeeperInstallation) -> Iterator[ZooKeeperEnsemble]:
    with ZooKeeperEnsemble(3, installation=zookeeper_installation) as ensemble:
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
