"""The ZooKeeperMirror reconciler's replans: a create that meets a ConfigMap its label-selected cache does not
hold is a concurrent change, decided again through :func:`zkop.zookeeper.replan.with_replans` with the
ConfigMap read from the API server (the real :class:`~zkop.mirror.writer.ApiWriter` over a scripted client)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import pytest

from zkop.feature.ensemble_lookup import EnsembleAccess, EnsembleLookup, EnsembleMissing
from zkop.feature.gate import Gate
from zkop.kube.client import JSON, ApiException
from zkop.kube.events import EventRecorder
from zkop.mirror.reconciler import ENSEMBLE_STARTING_RECHECK, MirrorReconciler
from zkop.mirror.sources import MirrorSource, MirrorSources
from zkop.mirror.tree import TreeReader
from zkop.mirror.writer import ApiWriter
from zkop.runtime.cache import Indexer
from zkop.runtime.controller import RetryableError
from zkop.zookeeper.actions import Observed
from zkop.zookeeper.reads import Listing
from zkop.zookeeper.replan import MAX_REPLANS

MIRROR: JSON = {"apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperMirror",
                "metadata": {"name": "app", "namespace": "ns", "uid": "u-1", "generation": 1},
                "spec": {"path": "/app/config"}}


class OneZnode:
    """A ZooKeeper holding ``/app/config`` = ``b"v"`` and nothing else."""

    def read(self, path: str, expected_acl: Any = None, *, watch: bool = False) -> Observed | None:
        return Observed(b"v", 1) if path == "/app/config" else None

    def list_watched(self, path: str, on_change: Callable[[str], None]) -> Listing | None:
        return None


class Client:
    """The API server as the mirror's writer sees it: every create of a ConfigMap answers 409 AlreadyExists,
    a GET answers with ``existing``; every request is recorded."""

    def __init__(self, existing: JSON | None) -> None:
        self.existing = existing
        self.requests: list[tuple[str, str, Any]] = []

    def request(self, method: str, path: str, *, query: Any = None, body: Any = None,
                content_type: str | None = None, timeout: Any = None) -> JSON:
        self.requests.append((method, path, body))
        if method == "POST" and path.endswith("/configmaps"):
            raise ApiException(status=409, reason="AlreadyExists")
        if method == "GET":
            if self.existing is None:
                raise ApiException(status=404, reason="NotFound")
            return self.existing
        return body if isinstance(body, dict) else {}


def flags_only() -> MirrorSources:
    """The flags' ensemble's source alone (no ZooKeeperEnsembles): one znode, no admission rule."""
    return MirrorSources(MirrorSource(Gate(), TreeReader(OneZnode(), lambda path: None), lambda roots: None))


def reconciler(client: Client) -> MirrorReconciler:
    mirrors = Indexer()
    mirrors.upsert(MIRROR)
    return MirrorReconciler(mirrors, Indexer(), ApiWriter(client, EventRecorder(None)), sources=flags_only())


def test_a_foreign_configmap_met_by_the_create_is_read_and_left_alone() -> None:
    foreign = {"metadata": {"name": "app", "namespace": "ns", "resourceVersion": "7"}, "data": {"mine": "yes"}}
    client = Client(foreign)
    reconciler(client).reconcile("ns/app")
    methods = [(method, path.rsplit("/", 1)[-1]) for method, path, _ in client.requests]
    assert methods == [("POST", "configmaps"), ("GET", "app"), ("PATCH", "status")]
    status = client.requests[-1][2]["status"]
    assert {c["type"]: c["reason"] for c in status["conditions"]} == {"Ready": "ConfigMapConflict",
                                                                      "Stalled": "ConfigMapConflict"}


def test_an_owned_configmap_missing_from_the_cache_is_patched_on_the_replan() -> None:
    owned = {"metadata": {"name": "app", "namespace": "ns", "resourceVersion": "7",
                          "ownerReferences": [{"kind": "ZooKeeperMirror", "uid": "u-1", "name": "app"}]},
             "data": {"config": "old"}}
    client = Client(owned)
    reconciler(client).reconcile("ns/app")
    patch = next(body for method, path, body in client.requests if method == "PATCH" and path.endswith("/app"))
    assert patch["data"] == {"config": "v"} and patch["metadata"]["resourceVersion"] == "7"
    assert client.requests[-1][2]["status"]["conditions"][0]["reason"] == "Mirrored"


def test_a_configmap_that_keeps_appearing_and_vanishing_is_retried_after_the_last_replan() -> None:
    client = Client(None)  # every create: AlreadyExists; every read: gone again
    with pytest.raises(RetryableError, match="ns/app: ConfigMap app changed meanwhile"):
        reconciler(client).reconcile("ns/app")
    assert [method for method, _, _ in client.requests] == ["POST"] + ["GET", "POST"] * (MAX_REPLANS - 1)


def named(ensemble: str) -> MirrorReconciler:
    """The reconciler over one mirror naming ZooKeeperEnsemble ``ensemble``, without ZooKeeperEnsembles."""
    mirrors = Indexer()
    mirrors.upsert({**MIRROR, "spec": {**MIRROR["spec"], "ensembleRef": {"name": ensemble}}})
    return MirrorReconciler(mirrors, Indexer(), ApiWriter(Client(None), EventRecorder(None)), sources=flags_only())


def test_without_zookeeperensembles_a_mirror_naming_one_reads_nothing_and_says_ensemblenotfound() -> None:
    client = Client(None)
    subject = named("prod-eu")
    subject.writer = ApiWriter(client, EventRecorder(None))
    subject.reconcile("ns/app")
    assert [(method, path.rsplit("/", 1)[-1]) for method, path, _ in client.requests] == [("PATCH", "status")]
    (ready,) = client.requests[-1][2]["status"]["conditions"]  # Ready alone: not Stalled, read once it runs
    assert (ready["status"], ready["reason"]) == ("False", "EnsembleNotFound")
    assert "'prod-eu'" in ready["message"] and "--zookeeper-ensembles" in ready["message"]


def test_a_mirror_reads_the_adapter_its_ensemble_runs_now_and_waits_while_it_starts() -> None:
    answers: dict[str, EnsembleAccess | EnsembleMissing] = {"prod-eu": EnsembleMissing(None, "starting")}
    made: list[object] = []

    def make(name: str, access: EnsembleAccess) -> MirrorSource:
        made.append(access.adapter)
        return MirrorSource(access.gate, TreeReader(cast(Any, access.adapter), lambda path: None), lambda roots: None,
                            access.adapter)

    client = Client(None)
    subject = named("prod-eu")
    subject.writer = ApiWriter(client, EventRecorder(None))
    subject.sources = MirrorSources(subject.sources.default, EnsembleLookup(answers.__getitem__, lambda f: None),
                                    make)
    assert subject.reconcile("ns/app").requeue_after == ENSEMBLE_STARTING_RECHECK  # nothing reported while starting
    assert client.requests == []
    first, second = OneZnode(), OneZnode()
    answers["prod-eu"] = EnsembleAccess(cast(Any, first), Gate())
    assert subject.sources.get("prod-eu") is subject.sources.get("prod-eu")  # one source per adapter
    answers["prod-eu"] = EnsembleAccess(cast(Any, second), Gate())  # its session made anew: a new source
    source = subject.sources.get("prod-eu")
    assert isinstance(source, MirrorSource) and source.reader.zookeeper is second and made == [first, second]
    answers["prod-eu"] = EnsembleMissing("EnsembleNotUsable", "ZooKeeperEnsemble prod-eu cannot be used: no Secret")
    subject.reconcile("ns/app")
    assert client.requests[-1][2]["status"]["conditions"][0]["reason"] == "EnsembleNotUsable"
    assert [name for name, _ in subject.sources.known()] == [""]  # nothing kept on its closed adapter
