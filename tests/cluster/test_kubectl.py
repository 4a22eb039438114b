"""A real kubectl against a real kube-apiserver: what a user types about zkop's objects, per kubectl and minor.

The same commands as ``tests/doubles/kubectl/test_kubectl_against_double.py`` (the checks are
:mod:`zkop_testing.kubectl`'s): the venv's kubectl and, with ``$ZKOP_TEST_DEBIAN_KUBECTL``, Debian's
kubectl 1.20 (OpenAPI v2, client-side validation, no client-side-apply ownership migration). Each
kubectl gets a namespace of its own, the default namespace of its kubeconfig's context.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from zkop_testing import kubectl as suite
from zkop_testing.controlplane import ControlPlane, fresh_namespace
from zkop_testing.kubectl import Kubectl, candidates

from zkop.kube.client import KubeClient


@pytest.fixture(scope="module", params=candidates(from_path=False))
def binary(request: pytest.FixtureRequest) -> tuple[str, tuple[int, int]]:
    """A kubectl to test and its ``(major, minor)``."""
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def tool(binary: tuple[str, tuple[int, int]], plane: ControlPlane,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubectl]:
    """``binary`` as the admin, its context's namespace a fresh one (deleted afterwards)."""
    for namespace in fresh_namespace(plane):
        kubeconfig = plane.write_kubeconfig(tmp_path_factory.mktemp("kubectl") / "kubeconfig", namespace=namespace)
        yield Kubectl(binary[0], binary[1], kubeconfig, namespace=namespace)


def test_create_configmap_secret_namespace(tool: Kubectl, kube: KubeClient) -> None:
    suite.create_configmap_secret_namespace(tool, kube)


def test_get_prints_the_columns_a_cluster_prints(tool: Kubectl, kube: KubeClient) -> None:
    suite.get_prints_the_columns_a_cluster_prints(tool, kube)


def test_explain_uses_the_crd_schema(tool: Kubectl) -> None:
    suite.explain_uses_the_crd_schema(tool)


def test_apply_client_side_then_server_side_and_edit(tool: Kubectl, kube: KubeClient, tmp_path: Path) -> None:
    suite.apply_client_side_then_server_side_and_edit(tool, kube, tmp_path)


def test_wait_describe_delete(tool: Kubectl, kube: KubeClient) -> None:
    suite.wait_describe_delete(tool, kube)


def test_server_side_apply_takes_over_from_client_side_apply(tool: Kubectl, kube: KubeClient,
                                                            tmp_path: Path) -> None:
    suite.server_side_apply_takes_over_from_client_side_apply(tool, kube, tmp_path)
