"""Rate limiter arithmetic, checked against client-go's default_rate_limiters.go."""

from __future__ import annotations

import threading
from collections.abc import Hashable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkop.runtime.workqueue.ratelimit import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    default_controller_rate_limiter,
    default_item_based_rate_limiter,
)


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


# ---------------------------------------------------------------- exponential


def test_exponential_sequence_doubles_from_5ms_and_caps_at_1000s_on_the_19th_retry() -> None:
    limiter = ItemExponentialFailureRateLimiter[str]()
    delays = [limiter.when("a") for _ in range(25)]
    expected = [0.005 * 2**n for n in range(18)]
    assert delays[:18] == pytest.approx(expected)
    assert delays[:4] == pytest.approx([0.005, 0.010, 0.020, 0.040])
    assert delays[17] == pytest.approx(655.36)
    assert delays[18:] == [1000.0] * 7
    assert limiter.num_requeues("a") == 25


def test_exponential_is_per_item_and_forget_resets() -> None:
    limiter = ItemExponentialFailureRateLimiter[str](base_delay=0.001, max_delay=1.0)
    assert limiter.when("a") == pytest.approx(0.001)
    assert limiter.when("a") == pytest.approx(0.002)
    assert limiter.when("b") == pytest.approx(0.001)
    assert (limiter.num_requeues("a"), limiter.num_requeues("b"), limiter.num_requeues("c")) == (2, 1, 0)
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == pytest.approx(0.001)
    assert limiter.num_requeues("b") == 1


def test_exponential_never_overflows() -> None:
    limiter = ItemExponentialFailureRateLimiter[str](base_delay=1.0, max_delay=5.0)
    delays = [limiter.when("x") for _ in range(2100)]
    assert delays[-1] == 5.0
    assert max(delays) == 5.0


def test_exponential_rejects_negative_delays() -> None:
    with pytest.raises(ValueError):
        ItemExponentialFailureRateLimiter[str](base_delay=-1.0)


@given(
    base=st.floats(min_value=1e-6, max_value=10.0),
    cap=st.floats(min_value=0.0, max_value=5000.0),
    n=st.integers(min_value=1, max_value=60),
)
def test_exponential_matches_formula(base: float, cap: float, n: int) -> None:
    limiter = ItemExponentialFailureRateLimiter[int](base, cap)
    for k in range(n):
        assert limiter.when(7) == pytest.approx(min(base * 2**k, cap))
    assert limiter.num_requeues(7) == n


def test_exponential_counts_every_call_under_contention() -> None:
    limiter = ItemExponentialFailureRateLimiter[str]()
    threads = [threading.Thread(target=lambda: [limiter.when("k") for _ in range(500)]) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert limiter.num_requeues("k") == 4000


def test_item_based_default_starts_at_1ms() -> None:
    limiter = default_item_based_rate_limiter()
    assert [limiter.when("a") for _ in range(3)] == pytest.approx([0.001, 0.002, 0.004])


# ---------------------------------------------------------------- fast/slow


def test_fast_slow_switches_after_max_fast_attempts() -> None:
    limiter = ItemFastSlowRateLimiter[str](0.1, 7.0, 3)
    assert [limiter.when("a") for _ in range(5)] == [0.1, 0.1, 0.1, 7.0, 7.0]
    assert limiter.when("b") == 0.1
    assert limiter.num_requeues("a") == 5
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == 0.1


# ---------------------------------------------------------------- bucket


def test_bucket_burst_then_spacing_at_qps() -> None:
    clock = FakeClock()
    bucket = BucketRateLimiter(qps=10.0, burst=100, clock=clock)
    first = [bucket.when(i) for i in range(100)]
    assert first == [0.0] * 100
    nxt = [bucket.when(i) for i in range(100, 105)]
    assert nxt == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5])


def test_bucket_refills_with_time_but_never_beyond_burst() -> None:
    clock = FakeClock()
    bucket = BucketRateLimiter(qps=10.0, burst=5, clock=clock)
    assert [bucket.when("x") for _ in range(5)] == [0.0] * 5
    assert bucket.when("x") == pytest.approx(0.1)  # balance now -1
    clock.advance(0.3)  # +3 tokens -> balance 2
    assert [bucket.when("x") for _ in range(2)] == pytest.approx([0.0, 0.0], abs=1e-9)
    assert bucket.when("x") == pytest.approx(0.1)
    clock.advance(3600.0)  # refill is capped at burst
    assert [bucket.when("x") for _ in range(5)] == [0.0] * 5
    assert bucket.when("x") == pytest.approx(0.1)


