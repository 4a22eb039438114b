"""Fixtures for integration tests: Kubernetes is the real control plane, the in-memory double only with a reason.

- ``kube``: an admin client for the test's own requests; ``kubeconfig``: the kubeconfig ``zkop run`` gets.
  On the real control plane (the root conftest's ``control_plane``: the session's one, of the newest minor under
  test -- not once per minor) ``kubeconfig`` authenticates as zkop's own ServiceAccount under the roles
  ``manifests/default`` grants (:mod:`zkop_testing.zkop_install`, installed once per session), and the test works
  in ``namespace`` (a fresh one, deleted afterwards; run zkop with ``--namespace``, so that nothing another test
  left behind reaches it). Leases go to ``zkop-system`` (the only namespace zkop's Role grants them in) under a
  name of the test's own (``lease``).
- A test marked ``double_because("...")`` (:mod:`zkop_testing.double_because`) gets the in-memory API server
  instead (``apiserver``), zkop's CRD installed, and its kubeconfig (an admin one). A test that uses the double
  without that marker stops the collection (:func:`zkop_testing.double_because.check`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from zkop_testing import double_because
from zkop_testing.apiserver import ApiServer
from zkop_testing.controlplane import ControlPlane
from zkop_testing.crds import install_crds
from zkop_testing.zkop_install import delete_leases, installed, zkop_kubeconfig

from zkop.kube.client import KubeClient


@pytest.hookimpl(tryfirst=True)  # before -k/-m deselect: a module's rule holds whatever is selected
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every use of the in-memory double here states its reason (issue 22)."""
    double_because.check([item for item in items if Path(str(item.fspath)).parent == Path(__file__).parent])


def _on_double(request: pytest.FixtureRequest) -> bool:
    return request.node.get_closest_marker(double_because.MARKER) is not None


@pytest.fixture
def kubeconfig(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """What ``zkop run --kubeconfig`` gets: zkop's ServiceAccount on the real control plane, else the double's."""
    path = tmp_path / "kubeconfig"
    if _on_double(request):
        apiserver: ApiServer = request.getfixturevalue("apiserver")
        apiserver.write_kubeconfig(str(path))
        return str(path)
    plane: ControlPlane = request.getfixturevalue("control_plane")
    installed(plane, tmp_path)  # the first test of the session renders the install in its tmp_path
    return str(zkop_kubeconfig(plane, path))


@pytest.fixture
def kube(request: pytest.FixtureRequest) -> Iterator[KubeClient]:
    """An admin client: on the real control plane, else on the double (zkop's CRD installed)."""
    if _on_double(request):
        apiserver: ApiServer = request.getfixturevalue("apiserver")
        client = KubeClient(apiserver.api_client())
        install_crds(client)
        yield client
        client.close()
        return
    plane: ControlPlane = request.getfixturevalue("control_plane")
    with plane.admin() as admin:
        yield admin


@pytest.fixture
def lease(control_plane: ControlPlane, namespace: str) -> Iterator[str]:
    """A Lease name of this test's own (in ``zkop-system``): a Lease another test's replica held is never waited
    for; deleted afterwards."""
    name = f"zkop-leader-{namespace}"
    yield name
    delete_leases(control_plane, name)
