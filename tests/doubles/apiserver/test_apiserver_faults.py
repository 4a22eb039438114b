"""Fault injection and the request log."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from apiserver_helpers import api_error, cm, zkc, zkc_path
from zkop_testing.apiserver import ApiServer

from zkop.kube.client import MERGE_PATCH, ApiException, KubeClient, resource_path

JSON = dict[str, Any]


def cms(ns: str, name: str | None = None) -> str:
    return resource_path("", "v1", "configmaps", ns, name)


def test_every_request_fails_with_a_status_body(kube: KubeClient, server: ApiServer, ns: str) -> None:
    server.fail_requests(1.0, codes=(500,))
    status, body = api_error(lambda: kube.request("POST", cms(ns), body=cm("a")))
    assert status == 500
    assert body["kind"] == "Status" and body["reason"] == "InternalError" and body["code"] == 500
    server.fail_requests(0)
    assert kube.request("POST", cms(ns), body=cm("a"))["metadata"]["name"] == "a"


def test_429_carries_retry_after(server: ApiServer, ns: str) -> None:
    server.fail_requests(1.0, codes=(429,))
    request = urllib.request.Request(f"{server.url}{cms(ns)}", data=json.dumps(cm("a")).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=5)
    assert info.value.code == 429
    assert info.value.headers["Retry-After"] == "1"
    body = json.loads(info.value.read())
    assert body["reason"] == "TooManyRequests" and body["details"] == {"retryAfterSeconds": 1}
    assert body["message"] == "Too many requests, please try again later."


def _raw_post(server: ApiServer, ns: str, name: str) -> tuple[int, Any, JSON]:
    """POST a ConfigMap with urllib (no client retries): ``(status, headers, body)``."""
    request = urllib.request.Request(f"{server.url}{cms(ns)}", data=json.dumps(cm(name)).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return int(answer.status), answer.headers, json.loads(answer.read())
    except urllib.error.HTTPError as err:
        return err.code, err.headers, json.loads(err.read())


def test_count_fails_only_the_next_requests_with_the_retry_after_given(server: ApiServer, ns: str) -> None:
    server.fail_requests(1.0, codes=(429,), count=2, retry_after="7")
    for name in ("a", "b"):
        status, headers, body = _raw_post(server, ns, name)
        assert (status, headers["Retry-After"], body["details"]) == (429, "7", {"retryAfterSeconds": 7})
    assert _raw_post(server, ns, "c")[0] == 201  # injection turned itself off
    assert _raw_post(server, ns, "d")[0] == 201
    server.fail_requests(1.0, codes=(503,), count=1, retry_after=None)
    status, headers, body = _raw_post(server, ns, "e")
    assert (status, headers["Retry-After"], body["reason"], body.get("details")) == (
        503, None, "ServiceUnavailable", None)
    server.fail_requests(1.0, codes=(429,), count=1, retry_after="Wed, 21 Oct 2015 07:28:00 GMT")
    status, headers, body = _raw_post(server, ns, "f")
    assert (status, headers["Retry-After"], body.get("details")) == (429, "Wed, 21 Oct 2015 07:28:00 GMT", None)
    with pytest.raises(ValueError, match="count must not be negative"):
        server.fail_requests(1.0, count=-1)


def test_fraction_is_deterministic_with_a_seed(kube: KubeClient, server: ApiServer, ns: str) -> None:
    def outcome() -> list[int]:
        result = []
        for _ in range(40):
            try:
                kube.request("GET", cms(ns))
                result.append(200)
            except ApiException as exc:
                result.append(int(exc.status))
        return result

    server.fail_requests(0.5, codes=(500, 504), seed=42, methods=["list"])
    first = outcome()
    server.fail_requests(0.5, codes=(500, 504), seed=42, methods=["list"])
    second = outcome()
    assert first == second
    assert 200 in first and 500 in first
    server.fail_requests(0)


def test_methods_filter(kube: KubeClient, server: ApiServer, ns: str) -> None:
    kube.request("POST", cms(ns), body=cm("a"))
    server.fail_requests(1.0, codes=(500,), methods=["PATCH"])
    status, _ = api_error(lambda: kube.request("PATCH", cms(ns, "a"), body={"data": {}}, content_type=MERGE_PATCH))
    assert status == 500
    assert kube.request("GET", cms(ns, "a"))["metadata"]["name"] == "a"
    with pytest.raises(ValueError):
        server.fail_requests(2.0)


def test_request_log_records_rbac_verbs(kube: KubeClient, server: ApiServer, crd: JSON, ns: str) -> None:
    server.clear_request_log()
    kube.request("POST", zkc_path(ns), body=zkc("a"))
    kube.request("GET", zkc_path(ns, "a"))
    kube.request("GET", zkc_path(ns))
    kube.request("PATCH", zkc_path(ns, "a"), body={"spec": {"data": "2"}}, content_type=MERGE_PATCH)
    kube.request("PATCH", zkc_path(ns, "a", "status"), body={"status": {"observedGeneration": 2}},
                 content_type=MERGE_PATCH)
    current = kube.request("GET", zkc_path(ns, "a"))
    kube.request("PUT", zkc_path(ns, "a"), body=current)
    list(kube.watch(zkc_path(ns), query={"resourceVersion": "1"}, timeout=(5, 5)))  # 410: ends at once
    kube.request("DELETE", zkc_path(ns, "a"))
    kube.request("DELETE", zkc_path(ns))
    kube.request("GET", "/version")
    assert {r.group for r in server.request_log} == {"platform.example.com"}
    assert all(r.user_agent == "zkop" for r in server.request_log)  # KubeClient's User-Agent
    assert [r[:5] for r in server.request_log] == [
        ("create", "zookeeperconfigs", "", ns, ""),
        ("get", "zookeeperconfigs", "", ns, "a"),
        ("list", "zookeeperconfigs", "", ns, ""),
        ("patch", "zookeeperconfigs", "", ns, "a"),
        ("patch", "zookeeperconfigs", "status", ns, "a"),
        ("get", "zookeeperconfigs", "", ns, "a"),
        ("update", "zookeeperconfigs", "", ns, "a"),
        ("watch", "zookeeperconfigs", "", ns, ""),
        ("delete", "zookeeperconfigs", "", ns, "a"),
        ("deletecollection", "zookeeperconfigs", "", ns, ""),
    ]
    assert server.request_log[4][:5] == ("patch", "zookeeperconfigs", "status", ns, "a")
    assert server.write_counts == {"create": 1, "patch": 2, "update": 1, "delete": 1, "deletecollection": 1}
    assert server.count_requests("patch", "zookeeperconfigs", subresource="status") == 1
    assert server.count_requests(resource="zookeeperconfigs", name="a") == 6
    server.clear_request_log()
    assert server.request_log == [] and server.write_counts == {}


def test_failed_requests_are_logged_too(kube: KubeClient, server: ApiServer, ns: str) -> None:
    server.clear_request_log()
    api_error(lambda: kube.request("GET", cms(ns, "missing")))
    server.fail_requests(1.0, codes=(500,))
    api_error(lambda: kube.request("POST", cms(ns), body=cm("x")))
    server.fail_requests(0)
    assert [r.verb for r in server.request_log] == ["get", "create"]
