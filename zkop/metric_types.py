"""prometheus-client's ``Counter``, ``Gauge`` and ``Histogram`` with a cheaper update on a labelled child.

zkop updates about fifteen series per converged object (work queue, reconcile, ZooKeeper and API
request metrics). prometheus-client checks on every update that the metric is not a parent still
missing its label values, and a ``Histogram.observe`` walks its bucket bounds one by one. These
subclasses skip the check where the child's value already exists (it does exactly when the check
would pass: prometheus-client creates the value when the metric becomes observable) and find the
bucket by bisection; every other case -- exemplars, a negative or NaN amount, a parent without label
values, a ``mostrecent`` gauge -- goes to prometheus-client's own method, which raises or handles it
as before. The series, their names, buckets and exposition are prometheus-client's, unchanged
(``tests/runtime/test_metric_types.py``; the instruction counts in docs/performance.md, "CPU per
object"). Outside every layer of zkop so that the ZooKeeper and the Kubernetes layers can both use it.
"""

from __future__ import annotations

from bisect import bisect_left

import prometheus_client

__all__ = ["Counter", "Gauge", "Histogram"]


class Counter(prometheus_client.Counter):
    """``prometheus_client.Counter``; :meth:`inc` without an exemplar skips the observability check."""

    def inc(self, amount: float = 1, exemplar: dict[str, str] | None = None) -> None:
        """Add ``amount`` (≥ 0).

        Raises:
            ValueError: a negative amount, or a parent metric without its label values (prometheus-client's).
        """
        if exemplar is None and amount >= 0:
            value = self.__dict__.get("_value")
            if value is not None:
                value.inc(amount)
                return
        super().inc(amount, exemplar)


class Gauge(prometheus_client.Gauge):
    """``prometheus_client.Gauge``; :meth:`inc` and :meth:`dec` skip the observability check."""

    def inc(self, amount: float = 1) -> None:
        """Add ``amount``.

        Raises:
            ValueError: a parent metric without its label values; RuntimeError: a ``mostrecent`` gauge.
        """
        value = self.__dict__.get("_value")
        if value is not None and not self._is_most_recent:
            value.inc(amount)
            return
        super().inc(amount)

    def dec(self, amount: float = 1) -> None:
        """Subtract ``amount``; raises as :meth:`inc`."""
        value = self.__dict__.get("_value")
        if value is not None and not self._is_most_recent:
            value.inc(-amount)
            return
        super().dec(amount)


class Histogram(prometheus_client.Histogram):
    """``prometheus_client.Histogram``; :meth:`observe` finds the bucket by bisection."""

    def observe(self, amount: float, exemplar: dict[str, str] | None = None) -> None:
        """Count ``amount`` in the first bucket whose upper bound is ≥ it, and add it to the sum.

        Raises:
            ValueError: a parent metric without its label values (prometheus-client's).
        """
        buckets = self.__dict__.get("_buckets")
        if buckets is not None and exemplar is None and amount == amount:  # a NaN takes the general path
            self._sum.inc(amount)
            buckets[bisect_left(self._upper_bounds, amount)].inc(1)
            return
        super().observe(amount, exemplar)
