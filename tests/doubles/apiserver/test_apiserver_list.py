"""LIST: ordering, selectors, pagination and resource version semantics."""

from __future__ import annotations

from typing import Any

import pytest
from apiserver_helpers import api_error, cm, zkc, zkc_path
from zkop_testing.apiserver import ApiServer

from zkop.kube.client import MERGE_PATCH, KubeClient, resource_path

JSON = dict[str, Any]


def cms(ns: str | None, name: str | None = None) -> str:
    return resource_path("", "v1", "configmaps", ns, name)


def names(listing: JSON) -> list[str]:
    return [i["metadata"]["name"] for i in listing["items"]]


def test_items_are_sorted_and_built_in_items_have_no_type_meta(kube: KubeClient, crd: JSON, ns: str) -> None:
    for name in ("c", "a", "b"):
        kube.request("POST", cms(ns), body=cm(name))
        kube.request("POST", zkc_path(ns), body=zkc(name))
    listing = kube.request("GET", cms(ns))
    assert listing["kind"] == "ConfigMapList" and listing["apiVersion"] == "v1"
    assert names(listing) == ["a", "b", "c"]
    assert all("kind" not in i and "apiVersion" not in i for i in listing["items"])
    custom = kube.request("GET", zkc_path(ns))
    assert names(custom) == ["a", "b", "c"]
    assert all(i["kind"] == "ZooKeeperConfig" for i in custom["items"])


def test_cluster_wide_list_orders_by_namespace_then_name(kube: KubeClient) -> None:
    for namespace in ("zz", "aa"):
        kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": namespace}})
        kube.request("POST", cms(namespace), body=cm("x"))
    items = kube.request("GET", cms(None))["items"]
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in items] == [("aa", "x"), ("zz", "x")]


@pytest.mark.parametrize(("selector", "expected"), [
    ("", ["both", "none", "tier-a", "tier-b"]),
    ("app=zk", ["both", "tier-a", "tier-b"]),
    ("app==zk,tier=a", ["tier-a"]),
    ("tier!=a", ["both", "none", "tier-b"]),
    ("tier in (a, b)", ["tier-a", "tier-b"]),
    ("tier notin (a)", ["both", "none", "tier-b"]),
    ("tier", ["tier-a", "tier-b"]),
    ("!tier", ["both", "none"]),
    ("app=zk,!tier", ["both"]),
    ("weight>5", ["both"]),
])
def test_label_selectors(kube: KubeClient, ns: str, selector: str, expected: list[str]) -> None:
    labels = {"both": {"app": "zk", "weight": "10"}, "none": {}, "tier-a": {"app": "zk", "tier": "a"},
              "tier-b": {"app": "zk", "tier": "b"}}
    for name, value in labels.items():
        kube.request("POST", cms(ns), body=cm(name, labels=value))
    assert names(kube.request("GET", cms(ns), query={"labelSelector": selector})) == expected


def test_bad_selectors_are_bad_requests(kube: KubeClient, ns: str) -> None:
    for selector in ("a in (b", "a=b=c", "=x", "a,", "Bad Key=1"):
        def list_with(s: str = selector) -> Any:
            return kube.request("GET", cms(ns), query={"labelSelector": s})

        status, body = api_error(list_with)
        assert status == 400 and body["reason"] == "BadRequest", selector
    status, body = api_error(lambda: kube.request("GET", cms(ns), query={"fieldSelector": "data.k=v"}))
    assert status == 400 and body["message"] == "field label not supported: data.k"


def test_field_selectors(kube: KubeClient, ns: str) -> None:
    for name in ("a", "b"):
        kube.request("POST", cms(ns), body=cm(name))
    assert names(kube.request("GET", cms(ns), query={"fieldSelector": "metadata.name=b"})) == ["b"]
    assert names(kube.request("GET", cms(ns), query={"fieldSelector": "metadata.name!=b"})) == ["a"]
    assert names(kube.request("GET", cms(None), query={"fieldSelector": f"metadata.namespace=={ns}"})) == ["a", "b"]
    secrets = resource_path("", "v1", "secrets", ns)
    kube.request("POST", secrets, body={"metadata": {"name": "tls"}, "type": "kubernetes.io/tls",
                                        "data": {"tls.crt": "", "tls.key": ""}})
    kube.request("POST", secrets, body={"metadata": {"name": "plain"}})
    assert names(kube.request("GET", secrets, query={"fieldSelector": "type=kubernetes.io/tls"})) == ["tls"]


