"""OwnWrites: only the exact echo of our own write is dropped; everything else is delivered."""

from __future__ import annotations

import pytest

from zkop.kube.client import JSON
from zkop.runtime.ownwrites import OwnWrites


def obj(rv: str) -> JSON:
    return {"metadata": {"namespace": "ns", "name": "a", "resourceVersion": rv}}


def written(writes: OwnWrites, base: JSON, response: JSON) -> None:
    with writes.writing("ns/a", base) as respond:
        respond(response)


def test_echo_after_the_response_is_dropped_once() -> None:
    writes = OwnWrites()
    written(writes, obj("1"), obj("2"))
    assert writes.is_echo("ns/a", obj("1"), obj("2"))
    assert not writes.is_echo("ns/a", obj("1"), obj("2"))  # consumed
    assert len(writes) == 0 and writes.echoes_dropped == 1


def test_other_transitions_are_delivered() -> None:
    writes = OwnWrites()
    written(writes, obj("1"), obj("3"))
    assert not writes.is_echo("ns/a", obj("2"), obj("3"))  # someone else wrote 2: 2 → 3 is more than our write
    assert not writes.is_echo("ns/a", obj("1"), obj("4"))  # a relist spanning our write and another
    assert not writes.is_echo("ns/b", obj("1"), obj("3"))  # another object
    assert not writes.is_echo("ns/a", obj("3"), obj("3"))  # a resync re-delivers the cached object


def test_event_before_the_response_is_held_then_dropped() -> None:
    released: list[str] = []
    writes = OwnWrites(release=released.append)
    with writes.writing("ns/a", obj("1")) as respond:
        assert writes.is_echo("ns/a", obj("1"), obj("2"))  # held: the write is in flight
        respond(obj("2"))
    assert released == [] and writes.echoes_dropped == 1 and len(writes) == 0


def test_held_event_that_is_not_the_echo_is_released() -> None:
    released: list[str] = []
    writes = OwnWrites(release=released.append)
    with writes.writing("ns/a", obj("1")) as respond:
        assert writes.is_echo("ns/a", obj("1"), obj("2"))  # held
        respond(obj("3"))  # our write landed after someone else's (version 2)
    assert released == ["ns/a"]
    assert not writes.is_echo("ns/a", obj("2"), obj("3"))  # and 2 → 3 is delivered as well


def test_failed_write_releases_what_it_held() -> None:
    released: list[str] = []
    writes = OwnWrites(release=released.append)
    with pytest.raises(RuntimeError), writes.writing("ns/a", obj("1")):
        assert writes.is_echo("ns/a", obj("1"), obj("2"))
        raise RuntimeError("409 Conflict")
    assert released == ["ns/a"] and len(writes) == 0


def test_without_release_nothing_is_held() -> None:
    writes = OwnWrites()
    with writes.writing("ns/a", obj("1")) as respond:
        assert not writes.is_echo("ns/a", obj("1"), obj("2"))
        respond(obj("2"))


def test_memory_is_bounded_per_key_and_forget_drops_a_key() -> None:
    writes = OwnWrites(per_key=2)
    for i in range(10):
        written(writes, obj(str(2 * i)), obj(str(2 * i + 1)))
    assert len(writes) == 2
    writes.forget("ns/a")
    assert len(writes) == 0


def test_newest_answers_our_write_while_the_cache_lags_behind_it() -> None:
    writes = OwnWrites()
    written(writes, obj("1"), obj("2"))  # the finalizer, computed from 1
    status = {**obj("3"), "status": {"state": "Synced"}}
    written(writes, obj("2"), status)  # the status, computed from 2
    assert writes.newest("ns/a", lambda: obj("1")) == status  # the cache has seen neither write
    assert writes.newest("ns/a", lambda: obj("2")) == status  # nor the status write
    assert writes.newest("ns/a", lambda: obj("3")) == obj("3")  # caught up
    assert writes.newest("ns/a", lambda: obj("4")) == obj("4")  # someone else wrote after us
    assert writes.newest("ns/a", lambda: None) is None  # gone stays gone
    assert writes.newest("ns/b", lambda: obj("1")) == obj("1")  # another object


def test_newest_forgets_the_response_once_every_echo_arrived() -> None:
    writes = OwnWrites()
    written(writes, obj("1"), obj("2"))
    assert writes.is_echo("ns/a", obj("1"), obj("2"))
    # Version 1 can only come back through a stale read now; nothing of ours is kept for it.
    assert writes.newest("ns/a", lambda: obj("1")) == obj("1")
    written(writes, obj("2"), obj("3"))
    writes.forget("ns/a")
    assert writes.newest("ns/a", lambda: obj("2")) == obj("2")


def test_newest_reads_the_cache_after_copying_what_it_remembers() -> None:
    writes = OwnWrites()
    written(writes, obj("1"), obj("2"))

    def echo_arrives_while_reading() -> JSON:
        # The informer stores version 2, then hands the echo over: the read sees the new version.
        assert writes.is_echo("ns/a", obj("1"), obj("2"))
        return obj("2")

    assert writes.newest("ns/a", echo_arrives_while_reading) == obj("2")


def test_recorded_is_told_each_response_after_it_is_remembered() -> None:
    seen: list[tuple[str, str, JSON, bool]] = []
    writes = OwnWrites()
    # Called once the write is remembered (its echo is already recognised) and outside the lock.
    writes.recorded = lambda key, base, response: seen.append(
        (key, base, response, writes.is_echo(key, obj(base), response)))
    written(writes, obj("1"), obj("2"))
    assert seen == [("ns/a", "1", obj("2"), True)]


def test_recorded_is_not_told_a_write_that_failed() -> None:
    seen: list[str] = []
    writes = OwnWrites(recorded=lambda key, base, response: seen.append(key))
    with pytest.raises(RuntimeError), writes.writing("ns/a", obj("1")):
        raise RuntimeError("409 Conflict")
    assert seen == []
