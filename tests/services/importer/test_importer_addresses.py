"""Addresses the way kube-apiserver validates EndpointSlices, and slices written one by one.

The in-memory API server validates EndpointSlices as ``pkg/apis/discovery/validation/validation.go``
does (``zkop_testing.apiserver_discovery``), so a 422 here is the 422 a real cluster answers.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from kazoo.client import KazooClient
from zkop_testing.apiserver import ApiServer
from zkop_testing.services import IMPORT_NAMESPACE as NAMESPACE
from zkop_testing.services import endpoints, events, register, running_importer, sample, slices_of
from zkop_testing.waiting import wait_for

from zkop.kube.client import ApiException, KubeClient
from zkop.services.importer.objects import CreateObject, DeleteObject, KubeAction, PatchObject
from zkop.services.importer.options import ImportOptions
from zkop.services.importer.writer import ApiWriter
from zkop.zookeeper.adapter import ZooKeeperAdapter

JSON = dict[str, Any]
OPTIONS = ImportOptions(namespace=NAMESPACE, gc_delay=0.2)


def test_a_mixed_instance_set_publishes_what_a_slice_can_hold_and_warns_about_the_rest(
        apiserver: ApiServer, kube: KubeClient, adapter: ZooKeeperAdapter, chrooted: KazooClient) -> None:
    skipped_before = sample("zkop_service_import_skipped_instances_total", {"reason": "address"})
    register(chrooted, "payments", "v4", "10.1.0.1", ephemeral=False)
    register(chrooted, "payments", "v6", "2001:db8::5", ephemeral=False)
    register(chrooted, "payments", "fqdn", "payments-1.legacy.example.com", ephemeral=False)
    register(chrooted, "payments", "pig", "pig", ephemeral=False)  # Spring Cloud Zookeeper's local host name
    register(chrooted, "payments", "mapped", "::ffff:10.1.0.9", ephemeral=False)  # a dual-stack JVM's IPv4 peer
    with running_importer(apiserver, adapter, OPTIONS):
        wait_for(lambda: endpoints(kube, "payments") == {
            "10.1.0.1": True, "10.1.0.9": True, "2001:db8::5": True, "payments-1.legacy.example.com": True,
        }, message="every instance a slice can hold is published")
        assert {(s["metadata"]["name"], s["addressType"]) for s in slices_of(kube, "payments")} == {
            ("payments-zkop-ipv4", "IPv4"), ("payments-zkop-ipv6", "IPv6"), ("payments-zkop-fqdn", "FQDN")}
        wait_for(lambda: events(kube, "InstanceSkipped"), message="a Warning for the skipped one")
        (event,) = events(kube, "InstanceSkipped")
        assert event["type"] == "Warning" and event["involvedObject"]["name"] == "payments"
        assert "/services/payments/pig (address: 'pig' is a single-label host name" in event["message"]
        assert sample("zkop_service_import_skipped_instances_total", {"reason": "address"}) == skipped_before + 1


class _RefusingClient:
    """Answers every request with ``{}`` except the ones ``refuse(method, path)`` names: 422 or 409."""

    def __init__(self, refuse: dict[tuple[str, str], int]) -> None:
        self.refuse = refuse
        self.sent: list[tuple[str, str]] = []

    def request(self, method: str, path: str, *, query: Any = None, body: Any = None,
                content_type: str | None = None, timeout: Any = None) -> JSON:
        name = path.rsplit("/", 1)[-1] if method != "POST" else str(body["metadata"]["name"])
        self.sent.append((method, name))
        status = self.refuse.get((method, name))
        if status is not None:
            raise ApiException(status=status, reason="Refused")
        return {}


def _slice(name: str) -> JSON:
    return {"metadata": {"name": name}}


def test_one_refused_slice_does_not_keep_the_others_from_being_written() -> None:
    client = _RefusingClient({("POST", "s-fqdn"): 422})
    writer = ApiWriter(client, NAMESPACE)
    actions: list[KubeAction] = [
        CreateObject("endpointslices", _slice("s-fqdn")), CreateObject("endpointslices", _slice("s-ipv4")),
        PatchObject("endpointslices", "s-ipv6", {}), DeleteObject("endpointslices", "s-old", "uid", "1"),
    ]
    failures = writer.execute_each(actions)
    # The IPv4 and IPv6 slices are written; the delete of a slice no longer wanted waits for the retry.
    assert client.sent == [("POST", "s-fqdn"), ("POST", "s-ipv4"), ("PATCH", "s-ipv6")]
    assert len(failures) == 2 and "422" in failures[0] and "held back" in failures[1]


def test_a_failed_delete_keeps_back_only_its_own_replacement() -> None:
    client = _RefusingClient({("DELETE", "s-a"): 409})
    writer = ApiWriter(client, NAMESPACE)
    actions: list[KubeAction] = [
        DeleteObject("endpointslices", "s-a", "uid", "1"), CreateObject("endpointslices", _slice("s-a")),
        CreateObject("endpointslices", _slice("s-b")),
    ]
    failures = writer.execute_each(actions)
    assert client.sent == [("DELETE", "s-a"), ("POST", "s-b")]
    assert len(failures) == 1 and "409" in failures[0]


def test_a_slice_created_moments_ago_is_not_reported_as_foreign(caplog: pytest.LogCaptureFixture) -> None:
    """A reconcile whose cache has not seen the slice this writer just created gets 409 on its create (seen on
    kube-apiserver, whose watch event follows the POST's answer): not someone else's slice, no warning."""
    client = _RefusingClient({})
    writer = ApiWriter(client, NAMESPACE)
    writer.execute_one(CreateObject("endpointslices", _slice("mine")))
    client.refuse = {("POST", "mine"): 409, ("POST", "theirs"): 409}
    with caplog.at_level(logging.INFO, logger="zkop.services.importer.writer"):
        assert writer.execute_one(CreateObject("endpointslices", _slice("mine"))) is None
        assert writer.execute_one(CreateObject("endpointslices", _slice("theirs"))) is None
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == [f"service-import: EndpointSlice {NAMESPACE}/theirs exists and is not owned by this zkop; "
                      "left unchanged"]
    # Deleted since: a slice of that name is someone else's again.
    client.refuse = {}
    writer.execute_one(DeleteObject("endpointslices", "mine", "uid", "1"))
    assert not writer.created_here("mine")
