"""The CRD shipped inside the Python package is the one in manifests/crd/, byte for byte."""

from __future__ import annotations

from importlib import resources

from zkop_testing.crds import CRD_FILE


def test_package_crd_equals_manifest() -> None:
    packaged = resources.files("zkop.crds").joinpath("zookeeperconfigs.yaml").read_bytes()
    assert packaged == CRD_FILE.read_bytes(), "run: cp manifests/crd/zookeeperconfigs.yaml zkop/crds/"