def test_pagination_is_a_consistent_snapshot(kube: KubeClient, server: ApiServer, ns: str) -> None:
    for i in range(7):
        kube.request("POST", cms(ns), body=cm(f"cm-{i}"))
    page = kube.request("GET", cms(ns), query={"limit": 3})
    snapshot_rv = page["metadata"]["resourceVersion"]
    assert names(page) == ["cm-0", "cm-1", "cm-2"] and page["metadata"]["remainingItemCount"] == 4
    # changes after the first page do not leak into later pages
    kube.request("DELETE", cms(ns, "cm-4"))
    kube.request("POST", cms(ns), body=cm("cm-35"))
    kube.request("PATCH", cms(ns, "cm-5"), body={"data": {"k": "changed"}}, content_type=MERGE_PATCH)
    collected = names(page)
    while page["metadata"].get("continue"):
        page = kube.request("GET", cms(ns), query={"limit": 3, "continue": page["metadata"]["continue"]})
        assert page["metadata"]["resourceVersion"] == snapshot_rv
        collected += names(page)
        if page["metadata"].get("continue") is None:
            assert "remainingItemCount" not in page["metadata"]
        if any(i["metadata"]["name"] == "cm-5" for i in page["items"]):
            assert next(i for i in page["items"] if i["metadata"]["name"] == "cm-5")["data"] == {"k": "v"}
    assert collected == [f"cm-{i}" for i in range(7)]
    status, _ = api_error(lambda: kube.request("GET", cms(ns), query={"continue": "garbage!"}))
    assert status == 400


def test_pages_follow_creates_and_deletes_between_lists(kube: KubeClient, server: ApiServer, ns: str) -> None:
    """Pages start at their continue key by bisection in a key order kept in step with every
    create and delete (not re-sorted per page); with and without selectors, the pages add up."""

    def paged(namespace: str | None, query: dict[str, Any]) -> tuple[list[str], list[int]]:
        collected: list[str] = []
        remaining: list[int] = []
        page = kube.request("GET", cms(namespace), query={**query, "limit": 4})
        while True:
            collected += [f"{i['metadata']['namespace']}/{i['metadata']['name']}" for i in page["items"]]
            if not page["metadata"].get("continue"):
                return collected, remaining
            remaining.append(page["metadata"].get("remainingItemCount", -1))
            page = kube.request("GET", cms(namespace), query={**query, "limit": 4,
                                                             "continue": page["metadata"]["continue"]})

    for i in (5, 1, 9, 3, 7, 0, 8, 2, 6, 4):
        kube.request("POST", cms(ns), body={**cm(f"cm-{i}"), "metadata": {"name": f"cm-{i}",
                                                                           "labels": {"odd": str(i % 2)}}})
    for round_ in range(3):
        everything = [f"{i['metadata']['namespace']}/{i['metadata']['name']}"
                      for i in kube.request("GET", cms(None))["items"]]
        names_, remaining = paged(None, {})
        assert names_ == everything == sorted(everything)
        assert remaining == [len(everything) - 4 * (k + 1) for k in range(len(remaining))]
        assert paged(ns, {})[0] == [n for n in everything if n.startswith(f"{ns}/")]
        odd = paged(None, {"labelSelector": "odd=1"})[0]
        assert odd == [n for n in everything if n.startswith(f"{ns}/cm-") and len(n) == len(ns) + 5
                       and int(n[-1]) % 2 == 1]  # the labelled cm-<digit>s that are left
        kube.request("DELETE", cms(ns, f"cm-{round_ * 3}"))
        kube.request("POST", cms(ns), body=cm(f"cm-{round_}{round_}"))
        kube.request("POST", cms(ns), body=cm(f"aa-{round_}"))


