"""Layouts and the collision rule (pure)."""

from __future__ import annotations

from zkop.services.bridge.formats import CuratorFormat, JsonFormat
from zkop.services.bridge.naming import key_path, winner
from zkop.services.bridge.options import BridgeOptions
from zkop.services.bridge.plan import desired_set

from .factories import service


def test_flat_layout_is_ambiguous_and_nested_is_not() -> None:
    assert key_path("/r", "flat", "team-a", "web") == key_path("/r", "flat", "team", "a-web") == "/r/team-a-web"
    assert key_path("/r", "nested", "team-a", "web") != key_path("/r", "nested", "team", "a-web")


def test_oldest_service_wins_then_namespace_name() -> None:
    old = service("a-web", "team", created="2024-01-01T00:00:00Z")
    young = service("web", "team-a", created="2024-01-02T00:00:00Z")
    assert winner([young, old]) is old
    assert winner([old, young]) is old
    tie_a = service("web", "team-a", created="2024-01-01T00:00:00Z")
    tie_b = service("a-web", "team", created="2024-01-01T00:00:00Z")
    # Same second: "team-a/web" < "team/a-web" ('-' sorts before '/').
    assert winner([tie_b, tie_a]) is tie_a
    assert winner([]) is None


def test_desired_set_reports_collisions_deterministically() -> None:
    old = service("a-web", "team", created="2024-01-01T00:00:00Z")
    young = service("web", "team-a", created="2024-01-02T00:00:00Z")
    other = service("api", "team-a")
    for order in ([old, young, other], [other, young, old]):
        want = desired_set(order, BridgeOptions(), JsonFormat())
        assert want.keys == {"/kubernetes/services/team-a-web", "/kubernetes/services/team-a-api"}
        assert want.live_uids == {old["metadata"]["uid"], other["metadata"]["uid"]}
        assert [(c.winner, c.loser) for c in want.collisions] == [("team/a-web", "team-a/web")]
    nested = desired_set([old, young], BridgeOptions(layout="nested"), CuratorFormat())
    assert nested.collisions == ()
    assert nested.keys == {"/kubernetes/services/team/a-web", "/kubernetes/services/team-a/web"}
