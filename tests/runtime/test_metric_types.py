"""zkop.metric_types: the cheaper update paths expose exactly what prometheus-client's own metrics do."""

from __future__ import annotations

import math

import prometheus_client
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from zkop import metric_types

BUCKETS = (1e-8, 1e-3, 0.5, 1.0, 10.0)
#: Below, on and between the bounds, beyond the last finite one, infinite, negative and NaN.
AMOUNTS = (0.0, 1e-8, 5e-9, 2e-8, 1e-3, 0.25, 0.5, 0.75, 1.0, 10.0, 11.0, math.inf, -1.0, -math.inf, math.nan)


def _exposition(registry: CollectorRegistry, name: str) -> list[str]:
    """The exposition lines of ``name``'s series, with the metric name cut off (to compare two metrics)."""
    text = generate_latest(registry).decode()
    return sorted(line[len(name):] for line in text.splitlines()
                  if line.startswith(name) and "_created" not in line)


def test_histogram_buckets_and_sum_match_prometheus_client_for_every_kind_of_amount() -> None:
    registry = CollectorRegistry()
    stock = prometheus_client.Histogram("stock", "h", ["k"], buckets=BUCKETS, registry=registry).labels("a")
    ours = metric_types.Histogram("ours", "h", ["k"], buckets=BUCKETS, registry=registry).labels("a")
    for amount in AMOUNTS:
        stock.observe(amount)
        ours.observe(amount)
    assert _exposition(registry, "ours") == _exposition(registry, "stock")
    lines = _exposition(registry, "ours")
    assert '_bucket{k="a",le="1e-08"} 5.0' in lines  # 0, 1e-8 (on the bound), 5e-9, -1 and -inf
    assert '_count{k="a"} 14.0' in lines  # a NaN is in no bucket


def test_histogram_with_an_exemplar_records_it_as_prometheus_client_does() -> None:
    registry = CollectorRegistry()
    ours = metric_types.Histogram("ours", "h", ["k"], buckets=BUCKETS, registry=registry).labels("a")
    ours.observe(0.7, {"trace_id": "abc"})
    samples = [s for metric in registry.collect() for s in metric.samples if s.name == "ours_bucket"]
    assert [(s.labels["le"], s.exemplar.labels) for s in samples if s.exemplar is not None] == [
        ("1.0", {"trace_id": "abc"})]


def test_counter_and_gauge_values_match_prometheus_client() -> None:
    registry = CollectorRegistry()
    stock_c = prometheus_client.Counter("stockc", "c", ["k"], registry=registry).labels("a")
    ours_c = metric_types.Counter("oursc", "c", ["k"], registry=registry).labels("a")
    stock_g = prometheus_client.Gauge("stockg", "g", ["k"], registry=registry).labels("a")
    ours_g = metric_types.Gauge("oursg", "g", ["k"], registry=registry).labels("a")
    for amount in (1, 2.5, 0):
        stock_c.inc(amount)
        ours_c.inc(amount)
        stock_g.inc(amount)
        ours_g.inc(amount)
    stock_g.dec(7)
    ours_g.dec(7)
    assert _exposition(registry, "oursc") == _exposition(registry, "stockc") == ['_total{k="a"} 3.5']
    assert _exposition(registry, "oursg") == _exposition(registry, "stockg") == ['{k="a"} -3.5']


def test_misuse_raises_what_prometheus_client_raises() -> None:
    registry = CollectorRegistry()
    counter = metric_types.Counter("c", "c", ["k"], registry=registry)
    gauge = metric_types.Gauge("g", "g", ["k"], registry=registry)
    histogram = metric_types.Histogram("h", "h", ["k"], registry=registry)
    with pytest.raises(ValueError, match="missing label values"):
        counter.inc()
    with pytest.raises(ValueError, match="missing label values"):
        gauge.inc()
    with pytest.raises(ValueError, match="missing label values"):
        gauge.dec()
    with pytest.raises(ValueError, match="missing label values"):
        histogram.observe(1.0)
    with pytest.raises(ValueError, match="non-negative"):
        counter.labels("a").inc(-1)
    recent = metric_types.Gauge("r", "g", ["k"], registry=registry, multiprocess_mode="mostrecent").labels("a")
    with pytest.raises(RuntimeError, match="mostrecent"):
        recent.inc()
    with pytest.raises(RuntimeError, match="mostrecent"):
        recent.dec()


def test_the_runtime_metrics_use_the_cheaper_types() -> None:
    from zkop.kube import metrics as kube_metrics
    from zkop.runtime import metrics as runtime_metrics
    from zkop.zookeeper import metrics as zookeeper_metrics

    assert isinstance(runtime_metrics.WORKQUEUE_WORK_DURATION, metric_types.Histogram)
    assert isinstance(runtime_metrics.WORKQUEUE_ADDS, metric_types.Counter)
    assert isinstance(runtime_metrics.WORKQUEUE_DEPTH, metric_types.Gauge)
    assert isinstance(runtime_metrics.RECONCILE_TIME, metric_types.Histogram)
    assert isinstance(zookeeper_metrics.ZOOKEEPER_REQUEST_DURATION, metric_types.Histogram)
    assert isinstance(kube_metrics.REST_CLIENT_REQUESTS, metric_types.Counter)
