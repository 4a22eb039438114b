"""Helpers shared by tests that use the in-memory API server (or a real cluster).

* :func:`wait_for` polls a predicate instead of sleeping a fixed time (:mod:`zkop_testing.waiting`'s,
  re-exported for these tests);
* :func:`zookeeperconfig_crd` is the ZooKeeperConfig CRD of ``manifests/crd/``
  (group ``platform.example.com``, version ``v1alpha1``, plural
  ``zookeeperconfigs``, short name ``zkc``, namespaced, status subresource).
"""

from __future__ import annotations

from typing import Any

from zkop_testing.crds import load_crd
from zkop_testing.waiting import wait_for

__all__ = ["ZKC_GROUP", "ZKC_PLURAL", "ZKC_VERSION", "wait_for", "zookeeperconfig_crd"]

ZKC_GROUP = "platform.example.com"
ZKC_VERSION = "v1alpha1"
ZKC_PLURAL = "zookeeperconfigs"


def zookeeperconfig_crd() -> dict[str, Any]:
    """A fresh copy of the ZooKeeperConfig CRD manifest, ``manifests/crd/zookeeperconfigs.yaml``."""
    return load_crd()
