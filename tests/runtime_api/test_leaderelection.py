"""Lease-based leader election against the in-memory API server."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from zkop_testing.apiserver import ApiServer
from zkop_testing.waiting import wait_for

from zkop.kube.client import JSON, KubeClient, resource_path
from zkop.runtime.leaderelection import LeaderElector


@pytest.fixture
def kube() -> Iterator[KubeClient]:
    with ApiServer() as server:
        client = KubeClient(server.api_client(), default_timeout=5)
        yield client
        client.close()


def lease(kube: KubeClient) -> dict[str, object]:
    spec: dict[str, object] = kube.request("GET", resource_path("coordination.k8s.io", "v1", "leases", "default",
                                                                "zkop-leader"))["spec"]
    return spec


class LeaseReads(KubeClient):
    """A client that counts its GETs of the Lease (a standby's attempts: it renews nothing)."""

    gets = 0

    def request(self, method: str, path: str, **kwargs: Any) -> JSON:
        if method == "GET" and path.endswith("/leases/zkop-leader"):
            self.gets += 1
        return super().request(method, path, **kwargs)


def elector(kube: KubeClient, identity: str, **kw: float) -> tuple[LeaderElector, threading.Event, threading.Event]:
    started, stopped = threading.Event(), threading.Event()
    e = LeaderElector(kube, namespace="default", name="zkop-leader", identity=identity,
                      lease_duration=kw.get("lease", 2.0), renew_deadline=kw.get("renew", 1.5),
                      retry_period=kw.get("retry", 0.2), on_started_leading=started.set,
                      on_stopped_leading=stopped.set)
    return e, started, stopped


def test_validation_follows_client_go() -> None:
    with pytest.raises(ValueError):
        LeaderElector(None, namespace="n", name="l", identity="a", lease_duration=10, renew_deadline=10)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        LeaderElector(None, namespace="n", name="l", identity="a", renew_deadline=2, retry_period=2)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        LeaderElector(None, namespace="n", name="l", identity="")  # type: ignore[arg-type]


def test_one_leader_then_release_hands_over(kube: KubeClient) -> None:
    # a's lease is long: a renewer starved for 2 s on a loaded machine must not let b in during the
    # standby check below; the release then shortens it to 1 s, which is what hands over.
    a, a_started, _ = elector(kube, "a", lease=30.0, renew=20.0)
    b_client = LeaseReads(kube.api_client, default_timeout=5)  # the same connection pool, closed with kube's
    b, b_started, _ = elector(b_client, "b")
    stop_a, stop_b = threading.Event(), threading.Event()
    threading.Thread(target=a.run, args=(stop_a,), daemon=True).start()
    wait_for(a_started.is_set, message="a leads")
    threading.Thread(target=b.run, args=(stop_b,), daemon=True).start()
    record = lease(kube)
    assert record["holderIdentity"] == "a" and record["leaseTransitions"] == 0
    assert str(record["renewTime"]).endswith("Z") and "." in str(record["renewTime"])  # RFC 3339 micro time
    # b stays a standby while a renews: its second read of the Lease starts after its first attempt
    # ended without taking it (had it, b would lead and renew from its own copy, not read again).
    wait_for(lambda: b_client.gets >= 2, message="b tried twice")
    assert not b_started.is_set() and lease(kube)["holderIdentity"] == "a"
    stop_a.set()
    assert a.release()
    released = lease(kube)
    assert released.get("holderIdentity") in (None, "") and released["leaseDurationSeconds"] == 1
    wait_for(b_started.is_set, message="b takes over after release")
    assert lease(kube)["holderIdentity"] == "b"
    assert lease(kube)["leaseTransitions"] == 1
    stop_b.set()


def test_takeover_after_expiry_and_loser_steps_down(kube: KubeClient) -> None:
    a, a_started, a_stopped = elector(kube, "a")
    stop_a = threading.Event()
    threading.Thread(target=a.run, args=(stop_a,), daemon=True).start()
    wait_for(a_started.is_set, message="a leads")
    acquired = lease(kube)["acquireTime"]
    # a dies without releasing (its renew loop stops).
    stop_a.set()
    b, b_started, _ = elector(kube, "b")
    stop_b = threading.Event()
    threading.Thread(target=b.run, args=(stop_b,), daemon=True).start()
    wait_for(b_started.is_set, message="b takes over once the lease expires")
    record = lease(kube)
    assert record["holderIdentity"] == "b" and record["leaseTransitions"] == 1 and record["acquireTime"] != acquired
    assert not a_stopped.is_set()  # a was stopped, it did not lose
    # A leader that cannot renew (someone else holds the lease now) calls on_stopped_leading.
    c, _c_started, c_stopped = elector(kube, "c")
    c._leader.set()  # pretend c believed it led
    stop_c = threading.Event()
    threading.Thread(target=c._renew, args=(stop_c,), daemon=True).start()
    wait_for(c_stopped.is_set, message="c steps down when it cannot renew")
    assert not c.is_leader()
    stop_b.set()
    stop_c.set()
