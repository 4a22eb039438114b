"""Every feature of ``zkop run``, one line each (cert-manager's ``controller.Register``, controller-runtime's
``SetupWithManager`` calls in ``main.go``).

A feature is a package whose module named here exposes ``setup(context, options) -> parts``
(:class:`~zkop.feature.context.FeatureContext`): it builds its informers, controller, reconciler and writer
(the dry-run seam chosen once from ``context.settings.dry_run``), adds them to the Manager and registers its
resync hook. Its line says where it lives and which options enable it (``None``: disabled). Features are built
in this order, so one may use the parts of one listed before it (:meth:`FeatureContext.part`). A feature's
module is imported only when it is enabled: a process without it neither loads nor exports its metrics.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

from zkop.configtree.options import TreeOptions
from zkop.ensembles.options import EnsembleOptions
from zkop.feature.context import FeatureContext
from zkop.mirror.options import MirrorOptions
from zkop.operator.options import OperatorOptions
from zkop.zkconfig.controller import ZooKeeperConfigOptions

__all__ = ["FEATURES", "Feature", "FeatureSetup", "enabled_features"]


class FeatureSetup(Protocol):
    """A feature module's ``setup``: build the feature from ``context`` and ``options`` and return its parts."""

    def __call__(self, context: FeatureContext, options: Any, /) -> object: ...


@dataclass(frozen=True)
class Feature:
    """One registry line.

    Attributes:
        name: the feature's name (its controller's, in logs and metrics).
        module: the module holding its ``setup(context, options)``.
        options: the feature's options from ``zkop run``'s, or ``None`` when it is not enabled.
        api_workers: threads of its own that may hold an API connection at once (its controllers' workers);
            the API client's pool is sized for the sum (:func:`zkop.operator.run.api_pool_size`).
    """

    name: str
    module: str
    options: Callable[[OperatorOptions], object | None]
    api_workers: Callable[[OperatorOptions], int] = lambda o: o.workers

    def setup(self) -> FeatureSetup:
        """The module's ``setup``, imported now."""
        return cast(FeatureSetup, importlib.import_module(self.module).setup)


FEATURES: tuple[Feature, ...] = (
    Feature("zookeeperconfig", "zkop.zkconfig.controller", lambda o: ZooKeeperConfigOptions(
        max_data_bytes=o.max_data_bytes, registry_root=o.registry_root, tenancy=o.tenancy,
        watch_namespaces=o.ensembles)),
    Feature("zookeeperensemble", "zkop.ensembles.controller",
            lambda o: EnsembleOptions(o.secret_namespace()) if o.ensembles else None),
    Feature("service-bridge", "zkop.services.bridge.builder", lambda o: o.bridge,
            lambda o: o.bridge.workers if o.bridge else 0),
    Feature("service-import", "zkop.services.importer.builder", lambda o: o.importer,
            lambda o: o.importer.workers if o.importer else 0),
    Feature("service-imports", "zkop.services.importer.kind.builder", lambda o: o.service_imports,
            lambda o: o.service_imports.workers if o.service_imports else 0),
    Feature("zookeeper-mirror", "zkop.mirror.builder",
            lambda o: MirrorOptions(o.mirror_max_znodes, o.mirror_max_bytes) if o.mirrors else None),
    Feature("zookeeper-config-tree", "zkop.configtree.builder",
            lambda o: TreeOptions(o.config_tree_max_znodes, o.registry_root) if o.config_trees else None),
)


def enabled_features(options: OperatorOptions,
                     features: Sequence[Feature] = FEATURES) -> list[tuple[Feature, object]]:
    """The features ``options`` enables, in registry order, each with its options."""
    enabled: list[tuple[Feature, object]] = []
    for feature in features:
        feature_options = feature.options(options)
        if feature_options is not None:
            enabled.append((feature, feature_options))
    return enabled
