"""The service bridge: publish Kubernetes Services into ZooKeeper for consumers outside the cluster.

Pipeline (external-dns's source → plan → registry → provider):

==================  ==============================================================
module              role
==================  ==============================================================
``options``         :class:`BridgeOptions` and fixed names (annotations, defaults)
``cli``             ``zkop run`` flags → options
``records``         selection rules; Service → format-neutral :class:`ServiceRecord`
``endpoints``       ready EndpointSlice addresses and their debounce
``naming``          layouts (flat / nested key paths) and the collision rule
``formats``         record formats (``json``, ``curator``) and owner stamps
``plan``            pure planning: per-Service plan, garbage-collection sweep, breaker
``reconciler``      reads cache and ZooKeeper, plans, executes through the adapter
``builder``         informers + the ``service-bridge`` controller for the manager
==================  ==============================================================
"""

from typing import TYPE_CHECKING, Any

from zkop.services.bridge.options import BridgeOptions

if TYPE_CHECKING:
    from zkop.services.bridge.builder import ServiceBridge, build_service_bridge

__all__ = ["BridgeOptions", "ServiceBridge", "build_service_bridge"]


def __getattr__(name: str) -> Any:
    # The builder (and the informer and controller machinery behind it) is imported on first use,
    # so a process that only needs the options (``zkop run`` without this feature) starts faster.
    if name in ("ServiceBridge", "build_service_bridge"):
        from zkop.services.bridge import builder

        return getattr(builder, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
