"""One CRD source: ``manifests/crd/``. The copy shipped inside the Python package is it, byte for byte; the Helm
chart links to it."""

from __future__ import annotations

import re
import subprocess
from importlib import resources

from zkop_testing.crds import CRD_FILE
from zkop_testing.kustomize import REPO


def test_package_crd_equals_manifest() -> None:
    packaged = resources.files("zkop.crds").joinpath("zookeeperconfigs.yaml").read_bytes()
    assert packaged == CRD_FILE.read_bytes(), "run: cp manifests/crd/zookeeperconfigs.yaml zkop/crds/"


def test_no_other_copy_of_the_crd_in_the_repository() -> None:
    """No file but the two declares the CRD's ``spec.syncPolicy`` enum (how main's inline copy in the fixtures read)."""
    declaration = re.compile(r'enum.{0,5}\[\s*"?createOrUpdate"?,\s*"?createOnly"?')
    tracked = subprocess.run(["git", "ls-files", "*.yaml", "*.yml", "*.json", "*.py"], cwd=REPO, check=True,
                             capture_output=True, text=True, timeout=30).stdout.split()
    # charts/zkop/files/zookeeperconfigs.yaml is a symlink to manifests/crd's file, not a copy.
    holders = sorted(name for name in tracked if not (REPO / name).is_symlink()
                     and declaration.search((REPO / name).read_text(errors="replace")))
    # A ZooKeeperConfigTree has the same syncPolicy values, declared in its own CRD.
    assert holders == ["manifests/crd/zookeeperconfigs.yaml", "manifests/crd/zookeeperconfigtrees.yaml",
                       "zkop/crds/zookeeperconfigs.yaml", "zkop/crds/zookeeperconfigtrees.yaml"]


def test_package_mirror_crd_equals_manifest() -> None:
    packaged = resources.files("zkop.crds").joinpath("zookeepermirrors.yaml").read_bytes()
    assert packaged == (CRD_FILE.parent / "zookeepermirrors.yaml").read_bytes(), \
        "run: cp manifests/crd/zookeepermirrors.yaml zkop/crds/"


def test_package_config_tree_crd_equals_manifest() -> None:
    packaged = resources.files("zkop.crds").joinpath("zookeeperconfigtrees.yaml").read_bytes()
    assert packaged == (CRD_FILE.parent / "zookeeperconfigtrees.yaml").read_bytes(), \
        "run: cp manifests/crd/zookeeperconfigtrees.yaml zkop/crds/"
