"""Helpers shared by tests that use the in-memory API server (or a real cluster).

* :func:`wait_for` polls a predicate instead of sleeping a fixed time;
* :func:`zookeeperconfig_crd` is an inline copy of the ZooKeeperConfig CRD
  (group ``platform.example.com``, version ``v1alpha1``, plural
  ``zookeeperconfigs``, short name ``zkc``, namespaced, status subresource);
* :func:`crd_from_manifest` loads ``manifests/crd/zookeeperconfigs.yaml`` when present.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml

__all__ = ["ZKC_GROUP", "ZKC_PLURAL", "ZKC_VERSION", "crd_from_manifest", "wait_for", "zookeeperconfig_crd"]

T = TypeVar("T")

ZKC_GROUP = "platform.example.com"
ZKC_VERSION = "v1alpha1"
ZKC_PLURAL = "zookeeperconfigs"

_CONDITION = {
    "type": "object",
    "required": ["type", "status"],
    "properties": {
        "type": {"type": "string"},
        "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
        "reason": {"type": "string"},
        "message": {"type": "string"},
        "observedGeneration": {"type": "integer", "format": "int64"},
        "lastTransitionTime": {"type": "string", "format": "date-time"},
    },
}

_ZKC_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{ZKC_PLURAL}.{ZKC_GROUP}"},
    "spec": {
        "group": ZKC_GROUP,
        "scope": "Namespaced",
        "names": {"plural": ZKC_PLURAL, "singular": "zookeeperconfig", "kind": "ZooKeeperConfig",
                  "listKind": "ZooKeeperConfigList", "shortNames": ["zkc"]},
        "versions": [{
            "name": ZKC_VERSION,
            "served": True,
            "storage": True,
            "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {
                        "type": "object",
                        "required": ["path", "data"],
                        "properties": {
                            "path": {"type": "string"},
                            "data": {"type": "string"},
                            "encoding": {"type": "string", "enum": ["utf-8", "binary"], "default": "utf-8"},
                            "syncPolicy": {"type": "string", "enum": ["createOrUpdate", "createOnly"],
                                           "default": "createOrUpdate"},
                        },
                    },
                    "status": {
                        "type": "object",
                        "properties": {
                            "observedGeneration": {"type": "integer", "format": "int64"},
                            "conditions": {"type": "array", "items": _CONDITION},
                        },
                    },
                },
            }},
        }],
    },
}


def zookeeperconfig_crd() -> dict[str, Any]:
    """A fresh copy of the inline ZooKeeperConfig CRD manifest."""
    return copy.deepcopy(_ZKC_CRD)


def crd_from_manifest(root: Path | None = None) -> dict[str, Any] | None:
    """The CRD in ``manifests/crd/zookeeperconfigs.yaml`` under ``root`` (repository root), or ``None``."""
    base = root or Path(__file__).resolve().parents[3]
    path = base / "manifests" / "crd" / "zookeeperconfigs.yaml"
    if not path.is_file():
        return None
    for doc in yaml.safe_load_all(path.read_text()):
        if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
            return doc
    return None


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
