"""Prometheus metrics: names, labels, buckets, and the values the work queue moves."""

from __future__ import annotations

import gc
import importlib
import itertools
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client import REGISTRY
from zkop_testing.waiting import wait_for

from zkop.runtime import metrics
from zkop.runtime.metrics import InFlightSource, init_controller_metrics
from zkop.runtime.serving import parse_bind_address, start_metrics_server
from zkop.runtime.workqueue import (
    CounterMetric,
    DelayingQueue,
    GaugeMetric,
    HistogramMetric,
    RateLimitingQueue,
    WorkQueue,
)
from zkop.runtime.workqueue.ratelimit import ItemExponentialFailureRateLimiter

_counter = itertools.count()


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_counter)}-{time.monotonic_ns()}"


def sample(name: str, labels: dict[str, str]) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


def wq(name: str) -> dict[str, str]:
    return {"name": name, "controller": name}


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# ------------------------------------------------------------------ registry shape


def test_every_metric_is_registered_with_controller_runtime_names_and_types() -> None:
    # What `zkop run` registers: the runtime's metrics and those of the packages it wires.
    importlib.import_module("zkop.operator.run")
    for module in ("zkop.zookeeper.metrics", "zkop.zkconfig.metrics", "zkop.services.bridge.metrics"):
        importlib.import_module(module)
    families = {m.name: m for m in REGISTRY.collect()}
    expected = {
        # prometheus_client strips "_total" from counter family names; samples keep it.
        "workqueue_depth": "gauge",
        "workqueue_adds": "counter",
        "workqueue_queue_duration_seconds": "histogram",
        "workqueue_work_duration_seconds": "histogram",
        "workqueue_unfinished_work_seconds": "gauge",
        "workqueue_longest_running_processor_seconds": "gauge",
        "workqueue_retries": "counter",
        "controller_runtime_reconcile": "counter",
        "controller_runtime_reconcile_errors": "counter",
        "controller_runtime_terminal_reconcile_errors": "counter",
        "controller_runtime_reconcile_panics": "counter",
        "controller_runtime_reconcile_timeouts": "counter",
        "controller_runtime_reconcile_time_seconds": "histogram",
        "controller_runtime_max_concurrent_reconciles": "gauge",
        "controller_runtime_active_workers": "gauge",
        "leader_election_master_status": "gauge",
        "zkop_zookeeper_connected": "gauge",
        "zkop_zookeeper_request_duration_seconds": "histogram",
        "zkop_zookeeper_request_errors": "counter",
        "zkop_drift_corrections": "counter",
        "zkop_service_bridge_records": "gauge",
        "zkop_service_bridge_writes": "counter",
        "zkop_service_bridge_deletes": "counter",
        "zkop_service_bridge_skipped_foreign": "counter",
        "zkop_service_bridge_collisions": "counter",
        "zkop_service_bridge_last_full_sync_timestamp_seconds": "gauge",
        "zkop_service_bridge_delete_circuit_breaker_open": "gauge",
    }
    for name, kind in expected.items():
        assert name in families, name
        assert families[name].type == kind, name


def test_no_created_series_are_exported() -> None:
    metrics.RECONCILE_TOTAL.labels(unique("created"), "success").inc()
    names = {s.name for m in REGISTRY.collect() for s in m.samples}
    assert not [n for n in names if n.endswith("_created")]


def test_workqueue_histogram_buckets_span_1e_8_to_1e3() -> None:
    name = unique("buckets")
    WorkQueue[str](name)
    les = [
        s.labels["le"]
        for m in REGISTRY.collect()
        if m.name == "workqueue_queue_duration_seconds"
        for s in m.samples
        if s.name.endswith("_bucket") and s.labels["name"] == name
    ]
    assert les == [
        "1e-08", "1e-07", "1e-06", "1e-05", "0.0001", "0.001", "0.01", "0.1",
        "1.0", "10.0", "100.0", "1000.0", "+Inf",
    ]  # fmt: skip


