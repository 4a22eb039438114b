"""Every rule of :mod:`zkop.ensembles.decide`, one table row each: facts in, plan (plain data) out."""

from __future__ import annotations

from typing import Any

import pytest

from zkop.ensembles.decide import (
    Condition,
    EnsembleFacts,
    Plan,
    ReportRuntime,
    RunningRuntime,
    RuntimeAction,
    decide,
    desired_status,
    needs_runtime_facts,
    runtime_condition,
    terminating_message,
)

SPEC: dict[str, Any] = {"connectString": "zk-0:2181", "auth": {"digest": {"secretRef": {"name": "creds"}}}}
POLICY_CHANGED: dict[str, Any] = {**SPEC, "tenancy": {"rules": []}}


def ensemble(*, deleting: bool = False, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "zk", "generation": 3}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": SPEC if spec is None else spec}


def facts(obj: dict[str, Any] | None = None, **fields: Any) -> EnsembleFacts:
    base: dict[str, Any] = {"has_finalizer": True, "hosts": "zk-0:2181", "secret_names": frozenset({"creds"}),
                            "fingerprint": "fp", "running": RunningRuntime("fp", SPEC)}
    return EnsembleFacts("zk", ensemble() if obj is None else obj, **{**base, **fields})


WAITING = ("ns/a", "ns/b")

DECIDE: list[tuple[str, EnsembleFacts, Plan]] = [
    ("1. gone: close its runtime, write nothing",
     EnsembleFacts("zk", None),
     Plan(runtime=RuntimeAction("close", "ZooKeeperEnsemble zk not found"))),
    ("2. being deleted, nobody needs it: close, remove the finalizer, report nothing",
     facts(ensemble(deleting=True)),
     Plan(finalizer="remove", runtime=RuntimeAction("close", "ZooKeeperEnsemble zk is being deleted"))),
    ("2. being deleted, nobody needs it, no finalizer of ours: close only",
     facts(ensemble(deleting=True), has_finalizer=False),
     Plan(runtime=RuntimeAction("close", "ZooKeeperEnsemble zk is being deleted"))),
    ("3. being deleted, still needed: keep the finalizer and the runtime, report Terminating",
     facts(ensemble(deleting=True), needing=WAITING),
     Plan(watch_secrets=frozenset({"creds"}), runtime=RuntimeAction("keep"),
          status=ReportRuntime("zk-0:2181", terminating_message(WAITING)))),
    ("3. being deleted, still needed, no finalizer: none is added",
     facts(ensemble(deleting=True), has_finalizer=False, needing=WAITING),
     Plan(watch_secrets=frozenset({"creds"}), runtime=RuntimeAction("keep"),
          status=ReportRuntime("zk-0:2181", terminating_message(WAITING)))),
    ("4. no finalizer yet: add it first",
     facts(has_finalizer=False),
     Plan(finalizer="add", watch_secrets=frozenset({"creds"}), runtime=RuntimeAction("keep"),
          status=ReportRuntime("zk-0:2181"))),
    ("5. invalid spec: close the runtime, report InvalidSpec (after adding the finalizer)",
     facts(has_finalizer=False, spec_error="spec.connectString: required", hosts="", secret_names=frozenset(),
           fingerprint=None, running=None),
     Plan(finalizer="add",
          runtime=RuntimeAction("close", "ZooKeeperEnsemble zk has an invalid spec: spec.connectString: required"),
          status=Condition("False", "InvalidSpec", "spec.connectString: required"))),
    ("5. invalid spec while still needed: close, report InvalidSpec, the finalizer stays",
     facts(ensemble(deleting=True), spec_error="bad", needing=WAITING, fingerprint=None, running=None),
     Plan(runtime=RuntimeAction("close", "ZooKeeperEnsemble zk has an invalid spec: bad"),
          status=Condition("False", "InvalidSpec", "bad"))),
    ("6. same fingerprint, same spec: keep the runtime",
     facts(),
     Plan(watch_secrets=frozenset({"creds"}), runtime=RuntimeAction("keep"), status=ReportRuntime("zk-0:2181"))),
    ("6. same fingerprint, only tenancy or adoption changed: the same session, the new policy",
     facts(ensemble(spec=POLICY_CHANGED)),
     Plan(watch_secrets=frozenset({"creds"}), runtime=RuntimeAction("change-policy"),
          status=ReportRuntime("zk-0:2181"))),
    ("6. the spec or a Secret changed (a new fingerprint): a new runtime",
     facts(fingerprint="fp2"),
     Plan(watch_secrets=frozenset({"creds"}), runtime=RuntimeAction("rebuild"), status=ReportRuntime("zk-0:2181"))),
    ("6. no runtime yet: make one",
     facts(running=None),
     Plan(watch_secrets=frozenset({"creds"}), runtime=RuntimeAction("rebuild"), status=ReportRuntime("zk-0:2181"))),
]


