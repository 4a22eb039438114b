"""Scenario ``memory``: RSS of ``zkop run`` with N CRs (and M Services) cached."""

from __future__ import annotations

from .harness import Harness
from .params import JSON


def memory(h: Harness, with_bridge: bool) -> JSON:
    p = h.p
    cold = h.results.pop("_memory_after_cold_sync", {})
    bridge = h.results.pop("_memory_with_bridge", {})
    current = bridge if with_bridge else cold
    return {
        "params": {"n": p.n, "m": p.m if with_bridge else 0, "service_bridge": with_bridge,
                   "source": "/proc/<pid>/status of zkop run"},
        "rss_mb": current.get("VmRSS"),
        "peak_rss_mb": current.get("VmHWM"),
        "rss_mb_zookeeperconfigs_only": cold.get("VmRSS"),
    }
