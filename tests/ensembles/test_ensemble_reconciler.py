"""The ZooKeeperEnsemble reconciler through the writer it is built with, against the real kube-apiserver and a
real ZooKeeper server.

As ``tests/zkconfig/test_reconciler.py``: the test puts the ZooKeeperEnsemble into the reconciler's cache
itself and calls ``reconcile(name)``. The same passes run with :class:`~zkop.ensembles.writer.ApiWriter` (a
real run) and :class:`~zkop.ensembles.writer.DryRunWriter` (``zkop run --dry-run``): the dry run adds no
finalizer and still reports the status; a finalizer an earlier real run left is removed in both once the
ensemble is deleted (docs/operations.md, "Dry run").
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from zkop_testing.controlplane import ControlPlane
from zkop_testing.crds import crd_established
from zkop_testing.ensembles import ZKE, ensemble, get_ensemble, install_ensemble_crd, ready_condition
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.ensembles.controller import EnsembleReconciler
from zkop.ensembles.running import EnsembleRuntime, Ensembles, PolicySlot
from zkop.ensembles.spec import FINALIZER, EnsembleSpec
from zkop.ensembles.writer import ApiWriter, DryRunWriter
from zkop.kube.client import JSON, MERGE_PATCH, ApiException, KubeClient, resource_path
from zkop.kube.events import EventRecorder
from zkop.runtime.cache import Indexer, Informer, NamedObjectInformer
from zkop.zkconfig.controller import (
    CONFIGMAPS,
    ENSEMBLE_INDEX,
    SECRETS,
    ZOOKEEPERCONFIGS,
    SharedInformers,
    build_ensemble,
    index_by_ensemble,
)
from zkop.zkconfig.reconciler import ReconcilerOptions
from zkop.zookeeper.adapter import ZooKeeperAdapter
from zkop.zookeeper.connection import ConnectionOptions

WRITERS = {"real run": ApiWriter, "dry run": DryRunWriter}


@pytest.fixture
def kube(control_plane: ControlPlane) -> Iterator[KubeClient]:
    """The admin client, with the ZooKeeperEnsemble CRD installed (once per control plane)."""
    with control_plane.admin() as client:
        try:
            install_ensemble_crd(client)
        except ApiException as err:
            if err.status != 409:  # installed by an earlier test
                raise
        wait_for(lambda: crd_established(client, "zookeeperensembles.platform.example.com"),
                 message="the ZooKeeperEnsemble CRD served")
        yield client


class Reconciler:
    """An ensemble reconciler over a cache the test fills, its Secrets read from ``namespace``, each runtime a real
    session to the ensemble the spec names (with its ZooKeeperConfig controller, over caches nobody fills)."""

    def __init__(self, kube: KubeClient, namespace: str, writer: ApiWriter, directory: Path) -> None:
        self.kube, self.directory = kube, directory
        self.cache = Indexer()
        self.shared = SharedInformers(Informer(kube, ZOOKEEPERCONFIGS, indexers={ENSEMBLE_INDEX: index_by_ensemble}),
                                      NamedObjectInformer(kube, CONFIGMAPS), NamedObjectInformer(kube, SECRETS))
        self.ensembles = Ensembles()
        self.made: list[str] = []
        self.reconciler = EnsembleReconciler(self.cache, self.shared, NamedObjectInformer(kube, SECRETS), namespace,
                                             writer, self.ensembles, ConnectionOptions(hosts="", connect_timeout=10),
                                             self.make_runtime)

    def make_runtime(self, name: str, raw: JSON, spec: EnsembleSpec, print_: str, connection: ConnectionOptions,
                     directory: Path) -> EnsembleRuntime:
        self.made.append(name)
        adapter = ZooKeeperAdapter(connection)
        policy = PolicySlot(spec.policy)
        parts = build_ensemble(self.shared, self.kube, adapter, EventRecorder(None), ReconcilerOptions(),
                               ensemble=name, workers=1, acl_check_period=0, policy_for=policy)
        return EnsembleRuntime(name, raw, print_, adapter, parts, policy=policy, directory=directory)

    def create(self, obj: JSON) -> str:
        """Create the ZooKeeperEnsemble and put it into the cache; its name."""
        self.cache.upsert(self.kube.request("POST", resource_path(*ZKE), body=obj))
        return str(obj["metadata"]["name"])

    def refresh(self, name: str) -> JSON | None:
        """Put the API server's current object into the cache (or take it out), as the informer would."""
        found = get_ensemble(self.kube, name)
        if found is None:
            self.cache.delete(name)
        else:
            self.cache.upsert(found)
        return found

    def reconcile(self, name: str) -> None:
        self.reconciler.reconcile(name)

    def stop(self) -> None:
        self.ensembles.stop_all(5.0)