def test_reconcile_time_buckets_match_controller_runtime() -> None:
    assert metrics.RECONCILE_TIME_BUCKETS[0] == 0.005
    assert metrics.RECONCILE_TIME_BUCKETS[-1] == 60
    assert len(metrics.RECONCILE_TIME_BUCKETS) == 40
    controller = unique("rt")
    metrics.RECONCILE_TIME.labels(controller).observe(0.3)
    assert sample("controller_runtime_reconcile_time_seconds_bucket", {"controller": controller, "le": "0.3"}) == 1
    assert sample("controller_runtime_reconcile_time_seconds_bucket", {"controller": controller, "le": "0.25"}) == 0


# ------------------------------------------------------------------ work queue values


def test_named_queue_series_exist_at_zero_with_controller_runtime_labels() -> None:
    name = unique("fresh")
    q: WorkQueue[str] = WorkQueue(name)
    assert sample("workqueue_depth", {**wq(name), "priority": ""}) == 0
    assert sample("workqueue_adds_total", wq(name)) == 0
    assert sample("workqueue_retries_total", wq(name)) == 0
    assert sample("workqueue_queue_duration_seconds_count", wq(name)) == 0
    assert sample("workqueue_work_duration_seconds_count", wq(name)) == 0
    assert sample("workqueue_unfinished_work_seconds", wq(name)) == 0
    assert sample("workqueue_longest_running_processor_seconds", wq(name)) == 0
    del q


def test_depth_adds_and_durations_follow_client_go() -> None:
    name = unique("flow")
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(name, clock=clock)
    depth = {**wq(name), "priority": ""}

    q.add("a")
    clock.now += 1.0
    q.add("a")  # deduplicated: not counted
    q.add("b")
    assert sample("workqueue_adds_total", wq(name)) == 2
    assert sample("workqueue_depth", depth) == 2

    clock.now += 2.0
    assert q.get(timeout=0) == ("a", False)  # waited 3 s since its *first* add
    assert sample("workqueue_depth", depth) == 1
    assert sample("workqueue_queue_duration_seconds_count", wq(name)) == 1
    assert sample("workqueue_queue_duration_seconds_sum", wq(name)) == pytest.approx(3.0)

    clock.now += 0.5
    q.done("a")
    assert sample("workqueue_work_duration_seconds_count", wq(name)) == 1
    assert sample("workqueue_work_duration_seconds_sum", wq(name)) == pytest.approx(0.5)


def test_add_during_processing_counts_as_depth_like_client_go() -> None:
    name = unique("dirty")
    q: WorkQueue[str] = WorkQueue(name)
    depth = {**wq(name), "priority": ""}
    q.add("a")
    q.get(timeout=0)
    q.add("a")  # dirty while processing: counted once, depth 1, queue length 0
    q.add("a")
    assert sample("workqueue_adds_total", wq(name)) == 2
    assert sample("workqueue_depth", depth) == 1
    assert len(q) == 0
    q.done("a")
    q.get(timeout=0)
    assert sample("workqueue_depth", depth) == 0


def test_unfinished_and_longest_running_are_computed_at_scrape() -> None:
    name = unique("inflight")
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(name, clock=clock)
    q.add("a")
    q.add("b")
    q.get(timeout=0)  # a starts at t=100
    clock.now += 2.0
    q.get(timeout=0)  # b starts at t=102
    clock.now += 3.0  # t=105: a 5 s, b 3 s
    assert sample("workqueue_unfinished_work_seconds", wq(name)) == pytest.approx(8.0)
    assert sample("workqueue_longest_running_processor_seconds", wq(name)) == pytest.approx(5.0)
    q.done("a")
    assert sample("workqueue_unfinished_work_seconds", wq(name)) == pytest.approx(3.0)
    assert sample("workqueue_longest_running_processor_seconds", wq(name)) == pytest.approx(3.0)
    q.done("b")
    assert sample("workqueue_unfinished_work_seconds", wq(name)) == 0
    assert sample("workqueue_longest_running_processor_seconds", wq(name)) == 0


