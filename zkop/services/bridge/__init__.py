"""The service bridge: publish Kubernetes Services into ZooKeeper for consumers outside the cluster.

external-dns's source → plan → registry → provider, one module each: ``options`` and ``cli``
(flags → :class:`BridgeOptions`), ``records`` (selection; Service →
:class:`~zkop.services.codecs.base.ServiceRecord`), ``naming`` (layouts, the collision rule),
``formats`` (over the shared codecs), ``plan`` (pure), ``reconciler`` (gather, plan, apply through
the adapter), ``builder`` (informers and the ``service-bridge`` controller). The EndpointSlice
view, the codecs, the full-sync rules, policies and report-once memos are shared with the importer
(:mod:`zkop.services`).
"""

from typing import TYPE_CHECKING

from zkop.services.bridge.options import BridgeOptions
from zkop.services.lazy import lazy_attributes

if TYPE_CHECKING:
    from zkop.services.bridge.builder import ServiceBridge, build_service_bridge

__all__ = ["BridgeOptions", "ServiceBridge", "build_service_bridge"]

# The builder (and the informer and controller machinery behind it) is imported on first use.
__getattr__ = lazy_attributes("zkop.services.bridge.builder", ("ServiceBridge", "build_service_bridge"), __name__)