@pytest.fixture(params=list(WRITERS))
def reconciler(request: pytest.FixtureRequest, kube: KubeClient, namespace: str, tmp_path: Path,
               monkeypatch: pytest.MonkeyPatch) -> Iterator[Reconciler]:
    """A reconciler with each writer; afterwards its sessions closed and the test's ensembles gone."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # each runtime's private directory: not in /tmp
    r = Reconciler(kube, namespace, WRITERS[request.param](kube), tmp_path)
    yield r
    r.stop()
    for obj in kube.request("GET", resource_path(*ZKE))["items"]:
        name = obj["metadata"]["name"]
        if not name.startswith(f"{namespace}-"):
            continue
        for request_ in (("PATCH", {"metadata": {"finalizers": None}}), ("DELETE", None)):
            try:
                kube.request(request_[0], resource_path(*ZKE, None, name), body=request_[1],
                             content_type=MERGE_PATCH if request_[1] else None)
            except ApiException as err:
                if err.status != 404:
                    raise
        wait_for(lambda: get_ensemble(kube, name) is None, message="the test's ensemble gone")  # noqa: B023


def finalizers_of(obj: dict[str, Any] | None) -> list[str]:
    return list(((obj or {}).get("metadata") or {}).get("finalizers") or [])


def test_a_pass_over_a_reachable_ensemble_reports_ready_and_only_a_real_run_adds_the_finalizer(
        reconciler: Reconciler, namespace: str, zk_server: ZooKeeperServer, zk_base: str) -> None:
    r, dry_run = reconciler, isinstance(reconciler.reconciler.writer, DryRunWriter)
    name = r.create(ensemble(f"{namespace}-zk", zk_server.hosts, chroot=zk_base))
    r.reconcile(name)
    assert r.made == [name]
    runtime = r.ensembles.get(name)
    assert runtime is not None
    wait_for(lambda: runtime.ready, message="the ensemble's session established")
    r.refresh(name)
    r.reconcile(name)
    found = get_ensemble(r.kube, name)
    ready = ready_condition(found)
    assert (ready["status"], ready["reason"]) == ("True", "Connected"), ready
    assert found is not None and found["status"]["serverVersion"][0].isdigit()
    assert found["status"]["managedObjects"] == 0
    assert finalizers_of(found) == ([] if dry_run else [FINALIZER])


def test_a_pass_over_an_ensemble_missing_its_secret_reports_it_and_makes_no_session(
        reconciler: Reconciler, namespace: str) -> None:
    r, dry_run = reconciler, isinstance(reconciler.reconciler.writer, DryRunWriter)
    name = r.create(ensemble(f"{namespace}-nosecret", "localhost:1",
                             auth={"digest": {"secretRef": {"name": "absent"}}}))
    r.reconcile(name)
    found = get_ensemble(r.kube, name)
    assert ready_condition(found)["reason"] == "SecretNotFound"
    assert finalizers_of(found) == ([] if dry_run else [FINALIZER])
    assert r.made == []
    assert list(r.directory.glob("zkop-ensemble-*")) == []  # its private directory removed


def test_a_finalizer_left_by_a_real_run_is_removed_once_the_ensemble_is_deleted(
        reconciler: Reconciler, namespace: str) -> None:
    """In a dry run too: the ZooKeeperConfig's rule (its deletion never blocks on a dry run)."""
    r = reconciler
    obj = ensemble(f"{namespace}-leaving", "localhost:1")
    obj["metadata"]["finalizers"] = [FINALIZER, "example.com/other"]
    name = r.create(obj)
    r.kube.request("DELETE", resource_path(*ZKE, None, name))
    deleting = r.refresh(name)
    assert deleting is not None and deleting["metadata"].get("deletionTimestamp")
    r.reconcile(name)
    assert finalizers_of(get_ensemble(r.kube, name)) == ["example.com/other"]
    assert r.made == []
