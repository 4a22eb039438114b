"""Fixtures both directions' tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from zkop_testing.apiserver import ApiServer


@pytest.fixture
def apiserver() -> Iterator[ApiServer]:
    """The in-memory Kubernetes API server (no CRDs needed by the services)."""
    with ApiServer() as server:
        yield server