def test_in_flight_series_go_away_with_the_queue() -> None:
    name = unique("gone")
    q: WorkQueue[str] = WorkQueue(name)
    assert sample("workqueue_unfinished_work_seconds", wq(name)) == 0
    del q
    gc.collect()
    assert sample("workqueue_unfinished_work_seconds", wq(name)) is None


def test_retries_count_every_add_after_but_none_after_shutdown() -> None:
    name = unique("retries")
    q: DelayingQueue[str] = DelayingQueue(name)
    q.add_after("a", 0)
    q.add_after("a", 0)  # deduplicated add, still a retry
    q.add_after("b", 30.0)
    q.add_after("b", 10.0)
    assert sample("workqueue_retries_total", wq(name)) == 4
    assert sample("workqueue_adds_total", wq(name)) == 1
    q.shutdown()
    q.add_after("c", 0)
    assert sample("workqueue_retries_total", wq(name)) == 4
    assert q._delay_thread is None or not q._delay_thread.is_alive()  # joined by shutdown


def test_rate_limited_adds_count_as_retries_and_adds() -> None:
    name = unique("rl")
    q: RateLimitingQueue[str] = RateLimitingQueue(
        name, rate_limiter=ItemExponentialFailureRateLimiter[str](0.001, 0.001)
    )
    q.add_rate_limited("a")
    wait_for(lambda: len(q) == 1, message="the rate-limited add reached the queue")
    assert sample("workqueue_retries_total", wq(name)) == 1
    assert sample("workqueue_adds_total", wq(name)) == 1
    q.shutdown()
    assert q._delay_thread is None or not q._delay_thread.is_alive()  # joined by shutdown


class RecordingProvider:
    def __init__(self) -> None:
        self.calls: list[str] = []

    class _M:
        def __init__(self, calls: list[str], label: str) -> None:
            self.calls, self.label = calls, label

        def inc(self, amount: float = 1) -> None:
            self.calls.append(f"{self.label}.inc")

        def dec(self, amount: float = 1) -> None:
            self.calls.append(f"{self.label}.dec")

        def observe(self, amount: float) -> None:
            self.calls.append(f"{self.label}.observe")

    def new_depth_metric(self, name: str) -> GaugeMetric:
        return self._M(self.calls, "depth")

    def new_adds_metric(self, name: str) -> CounterMetric:
        return self._M(self.calls, "adds")

    def new_latency_metric(self, name: str) -> HistogramMetric:
        return self._M(self.calls, "latency")

    def new_work_duration_metric(self, name: str) -> HistogramMetric:
        return self._M(self.calls, "work")

    def new_retries_metric(self, name: str) -> CounterMetric:
        return self._M(self.calls, "retries")

    def register_in_flight(self, name: str, source: InFlightSource) -> None:
        self.calls.append("register_in_flight")


def exercise(q: DelayingQueue[str]) -> None:
    q.add("a")
    q.get(timeout=0)
    q.done("a")
    q.add_after("b", 0)


def test_custom_provider_receives_the_calls_of_a_named_queue() -> None:
    provider = RecordingProvider()
    exercise(DelayingQueue(unique("custom"), metrics_provider=provider))
    assert provider.calls == [
        "register_in_flight",
        "adds.inc",
        "depth.inc",
        "depth.dec",
        "latency.observe",
        "work.observe",
        "retries.inc",
        "adds.inc",
        "depth.inc",
    ]


def test_unnamed_queue_records_no_metrics() -> None:
    provider = RecordingProvider()
    exercise(DelayingQueue("", metrics_provider=provider))
    assert provider.calls == []
    assert sample("workqueue_adds_total", wq("")) is None


# ------------------------------------------------------------------ controller / leader election