@pytest.mark.parametrize(("rule", "given", "plan"), DECIDE, ids=[row[0] for row in DECIDE])
def test_decide(rule: str, given: EnsembleFacts, plan: Plan) -> None:
    assert decide(given) == plan


CONDITIONS: list[tuple[str, ReportRuntime, str | None, str | None, Condition]] = [
    ("7. a session: Connected", ReportRuntime("zk-0:2181"), None, None,
     Condition("True", "Connected", "session established with zk-0:2181")),
    ("7. no session: ZooKeeperUnavailable, why", ReportRuntime("zk-0:2181"), None, "connection refused",
     Condition("False", "ZooKeeperUnavailable", "connection refused")),
    ("7. being deleted: Terminating, connected or not", ReportRuntime("zk-0:2181", "being deleted; ..."), None,
     "connection refused", Condition("False", "Terminating", "being deleted; ...")),
    ("7. a Secret missing: SecretNotFound", ReportRuntime("zk-0:2181", "being deleted; ..."),
     "Secret 'creds' not found in the trusted namespace", None,
     Condition("False", "SecretNotFound", "Secret 'creds' not found in the trusted namespace")),
    ("7. a credential that is not user:password: InvalidSpec", ReportRuntime("zk-0:2181"),
     "spec.auth.digest: not user:password", None,
     Condition("False", "InvalidSpec", "spec.auth.digest: not user:password")),
]


@pytest.mark.parametrize(("rule", "report", "cannot_run", "not_ready", "expected"), CONDITIONS,
                         ids=[row[0] for row in CONDITIONS])
def test_runtime_condition(rule: str, report: ReportRuntime, cannot_run: str | None, not_ready: str | None,
                           expected: Condition) -> None:
    assert runtime_condition(report, cannot_run, not_ready) == expected


READS: list[tuple[str, EnsembleFacts, bool]] = [
    ("a live object with a valid spec reads its Secrets and runtime", facts(), True),
    ("an invalid spec reads nothing more", facts(spec_error="bad"), False),
    ("gone: nothing more", EnsembleFacts("zk", None), False),
    ("being deleted, nobody needs it: nothing more", facts(ensemble(deleting=True)), False),
    ("being deleted, still needed: its Secrets and runtime", facts(ensemble(deleting=True), needing=WAITING), True),
]


@pytest.mark.parametrize(("rule", "given", "expected"), READS, ids=[row[0] for row in READS])
def test_what_is_gathered(rule: str, given: EnsembleFacts, expected: bool) -> None:
    assert needs_runtime_facts(given) is expected


def test_terminating_names_at_most_five() -> None:
    waiting = [f"ns/o{i}" for i in range(7)]
    assert terminating_message(waiting) == ("being deleted; waiting for 7 object(s) that still need it to "
                                            "delete their znodes: ns/o0, ns/o1, ns/o2, ns/o3, ns/o4 and 2 more")


def test_status_names_watch_mode_and_server_version_only_while_a_runtime_runs() -> None:
    ready = {"type": "Ready", "status": "True"}
    assert desired_status(3, 2, ready) == {"observedGeneration": 3, "managedObjects": 2, "conditions": [ready]}
    assert desired_status(3, 2, ready, watch_mode="persistent", server_version="3.9.2") == {
        "observedGeneration": 3, "managedObjects": 2, "conditions": [ready], "watchMode": "persistent",
        "serverVersion": "3.9.2"}
    assert "serverVersion" not in desired_status(3, 2, ready, watch_mode="auto", server_version=None)
