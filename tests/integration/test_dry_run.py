"""``zkop run --dry-run`` covers every controller: ZooKeeperConfigs, the service bridge, the service importer.

One operator process as users start it (as its ServiceAccount, in the test's namespace), a real ZooKeeper and
the real kube-apiserver: the
ZooKeeper tree and every API object stay as they were, except the documented ZooKeeperConfig
status (``Ready=False``, reason ``DryRun``) and the finalizer of an object deleted during the
dry run; each planned change is one log line and one count in
``zkop_dry_run_planned_changes_total``.
"""

from __future__ import annotations

import base64
import json
import logging
import re
from typing import Any

import pytest
from kazoo.client import KazooClient
from zkop_testing.controllers import running_manager
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import ZKC, conditions, get, reasons, synced, zkc
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer, tree_state

from zkop.kube.client import MERGE_PATCH, KubeClient, resource_path
from zkop.kube.events import EventRecorder
from zkop.runtime.manager import Manager
from zkop.zkconfig import controller as zkconfig_controller
from zkop.zkconfig.reconciler import ReconcilerOptions
from zkop.zkconfig.spec import FINALIZER
from zkop.zookeeper.adapter import ZooKeeperAdapter

JSON = dict[str, Any]




def curator(name: str, instance_id: str, address: str) -> bytes:
    """A Curator ``ServiceInstance`` as a legacy application registers it."""
    return json.dumps({"name": name, "id": instance_id, "address": address, "port": 8080, "sslPort": None,
                       "payload": None, "registrationTimeUTC": 1621155920122, "serviceType": "DYNAMIC",
                       "uriSpec": None, "enabled": True}).encode()


