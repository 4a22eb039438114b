"""Contract suite fixtures: every test runs against the in-memory API server and against a real control plane.

``cluster`` is parametrized: ``double`` (``zkop_testing.apiserver``) and ``k8s-<minor>`` for each
Kubernetes minor under test (``zkop_testing.controlplane``, built from source), so a divergence
between the double and kube-apiserver is a failing test. ``ZKOP_CONTRACT_KUBECONFIG`` adds one more
target, any cluster (the kind job of ``.github/workflows/e2e.yaml``).

On a real cluster the suite installs its copy of the ZooKeeperConfig CRD (group
``contract.zkop.example.com``, which zkop does not reconcile, so the suite passes
on a cluster where zkop runs), works in a scratch namespace ``zkop-contract-<random>``
and removes both afterwards (the CRD only if the suite created it).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator

import pytest
from contract_support import CRDS, Cluster, contract_crd, install_crd
from zkop_testing.apiserver import ApiServer
from zkop_testing.controlplane import minors_under_test

from zkop.kube.client import ApiException, KubeClient, load_api_client

KUBECONFIG_ENV = "ZKOP_CONTRACT_KUBECONFIG"


TARGETS = ["double", *(f"k8s-{minor}" for minor in minors_under_test()),
           *(["kubeconfig"] if os.environ.get(KUBECONFIG_ENV) else [])]


@pytest.fixture(scope="session", params=TARGETS)
def _real_cluster(request: pytest.FixtureRequest) -> Iterator[tuple[KubeClient, str] | None]:
    target = str(request.param)
    if target == "double":
        yield None
        return
    if target == "kubeconfig":
        kube = KubeClient(load_api_client(os.environ[KUBECONFIG_ENV]), default_timeout=30)
    else:
        plane = request.getfixturevalue("_control_planes").get(target.removeprefix("k8s-"))
        kube = KubeClient(plane.api_client(), default_timeout=30)
    created = install_crd(kube)
    namespace = f"zkop-contract-{uuid.uuid4().hex[:6]}"
    kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": namespace}})
    try:
        yield kube, namespace
    finally:
        with contextlib.suppress(ApiException):
            kube.request("DELETE", f"/api/v1/namespaces/{namespace}")
        if created:
            with contextlib.suppress(ApiException):
                kube.request("DELETE", f"{CRDS}/{contract_crd()['metadata']['name']}")
        kube.close()


@pytest.fixture
def cluster(_real_cluster: tuple[KubeClient, str] | None) -> Iterator[Cluster]:
    if _real_cluster is not None:
        kube, namespace = _real_cluster
        yield Cluster(kube, namespace, None)
        return
    with ApiServer() as server:
        kube = KubeClient(server.api_client(), default_timeout=10)
        install_crd(kube)
        namespace = "contract"
        kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": namespace}})
        yield Cluster(kube, namespace, server)
        kube.close()