def test_init_controller_metrics_precreates_series_like_controller_runtime() -> None:
    controller = unique("ctrl")
    init_controller_metrics(controller, 4)
    for result in ("success", "error", "requeue", "requeue_after"):
        assert sample("controller_runtime_reconcile_total", {"controller": controller, "result": result}) == 0
    for counter in (
        "controller_runtime_reconcile_errors_total",
        "controller_runtime_terminal_reconcile_errors_total",
        "controller_runtime_reconcile_panics_total",
        "controller_runtime_reconcile_timeouts_total",
    ):
        assert sample(counter, {"controller": controller}) == 0, counter
    assert sample("controller_runtime_max_concurrent_reconciles", {"controller": controller}) == 4
    assert sample("controller_runtime_active_workers", {"controller": controller}) == 0
    # The histogram is not pre-created (Go does not either).
    assert sample("controller_runtime_reconcile_time_seconds_count", {"controller": controller}) is None

    metrics.RECONCILE_TOTAL.labels(controller, "error").inc()
    metrics.ACTIVE_WORKERS.labels(controller).inc()
    init_controller_metrics(controller, 2)  # a restart keeps counters, resets the gauges
    assert sample("controller_runtime_reconcile_total", {"controller": controller, "result": "error"}) == 1
    assert sample("controller_runtime_max_concurrent_reconciles", {"controller": controller}) == 2
    assert sample("controller_runtime_active_workers", {"controller": controller}) == 0


@pytest.mark.parametrize(("controller", "workers"), [("", 1), ("x", 0)])
def test_init_controller_metrics_rejects_bad_arguments(controller: str, workers: int) -> None:
    with pytest.raises(ValueError):
        init_controller_metrics(controller, workers)


def test_leader_election_gauge_has_name_label() -> None:
    lease = unique("lease")
    metrics.LEADER_ELECTION_MASTER_STATUS.labels(lease).set(1)
    assert sample("leader_election_master_status", {"name": lease}) == 1


# ------------------------------------------------------------------ /metrics server


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("0", None),
        (":8080", ("", 8080)),
        ("127.0.0.1:9090", ("127.0.0.1", 9090)),
        ("[::1]:0", ("::1", 0)),
        ("localhost:0", ("localhost", 0)),
    ],
)
def test_parse_bind_address(address: str, expected: tuple[str, int] | None) -> None:
    assert parse_bind_address(address) == expected


@pytest.mark.parametrize("address", ["", "8080", "host:", "host:http", ":70000", "::1:80"])
def test_parse_bind_address_rejects(address: str) -> None:
    with pytest.raises(ValueError):
        parse_bind_address(address)


def test_disabled_server_returns_none() -> None:
    assert start_metrics_server("0") is None


def fetch(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, ""


def test_server_serves_metrics_on_a_free_port_and_shuts_down() -> None:
    name = unique("served")
    q: WorkQueue[str] = WorkQueue(name)
    q.add("x")
    server = start_metrics_server("127.0.0.1:0")
    assert server is not None
    with server:
        assert server.port > 0
        status, body = fetch(server.url)
        assert status == 200
        assert f'workqueue_adds_total{{controller="{name}",name="{name}"}} 1.0' in body
        assert f'workqueue_depth{{controller="{name}",name="{name}",priority=""}} 1.0' in body
        assert "_created" not in body
        status, _ = fetch(server.url.replace("/metrics", "/other"))
        assert status == 404
    with pytest.raises(OSError):
        urllib.request.urlopen(server.url, timeout=2)
    server.shutdown()  # idempotent


def test_server_on_all_interfaces() -> None:
    server = start_metrics_server(":0")
    assert server is not None
    with server:
        status, body = fetch(f"http://127.0.0.1:{server.port}/metrics")
        assert status == 200
        assert "workqueue_depth" in body


def test_importing_runtime_metrics_installs_the_prometheus_provider_once() -> None:
    from zkop.runtime.workqueue import metrics as workqueue_metrics

    assert workqueue_metrics.global_provider() is metrics.WORKQUEUE_METRICS_PROVIDER
    workqueue_metrics.set_provider(workqueue_metrics.NoopMetricsProvider())  # client-go: first call wins
    assert workqueue_metrics.global_provider() is metrics.WORKQUEUE_METRICS_PROVIDER
    name = unique("installed")
    WorkQueue[str](name).add("x")
    assert sample("workqueue_adds_total", wq(name)) == 1.0
