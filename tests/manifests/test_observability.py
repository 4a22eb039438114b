"""The Prometheus alerts (``manifests/components/prometheus``) and the Grafana dashboard (``docs/``).

Every PromQL expression is parsed with a real PromQL parser (``promql-parser``) and every
metric it selects must be one that ``zkop.runtime.metrics`` registers, so a renamed metric
breaks this test instead of silently emptying a panel or an alert.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import promql_parser
import pytest
from zkop_testing.kustomize import REPO, Obj, find

DASHBOARD = REPO / "docs" / "grafana-dashboard.json"
ALERTS_DOC = REPO / "docs" / "alerts.md"
JOB = "zkop-controller-manager-metrics"
#: Series Prometheus makes itself.
PROMETHEUS_METRICS = {"up"}
#: Grafana's interval variables, replaced by a duration before parsing.
GRAFANA_INTERVALS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}


def selectors(expr: str) -> list[promql_parser.VectorSelector]:
    """Parse ``expr`` and return every vector selector in it (raises ``ValueError`` on bad PromQL)."""
    found: list[promql_parser.VectorSelector] = []

    def visit(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            found.append(node)

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


def metric_names(expr: str) -> set[str]:
    """The metric names ``expr`` selects."""
    return {s.name for s in selectors(expr) if s.name}


def grafana_to_promql(expr: str) -> str:
    """Replace Grafana's variables so that a panel query parses as PromQL."""
    for variable, duration in GRAFANA_INTERVALS.items():
        expr = expr.replace(variable, duration)
    return re.sub(r"\$\{?\w+\}?", "x", expr)


def test_helpers_parse_real_promql() -> None:
    expr = 'histogram_quantile(0.99, sum by (le) (rate(a_bucket{job="j"}[5m]))) > 0 or absent(b) or time() - c'
    assert metric_names(expr) == {"a_bucket", "b", "c"}
    with pytest.raises(ValueError):
        selectors("sum(rate(a[5m])")
    assert grafana_to_promql('rate(a{n="$namespace", j=~"${job}"}[$__rate_interval])') == 'rate(a{n="x", j=~"x"}[5m])'


# --------------------------------------------------------------------------------------------
# alerts
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def alert_rules(rendered_full: list[Obj]) -> dict[str, Obj]:
    """The PrometheusRule's alerts by name."""
    (rule,) = find(rendered_full, "PrometheusRule")
    alerts = {r["alert"]: r for group in rule["spec"]["groups"] for r in group["rules"]}
    assert len(alerts) == sum(len(g["rules"]) for g in rule["spec"]["groups"]), "duplicate alert names"
    return alerts


def test_alert_expressions_use_existing_metrics(alert_rules: dict[str, Obj], zkop_metric_names: frozenset[str]
                                                ) -> None:
    for name, rule in alert_rules.items():
        used = metric_names(rule["expr"])
        assert used, name
        unknown = used - zkop_metric_names - PROMETHEUS_METRICS
        assert not unknown, f"{name}: {sorted(unknown)} are not metrics zkop exports"


def test_alerts_select_zkops_job(alert_rules: dict[str, Obj], rendered_full: list[Obj]) -> None:
    (service,) = find(rendered_full, "Service")
    assert service["metadata"]["name"] == JOB  # the ServiceMonitor's job label
    for name, rule in alert_rules.items():
        for selector in selectors(rule["expr"]):
            jobs = [m for m in selector.matchers.matchers if m.name == "job"]
            assert [(m.op, m.value) for m in jobs] == [(promql_parser.MatchOp.Equal, JOB)], (name, str(selector))


def test_required_alerts(alert_rules: dict[str, Obj]) -> None:
    by_metric = {metric: name for name, rule in alert_rules.items() for metric in metric_names(rule["expr"])}
    expected = {
        "controller_runtime_reconcile_errors_total": ("warning", "15m"),
        "zkop_zookeeperconfig_condition": ("warning", "5m"),
        "zkop_zookeeper_connected": ("critical", "2m"),
        "leader_election_master_status": ("critical", "5m"),
        "zkop_drift_corrections_total": ("info", None),
        "zkop_service_bridge_delete_circuit_breaker_open": ("warning", "1m"),
        "up": ("critical", "5m"),
    }
    for metric, (severity, for_) in expected.items():
        rule = alert_rules[by_metric[metric]]
        assert rule["labels"]["severity"] == severity, metric
        assert rule.get("for") == for_, metric
    assert "absent(" in alert_rules[by_metric["leader_election_master_status"]]["expr"]
    assert 'name="zkop-leader"' in alert_rules[by_metric["leader_election_master_status"]]["expr"]
    assert "[1h]" in alert_rules[by_metric["zkop_drift_corrections_total"]]["expr"]
    assert "[5m]" in alert_rules[by_metric["controller_runtime_reconcile_errors_total"]]["expr"]


