"""Helpers for the in-memory API server tests (object builders, error capture)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from zkop_testing.apiserver import ApiServer
from zkop_testing.apiserver_fixtures import ZKC_GROUP, ZKC_PLURAL, ZKC_VERSION
from zkop_testing.waiting import EVENTUALLY

from zkop.kube.client import ApiException, KubeClient, resource_path

JSON = dict[str, Any]


def zkc_path(namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
    return resource_path(ZKC_GROUP, ZKC_VERSION, ZKC_PLURAL, namespace, name, subresource)


def zkc(name: str, path: str = "/app/config", data: str = "x", **extra: Any) -> JSON:
    spec: JSON = {"path": path, "data": data}
    metadata: JSON = {"name": name}
    for key in ("labels", "finalizers", "annotations"):
        if key in extra:
            metadata[key] = extra.pop(key)
    spec.update(extra)
    return {"apiVersion": f"{ZKC_GROUP}/{ZKC_VERSION}", "kind": "ZooKeeperConfig", "metadata": metadata, "spec": spec}


def cm(name: str, data: dict[str, str] | None = None, **metadata: Any) -> JSON:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **metadata}, "data": data or {"k": "v"}}


def api_error(call: Callable[[], Any]) -> tuple[int, JSON]:
    """Run ``call``, expect an :class:`ApiException`, return ``(status, decoded Status body)``."""
    with pytest.raises(ApiException) as info:
        call()
    body = json.loads(info.value.body) if info.value.body else {}
    return int(info.value.status), body


class WatchCollector:
    """Runs ``KubeClient.watch`` in a thread and collects its events.

    ``stop()`` cuts the stream with :meth:`ApiServer.drop_watches` (all watches of the server) and joins.
    ``error`` holds what ended the stream abnormally (``None`` for a clean end).
    """

    def __init__(self, kube: KubeClient, path: str, query: Mapping[str, Any] | None = None,
                 read_timeout: float = 30) -> None:
        self.events: list[JSON] = []
        self.error: BaseException | None = None
        self.finished = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(kube, path, dict(query or {}), read_timeout),
                                        daemon=True)
        self._thread.start()

    def _run(self, kube: KubeClient, path: str, query: dict[str, Any], read_timeout: float) -> None:
        try:
            for event in kube.watch(path, query=query, timeout=(5, read_timeout)):
                self.events.append(event)
        except BaseException as exc:  # reported to the test
            self.error = exc
        finally:
            self.finished.set()

    def types(self) -> list[str]:
        return [e["type"] for e in self.events]

    def names(self, *types: str) -> list[tuple[str, str]]:
        return [(e["type"], e["object"]["metadata"].get("name", "")) for e in self.events
                if not types or e["type"] in types]

    def stop(self, server: ApiServer) -> None:
        if not self.finished.is_set():
            server.drop_watches()
        self._thread.join(timeout=EVENTUALLY)
