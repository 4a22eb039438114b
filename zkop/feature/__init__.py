"""The one way a feature (a controller with its informers) is wired into ``zkop run``.

A feature's package exposes ``setup(context, options) -> parts`` (:class:`~zkop.feature.context.FeatureContext`);
:mod:`zkop.operator.registry` lists every feature once, and :class:`zkop.operator.run.Operator` builds every
enabled one from it. The ZooKeeper session runnable and the resync-on-reconnect rule every feature shares
live here too (:mod:`zkop.feature.session`).
"""