def planned(metrics: str, controller: str, operation: str) -> float:
    """``zkop_dry_run_planned_changes_total{controller, operation}`` (0 when absent)."""
    pattern = (rf'^zkop_dry_run_planned_changes_total\{{controller="{controller}",operation="{operation}"\}} '
               r"([0-9.e+]+)$")
    match = re.search(pattern, metrics, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def items(kube: KubeClient, path: str) -> list[JSON]:
    found: list[JSON] = kube.request("GET", path)["items"]
    return sorted(found, key=lambda o: str(o["metadata"]["name"]))


def test_dry_run_writes_nothing_anywhere_and_says_what_it_would_do(
        kubeconfig: str, kube: KubeClient, zk_server: ZooKeeperServer, zk: KazooClient, zk_base: str,
        namespace: str) -> None:
    hosts = f"{zk_server.hosts}{zk_base}"
    services = resource_path("", "v1", "services", namespace)
    slices = resource_path("discovery.k8s.io", "v1", "endpointslices", namespace)
    # A real run first: "kept" is Synced, carries the finalizer, owns /app/kept and its record.
    kube.request("POST", resource_path(*ZKC, namespace), body=zkc("kept", "/app/kept", b"v1", namespace=namespace))
    kube.request("POST", resource_path(*ZKC, namespace), body=zkc("gone", "/app/gone", b"bye", namespace=namespace))
    with OperatorProcess(kubeconfig, hosts, ["--cluster-id", "prod", "--namespace", namespace]) as real:
        wait_for(lambda: synced(kube, "kept", namespace) and synced(kube, "gone", namespace),
                 message="Synced in the real run")
    assert real.proc is not None and real.proc.returncode == 0, real.log_tail()
    # A legacy application registered in ZooKeeper (the importer's input).
    zk.create(f"{zk_base}/services/payments/i1", curator("payments", "i1", "10.3.0.1"), makepath=True)
    before_zk = tree_state(zk, zk_base)
    assert before_zk[zk_base + "/app/kept"][0] == b"v1"
    before_objects = {path: items(kube, path) for path in (services, slices)}

    args = ["--dry-run", "--cluster-id", "prod", "--service-bridge", "--import-services",
            "--import-namespace", namespace, "--sync-period", "5", "--namespace", namespace]
    with OperatorProcess(kubeconfig, hosts, args) as proc:
        # ZooKeeperConfig create: status says DryRun and names the changes; no finalizer.
        kube.request("POST", resource_path(*ZKC, namespace),
                     body=zkc("fresh", "/app/fresh", b"new", namespace=namespace))

        def dry_run_ready(name: str) -> JSON | None:
            ready = conditions(get(kube, name, namespace)).get("Ready") or {}
            return ready if ready.get("reason") == "DryRun" else None

        ready = wait_for(lambda: dry_run_ready("fresh"), message="fresh reports DryRun")
        assert ready["status"] == "False"
        assert "would create /app/fresh (3 bytes)" in ready["message"]
        assert "would create /zkop/owners/app/fresh" in ready["message"]  # the ownership record
        fresh = get(kube, "fresh", namespace) or {}
        assert fresh["status"]["state"] == "Pending"
        assert FINALIZER not in (fresh["metadata"].get("finalizers") or [])

        # ZooKeeperConfig update: the znode keeps its bytes, status lists the update.
        kube.request("PATCH", resource_path(*ZKC, namespace, "kept"),
                     body={"spec": {"data": base64.b64encode(b"v2-secret").decode()}}, content_type=MERGE_PATCH)
        ready = wait_for(lambda: dry_run_ready("kept"), message="kept reports DryRun")
        assert "would update /app/kept (version 0, 9 bytes)" in ready["message"]
        assert "v2-secret" not in ready["message"]

        # ZooKeeperConfig delete: the dry-run object goes at once (no finalizer); the one with the
        # finalizer of the real run goes too (the finalizer is removed), its znode stays.
        kube.request("DELETE", resource_path(*ZKC, namespace, "fresh"))
        kube.request("DELETE", resource_path(*ZKC, namespace, "gone"))
        wait_for(lambda: get(kube, "fresh", namespace) is None and get(kube, "gone", namespace) is None,
                 message="deletions never block in a dry run")

        # Service bridge: a Service is planned, not published.
        kube.request("POST", services, body={"apiVersion": "v1", "kind": "Service",
                                             "metadata": {"name": "web", "namespace": namespace},
                                             "spec": {"ports": [{"port": 80}]}})

        def logged(*needles: str) -> bool:
            text = proc.log_tail(1_000_000)
            return all(needle in text for needle in needles)

        wait_for(lambda: logged(
            f"dry-run zookeeperconfig {namespace}/fresh: would create /app/fresh (3 bytes)",
            f"dry-run zookeeperconfig {namespace}/kept: would update /app/kept (version 0, 9 bytes)",
            f"dry-run zookeeperconfig {namespace}/gone: would delete /app/gone (version 0)",
            f"dry-run zookeeperconfig {namespace}/gone: would release the ownership record",
            f"dry-run service-bridge {namespace}/web: would create /kubernetes/services/{namespace}-web",
            f"dry-run service-import {namespace}/payments: would create services/payments",
        ), message="every planned change logged")

        text = proc.metrics()
        assert planned(text, "zookeeperconfig", "create") >= 2  # /app/fresh and its ownership record
        assert planned(text, "zookeeperconfig", "update") >= 1
        assert planned(text, "zookeeperconfig", "delete") >= 1
        assert planned(text, "zookeeperconfig", "release") >= 1
        assert planned(text, "service-bridge", "create") >= 1
        assert planned(text, "service-import", "create") >= 1  # the Service (and its EndpointSlice)
        log_text = proc.log_tail(1_000_000)
        assert "v2-secret" not in log_text and "REFUSED" not in log_text

        # Nothing was written: the whole tree (data, mzxid, cversion) is as before (so no start-up
        # probe node came and went under /zkop/probe either); no Service or EndpointSlice but ours.
        assert tree_state(zk, zk_base) == before_zk
        assert [s for s in items(kube, services) if s["metadata"]["name"] != "web"] == before_objects[services]
        assert items(kube, slices) == before_objects[slices]
        kept = get(kube, "kept", namespace) or {}
        assert FINALIZER in kept["metadata"]["finalizers"]  # left as the real run left it
        assert "Created" not in reasons(kube, "fresh", namespace) and "Updated" not in reasons(kube, "kept", namespace)
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()
    assert tree_state(zk, zk_base) == before_zk


def test_a_code_path_that_misses_the_dry_run_fails_closed(kube: KubeClient, adapter: ZooKeeperAdapter, zk: KazooClient,
                                                          zk_base: str, caplog: pytest.LogCaptureFixture,
                                                          namespace: str) -> None:
    """The reconciler told nothing of the dry run (a bug), the adapter refusing writes: nothing reaches ZooKeeper."""
    adapter.refuse_writes = "zkop run --dry-run"
    recorder = EventRecorder(kube)

    def setup(manager: Manager) -> None:
        manager.add(recorder, needs_leader=False)
        zkconfig_controller.add_to_manager(manager, kube, adapter, recorder, ReconcilerOptions(dry_run=False),
                                  namespaces=[namespace], workers=1, sync_period=600, inactivity_timeout=90)

    with caplog.at_level(logging.ERROR), running_manager(setup, zookeeper=adapter):
        kube.request("POST", resource_path(*ZKC, namespace),
                     body=zkc("missed", "/app/missed", b"x", namespace=namespace))
        wait_for(lambda: "REFUSED a ZooKeeper write" in caplog.text
                 and f"reconcile {namespace}/missed failed" in caplog.text, message="refused, loudly")
    assert zk.exists(f"{zk_base}/app/missed") is None
    assert zk.exists(f"{zk_base}/zkop") is None  # nor its ownership record
    assert ((get(kube, "missed", namespace) or {}).get("status") or {}).get("state") != "Synced"