def test_bucket_is_shared_and_has_no_per_item_state() -> None:
    clock = FakeClock()
    bucket = BucketRateLimiter(qps=1.0, burst=1, clock=clock)
    assert bucket.when("a") == 0.0
    assert bucket.when("b") == pytest.approx(1.0)  # another item still pays for "a"'s token
    bucket.forget("b")
    assert bucket.num_requeues("b") == 0
    assert bucket.when("c") == pytest.approx(2.0)


def test_bucket_tolerates_clock_going_backwards() -> None:
    clock = FakeClock()
    bucket = BucketRateLimiter(qps=1.0, burst=1, clock=clock)
    assert bucket.when("a") == 0.0
    clock.advance(-50.0)
    assert bucket.when("a") == pytest.approx(1.0)


@pytest.mark.parametrize(("qps", "burst"), [(0.0, 1), (-1.0, 1), (1.0, 0)])
def test_bucket_rejects_useless_settings(qps: float, burst: int) -> None:
    with pytest.raises(ValueError):
        BucketRateLimiter(qps=qps, burst=burst)


# ---------------------------------------------------------------- max-of / default


def test_max_of_takes_the_largest_answer_and_forgets_everywhere() -> None:
    clock = FakeClock()
    limiter: MaxOfRateLimiter[Hashable] = MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter[Hashable](0.005, 1000.0),
        BucketRateLimiter(qps=10.0, burst=3, clock=clock),
    )
    # Exponential dominates while the bucket has tokens.
    assert [limiter.when("a") for _ in range(3)] == pytest.approx([0.005, 0.01, 0.02])
    # Bucket dominates once it is empty: 0.1 s > 0.005 s for a fresh item.
    assert limiter.when("b") == pytest.approx(0.1)
    # Exponential dominates again for a heavily failing item: 0.04 s vs bucket 0.2 s -> 0.2;
    # then after time passes, the item's own 0.08 s wins over a refilled bucket.
    assert limiter.when("a") == pytest.approx(0.2)
    clock.advance(10.0)
    assert limiter.when("a") == pytest.approx(0.08)
    assert limiter.num_requeues("a") == 5
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == pytest.approx(0.005)


def test_max_of_needs_a_member() -> None:
    with pytest.raises(ValueError):
        MaxOfRateLimiter[str]()


def test_default_controller_rate_limiter_combines_exponential_and_bucket() -> None:
    limiter: RateLimiter[str] = default_controller_rate_limiter()
    delays = [limiter.when("a") for _ in range(19)]
    assert delays[0] == pytest.approx(0.005)
    assert delays[18] == 1000.0
    assert limiter.num_requeues("a") == 19
    # The bucket (burst 100) is shared: 19 tokens used; 81 distinct items later it runs dry.
    fresh = [limiter.when(f"item-{i}") for i in range(81)]
    assert fresh == pytest.approx([0.005] * 81)
    assert limiter.when("one-too-many") == pytest.approx(0.1, abs=0.02)


def test_default_controller_rate_limiter_custom_figures() -> None:
    limiter = default_controller_rate_limiter(base_delay=1.0, max_delay=3.0, qps=100.0, burst=1000)
    assert [limiter.when("a") for _ in range(4)] == pytest.approx([1.0, 2.0, 3.0, 3.0])


def test_bucket_allow_takes_a_token_only_when_one_is_there() -> None:
    now = [0.0]
    bucket = BucketRateLimiter(qps=2.0, burst=3, clock=lambda: now[0])
    assert [bucket.allow() for _ in range(4)] == [True, True, True, False]
    now[0] += 0.4  # 0.8 tokens: still not one
    assert not bucket.allow()
    now[0] += 0.1
    assert bucket.allow() and not bucket.allow()
    now[0] += 100
    assert sum(bucket.allow() for _ in range(10)) == 3  # refill is capped at the burst
