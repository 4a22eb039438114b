"""Every runnable's ``health_check`` names a thread its work needs that ended, and nothing once it is stopped.

The Manager ends the run on such an answer (``tests/runtime/test_manager.py``); here each runnable
loses a thread the way a fault would end it, from inside: :func:`zkop_testing.faults.raise_in`
raises a ``BaseException`` in it at its next Python instruction, after which the test wakes it.
"""

from __future__ import annotations

import threading

import pytest
from zkop_testing.faults import idle, raise_in
from zkop_testing.tcpproxy import TcpProxy
from zkop_testing.waiting import EVENTUALLY, wait_for
from zkop_testing.zookeeper import ZooKeeperServer, free_port

from zkop.feature.session import ZooKeeperStartup
from zkop.kube.client import JSON, MERGE_PATCH, KubeClient, resource_path
from zkop.kube.events import EventRecorder
from zkop.runtime.cache import Indexer, NamedObjectInformer, ResourceRef
from zkop.runtime.workqueue import DelayingQueue
from zkop.zkconfig.aclcheck import AclCheck
from zkop.zookeeper.adapter import ConnectionOptions, ZooKeeperAdapter

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")


def kill(name: str, blocked_in: str = "wait", *, under: str | None = None) -> None:
    """Arm the fault in the thread called ``name`` once it waits in a function called ``blocked_in`` (idle),
    called from ``under`` if given."""
    thread = wait_for(lambda: next((t for t in threading.enumerate()
                                    if t.name == name and idle(t, blocked_in, under=under)), None),
                      message=f"{name} idle in {blocked_in}")
    assert raise_in(thread), f"{name} is not running"


def test_the_delaying_queue_names_its_ended_thread() -> None:
    queue: DelayingQueue[str] = DelayingQueue("liveness")
    queue.add_after("a", 60)
    kill("workqueue-delay-liveness")
    queue.add_after("b", 60)  # wakes it
    assert wait_for(queue.health_check) == "its delaying thread workqueue-delay-liveness ended"
    queue.shutdown()
    assert queue.health_check() is None


def test_the_event_recorder_names_its_ended_writer(kube: KubeClient) -> None:
    recorder = EventRecorder(kube)
    assert recorder.health_check() is None
    recorder.start()
    kill("event-recorder")
    subject: JSON = {"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "x", "namespace": "default", "uid": "u"}}
    recorder.event(subject, "Normal", "Test", "wakes the writer")
    assert wait_for(recorder.health_check) == "its writer thread event-recorder ended"
    recorder.stop(1.0)
    assert recorder.health_check() is None


def test_a_named_object_informer_names_a_tracked_reflector_that_ended_and_forgets_an_untracked_one(
        kube: KubeClient) -> None:
    path = resource_path("", "v1", "configmaps", "default")
    kube.request("POST", path, body={"apiVersion": "v1", "kind": "ConfigMap",
                                     "metadata": {"name": "watched", "namespace": "default"}, "data": {"v": "1"}})
    informer = NamedObjectInformer(kube, ResourceRef("", "v1", "configmaps"), name="configmaps")
    informer.track(["default/watched"])
    informer.start()
    try:
        wait_for(lambda: informer.get("default/watched"))
        kill("informer-configmaps-default/watched", blocked_in="readinto")
        kube.request("PATCH", f"{path}/watched", body={"data": {"v": "2"}},  # a watch event wakes it
                     content_type=MERGE_PATCH)
        assert wait_for(informer.health_check) == (
            "informer threads ended: informer-configmaps-default/watched (ended by InjectedFault)")
        informer.untrack(["default/watched"])
        assert informer.health_check() is None
    finally:
        informer.stop(1.0)


def test_an_untracked_reflector_is_forgotten_before_it_is_told_to_stop(kube: KubeClient) -> None:
    """``untrack`` stops a healthy reflector while the Manager may be asking ``health_check`` (no lock): by the time
    the reflector is told to stop, its thread is no longer among those ``health_check`` reads, so one that ends at
    once is never named (CI saw zkop exit 1 on a ZooKeeperConfig deleted with the ConfigMap it named)."""
    path = resource_path("", "v1", "configmaps", "default")
    kube.request("POST", path, body={"apiVersion": "v1", "kind": "ConfigMap",
                                     "metadata": {"name": "dropped", "namespace": "default"}, "data": {"v": "1"}})
    informer = NamedObjectInformer(kube, ResourceRef("", "v1", "configmaps"), name="configmaps")
    informer.track(["default/dropped"])
    informer.start()
    seen: list[bool] = []
    try:
        wait_for(lambda: informer.get("default/dropped"))
        reflector, thread = informer._tracked["default/dropped"]
        assert thread is not None and thread in list(informer._threads)
        stop = reflector.stop

        def look_then_stop() -> None:  # still watched by health_check at this moment?
            seen.append(thread in list(informer._threads))
            stop()

        reflector.stop = look_then_stop  # type: ignore[method-assign]
        informer.untrack(["default/dropped"])
        assert seen == [False]
        thread.join(EVENTUALLY)
        assert informer.health_check() is None
    finally:
        informer.stop(1.0)


def test_the_acl_check_names_its_ended_thread(adapter: ZooKeeperAdapter) -> None:
    check = AclCheck(Indexer(), adapter, lambda key: None, period=0.05)
    check.start()
    try:
        kill("zookeeperconfig-acl-check")  # it wakes every period
        assert wait_for(check.health_check) == "its thread zookeeperconfig-acl-check ended"
    finally:
        check.stop(1.0)
    assert check.health_check() is None


def test_the_zookeeper_session_names_its_ended_threads(zk_server: ZooKeeperServer, zk_base: str) -> None:
    host, port = zk_server.hosts.rsplit(":", 1)
    with TcpProxy((host, int(port))) as proxy:
        adapter = ZooKeeperAdapter(ConnectionOptions(hosts=f"{proxy.address}{zk_base}", connect_timeout=10))
        adapter.start()
        try:
            assert adapter.health_check() is None
            kill("zk-session-events")
            kill("zk-session-watchdog")
            proxy.cut()  # SUSPENDED: a state change wakes both
            assert wait_for(lambda: adapter.health_check() == (
                "ZooKeeper session threads ended: zk-session-events, zk-session-watchdog")), adapter.health_check()
            proxy.restore()
        finally:
            adapter.stop(1.0)
    assert adapter.health_check() is None


def test_the_zookeeper_start_up_names_its_thread_ended_before_the_session_was_up() -> None:
    adapter = ZooKeeperAdapter(ConnectionOptions(hosts=f"127.0.0.1:{free_port()}", connect_timeout=0.2))
    fatal: list[str] = []
    startup = ZooKeeperStartup(adapter, "/zkop/probe", probe=False, on_fatal=lambda code, why: fatal.append(why))
    startup.start()
    try:
        kill("zookeeper-startup", under="_sleep")  # between two connection attempts, it wakes on its own
        assert wait_for(startup.health_check) == "its thread zookeeper-startup ended before the session was up"
        assert not startup.has_synced() and fatal == []
    finally:
        startup.stop(1.0)
    assert startup.health_check() is None
