"""Rejection at apply time: the table of ``validation_cases.py`` judged by kube-apiserver, the in-memory double,
``zkop validate`` and ``parse_spec``, which must agree case by case.

kube-apiserver (each tested minor) is asked with ``POST …?dryRun=All&fieldValidation=Strict``, what
``kubectl apply --dry-run=server`` and Flux's dry-run send; nothing is stored. The double gets the same
request and must answer with the same causes (field and message), so its CEL evaluation
(``zkop_testing.apiserver_cel``) stays kube-apiserver's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from validation_cases import CASES, Case, case_id, manifest
from zkop_testing.apiserver import ApiServer
from zkop_testing.controlplane import ControlPlane, fresh_namespace
from zkop_testing.crds import install_crds

from zkop.kube.client import ApiException, KubeClient, resource_path
from zkop.zkconfig.spec import InvalidSpec, RefNotFound, parse_spec

pytestmark = pytest.mark.timeout(600)

def _post(kube: KubeClient, namespace: str, obj: dict[str, Any]) -> tuple[int, str, list[tuple[str, str]]]:
    """The answer to a dry-run create: HTTP status, ``Status.message`` and ``(field, message)`` causes."""
    try:
        kube.request("POST", resource_path("platform.example.com", "v1alpha1", "zookeeperconfigs", namespace),
                     query={"dryRun": "All", "fieldValidation": "Strict"}, body=obj)
    except ApiException as exc:
        status = json.loads(exc.body or "{}")
        causes = sorted((c.get("field", ""), c.get("message", "")) for c in status.get("details", {}).get("causes", []))
        return int(exc.status), str(status.get("message", "")), causes
    return 201, "", []


@pytest.fixture(scope="module")
def server(control_plane_each: ControlPlane) -> Iterator[tuple[KubeClient, str]]:
    """An admin client on each minor's control plane and a fresh namespace there."""
    for namespace in fresh_namespace(control_plane_each):
        with control_plane_each.admin() as kube:
            yield kube, namespace


@pytest.fixture(scope="module")
def double() -> Iterator[tuple[KubeClient, str]]:
    """The in-memory API server with zkop's CRD and a namespace ``table``."""
    with ApiServer() as api:
        kube = KubeClient(api.api_client(), default_timeout=30)
        try:
            install_crds(kube)
            kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": "table"}})
            yield kube, "table"
        finally:
            kube.close()


@pytest.fixture(scope="module")
def validate_answers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """``zkop validate -o json`` over one file per case: each case's problems as ``field: rule`` lines."""
    directory = tmp_path_factory.mktemp("cases")
    for case in CASES:
        (directory / f"{case.name}.json").write_text(json.dumps(manifest(case)))
    done = subprocess.run([sys.executable, "-m", "zkop", "validate", "-o", "json", "-f", str(directory)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode in (0, 1), done.stderr
    answers: dict[str, list[str]] = {case.name: [] for case in CASES}
    for problem in json.loads(done.stdout)["problems"]:
        name = Path(problem["location"].split(":")[0]).stem
        answers[name].append(f"{problem['field']}: {problem['rule']}")
    return {name: "\n".join(lines) for name, lines in answers.items()}


def test_the_table_is_well_formed() -> None:
    names = [case.name for case in CASES]
    assert len(names) == len(set(names))
    for case in CASES:
        if case.by:
            assert case.server_fragment() and case.zkop_fragment(), case.name
        assert bool(case.why) == (case.by == "zkop"), case.name
    assert {case.by for case in CASES} == {"", "cel", "schema", "zkop"}


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_kube_apiserver_and_the_double_judge_as_the_table_says(case: Case, server: tuple[KubeClient, str],
                                                               double: tuple[KubeClient, str]) -> None:
    kube, namespace = server
    status, message, causes = _post(kube, namespace, manifest(case, namespace))
    if not case.server_rejects:
        assert status == 201, f"kube-apiserver refused {case.name}: {message}"
    else:
        assert status in (400, 422), f"kube-apiserver accepted {case.name}"
        assert case.server_fragment() in message, message
    double_kube, double_namespace = double
    d_status, d_message, d_causes = _post(double_kube, double_namespace, manifest(case, double_namespace))
    assert d_status == status, d_message
    # The same causes; the namespace in them is each server's own.
    assert d_causes == [(f, m.replace(namespace, double_namespace)) for f, m in causes]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_zkop_validate_judges_as_the_table_says(case: Case, validate_answers: dict[str, str]) -> None:
    answer = validate_answers[case.name]
    if case.accepted:
        assert answer == ""
    else:
        assert case.zkop_fragment() in answer, answer


@pytest.mark.parametrize("case", [c for c in CASES if c.by in ("", "cel", "zkop")], ids=case_id)
def test_parse_spec_refuses_what_the_cel_rules_refuse(case: Case) -> None:
    """What the CRD's rules refuse, the operator refuses too (objects stored before the rules existed)."""
    spec = {k: v for k, v in manifest(case)["spec"].items() if v is not None}
    try:
        parse_spec(spec, lookup=lambda ref: b"")
    except (InvalidSpec, RefNotFound) as err:
        assert not case.accepted, f"{case.name}: {err}"
        assert case.zkop_fragment() in str(err)
    else:
        assert case.accepted, f"parse_spec accepted {case.name}"
