"""The PrometheusRule's alerts (docs/alerts.md) tested with Prometheus' own rule tester, ``promtool test rules``.

The input series are the ones a real ``zkop run`` exports: one process is scraped right after its start and
again after a hand edit of a znode it manages, and every series an alert selects is taken from those scrapes
(its name and labels, plus the target labels the ServiceMonitor adds) — the drift counter with its real
values: 0 from the start, 1 after the edit, so "the first hand edit after a start fires ``ZkopDriftCorrected``"
(docs/operations.md, "Metrics") is checked on what zkop really exports. The other alerts need an outage or a
failing loop over minutes; their series keep the real labels and start at the scraped value.

Needs ``promtool`` (Debian's ``prometheus`` package: ``apt-get install --no-install-recommends prometheus``).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kazoo.client import KazooClient
from prometheus_client.parser import text_string_to_metric_families
from zkop_testing.controlplane import ControlPlane
from zkop_testing.kustomize import REPO
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import create, get, read, synced, zkc
from zkop_testing.waiting import wait_for
from zkop_testing.zkop_install import ZKOP_NAMESPACE, delete_leases
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import KubeClient

RULE = REPO / "manifests" / "components" / "prometheus" / "prometheusrule.yaml"
PROMTOOL = shutil.which("promtool")
#: The labels Prometheus adds to every series it scrapes through the component's ServiceMonitor.
TARGET = {"job": "zkop-controller-manager-metrics", "namespace": "zkop-system",
          "pod": "zkop-controller-manager-7d9f-x2x4q", "instance": "10.0.0.7:8443"}

pytestmark = pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (Debian: apt-get install "
                                                          "--no-install-recommends prometheus)")


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {(s.name, frozenset(s.labels.items())): float(s.value)
            for family in text_string_to_metric_families(text) for s in family.samples}


def _one(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], metric: str, /,
         **labels: str) -> tuple[dict[str, str], float]:
    """The one exported sample ``metric`` whose labels include ``labels``: its labels and value."""
    found = [(dict(ls), v) for (n, ls), v in samples.items() if n == metric and set(labels.items()) <= ls]
    assert len(found) == 1, f"{metric}{labels}: {found}"
    return found[0]


def _series(name: str, labels: dict[str, str]) -> str:
    inner = ",".join(f"{k}={json.dumps(v)}" for k, v in sorted({**labels, **TARGET}.items()))
    return f"{name}{{{inner}}}"


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else repr(value)


def _annotations(rule: dict[str, Any], labels: dict[str, str], value: str) -> dict[str, str]:
    """The rule's annotations as Prometheus renders them for an alert with ``labels`` and ``$value``."""
    def render(text: str) -> str:
        text = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m.group(1), ""), text)
        return re.sub(r"\{\{ \$value( \| humanize)? \}\}", value, text)

    return {k: render(v) for k, v in rule["annotations"].items()}


@pytest.fixture
def lease(control_plane: ControlPlane) -> Iterator[str]:
    """The Deployment's Lease, ``zkop-system/zkop-leader``: ``ZkopNoLeader`` selects its name. Deleted afterwards."""
    yield "zkop-leader"
    delete_leases(control_plane, "zkop-leader")