def _github_anchor(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_alerts_are_documented(alert_rules: dict[str, Obj]) -> None:
    text = ALERTS_DOC.read_text(encoding="utf-8")
    anchors = {_github_anchor(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE)}
    for name, rule in alert_rules.items():
        annotations = rule["annotations"]
        assert annotations["summary"] and annotations["description"], name
        url = annotations["runbook_url"]
        assert url.startswith("https://github.com/example/zkop/blob/main/docs/alerts.md#"), name
        assert url.rpartition("#")[2] in anchors, f"{name}: no section {url.rpartition('#')[2]} in docs/alerts.md"


# --------------------------------------------------------------------------------------------
# Grafana dashboard
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dashboard() -> Obj:
    """docs/grafana-dashboard.json."""
    result: Obj = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return result


def _panels(dashboard: Obj) -> Iterator[Obj]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def test_dashboard_shape(dashboard: Obj) -> None:
    assert 36 <= dashboard["schemaVersion"] <= 41
    assert dashboard["uid"] and dashboard["title"]
    ids = [p["id"] for p in _panels(dashboard)]
    assert len(ids) == len(set(ids))
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    assert variables == {"datasource", "namespace", "job"}
    for panel in _panels(dashboard):
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24 and grid["h"] > 0, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["description"], panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            used = set(re.findall(r"\$\{?(\w+)\}?", target["expr"])) - {k.lstrip("$") for k in GRAFANA_INTERVALS}
            assert used <= variables, (panel["title"], used)


def test_dashboard_panels_do_not_overlap(dashboard: Obj) -> None:
    cells: dict[tuple[int, int], str] = {}
    for panel in _panels(dashboard):
        grid = panel["gridPos"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps {cells[x, y]}"
                cells[x, y] = panel["title"]


def test_dashboard_queries_use_existing_metrics(dashboard: Obj, zkop_metric_names: frozenset[str]) -> None:
    used_everywhere: set[str] = set()
    for panel in _panels(dashboard):
        for target in panel.get("targets", []):
            expr = grafana_to_promql(target["expr"])
            used = metric_names(expr)
            assert used, panel["title"]
            unknown = used - zkop_metric_names
            assert not unknown, f"{panel['title']}: {sorted(unknown)} are not metrics zkop exports"
            for selector in selectors(expr):
                labels = {m.name for m in selector.matchers.matchers}
                assert {"namespace", "job"} <= labels, (panel["title"], str(selector))
            if "histogram_quantile" in expr:
                assert all(n.endswith("_bucket") for n in used) and re.search(r"by \([^)]*\ble\b", expr), expr
            used_everywhere |= used
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            match = re.fullmatch(r"label_values\((.+),\s*\w+\)", variable["definition"])
            assert match, variable["definition"]
            assert metric_names(grafana_to_promql(match.group(1))) <= zkop_metric_names
    assert used_everywhere >= {
        "controller_runtime_reconcile_total", "controller_runtime_reconcile_errors_total",
        "controller_runtime_reconcile_time_seconds_bucket", "workqueue_depth",
        "workqueue_queue_duration_seconds_bucket", "workqueue_work_duration_seconds_bucket",
        "zkop_zookeeper_request_duration_seconds_bucket", "zkop_zookeeper_connected", "zkop_drift_corrections_total",
        "zkop_service_bridge_records", "zkop_service_bridge_writes_total", "zkop_service_bridge_deletes_total",
        "leader_election_master_status",
    }


def test_dashboard_has_the_promised_panels(dashboard: Obj) -> None:
    titles = {p["title"] for p in _panels(dashboard)}
    assert titles >= {
        "Reconcile rate by result", "Reconcile errors", "Reconcile latency", "Work queue depth",
        "Queue and work duration", "ZooKeeper request latency p99", "ZooKeeper connected", "Drift corrections",
        "Bridge records", "Bridge writes and deletes", "Leader",
    }
    (latency,) = [p for p in _panels(dashboard) if p["title"] == "Reconcile latency"]
    quantiles = [t["expr"].split(",")[0] for t in latency["targets"]]
    assert quantiles == ["histogram_quantile(0.5", "histogram_quantile(0.99"]
