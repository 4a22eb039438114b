"""Fixtures for the importer tests on the in-memory double: a client of it with the import namespace made; the
helpers (the importer running in-process, Curator registrations, reads) are :mod:`zkop_testing.services`'s."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from zkop_testing.apiserver import ApiServer
from zkop_testing.services import IMPORT_NAMESPACE

from zkop.kube.client import ApiException, KubeClient, resource_path


@pytest.fixture
def kube(apiserver: ApiServer) -> Iterator[KubeClient]:
    """A client for the test's own reads and writes (the importer gets its own), the import namespace made."""
    client = KubeClient(apiserver.api_client())
    with contextlib.suppress(ApiException):
        client.request("POST", resource_path("", "v1", "namespaces"),
                       body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": IMPORT_NAMESPACE}})
    yield client
    client.close()
