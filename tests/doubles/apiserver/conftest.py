"""Fixtures for the in-memory API server tests: a fresh server per test and real clients on it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import kubernetes.client as k8s
import pytest
from zkop_testing.apiserver import ApiServer
from zkop_testing.apiserver_fixtures import zookeeperconfig_crd

from zkop.kube.client import KubeClient, resource_path

JSON = dict[str, Any]


@pytest.fixture
def server(apiserver: ApiServer) -> ApiServer:
    """The API server under test: ``apiserver`` of ``tests/conftest.py``."""
    return apiserver


@pytest.fixture
def api(server: ApiServer) -> Iterator[Any]:
    client = server.api_client()
    yield client
    client.close()


@pytest.fixture
def core(api: Any) -> Any:
    return k8s.CoreV1Api(api)


@pytest.fixture
def custom(api: Any) -> Any:
    return k8s.CustomObjectsApi(api)


@pytest.fixture
def ns(kube: KubeClient) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": name}})
    return name


@pytest.fixture
def crd(kube: KubeClient) -> JSON:
    return kube.request("POST", resource_path("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
                        body=zookeeperconfig_crd())
