"""A real kubectl against the API double: what a user types works as it does on a cluster.

The same checks (:mod:`zkop_testing.kubectl`) run against each real control plane in
``tests/cluster/test_kubectl.py``. They stay here too because people use kubectl on the double:
``hack/demo.sh`` runs on it by default (its fast start), so its Table, OpenAPI and protobuf support
must keep working for the kubectl a user has, the venv's and Debian's 1.20 alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from zkop_testing import kubectl as suite
from zkop_testing.apiserver import ApiServer
from zkop_testing.kubectl import REPO, Kubectl, candidates

from zkop.kube.client import KubeClient


@pytest.fixture(scope="module", params=candidates())
def binary(request: pytest.FixtureRequest) -> tuple[str, tuple[int, int]]:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def apiserver(binary: tuple[str, tuple[int, int]]) -> Iterator[ApiServer]:
    with ApiServer() as s:  # one cluster per kubectl
        yield s


@pytest.fixture(scope="module")
def kubectl(binary: tuple[str, tuple[int, int]], apiserver: ApiServer,
            tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    tool = Kubectl(binary[0], binary[1], apiserver.write_kubeconfig(tmp_path_factory.mktemp("kubectl") / "kubeconfig"))
    tool.out("apply", "-f", str(REPO / "manifests" / "crd" / "zookeeperconfigs.yaml"))
    return tool


def test_create_configmap_secret_namespace(kubectl: Kubectl, kube: KubeClient) -> None:
    suite.create_configmap_secret_namespace(kubectl, kube)


def test_get_prints_the_columns_a_cluster_prints(kubectl: Kubectl, kube: KubeClient) -> None:
    suite.get_prints_the_columns_a_cluster_prints(kubectl, kube)


def test_explain_uses_the_crd_schema(kubectl: Kubectl) -> None:
    suite.explain_uses_the_crd_schema(kubectl)


def test_apply_client_side_then_server_side_and_edit(kubectl: Kubectl, kube: KubeClient, tmp_path: Path) -> None:
    suite.apply_client_side_then_server_side_and_edit(kubectl, kube, tmp_path)


def test_wait_describe_delete(kubectl: Kubectl, kube: KubeClient) -> None:
    suite.wait_describe_delete(kubectl, kube)


def test_server_side_apply_takes_over_from_client_side_apply(kubectl: Kubectl, kube: KubeClient,
                                                            tmp_path: Path) -> None:
    suite.server_side_apply_takes_over_from_client_side_apply(kubectl, kube, tmp_path)
