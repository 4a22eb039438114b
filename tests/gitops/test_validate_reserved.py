"""``zkop validate`` refuses a ZooKeeperConfig whose path lies under a reserved root, as the operator's admission gate
does (``zkop.feature.gate``): zkop's ownership registry and start-up probe root (``--registry-root``), and
``/zookeeper``."""

from __future__ import annotations

from pathlib import Path

import pytest
from gitops_support import write_manifests, zkc

from zkop.cmd.main import main
from zkop.gitops.manifests import load_manifests
from zkop.gitops.schema import SchemaChecker, load_crd_schema
from zkop.gitops.validate import validate_manifests


@pytest.mark.parametrize(("registry_root", "path", "rule"), [
    ("/zkop/owners", "/zkop/owners/config/payments",
     "path /zkop/owners/config/payments is under /zkop/owners, reserved for zkop's ownership registry: it is never "
     "written for a namespaced object"),
    ("/zkop/owners", "/zkop/owners", "path /zkop/owners is under /zkop/owners, reserved for zkop's ownership "
                                     "registry: it is never written for a namespaced object"),
    ("/zkop/owners", "/zkop/probe/x", "path /zkop/probe/x is under /zkop/probe, reserved for zkop's start-up probe: "
                                      "it is never written for a namespaced object"),
    ("/ops/zkop/owners", "/ops/zkop/owners/a", "path /ops/zkop/owners/a is under /ops/zkop/owners, reserved for "
                                               "zkop's ownership registry: it is never written for a namespaced "
                                               "object"),
])
def test_a_path_under_a_reserved_root_is_an_error(tmp_path: Path, registry_root: str, path: str, rule: str) -> None:
    manifest = write_manifests(tmp_path / "m.yaml", zkc(path, "x", stringData="1"))
    result = validate_manifests(load_manifests([str(manifest)]), SchemaChecker(load_crd_schema()),
                                registry_root=registry_root)
    assert [(p.field, p.rule) for p in result.errors] == [("spec.path", rule)]


@pytest.mark.parametrize("path", ["/zkop", "/zkop/ownersx", "/config/zkop/owners", "/kubernetes/services/a-b"])
def test_a_path_beside_a_reserved_root_passes(tmp_path: Path, path: str) -> None:
    """Whole segments: ``/zkop/ownersx`` is not under ``/zkop/owners``; the service bridge's root is reserved only
    while the operator runs the bridge (validate cannot know), so it passes here."""
    manifest = write_manifests(tmp_path / "m.yaml", zkc(path, "x", stringData="1"))
    result = validate_manifests(load_manifests([str(manifest)]), SchemaChecker(load_crd_schema()))
    assert result.errors == []


def test_the_command_takes_the_registry_root(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = write_manifests(tmp_path / "m.yaml", zkc("/ops/owners/a", "x", stringData="1"))
    assert main(["validate", "-f", str(manifest)]) == 0
    assert main(["validate", "-f", str(manifest), "--registry-root", "/ops/owners"]) == 1
    assert "reserved for zkop's ownership registry" in capsys.readouterr().out
