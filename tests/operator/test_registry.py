"""The feature registry (:mod:`zkop.operator.registry`): every feature has the one ``setup(context, options)``, the
options enable exactly the features they name, and the API client's pool is sized for their workers. (A new
feature added with one registry line and run on the real planes: ``tests/integration/test_feature_registry.py``.)"""

from __future__ import annotations

import inspect

from zkop.operator.options import OperatorOptions
from zkop.operator.registry import FEATURES, enabled_features
from zkop.operator.run import api_pool_size
from zkop.services.bridge.options import BridgeOptions
from zkop.services.importer.kind.options import KindOptions
from zkop.services.importer.options import ImportOptions


def test_every_registered_feature_has_the_one_setup_signature() -> None:
    for feature in FEATURES:
        parameters = list(inspect.signature(feature.setup()).parameters)
        assert parameters == ["context", "options"], (feature.name, parameters)
    assert [f.name for f in FEATURES] == ["zookeeperconfig", "zookeeperensemble", "service-bridge", "service-import",
                                          "service-imports", "zookeeper-mirror", "zookeeper-config-tree"]


def test_options_enable_features_and_size_the_api_pool() -> None:
    """Only the ZooKeeperConfig feature without options; each flag enables its own; the API pool counts the
    workers of exactly the enabled ones (client-go's 25 at least)."""
    plain = OperatorOptions()
    assert [f.name for f, _ in enabled_features(plain)] == ["zookeeperconfig"]
    everything = OperatorOptions(workers=20, ensembles=True, ensemble_secret_namespace="zkop-system", mirrors=True,
                                 bridge=BridgeOptions(workers=3), importer=ImportOptions(workers=5), config_trees=True,
                                 service_imports=KindOptions(workers=2))
    assert [f.name for f, _ in enabled_features(everything)] == [f.name for f in FEATURES]
    assert api_pool_size(plain) == 25
    assert api_pool_size(everything) == 20 * 4 + 3 + 5 + 2 + 16
