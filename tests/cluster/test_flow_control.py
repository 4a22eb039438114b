"""A cold sync of thousands of objects against a kube-apiserver whose API Priority and Fairness rejects zkop.

A control plane of its own with a small concurrency (``--max-requests-inflight``,
``--max-mutating-requests-inflight``) and a FlowSchema that puts zkop's ServiceAccount into a
priority level of one seat whose limit response is ``Reject``: every request beyond that one seat is
answered 429 with ``Retry-After`` (apiserver ``pkg/server/filters/priority-and-fairness.go``,
``tooManyRequests``; the value grows while rejections go on, ``droppedrequests.GetRetryAfter``).
zkop runs with its default client-side limits (``--kube-api-qps`` 50, burst 100). It must converge
every object with no error left in any status, and its retries must stay a small share of its requests
(client-go's ``rest.Request`` retry on ``Retry-After``, at most 10 per request).
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_support import ZKOP_NAMESPACE, ZKOP_SERVICE_ACCOUNT, install
from kazoo.client import KazooClient
from zkop_testing.controlplane import NEWEST, ControlPlane, fresh_namespace
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import ZKC, zkc
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import KubeClient, resource_path

OBJECTS = 2000
ZKOP_USER = f"system:serviceaccount:{ZKOP_NAMESPACE}:{ZKOP_SERVICE_ACCOUNT}"
FLOWCONTROL = "/apis/flowcontrol.apiserver.k8s.io/v1"
LEVEL = "zkop-test-one-seat"


@pytest.fixture(scope="module")
def tight_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A control plane whose API Priority and Fairness gives zkop's ServiceAccount one seat and rejects the rest."""
    # The server's total concurrency is split among the priority levels by their nominal shares
    # (about 245 among the built-in levels): 75 seats leave this level ceil(75 * 1 / 246) = 1.
    with ControlPlane(NEWEST, apiserver_args=["--max-requests-inflight=50",
                                              "--max-mutating-requests-inflight=25"]) as plane:
        install(plane, tmp_path_factory.mktemp("install"))
        with plane.admin() as kube:
            kube.request("POST", f"{FLOWCONTROL}/prioritylevelconfigurations", body={
                "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
                "metadata": {"name": LEVEL},
                "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 1, "lendablePercent": 0,
                                                        "limitResponse": {"type": "Reject"}}}})
            kube.request("POST", f"{FLOWCONTROL}/flowschemas", body={
                "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": LEVEL},
                "spec": {"priorityLevelConfiguration": {"name": LEVEL}, "matchingPrecedence": 500,
                         "distinguisherMethod": {"type": "ByUser"},
                         "rules": [{"subjects": [{"kind": "ServiceAccount", "serviceAccount": {
                             "name": ZKOP_SERVICE_ACCOUNT, "namespace": ZKOP_NAMESPACE}}],
                             "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                                "clusterScope": True, "namespaces": ["*"]}],
                             "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}})

            def active() -> bool:  # the APF config controller has taken the FlowSchema in
                schema = kube.request("GET", f"{FLOWCONTROL}/flowschemas/{LEVEL}")
                return any(c.get("type") == "Dangling" and c.get("status") == "False"
                           for c in (schema.get("status") or {}).get("conditions") or [])

            wait_for(active, message="FlowSchema taken in by API Priority and Fairness")
        yield plane


def _create_many(kube: KubeClient, namespace: str) -> None:
    def create(i: int) -> None:
        kube.request("POST", resource_path(*ZKC, namespace), body=zkc(f"flag-{i}", f"/flags/f{i}", b"on",
                                                                      namespace=namespace))

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(create, range(OBJECTS)))


def _states(kube: KubeClient, namespace: str) -> dict[str, list[str]]:
    items: list[dict[str, Any]] = kube.request("GET", resource_path(*ZKC, namespace))["items"]
    states: dict[str, list[str]] = {}
    for item in items:
        status = item.get("status") or {}
        synced = status.get("state") == "Synced" and status.get("observedGeneration") == item["metadata"]["generation"]
        states.setdefault("Synced" if synced else str(status.get("state")), []).append(item["metadata"]["name"])
    return states


@pytest.mark.timeout(1200)
def test_a_cold_sync_under_apf_rejections_converges_without_errors_or_a_retry_storm(
        tight_plane: ControlPlane, zk_server: ZooKeeperServer, zk_base: str, zk: KazooClient,
        tmp_path: Path) -> None:
    namespaces = fresh_namespace(tight_plane)
    namespace = next(namespaces)
    try:
        with tight_plane.admin(timeout=60) as kube:
            _create_many(kube, namespace)
            kubeconfig = tight_plane.service_account_kubeconfig(tmp_path / "zkop.kubeconfig", ZKOP_NAMESPACE,
                                                                ZKOP_SERVICE_ACCOUNT)
            mark = len(tight_plane.audit_events())
            with OperatorProcess(str(kubeconfig), f"{zk_server.hosts}{zk_base}",
                                 ["--namespace", namespace, "--workers", "4"]):
                wait_for(lambda: len(_states(kube, namespace).get("Synced", [])) == OBJECTS, timeout=900,
                         interval=2, message=f"{OBJECTS} objects Synced")
            states = _states(kube, namespace)
        assert set(states) == {"Synced"}, {state: names[:5] for state, names in states.items()}
        assert len(zk.get_children(zk_base + "/flags")) == OBJECTS
        events = [e for e in tight_plane.audit_events()[mark:] if e.get("user", {}).get("username") == ZKOP_USER
                  and e.get("stage") == "ResponseComplete"]
        rejected = [e for e in events if e.get("responseStatus", {}).get("code") == 429]
        writes = [e for e in events if e["verb"] in ("patch", "create", "update")]
        # The pressure was real: API Priority and Fairness turned zkop's requests away.
        assert rejected, "no request of zkop's was rejected: the test exercised nothing"
        # No storm: each rejected request was retried after Retry-After, not hammered; the rejections
        # stay a fraction of the work (two writes per object: finalizer and status, plus Events).
        assert len(rejected) < len(writes), (len(rejected), len(writes))
        # Every rejected request was sent again and then answered (by the client after Retry-After, or, for a
        # watch or a write whose retry budget ran out, by the reflector or the work queue): none was lost.
        answered = {(e["verb"], e["requestURI"].split("?")[0]) for e in events
                    if e.get("responseStatus", {}).get("code", 500) < 400}
        lost = sorted({(e["verb"], e["requestURI"]) for e in rejected
                       if (e["verb"], e["requestURI"].split("?")[0]) not in answered})
        assert not lost, lost[:10]
        print(f"\n{OBJECTS} objects: {len(events)} requests of zkop's, {len(writes)} writes, "
              f"{len(rejected)} answered 429 by API Priority and Fairness")
    finally:
        next(namespaces, None)
