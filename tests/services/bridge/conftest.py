"""Fixtures for the bridge tests: a client of the in-memory API server (the server itself is
``tests/services/conftest.py``'s), metric helpers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from service_testing import sample
from zkop_testing.apiserver import ApiServer

from zkop.kube.client import KubeClient

__all__ = ["kube", "sample"]


@pytest.fixture
def kube(apiserver: ApiServer) -> Iterator[KubeClient]:
    """A client for the test's own writes (the bridge gets its own)."""
    client = KubeClient(apiserver.api_client())
    yield client
    client.close()
