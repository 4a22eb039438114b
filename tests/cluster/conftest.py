"""zkop on a real Kubernetes control plane (``zkop_testing.controlplane``), under the RBAC its manifests grant.

Every test here runs once per Kubernetes minor under test (``plane``: ``control_plane_each``).

- ``installed``: ``manifests/default`` with the ``service-bridge`` and ``service-import`` components,
  rendered by the real ``kubectl kustomize`` and applied server-side by the real ``kubectl`` (everything
  but the Deployment, which needs a kubelet): the Namespace, the CRD, the ServiceAccount, the roles and
  their bindings, once per session.
- ``zkop_kubeconfig``: a kubeconfig that authenticates as that ServiceAccount with a token from the
  TokenRequest API, as the kubelet mounts one into zkop's Pod; zkop runs as it, never as an admin.
- ``zkop_clients``: API clients as that ServiceAccount, for the service bridge and importer run in-process.
- ``kube``: an admin client for the test's own requests; ``namespace``: a fresh namespace on ``plane``;
  ``new_namespace()``: one more, deleted with the test's.
- ``flux``: Flux's own source-controller and kustomize-controller (``zkop_testing.flux``, built from the Go
  module proxy by ``hack/control-plane/build-flux.sh`` before the first test runs) on ``plane``, once per
  module and minor; ``git_server``: ``git http-backend`` over HTTP on loopback, a bare repository per test;
  ``story``: the test's repository (an empty ``zookeeper/``) with a GitRepository and a Kustomization for it
  (``cluster_support.Story``), Ready.
  What the Flux story measures (commit to znode) is printed at the end of the run.
- ``reloader`` (tests/cluster/test_reloader.py): Stakater Reloader (``zkop_testing.reloader``, built from the Go
  module proxy by ``hack/build-reloader.sh`` before the first test runs); ``ZKOP_SKIP_RELOADER`` (the reason)
  skips the tests that use it, as ``ZKOP_SKIP_FLUX`` does Flux's. What the workload stories measure (a change to a
  new ReplicaSet, a git push to a Spring application's value) is printed at the end of the run.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cluster_support import FLUX_LATENCIES, WORKLOAD_LATENCIES, ServiceAccountClients, Story
from kazoo.client import KazooClient
from zkop_testing import java_interop
from zkop_testing.controlplane import ControlPlane, fresh_namespace
from zkop_testing.flux import GITREPOSITORY, KUSTOMIZATION, Flux, FluxError, GitServer, flux_binaries
from zkop_testing.helm import build_before_tests
from zkop_testing.kustomize import Obj
from zkop_testing.reloader import ReloaderError, reloader_binaries
from zkop_testing.zkop_install import installed as install_once
from zkop_testing.zkop_install import zkop_kubeconfig as write_zkop_kubeconfig
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import KubeClient

_flux_build_error: list[str] = []


def _needs_flux(item: pytest.Item) -> bool:
    """The test runs Flux's controllers: the ``flux`` fixture, or test_install.py's Flux stories."""
    return "flux" in getattr(item, "fixturenames", ()) or (
        Path(str(item.fspath)).name == "test_install.py" and item.name.startswith("test_flux"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """With ``ZKOP_SKIP_FLUX`` set (to the reason: ``.ci/run`` sets it when Flux's controllers are not cached
    and a cold build does not fit its time beside the suite), the tests that run Flux are skipped with it."""
    reason = os.environ.get("ZKOP_SKIP_FLUX")
    if reason:
        for item in items:
            if _needs_flux(item):
                item.add_marker(pytest.mark.skip(reason=f"ZKOP_SKIP_FLUX: {reason}"))
    reason = os.environ.get("ZKOP_SKIP_RELOADER")
    if reason:
        for item in items:
            if _needs_reloader(item):
                item.add_marker(pytest.mark.skip(reason=f"ZKOP_SKIP_RELOADER: {reason}"))


def _needs_reloader(item: pytest.Item) -> bool:
    return "reloader" in getattr(item, "fixturenames", ())


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build Flux's controllers before the first test runs if a collected test uses them (a cold build takes
    about half an hour, which no per-test timeout should count); a failed build fails those tests."""
    if session.config.option.collectonly:
        return
    build_before_tests(session.items, ("test_install.py",))  # Helm, as Flux below
    java_interop.build_before_tests(session.items)  # the Java interop programs (Maven's downloads)
    if not os.environ.get("ZKOP_SKIP_FLUX") and any(_needs_flux(item) for item in session.items):
        try:
            flux_binaries()
        except FluxError as err:
            _flux_build_error.append(str(err))
    if not os.environ.get("ZKOP_SKIP_RELOADER") and any(_needs_reloader(item) for item in session.items):
        with contextlib.suppress(ReloaderError):  # remembered: the reloader fixture fails with it
            reloader_binaries()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The Flux story's latencies, from ``git push`` to what the test waited for, and the workload stories' (never
    asserted on)."""
    for title, latencies in (("Flux: from git push to ZooKeeper", FLUX_LATENCIES),
                             ("Configuration for workloads: from a change to the workload", WORKLOAD_LATENCIES)):
        if latencies:
            terminalreporter.section(title)
            for test, step, seconds in latencies:
                terminalreporter.write_line(f"{seconds:7.2f} s  {step}  ({test})")


@pytest.fixture(scope="session")
def plane(control_plane_each: ControlPlane) -> ControlPlane:
    """The control plane of the minor this test runs on."""
    return control_plane_each


@pytest.fixture(scope="session")
def installed(plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> list[Obj]:
    """The install applied to the control plane (all but the Deployment), once per plane and session (shared with
    tests/integration); the rendered objects."""
    return install_once(plane, tmp_path_factory.mktemp("install"))


@pytest.fixture
def zkop_kubeconfig(plane: ControlPlane, installed: list[Obj], tmp_path: Path) -> str:
    """A kubeconfig for zkop's own ServiceAccount (a bound token from the TokenRequest API)."""
    return str(write_zkop_kubeconfig(plane, tmp_path / "zkop.kubeconfig"))


