"""The ZooKeeperConfig CRD's OpenAPI v3 schema, for checking manifests without an API server.

What the API server does to a custom resource before zkop ever sees it, as far
as a file can show (defaulting, validation against the structural schema, and the
fields pruning would drop) is :class:`zkop.kube.schema.StructuralSchema`; this
module only finds and loads the ZooKeeperConfig CRD. ``SchemaChecker`` is that
class under the name ``zkop validate`` and ``zkop export`` use.
"""

from __future__ import annotations

import functools
import importlib.resources
from pathlib import Path
from typing import Any

import yaml

from zkop.kube.schema import FieldProblem, StructuralSchema, crd_version_schema
from zkop.zkconfig.spec import VERSION

__all__ = ["REPO_CRD_FILE", "FieldProblem", "SchemaChecker", "crd_schema", "load_crd_schema",
           "load_ensemble_crd_schema", "load_tree_crd_schema"]

CRD_PACKAGE = "zkop.crds"
CRD_FILENAME = "zookeeperconfigs.yaml"
ENSEMBLE_CRD_FILENAME = "zookeeperensembles.yaml"
TREE_CRD_FILENAME = "zookeeperconfigtrees.yaml"
#: The CRD in a source checkout (editable install): ``<repo>/manifests/crd/zookeeperconfigs.yaml``.
REPO_CRD_FILE = Path(__file__).resolve().parents[2] / "manifests" / "crd" / CRD_FILENAME

#: Defaulting, validation and unknown-field detection against one CRD schema (see :mod:`zkop.kube.schema`).
SchemaChecker = StructuralSchema


def crd_schema(crd: Any, version: str = VERSION) -> dict[str, Any]:
    """The ``openAPIV3Schema`` of ``version`` (default ``v1alpha1``) in a parsed CustomResourceDefinition.

    Raises:
        ValueError: not a CRD, or it has no such version with a schema.
    """
    return crd_version_schema(crd, version)


@functools.cache
def _load(path: str | None, filename: str = CRD_FILENAME) -> dict[str, Any]:
    if path is not None:
        return crd_schema(yaml.safe_load(Path(path).read_text(encoding="utf-8")))
    try:
        resource = importlib.resources.files(CRD_PACKAGE).joinpath(filename)
        if resource.is_file():
            return crd_schema(yaml.safe_load(resource.read_text(encoding="utf-8")))
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError):
        pass
    repo_file = REPO_CRD_FILE.parent / filename
    if repo_file.is_file():
        return crd_schema(yaml.safe_load(repo_file.read_text(encoding="utf-8")))
    raise FileNotFoundError(
        f"CRD not found: neither the package resource {CRD_PACKAGE}/{filename} "
        f"nor {repo_file} exists; pass the CRD file explicitly (--crd)"
    )


def load_crd_schema(path: str | None = None) -> dict[str, Any]:
    """The ZooKeeperConfig ``openAPIV3Schema`` (version ``v1alpha1``), from the CRD manifest.

    Looks in order at: ``path`` if given; the package resource
    ``zkop.crds/zookeeperconfigs.yaml`` (``importlib.resources``, for a normal
    install); ``manifests/crd/zookeeperconfigs.yaml`` of the source checkout
    this module lives in (editable install). Cached per ``path``; do not mutate.

    Raises:
        FileNotFoundError: no CRD found (or ``path`` missing).
        ValueError: the file is not a CRD with a ``v1alpha1`` schema.
        yaml.YAMLError: the file is not YAML.
    """
    return _load(path)


def load_ensemble_crd_schema() -> dict[str, Any]:
    """The ZooKeeperEnsemble ``openAPIV3Schema`` (``zkop.crds/zookeeperensembles.yaml``, else the checkout's
    ``manifests/crd/zookeeperensembles.yaml``), as :func:`load_crd_schema` finds the ZooKeeperConfig one.

    Raises:
        FileNotFoundError: no CRD found.
    """
    return _load(None, ENSEMBLE_CRD_FILENAME)


def load_tree_crd_schema() -> dict[str, Any]:
    """The ZooKeeperConfigTree ``openAPIV3Schema`` (``zkop.crds/zookeeperconfigtrees.yaml``, else the checkout's
    ``manifests/crd/zookeeperconfigtrees.yaml``), found as :func:`load_ensemble_crd_schema` finds its CRD.

    Raises:
        FileNotFoundError: no CRD found.
    """
    return _load(None, TREE_CRD_FILENAME)
