"""Validation of the built-in kinds zkop writes: Events, Leases, Services (sources cited per test)."""

from __future__ import annotations

from typing import Any

import pytest
from apiserver_helpers import api_error

from zkop.kube.client import MERGE_PATCH, KubeClient, resource_path

JSON = dict[str, Any]


def event(name: str, ns: str, **extra: Any) -> JSON:
    return {"metadata": {"name": name}, "involvedObject": {"kind": "ConfigMap", "name": "a", "namespace": ns},
            "reason": "Synced", "message": "done", "type": "Normal", "source": {"component": "zkop"}, **extra}


def test_core_event_names_follow_only_path_segment_rules(kube: KubeClient, ns: str) -> None:
    # apimachinery pkg/api/validation/path/name.go IsValidPathSegmentName, applied by
    # k8s.io/apiserver pkg/registry/rest/create.go BeforeCreate (core/v1 Events have no DNS name rule:
    # pkg/apis/core/validation/events.go ValidateEventCreate returns after legacyValidateEvent for v1).
    long_name = "zkc-" + "a" * 260 + ".17f0c0ffee"
    created = kube.request("POST", resource_path("", "v1", "events", ns), body=event(long_name, ns))
    assert created["metadata"]["name"] == long_name
    upper = kube.request("POST", resource_path("", "v1", "events", ns), body=event("Mixed_Case.1", ns))
    assert upper["metadata"]["name"] == "Mixed_Case.1"
    for bad, message in (("..", "may not be '..'"), ("a%b", "may not contain '%'")):
        def create(name: str = bad) -> JSON:
            return kube.request("POST", resource_path("", "v1", "events", ns), body=event(name, ns))

        status, body = api_error(create)
        assert status == 422 and body["details"]["causes"][0] == {
            "reason": "FieldValueInvalid", "field": "metadata.name", "message": f'Invalid value: "{bad}": {message}'}


def test_events_k8s_io_names_are_dns_subdomains(kube: KubeClient, ns: str) -> None:
    # events.go ValidateEventCreate: strict validation (NameIsDNSSubdomain) for events.k8s.io/v1 requests.
    body = {"metadata": {"name": "Mixed_Case"}, "eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingController": "zkop", "reportingInstance": "zkop-0", "action": "Sync", "reason": "Synced",
            "type": "Normal", "regarding": {"kind": "ConfigMap", "name": "a", "namespace": ns}}
    status, reply = api_error(lambda: kube.request("POST", resource_path("events.k8s.io", "v1", "events", ns),
                                                   body=body))
    assert status == 422 and reply["details"]["causes"][0]["field"] == "metadata.name"


def test_legacy_event_rules(kube: KubeClient, ns: str) -> None:
    # events.go legacyValidateEvent: the namespaces must agree; with an eventTime, reportingController,
    # reportingInstance, action and reason are required.
    status, body = api_error(lambda: kube.request("POST", resource_path("", "v1", "events", ns), body=event(
        "x", ns, involvedObject={"kind": "ConfigMap", "name": "a", "namespace": "other"})))
    assert status == 422 and body["details"]["causes"][0]["field"] == "involvedObject.namespace"
    status, body = api_error(lambda: kube.request("POST", resource_path("", "v1", "events", ns), body=event(
        "y", ns, eventTime="2026-01-01T00:00:00.000000Z")))
    fields = {c["field"] for c in body["details"]["causes"]}
    assert status == 422 and fields == {"reportingController", "reportingInstance", "action"}
    # zkop's count/lastTimestamp patch of a core/v1 Event (no eventTime) stays valid
    kube.request("POST", resource_path("", "v1", "events", ns), body=event("z", ns, count=1))
    patched = kube.request("PATCH", resource_path("", "v1", "events", ns, "z"),
                           body={"count": 2, "lastTimestamp": "2026-01-01T00:00:01Z"}, content_type=MERGE_PATCH)
    assert patched["count"] == 2


