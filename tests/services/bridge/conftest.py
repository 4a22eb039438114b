"""Fixtures for the bridge tests: a client of the in-memory API server for the test's own writes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from zkop_testing.apiserver import ApiServer

from zkop.kube.client import KubeClient


@pytest.fixture
def kube(apiserver: ApiServer) -> Iterator[KubeClient]:
    """A client for the test's own writes (the bridge gets its own)."""
    client = KubeClient(apiserver.api_client())
    yield client
    client.close()