def test_the_alerts_fire_on_the_series_zkop_exports(kubeconfig: str, kube: KubeClient, zk_server: ZooKeeperServer,
                                                   chrooted: KazooClient, zk_base: str, tmp_path: Path,
                                                   namespace: str, lease: str) -> None:
    args = ["--leader-elect", "--leader-election-namespace", ZKOP_NAMESPACE, "--leader-election-id", lease,
            "--service-bridge", "--namespace", namespace]
    with OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", args) as proc:
        wait_for(lambda: f'leader_election_master_status{{name="{lease}"}} 1.0' in proc.metrics(),
                 message="leading")
        started = _samples(proc.metrics())
        create(kube, zkc("flag", "/app/flag", b"on", namespace=namespace))
        wait_for(lambda: synced(kube, "flag", namespace))
        chrooted.set("/app/flag", b"off")  # a hand edit
        wait_for(lambda: read(chrooted, "/app/flag") == b"on", message="the hand edit undone")
        wait_for(lambda: (get(kube, "flag", namespace) or {}).get("status", {}).get("znodeVersion") == 2)
        edited = _samples(proc.metrics())

    before_label, before = _one(started, "zkop_drift_corrections_total", controller="zookeeperconfig")
    _, after = _one(edited, "zkop_drift_corrections_total", controller="zookeeperconfig")
    assert (before, after) == (0.0, 1.0), "zkop exports the drift counter at 0 from the start, then counts the edit"
    leader_labels, leader = _one(started, "leader_election_master_status", name=lease)
    connected_labels, connected = _one(started, "zkop_zookeeper_connected")
    errors_labels, errors = _one(started, "controller_runtime_reconcile_errors_total", controller="zookeeperconfig")
    stalled_labels, stalled = _one(started, "zkop_zookeeperconfig_condition", type="Stalled", status="True")
    breaker_labels, breaker = _one(started, "zkop_service_bridge_delete_circuit_breaker_open")
    assert (leader, connected, errors, stalled, breaker) == (1.0, 1.0, 0.0, 0.0, 0.0)

    spec = yaml.safe_load(RULE.read_text(encoding="utf-8"))["spec"]
    rules = {r["alert"]: r for group in spec["groups"] for r in group["rules"]}
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    check = subprocess.run([str(PROMTOOL), "check", "rules", str(tmp_path / "rules.yaml")], capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr

    target_namespace, pod = TARGET["namespace"], TARGET["pod"]

    def alert(name: str, labels: dict[str, str], value: str = "1") -> dict[str, Any]:
        rule = rules[name]
        return {"exp_labels": {**labels, **rule["labels"]}, "exp_annotations": _annotations(rule, labels, value)}

    def case(name: str, series: list[tuple[str, dict[str, str], str]], quiet: str, firing: str,
             expected: list[dict[str, Any]]) -> dict[str, Any]:
        return {"interval": "1m",
                "input_series": [{"series": _series(n, ls), "values": v} for n, ls, v in series],
                "alert_rule_test": [{"eval_time": quiet, "alertname": name, "exp_alerts": []},
                                    {"eval_time": firing, "alertname": name, "exp_alerts": expected}]}

    cases = [
        case("ZkopDown", [("up", {}, "1x5 0x10")], "4m", "12m",
             [alert("ZkopDown", {})]),  # absent() of a comparison has no labels to give
        case("ZkopNoLeader", [("leader_election_master_status", leader_labels, f"{_number(leader)}x5 0x10")],
             "4m", "12m", [alert("ZkopNoLeader", {})]),
        case("ZkopZooKeeperDisconnected",
             [("zkop_zookeeper_connected", connected_labels, f"{_number(connected)}x5 0x5")], "7m", "9m",
             [alert("ZkopZooKeeperDisconnected", {**connected_labels, **TARGET})]),
        case("ZkopReconcileErrors",  # failing from 6m on, 60 a minute: 1/s
             [("controller_runtime_reconcile_errors_total", errors_labels, f"{_number(errors)}x5 60+60x30")],
             "10m", "22m",
             [alert("ZkopReconcileErrors", {"namespace": target_namespace, "controller": "zookeeperconfig"})]),
        case("ZkopZooKeeperConfigsStalled",
             [("zkop_zookeeperconfig_condition", stalled_labels, f"{_number(stalled)}x5 1x10")], "4m", "12m",
             [alert("ZkopZooKeeperConfigsStalled", {"namespace": target_namespace})]),
        case("ZkopServiceBridgeDeleteCircuitBreakerOpen",
             [("zkop_service_bridge_delete_circuit_breaker_open", breaker_labels, f"{_number(breaker)}x5 1x5")],
             "6m", "8m",
             [alert("ZkopServiceBridgeDeleteCircuitBreakerOpen", {"namespace": target_namespace, "pod": pod})]),
        # The first hand edit after a start: the scraped 0 for five scrapes, then the scraped 1.
        case("ZkopDriftCorrected",
             [("zkop_drift_corrections_total", before_label, f"{_number(before)}x5 {_number(after)}x30")], "5m",
             "10m",
             [alert("ZkopDriftCorrected", {"namespace": target_namespace, "controller": "zookeeperconfig"})]),
        # Why the 0 matters: the same edit on a counter that first appears at 1 fires nothing.
        case("ZkopDriftCorrected", [("zkop_drift_corrections_total", before_label, f"_x5 {_number(after)}x30")],
             "5m", "10m", []),
    ]
    assert set(rules) == {c["alert_rule_test"][0]["alertname"] for c in cases}, "an alert without a case"
    tests = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": cases}
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False), encoding="utf-8")
    run = subprocess.run([str(PROMTOOL), "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
