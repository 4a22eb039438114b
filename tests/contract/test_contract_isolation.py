"""The contract suite can run on a cluster where zkop runs: zkop neither reconciles nor may touch its objects."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from contract_support import GROUP, contract_crd
from zkop_testing.apiserver_fixtures import zookeeperconfig_crd

from zkop.zkconfig.spec import GROUP as ZKOP_GROUP

pytestmark = pytest.mark.contract

RBAC = Path(__file__).resolve().parents[2] / "manifests" / "rbac"


def test_the_suite_serves_zkops_schema_under_a_group_zkop_does_not_watch() -> None:
    crd = contract_crd()
    assert GROUP != ZKOP_GROUP and crd["spec"]["group"] == GROUP
    assert crd["spec"]["versions"] == zookeeperconfig_crd()["spec"]["versions"]


def test_zkops_rbac_grants_nothing_in_the_suite_group() -> None:
    groups = {group for path in RBAC.glob("*.yaml") for doc in yaml.safe_load_all(path.read_text())
              if doc for rule in doc.get("rules") or [] for group in rule.get("apiGroups") or []}
    assert ZKOP_GROUP in groups and GROUP not in groups and "*" not in groups
