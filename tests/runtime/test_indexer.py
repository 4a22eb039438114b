"""The informer cache's indexes follow every store and removal, and index functions see every change."""

from __future__ import annotations

from zkop.kube.client import JSON
from zkop.runtime.cache.indexer import Indexer


def cm(name: str, rv: str, *labels: str, namespace: str = "ns") -> JSON:
    return {"metadata": {"namespace": namespace, "name": name, "resourceVersion": rv,
                         "labels": {label: "" for label in labels}}}


class Labels:
    """An index function by label key that records which objects it was shown."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def __call__(self, obj: JSON) -> list[str]:
        meta = obj["metadata"]
        self.seen.append((meta["name"], meta["resourceVersion"]))
        return sorted(meta.get("labels") or {})


def test_indexes_follow_updates_that_change_and_that_keep_the_values() -> None:
    labels = Labels()
    indexer = Indexer({"label": labels})
    assert indexer.upsert(cm("a", "1", "x", "y")) is None
    indexer.upsert(cm("b", "2", "y"))
    assert indexer.index_keys("label", "x") == ["ns/a"]
    assert indexer.index_keys("label", "y") == ["ns/a", "ns/b"]

    old = indexer.upsert(cm("a", "3", "x", "y"))  # same values
    assert old is not None and old["metadata"]["resourceVersion"] == "1"
    assert indexer.index_keys("label", "y") == ["ns/a", "ns/b"]
    assert [o["metadata"]["resourceVersion"] for o in indexer.by_index("label", "x")] == ["3"]

    indexer.upsert(cm("a", "4", "z"))  # values changed: filed under the new ones only
    assert indexer.index_keys("label", "x") == [] and indexer.index_keys("label", "y") == ["ns/b"]
    assert indexer.index_keys("label", "z") == ["ns/a"]

    assert indexer.delete("ns/a") is not None and indexer.delete("ns/a") is None
    assert indexer.index_keys("label", "z") == []
    indexer.upsert(cm("a", "5", "x"))  # stored again after its removal
    assert indexer.index_keys("label", "x") == ["ns/a"] and indexer.index_keys("label", "z") == []


def test_index_functions_see_every_stored_and_every_removed_object() -> None:
    labels = Labels()
    indexer = Indexer({"label": labels})
    indexer.upsert(cm("a", "1", "x"))
    indexer.upsert(cm("a", "2", "x"))
    indexer.delete("ns/a")
    seen = set(labels.seen)
    assert {("a", "1"), ("a", "2")} <= seen
    assert labels.seen[-1] == ("a", "2")  # the removal was shown the object it removed


def test_an_index_added_later_covers_the_cache_and_follows_it() -> None:
    indexer = Indexer()
    indexer.upsert(cm("a", "1", "x"))
    indexer.upsert(cm("b", "1", "y"))
    indexer.add_indexer("label", Labels())
    assert indexer.index_keys("label", "x") == ["ns/a"]
    indexer.upsert(cm("a", "2", "y"))
    assert indexer.index_keys("label", "x") == [] and indexer.index_keys("label", "y") == ["ns/a", "ns/b"]
    indexer.delete("ns/b")
    assert indexer.index_keys("label", "y") == ["ns/a"]
