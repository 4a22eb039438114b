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
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cluster_support import ZKOP_NAMESPACE, ZKOP_SERVICE_ACCOUNT, ServiceAccountClients, install
from zkop_testing.controlplane import ControlPlane, fresh_namespace
from zkop_testing.kustomize import Obj

from zkop.kube.client import KubeClient


@pytest.fixture(scope="session")
def plane(control_plane_each: ControlPlane) -> ControlPlane:
    """The control plane of the minor this test runs on."""
    return control_plane_each


@pytest.fixture(scope="session")
def installed(plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> list[Obj]:
    """The install applied to the control plane (all but the Deployment); the rendered objects."""
    return install(plane, tmp_path_factory.mktemp("install"))


@pytest.fixture
def zkop_kubeconfig(plane: ControlPlane, installed: list[Obj], tmp_path: Path) -> str:
    """A kubeconfig for zkop's own ServiceAccount (a bound token from the TokenRequest API)."""
    return str(plane.service_account_kubeconfig(tmp_path / "zkop.kubeconfig", ZKOP_NAMESPACE, ZKOP_SERVICE_ACCOUNT))


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
