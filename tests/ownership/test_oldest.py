"""Oldest wins, one age key (:func:`zkop.ownership.oldest.object_age`) for every feature that decides by it.

Until issue 37 the ZooKeeperConfig rule compared the timestamp text (no timestamp: ``""``, the oldest) and
the service bridge Unix milliseconds (no timestamp: the youngest). Now an object without a readable
``creationTimestamp`` is the newest everywhere: it never takes a path or a key path from one that has one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from zkop.kube.client import JSON
from zkop.ownership.oldest import creation_seconds, object_age, oldest
from zkop.runtime.cache.indexer import meta_namespace_key
from zkop.services.bridge.naming import winner
from zkop.services.bridge.records import creation_millis
from zkop.zkconfig.acldrift import declared_acls

MISSING = object()  # no creationTimestamp key at all


def obj(key: str, created: Any) -> JSON:
    """An object ``namespace/name`` created at ``created`` (:data:`MISSING`: the key is absent), declaring a
    ZooKeeperConfig path with an ACL (read by the ZooKeeperConfig rule, ignored by the bridge's)."""
    namespace, name = key.split("/")
    meta: JSON = {"namespace": namespace, "name": name}
    if created is not MISSING:
        meta["creationTimestamp"] = created
    return {"metadata": meta, "spec": {"path": "/app/flag",
                                       "acl": [{"scheme": "world", "id": "anyone", "permissions": ["read"]}]}}


def zookeeperconfig_owner(candidates: list[JSON]) -> str:
    """Who owns a path in the cluster, as the ZooKeeperConfig controller decides (the ACL check's pure rule;
    the reconciler's cluster owner calls the same ``oldest(..., object_age)``)."""
    return declared_acls(candidates)["/app/flag"][0]


def bridge_winner(candidates: list[JSON]) -> str:
    """Which Service keeps a contested key path (the service bridge)."""
    best = winner(candidates)
    assert best is not None
    return meta_namespace_key(best)


def generic(candidates: list[JSON]) -> str:
    best = oldest(candidates, object_age)
    assert best is not None
    return meta_namespace_key(best)


FEATURES: list[Callable[[list[JSON]], str]] = [zookeeperconfig_owner, bridge_winner, generic]

# (rule, candidates as (namespace/name, creationTimestamp), the winner)
CASES = [
    ("the older timestamp wins", [("b/new", "2024-01-02T00:00:00Z"), ("z/old", "2024-01-01T00:00:00Z")], "z/old"),
    ("the same second: namespace/name decides ('-' before '/')",
     [("team/a-web", "2024-01-01T00:00:00Z"), ("team-a/web", "2024-01-01T00:00:00Z")], "team-a/web"),
    ("no timestamp is the newest: it never takes over from one that has one",
     [("a/untimed", MISSING), ("z/timed", "2024-01-01T00:00:00Z")], "z/timed"),
    ("no timestamp is the newest, whatever the order",
     [("z/timed", "2030-01-01T00:00:00Z"), ("a/untimed", MISSING)], "z/timed"),
    ("an empty timestamp is none", [("a/empty", ""), ("z/timed", "2024-01-01T00:00:00Z")], "z/timed"),
    ("a null timestamp is none", [("a/null", None), ("z/timed", "2024-01-01T00:00:00Z")], "z/timed"),
    ("an unparsable timestamp is none", [("a/bad", "yesterday"), ("z/timed", "2024-01-01T00:00:00Z")], "z/timed"),
    ("none has a timestamp: namespace/name decides", [("b/x", MISSING), ("a/y", None), ("c/z", "")], "a/y"),
    ("time order, not text order: fractional seconds",
     [("a/later", "2024-01-01T00:00:00.5Z"), ("z/earlier", "2024-01-01T00:00:00Z")], "z/earlier"),
    ("time order, not text order: an offset",
     [("a/later", "2024-01-01T01:30:00Z"), ("z/earlier", "2024-01-01T02:00:00+01:00")], "z/earlier"),
]


@pytest.mark.parametrize("feature", FEATURES, ids=lambda f: f.__name__)
@pytest.mark.parametrize(("candidates", "expected"), [pytest.param(c, w, id=rule) for rule, c, w in CASES])
def test_every_feature_picks_the_oldest_by_one_key(feature: Callable[[list[JSON]], str],
                                                   candidates: list[tuple[str, Any]], expected: str) -> None:
    objects = [obj(key, created) for key, created in candidates]
    assert feature(objects) == expected
    assert feature(list(reversed(objects))) == expected


@pytest.mark.parametrize(("created", "seconds"), [
    ("2024-01-01T00:00:01Z", 1704067201.0),
    ("2024-01-01T00:00:01", 1704067201.0),  # no offset: UTC
    ("2024-01-01T02:00:01+02:00", 1704067201.0),
    (MISSING, None), (None, None), ("", None), ("yesterday", None),
])
def test_the_age_and_the_bridges_record_time_read_one_timestamp(created: Any, seconds: float | None) -> None:
    """The bridge's records keep their registration time (Unix milliseconds, 0 without a timestamp: a wire
    format), read by the same parser as the age."""
    o = obj("default/svc", created)
    assert creation_seconds(o) == seconds
    assert object_age(o) == (math.inf if seconds is None else seconds, "default/svc")
    assert creation_millis(o) == (0 if seconds is None else int(seconds * 1000))