@pytest.fixture
def kube(plane: ControlPlane) -> Iterator[KubeClient]:
    """An admin client on the control plane."""
    with plane.admin() as client:
        yield client


@pytest.fixture
def namespace(plane: ControlPlane) -> Iterator[str]:
    """A fresh namespace on ``plane`` (see the root conftest's ``namespace``)."""
    yield from fresh_namespace(plane)


@pytest.fixture
def new_namespace(plane: ControlPlane) -> Iterator[Callable[[], str]]:
    """Make one more fresh namespace on ``plane`` per call; each is deleted as ``namespace`` is."""
    with contextlib.ExitStack() as stack:
        yield lambda: stack.enter_context(contextlib.contextmanager(fresh_namespace)(plane))


@pytest.fixture
def zkop_clients(plane: ControlPlane, zkop_kubeconfig: str) -> ServiceAccountClients:
    """API clients as zkop's ServiceAccount, for a component run in-process."""
    return ServiceAccountClients(plane, Path(zkop_kubeconfig))


@pytest.fixture(scope="module")
def flux(plane: ControlPlane) -> Iterator[Flux]:
    """source-controller and kustomize-controller on ``plane`` as the admin, their CRDs installed; stopped after
    the module (the CRDs stay with the session's plane)."""
    if _flux_build_error:
        pytest.fail(_flux_build_error[0], pytrace=False)
    running = Flux(plane)
    try:
        running.start()
    except FluxError as err:
        running.stop()
        pytest.fail(str(err), pytrace=False)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def git_server() -> Iterator[GitServer]:
    """``git http-backend`` over HTTP on loopback; a test makes its repository with ``git_server.create(name)``."""
    with GitServer() as server:
        yield server


@pytest.fixture
def second_ensemble() -> Iterator[tuple[KazooClient, str]]:
    """A second ensemble for this test, with the chroot ``/team``: a client on it, and its hosts."""
    with ZooKeeperServer() as server:
        client = KazooClient(hosts=server.hosts)
        client.start()
        client.ensure_path("/team")
        yield client, server.hosts
        client.stop()
        client.close()


@pytest.fixture
def story(flux: Flux, git_server: GitServer, kube: KubeClient, namespace: str,
          request: pytest.FixtureRequest) -> Iterator[Story]:
    """A repository with an empty ``zookeeper/`` (a README), and a GitRepository and Kustomization for it, Ready."""
    repo = git_server.create(namespace)
    sha = repo.commit("a directory for ZooKeeperConfigs", {"zookeeper/README.md": "ZooKeeperConfigs, one a file.\n"})
    Flux.create(kube, Flux.git_repository(namespace, repo.url))
    Flux.create(kube, Flux.kustomization(namespace, namespace, "./zookeeper", namespace))
    current = Story(kube, repo, namespace, request.node.name)
    try:
        current.ready(sha)
    except TimeoutError as err:
        raise AssertionError(f"{err}\n{flux.log_tail()}") from None
    yield current
    Flux.delete(kube, KUSTOMIZATION, namespace)
    Flux.delete(kube, GITREPOSITORY, namespace)
