"""Fixtures for integration tests: the in-memory API server with zkop's CRD, and a kubeconfig for it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from zkop_testing.apiserver import ApiServer
from zkop_testing.crds import install_crds

from zkop.kube.client import KubeClient


@pytest.fixture
def kubeconfig(apiserver: ApiServer, tmp_path: Path) -> str:
    path = tmp_path / "kubeconfig"
    apiserver.write_kubeconfig(str(path))
    return str(path)


@pytest.fixture
def kube(apiserver: ApiServer) -> Iterator[KubeClient]:
    client = KubeClient(apiserver.api_client())
    install_crds(client)
    yield client
    client.close()
