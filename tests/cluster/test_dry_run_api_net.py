"""The API client's net under ``zkop run --dry-run`` (``zkop.operator.run.DRY_RUN_WRITES``) on the real API server.

A client built with the dry run's write policy sends what docs/operations.md's rule allows (the status of
zkop's own objects, the removal of zkop's finalizer, Events, a Lease) and refuses everything else before it
is sent: kube-apiserver's audit log holds none of the refused requests.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from zkop_testing import audit
from zkop_testing.controlplane import ControlPlane
from zkop_testing.kustomize import Obj
from zkop_testing.resources import ZKC, zkc

from zkop.kube.client import MERGE_PATCH, KubeClient, WriteRefused, resource_path
from zkop.operator.run import DRY_RUN_WRITES
from zkop.zkconfig.spec import FINALIZER


def test_the_dry_run_client_sends_only_the_writes_the_rule_allows(
        plane: ControlPlane, installed: list[Obj], kube: KubeClient, namespace: str,
        caplog: pytest.LogCaptureFixture) -> None:
    kube.request("POST", resource_path(*ZKC, namespace), body={
        **zkc("flags", "/app/flags", b"on", namespace=namespace),
        "metadata": {"name": "flags", "namespace": namespace, "finalizers": [FINALIZER, "example.com/keep"]}})
    guarded = KubeClient(plane.api_client(), default_timeout=30, refuse_writes=DRY_RUN_WRITES)
    try:
        obj = kube.request("GET", resource_path(*ZKC, namespace, "flags"))
        refused: list[tuple[str, str, Any]] = [
            ("POST", resource_path("", "v1", "configmaps", namespace),
             {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nope"}}),
            ("PATCH", resource_path(*ZKC, namespace, "flags"), {"spec": {"path": "/app/other"}}),
            ("PATCH", resource_path(*ZKC, namespace, "flags"),  # adding the finalizer
             {"metadata": {"finalizers": [FINALIZER, "example.com/keep", "x.example.com/f"]}}),
            ("DELETE", resource_path(*ZKC, namespace, "flags"), None),
            ("POST", resource_path("", "v1", "services", namespace),
             {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "nope"}, "spec": {"ports": [{"port": 1}]}}),
        ]
        with caplog.at_level(logging.ERROR, logger="zkop.kube.client"):
            for method, path, body in refused:
                with pytest.raises(WriteRefused):
                    guarded.request(method, path, body=body, content_type=MERGE_PATCH if method == "PATCH" else None)
        assert caplog.text.count("REFUSED an API write") == len(refused)

        guarded.request("PATCH", resource_path(*ZKC, namespace, "flags", "status"),
                        body={"status": {"state": "Pending"}}, content_type=MERGE_PATCH)
        guarded.request("POST", resource_path("", "v1", "events", namespace), body={
            "apiVersion": "v1", "kind": "Event", "metadata": {"name": "flags.dry", "namespace": namespace},
            "involvedObject": {"kind": "ZooKeeperConfig", "name": "flags", "namespace": namespace,
                               "apiVersion": "platform.example.com/v1alpha1", "uid": obj["metadata"]["uid"]},
            "type": "Warning", "reason": "PathConflict", "message": "found", "source": {"component": "zkop"}})
        guarded.request("POST", resource_path("coordination.k8s.io", "v1", "leases", namespace), body={
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "zkop-dry"},
            "spec": {"holderIdentity": "test"}})
        guarded.request("PATCH", resource_path(*ZKC, namespace, "flags"), content_type=MERGE_PATCH, body={
            "metadata": {"finalizers": ["example.com/keep"],
                         "resourceVersion": kube.request("GET", resource_path(*ZKC, namespace, "flags"))[
                             "metadata"]["resourceVersion"]}})
    finally:
        guarded.close()

    after = kube.request("GET", resource_path(*ZKC, namespace, "flags"))
    assert after["metadata"]["finalizers"] == ["example.com/keep"]
    assert after["status"]["state"] == "Pending"
    assert after["spec"]["path"] == "/app/flags"
    audit.settled(plane, namespace)
    writes = sorted((r.verb, r.resource, r.subresource)
                    for r in audit.requests(plane, namespace=namespace, verbs=audit.WRITES, user="admin"))
    assert writes == sorted([
        ("create", "zookeeperconfigs", ""),  # the test's own object, by the plain admin client
        ("patch", "zookeeperconfigs", "status"), ("create", "events", ""), ("create", "leases", ""),
        ("patch", "zookeeperconfigs", ""),  # the finalizer removed
    ])
