"""Ready endpoints from EndpointSlices and the debounce against rollout flapping (pure)."""

from __future__ import annotations

from zkop.services.endpoints import Debouncer, EndpointPort, EndpointsView, endpoints_view, slice_service_key

from .factories import endpoint_slice


def test_ready_means_not_false_and_slices_are_merged() -> None:
    a = endpoint_slice("web", {"10.244.0.6": True, "10.244.0.9": False, "10.244.0.5": None}, name="web-a")
    b = endpoint_slice("web", {"10.244.1.2": True, "10.244.0.5": True}, name="web-b",
                       ports=[{"name": "http", "port": 8080}])
    gone = endpoint_slice("web", {"10.244.9.9": True}, name="web-c")
    gone["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    view = endpoints_view([a, b, gone])
    assert view.addresses == ("10.244.0.5", "10.244.0.6", "10.244.1.2")
    assert view.ports == (EndpointPort("http", 8080, "TCP"),)
    assert slice_service_key(a) == ["default/web"]
    assert slice_service_key({"metadata": {"namespace": "default", "name": "x"}}) == []


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def view(*addresses: str) -> EndpointsView:
    return EndpointsView(tuple(sorted(addresses)))


def test_debounce_holds_changes_until_stable() -> None:
    clock = Clock()
    debouncer = Debouncer(5.0, 30.0, clock)
    assert debouncer.settle("k", view("a", "b")) == (view("a", "b"), None)  # first sight: at once
    clock.now += 1
    assert debouncer.settle("k", view("a")) == (view("a", "b"), 5.0)  # pod a-b restarting: hold
    clock.now += 2
    assert debouncer.settle("k", view("a", "c")) == (view("a", "b"), 5.0)  # changed again: wait anew
    clock.now += 2
    assert debouncer.settle("k", view("a", "c")) == (view("a", "b"), 3.0)
    clock.now += 3
    assert debouncer.settle("k", view("a", "c")) == (view("a", "c"), None)  # stable for 5 s: published
    # Flapping back to the published set cancels the pending change.
    clock.now += 1
    debouncer.settle("k", view("a"))
    assert debouncer.settle("k", view("a", "c")) == (view("a", "c"), None)


def test_debounce_publishes_at_the_ceiling_even_if_changes_continue() -> None:
    clock = Clock()
    debouncer = Debouncer(5.0, 12.0, clock)
    debouncer.settle("k", view("a"))
    for step in range(1, 4):
        clock.now += 4
        value, recheck = debouncer.settle("k", view("a", str(step)))
        assert value == view("a") and recheck is not None and recheck <= 5.0
    clock.now += 4  # 16 s after the first change > 12 s ceiling
    assert debouncer.settle("k", view("a", "4")) == (view("a", "4"), None)


def test_zero_debounce_and_forget() -> None:
    clock = Clock()
    debouncer = Debouncer(0.0, 0.0, clock)
    debouncer.settle("k", view("a"))
    assert debouncer.settle("k", view("b")) == (view("b"), None)
    slow = Debouncer(5.0, 30.0, clock)
    slow.settle("k", view("a"))
    slow.forget("k")
    assert slow.settle("k", view("b")) == (view("b"), None)
