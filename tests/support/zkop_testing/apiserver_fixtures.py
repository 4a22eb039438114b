"""Helpers shared by tests that use the in-memory API server (or a real cluster).

* :func:`wait_for` polls a predicate instead of sleeping a fixed time;
* :func:`zookeeperconfig_crd` is the ZooKeeperConfig CRD of ``manifests/crd/``
  (group ``platform.example.com``, version ``v1alpha1``, plural
  ``zookeeperconfigs``, short name ``zkc``, namespaced, status subresource).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from zkop_testing.crds import load_crd

__all__ = ["ZKC_GROUP", "ZKC_PLURAL", "ZKC_VERSION", "wait_for", "zookeeperconfig_crd"]

T = TypeVar("T")

ZKC_GROUP = "platform.example.com"
ZKC_VERSION = "v1alpha1"
ZKC_PLURAL = "zookeeperconfigs"


def zookeeperconfig_crd() -> dict[str, Any]:
    """A fresh copy of the ZooKeeperConfig CRD manifest, ``manifests/crd/zookeeperconfigs.yaml``."""
    return load_crd()


def wait_for(predicate: Callable[[], T], timeout: float = 5.0, interval: float = 0.01,
             message: str = "condition") -> T:
    """Poll ``predicate`` until it returns a truthy value, and return that value.

    Args:
        predicate: called repeatedly; exceptions propagate.
        timeout: seconds before giving up.
        interval: seconds between polls (grows up to 0.1 s).
        message: describes the condition in the error.

    Raises:
        TimeoutError: the predicate stayed falsy for ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    delay = interval
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
