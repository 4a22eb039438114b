"""The service bridge: publish Kubernetes Services into ZooKeeper for consumers outside the cluster.

Pipeline (external-dns's source → plan → registry → provider):

==================  ==============================================================
module              role
==================  ==============================================================
``options``         :class:`BridgeOptions` and fixed names (annotations, defaults)
``cli``             ``zkop run`` flags → options
``records``         selection rules; Service → format-neutral :class:`~zkop.services.codecs.base.ServiceRecord`
``naming``          layouts (flat / nested key paths) and the collision rule
``formats``         record formats (``json``, ``curator``) over the shared codecs
``plan``            pure planning: per-Service plan, garbage-collection sweep, breaker
``reconciler``      reads cache and ZooKeeper, plans, executes through the adapter
``builder``         informers + the ``service-bridge`` controller for the manager
==================  ==============================================================

Shared with the importer through the services core (:mod:`zkop.services`): the EndpointSlice
view (``zkop.services.endpoints``), the codecs, the full-sync rules, policies and report-once memos.
"""

from typing import TYPE_CHECKING

from zkop.services.bridge.options import BridgeOptions
from zkop.services.lazy import lazy_attributes

if TYPE_CHECKING:
    from zkop.services.bridge.builder import ServiceBridge, build_service_bridge

__all__ = ["BridgeOptions", "ServiceBridge", "build_service_bridge"]

# The builder (and the informer and controller machinery behind it) is imported on first use.
__getattr__ = lazy_attributes("zkop.services.bridge.builder", ("ServiceBridge", "build_service_bridge"), __name__)
