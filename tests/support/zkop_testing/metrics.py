"""Reading a Prometheus text exposition (a ``/metrics`` scrape) in tests and the benchmark."""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["Metrics"]


class Metrics:
    """One scrape of a Prometheus text exposition, queried by sample name and labels.

    Args:
        text: the exposition, e.g. ``OperatorProcess.metrics()``.
    """

    def __init__(self, text: str) -> None:
        self.samples: list[tuple[str, dict[str, str], float]] = [
            (s.name, dict(s.labels), float(s.value))
            for family in text_string_to_metric_families(text) for s in family.samples
        ]

    def total(self, sample: str, /, **labels: str) -> float:
        """Sum of the samples called ``sample`` whose labels include ``labels`` (0 if there is none)."""
        return sum(v for n, ls, v in self.samples if n == sample and all(ls.get(k) == x for k, x in labels.items()))

    def by_label(self, sample: str, label: str, /, **labels: str) -> dict[str, float]:
        """Samples called ``sample`` (matching ``labels``) summed per value of ``label``."""
        out: dict[str, float] = {}
        for n, ls, v in self.samples:
            if n == sample and label in ls and all(ls.get(k) == x for k, x in labels.items()):
                out[ls[label]] = out.get(ls[label], 0.0) + v
        return out

    def mean_ms(self, histogram: str, label: str | None = None, **labels: str) -> dict[str, Any]:
        """Mean of a histogram in milliseconds (``_sum / _count``), overall or per value of ``label``.

        Returns:
            ``{"mean_ms": m}`` (``None`` without observations), or ``{label value: m}``.
        """
        if label is None:
            count = self.total(f"{histogram}_count", **labels)
            return {"mean_ms": round(self.total(f"{histogram}_sum", **labels) / count * 1000, 2) if count else None}
        sums = self.by_label(f"{histogram}_sum", label, **labels)
        counts = self.by_label(f"{histogram}_count", label, **labels)
        return {k: round(sums.get(k, 0.0) / c * 1000, 2) for k, c in sorted(counts.items()) if c}

    def zookeeper_ops(self) -> dict[str, float]:
        """zkop's ZooKeeper requests by operation (``get``, ``exists``, ``create``, ``set``…)."""
        return self.by_label("zkop_zookeeper_request_duration_seconds_count", "operation")

    def reconciles(self, controller: str, result: str = "success") -> float:
        """``controller_runtime_reconcile_total`` of ``controller`` with ``result``."""
        return self.total("controller_runtime_reconcile_total", controller=controller, result=result)