@pytest.mark.parametrize(("spec", "field", "message"), [
    ({"leaseDurationSeconds": 0}, "spec.leaseDurationSeconds", "Invalid value: 0: must be greater than 0"),
    ({"leaseTransitions": -1}, "spec.leaseTransitions", "Invalid value: -1: must be greater than or equal to 0"),
    ({"preferredHolder": "b"}, "spec.preferredHolder", "Forbidden: may only be specified if `strategy` is defined"),
    ({"strategy": "Newest"}, "spec.strategy.strategy",
     'Unsupported value: "Newest": supported values: "OldestEmulationVersion"'),
])
def test_lease_spec_validation(kube: KubeClient, ns: str, spec: JSON, field: str, message: str) -> None:
    # pkg/apis/coordination/validation/validation.go ValidateLeaseSpec / ValidateCoordinatedLeaseStrategy.
    status, body = api_error(lambda: kube.request("POST", resource_path("coordination.k8s.io", "v1", "leases", ns),
                                                  body={"metadata": {"name": "l"}, "spec": spec}))
    assert status == 422 and body["details"]["causes"][0]["field"] == field
    assert body["details"]["causes"][0]["message"] == message


def test_lease_names_are_dns_subdomains(kube: KubeClient, ns: str) -> None:
    # coordination validation.go ValidateLease: ValidateObjectMeta with NameIsDNSSubdomain.
    status, body = api_error(lambda: kube.request("POST", resource_path("coordination.k8s.io", "v1", "leases", ns),
                                                  body={"metadata": {"name": "Zkop"}, "spec": {}}))
    assert status == 422 and body["details"]["causes"][0]["field"] == "metadata.name"


def test_service_selector_and_target_port_names(kube: KubeClient, ns: str) -> None:
    # pkg/apis/core/validation/validation.go ValidateService: spec.selector through ValidateLabels,
    # targetPort through ValidatePortNumOrName (apimachinery IsValidPortName for names).
    svcs = resource_path("", "v1", "services", ns)
    status, body = api_error(lambda: kube.request("POST", svcs, body={"metadata": {"name": "s"}, "spec": {
        "selector": {"app": "not a value!"}, "ports": [{"port": 80}]}}))
    assert status == 422 and body["details"]["causes"][0]["field"] == "spec.selector"
    status, body = api_error(lambda: kube.request("POST", svcs, body={"metadata": {"name": "s"}, "spec": {
        "ports": [{"port": 80, "targetPort": "http--port-too-long"}]}}))
    messages = [c["message"] for c in body["details"]["causes"] if c["field"] == "spec.ports[0].targetPort"]
    assert status == 422 and messages == [
        'Invalid value: "http--port-too-long": must be no more than 15 characters',
        'Invalid value: "http--port-too-long": must not contain consecutive hyphens']
    ok = kube.request("POST", svcs, body={"metadata": {"name": "s"}, "spec": {
        "selector": {"app.kubernetes.io/name": "zk"}, "ports": [{"port": 80, "targetPort": "client"}]}})
    assert ok["spec"]["ports"][0]["targetPort"] == "client"


def test_service_names_ports_and_cluster_ip(kube: KubeClient, ns: str) -> None:
    # validation.go ValidateService (DNS-1035 names, port names required when several, unique) and
    # ValidateServiceUpdate (clusterIPs immutable).
    svcs = resource_path("", "v1", "services", ns)
    status, body = api_error(lambda: kube.request("POST", svcs, body={"metadata": {"name": "1svc"},
                                                                      "spec": {"ports": [{"port": 80}]}}))
    assert status == 422 and body["details"]["causes"][0]["field"] == "metadata.name"
    status, body = api_error(lambda: kube.request("POST", svcs, body={"metadata": {"name": "s2"}, "spec": {
        "ports": [{"port": 80}, {"port": 81}]}}))
    assert status == 422 and {c["field"] for c in body["details"]["causes"]} == {"spec.ports[0].name",
                                                                                 "spec.ports[1].name"}
    created = kube.request("POST", svcs, body={"metadata": {"name": "s3"}, "spec": {"ports": [{"port": 80}]}})
    status, body = api_error(lambda: kube.request("PATCH", f"{svcs}/s3", body={"spec": {"clusterIP": "10.96.9.9",
                                                  "clusterIPs": ["10.96.9.9"]}}, content_type=MERGE_PATCH))
    assert status == 422 and "may not change once set" in body["message"]
    assert created["spec"]["clusterIP"] != "10.96.9.9"
