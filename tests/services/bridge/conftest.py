"""Fixtures for the bridge tests: a ZooKeeper adapter chrooted at the test's base path, metric helpers,
and (for the integration tests) the in-memory API server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY
from zkop_testing.apiserver import ApiServer

from zkop.kube.client import KubeClient


def sample(name: str, labels: dict[str, str] | None = None) -> float:
    """The current value of a metric sample (0 if it was never set)."""
    return REGISTRY.get_sample_value(name, labels or {}) or 0.0


@pytest.fixture
def apiserver() -> Iterator[ApiServer]:
    """The in-memory Kubernetes API server (no CRDs needed by the bridge)."""
    with ApiServer() as server:
        yield server


@pytest.fixture
def kube(apiserver: ApiServer) -> Iterator[KubeClient]:
    """A client for the test's own writes (the bridge gets its own)."""
    client = KubeClient(apiserver.api_client())
    yield client
    client.close()
