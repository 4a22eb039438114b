"""Fixtures for the install-manifest tests: rendered kustomizations and zkop's metric names.

- ``rendered_default``: ``manifests/default`` rendered (no components).
- ``rendered_full``: ``manifests/default`` with both components (service bridge, Prometheus),
  through a throw-away overlay, as a user would enable them.
- ``zkop_metric_names``: every sample name ``zkop.runtime.metrics`` registers
  (``x_total``, ``x_bucket``, ... included).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from zkop_testing.kustomize import REPO, Obj, render

COMPONENTS = ("service-bridge", "prometheus")


def write_overlay(directory: Path, components: tuple[str, ...] = COMPONENTS) -> Path:
    """Write a kustomization in ``directory`` that enables ``components`` on ``manifests/default``."""

    def rel(path: Path) -> str:
        return os.path.relpath(path, directory)

    lines = ["apiVersion: kustomize.config.k8s.io/v1beta1", "kind: Kustomization", "resources:",
             f"  - {rel(REPO / 'manifests' / 'default')}", "components:"]
    lines += [f"  - {rel(REPO / 'manifests' / 'components' / c)}" for c in components]
    (directory / "kustomization.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return directory


@pytest.fixture(scope="session")
def full_overlay(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A kustomization directory: the default install plus every component."""
    return write_overlay(tmp_path_factory.mktemp("overlay"))


@pytest.fixture(scope="session")
def rendered_default() -> list[Obj]:
    """``manifests/default`` rendered."""
    return render(REPO / "manifests" / "default")


@pytest.fixture(scope="session")
def rendered_full(full_overlay: Path) -> list[Obj]:
    """The default install with the service-bridge and prometheus components."""
    return render(full_overlay)


@pytest.fixture(scope="session")
def zkop_metric_names() -> frozenset[str]:
    """Every sample name zkop registers on the default registry: every module of the package is imported for its
    registrations (a module only some other test would import must not decide the answer)."""
    import importlib
    import pkgutil

    from prometheus_client import REGISTRY

    import zkop

    for module in pkgutil.walk_packages(zkop.__path__, "zkop."):
        if module.name != "zkop.__main__":
            importlib.import_module(module.name)
    from zkop.runtime.cache import Indexer
    from zkop.zkconfig.status_metrics import ZooKeeperConfigStatusCollector

    # Registered by the manager at start-up, computed from the cache at scrape time.
    scrape_time = {family.name for family in ZooKeeperConfigStatusCollector(Indexer()).collect()}
    names = frozenset(REGISTRY._names_to_collectors) | scrape_time
    assert "controller_runtime_reconcile_total" in names
    return names