def test_expired_continue_token_is_gone(kube: KubeClient, server: ApiServer, ns: str) -> None:
    for i in range(3):
        kube.request("POST", cms(ns), body=cm(f"cm-{i}"))
    page = kube.request("GET", cms(ns), query={"limit": 1})
    kube.request("POST", cms(ns), body=cm("later"))
    server.expire_history()
    status, body = api_error(lambda: kube.request("GET", cms(ns), query={"limit": 1,
                                                                         "continue": page["metadata"]["continue"]}))
    assert status == 410 and body["reason"] == "Expired"
    assert body["message"].startswith("The provided continue parameter is too old")
    # k8s.io/apiserver pkg/storage/etcd3/store.go handleCompactedErrorForPaging: the Status carries a
    # fresh token that continues after the same key at the latest resource version (inconsistent list).
    fresh = body["metadata"]["continue"]
    rest = kube.request("GET", cms(ns), query={"continue": fresh})
    assert [i["metadata"]["name"] for i in rest["items"]] == ["cm-1", "cm-2", "later"]
    assert rest["metadata"]["resourceVersion"] == str(server.resource_version)


def test_resource_version_match(kube: KubeClient, server: ApiServer, ns: str) -> None:
    kube.request("POST", cms(ns), body=cm("a"))
    old = str(server.resource_version)
    kube.request("POST", cms(ns), body=cm("b"))
    kube.request("PATCH", cms(ns, "a"), body={"data": {"k": "new"}}, content_type=MERGE_PATCH)
    exact = kube.request("GET", cms(ns), query={"resourceVersion": old, "resourceVersionMatch": "Exact"})
    assert exact["metadata"]["resourceVersion"] == old
    assert names(exact) == ["a"] and exact["items"][0]["data"] == {"k": "v"}
    newer = kube.request("GET", cms(ns), query={"resourceVersion": old, "resourceVersionMatch": "NotOlderThan"})
    assert names(newer) == ["a", "b"] and newer["metadata"]["resourceVersion"] == str(server.resource_version)
    assert names(kube.request("GET", cms(ns), query={"resourceVersion": "0"})) == ["a", "b"]
    server.expire_history()
    status, body = api_error(lambda: kube.request("GET", cms(ns), query={"resourceVersion": old,
                                                                         "resourceVersionMatch": "Exact"}))
    assert status == 410 and body["reason"] == "Expired"
    # plain lists keep working after the history is gone
    for query in ({}, {"resourceVersion": ""}, {"resourceVersion": "0"},
                  {"resourceVersion": old, "resourceVersionMatch": "NotOlderThan"}):
        assert names(kube.request("GET", cms(ns), query=query)) == ["a", "b"]


def test_invalid_list_options(kube: KubeClient, server: ApiServer, ns: str) -> None:
    status, body = api_error(lambda: kube.request("GET", cms(ns), query={"resourceVersionMatch": "Exact"}))
    assert status == 422 and body["details"]["causes"][0]["field"] == "resourceVersionMatch"
    status, _ = api_error(lambda: kube.request("GET", cms(ns), query={"resourceVersion": "0",
                                                                      "resourceVersionMatch": "Exact"}))
    assert status == 422
    status, _ = api_error(lambda: kube.request("GET", cms(ns), query={"resourceVersion": "1",
                                                                      "resourceVersionMatch": "Sometimes"}))
    assert status == 422
    status, _ = api_error(lambda: kube.request("GET", cms(ns), query={"resourceVersion": "abc"}))
    assert status == 400
    server.store.future_rv_wait = 0.2
    future = str(server.resource_version + 1000)
    status, body = api_error(lambda: kube.request("GET", cms(ns), query={
        "resourceVersion": future, "resourceVersionMatch": "NotOlderThan"}, timeout=10))
    assert status == 504 and body["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
