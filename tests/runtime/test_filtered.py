"""FilteredIndexer and the active-workers gauge (issue #26's CPU levers): a view answers from its index, exactly
as filtering every object would; ``controller_runtime_active_workers`` counts the reconciles running when scraped."""

from __future__ import annotations

import threading

from prometheus_client import REGISTRY
from zkop_testing.waiting import EVENTUALLY, wait_for

from zkop.kube.client import JSON
from zkop.runtime.cache import Indexer
from zkop.runtime.cache.filtered import FilteredIndexer
from zkop.runtime.controller import Controller, Result


def cr(name: str, ensemble: str | None, path: str) -> JSON:
    spec: JSON = {"path": path}
    if ensemble is not None:
        spec["ensembleRef"] = {"name": ensemble}
    return {"metadata": {"namespace": "default", "name": name}, "spec": spec}


def by_ensemble(obj: JSON) -> list[str]:
    return [str(((obj.get("spec") or {}).get("ensembleRef") or {}).get("name") or "")]


def by_path(obj: JSON) -> list[str]:
    return [str(obj["spec"]["path"])]


def test_a_view_answers_from_its_index_as_filtering_each_object_would() -> None:
    base = Indexer({"ensemble": by_ensemble, "path": by_path})
    for obj in [cr("a", None, "/x"), cr("b", "blue", "/x"), cr("c", None, "/y"), cr("d", "blue", "/y"),
                cr("e", None, "/x")]:
        base.upsert(obj)
    default, blue = (FilteredIndexer(base, "ensemble", by_ensemble, v) for v in ("", "blue"))
    assert default.get("default/a") is base.get("default/a")
    assert default.get("default/b") is None and blue.get("default/b") is base.get("default/b")
    assert default.get("default/missing") is None
    assert default.index_keys("path", "/x") == ["default/a", "default/e"]
    assert blue.index_keys("path", "/x") == ["default/b"]
    assert [o["metadata"]["name"] for o in blue.by_index("path", "/y")] == ["d"]
    assert default.list_keys() == ["default/a", "default/c", "default/e"] and len(blue) == 2
    # An object that moves to another ensemble moves between the views at once (the index is updated on upsert).
    base.upsert(cr("a", "blue", "/x"))
    assert default.get("default/a") is None and blue.get("default/a") is base.get("default/a")
    assert blue.index_keys("path", "/x") == ["default/a", "default/b"]
    assert default.index_keys("path", "/x") == ["default/e"]
    # A view of a view filters by both.
    assert blue.index_keys_within("path", "/x", "ensemble", "blue") == ["default/a", "default/b"]
    assert default.index_keys_within("path", "/x", "ensemble", "blue") == []
    assert default.get_indexed("default/a", "path", "/x") is None
    assert blue.get_indexed("default/a", "path", "/x") is base.get("default/a")
    base.delete("default/a")
    assert blue.get("default/a") is None and blue.index_keys("path", "/x") == ["default/b"]


class Blocking:
    """A reconciler that holds each reconcile until released."""

    def __init__(self) -> None:
        self.entered = threading.Semaphore(0)
        self.release = threading.Event()

    def reconcile(self, key: str) -> Result:
        self.entered.release()
        self.release.wait(EVENTUALLY)
        return Result()


def active_workers(name: str) -> float | None:
    return REGISTRY.get_sample_value("controller_runtime_active_workers", {"controller": name})


def test_active_workers_counts_the_reconciles_running_when_scraped() -> None:
    reconciler = Blocking()
    controller = Controller("test-active-workers", reconciler, workers=3)
    controller.start()
    try:
        assert active_workers("test-active-workers") == 0
        controller.queue.add("a")
        controller.queue.add("b")
        for _ in range(2):
            assert reconciler.entered.acquire(timeout=EVENTUALLY)
        assert active_workers("test-active-workers") == 2
        reconciler.release.set()
        wait_for(lambda: active_workers("test-active-workers") == 0, message="both reconciles ended")
    finally:
        reconciler.release.set()
        controller.stop(EVENTUALLY)
