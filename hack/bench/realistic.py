"""Scenario ``realistic``: zkop's RSS and start-up LIST load in a cluster seeded like a real one.

Its own API server, seeded by :func:`zkop_testing.apiserver_realistic.seed` (``kube-root-ca.crt`` in
every namespace, ``realistic_secrets`` Helm release Secrets of ``realistic_secret_kb`` KB,
``managedFields`` with three managers on every object, also on what zkop writes later), holds N
ZooKeeperConfigs (``realistic_refs`` of them reading ``spec.dataFrom`` from a ConfigMap or Secret of
their own) and M Services. ``zkop run --service-bridge`` starts; once every ZooKeeperConfig is
``Synced`` at its generation and the controllers are quiet, the scenario reports:

* ``rss_mb`` / ``peak_rss_mb`` -- ``VmRSS`` / ``VmHWM`` of the zkop process;
* ``list`` -- per resource, the LIST responses zkop received (requests, objects, bytes of JSON),
  counted by wrapping the API server's response writer for zkop's ``User-Agent``; ``get`` the
  same for single-object GETs;
* ``configmaps_secrets_listed_unreferenced`` -- Secrets and ConfigMaps zkop received in a LIST
  that no ZooKeeperConfig references (the issue's requirement: 0).

Not part of the default run (``python -m hack.bench --scenario realistic``).
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from collections import Counter
from typing import Any

from zkop_testing.apiserver import ApiServer
from zkop_testing.apiserver_realistic import managed_fields_for
from zkop_testing.crds import install_crds
from zkop_testing.operator import OperatorProcess

from zkop.kube.client import KubeClient
from zkop.zkconfig.spec import GROUP, PLURAL, VERSION

from .harness import Harness
from .measure import proc_memory_mb, zk_client
from .params import JSON, UNTHROTTLED, cr_manifest, svc_manifest

__all__ = ["ListLoad", "realistic"]

log = logging.getLogger("bench")
CHROOT = "/realistic"
NAMESPACE = "default"
SERVICE_NAMESPACE = "bench"
#: zkop's User-Agent prefix (``zkop-operator/<version>``).
ZKOP_AGENT = "zkop-operator/"


class ListLoad:
    """Counts the LIST and GET responses the API server writes to zkop (by ``User-Agent``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lists: dict[str, Counter[str]] = {}
        self.gets: dict[str, Counter[str]] = {}
        self.listed: dict[str, set[str]] = {"configmaps": set(), "secrets": set()}
        self._original: Any = None

    def install(self) -> None:
        """Wrap ``ApiServer._send``, the one static method every response goes through."""
        original = self._original = ApiServer._send

        def counting(handler: Any, code: int, body: Any, headers: Any = None,
                     content_type: str = "application/json") -> None:
            agent = str(handler.headers.get("User-Agent") or "")
            if handler.command == "GET" and code == 200 and agent.startswith(ZKOP_AGENT) and isinstance(body, dict):
                self.record(str(handler.path), body)
            original(handler, code, body, headers, content_type)

        ApiServer._send = staticmethod(counting)  # type: ignore[method-assign]

    def uninstall(self) -> None:
        if self._original is not None:
            ApiServer._send = staticmethod(self._original)  # type: ignore[method-assign]

    def record(self, path: str, body: JSON) -> None:
        size = len(json.dumps(body, separators=(",", ":")))
        route = path.split("?", 1)[0].rstrip("/").split("/")
        with self.lock:
            if isinstance(body.get("items"), list):
                entry = self.lists.setdefault(route[-1], Counter())
                entry["requests"] += 1
                entry["objects"] += len(body["items"])
                entry["bytes"] += size
                for item in body["items"] if route[-1] in self.listed else ():
                    meta = item.get("metadata") or {}
                    self.listed[route[-1]].add(f"{meta.get('namespace')}/{meta.get('name')}")
            else:
                entry = self.gets.setdefault(route[-2] if len(route) > 1 else "?", Counter())
                entry["requests"] += 1
                entry["bytes"] += size

    def report(self, referenced: set[str]) -> JSON:
        with self.lock:
            listed = self.listed["configmaps"] | self.listed["secrets"]
            return {
                "list": {k: dict(v) for k, v in sorted(self.lists.items())},
                "list_total": {"objects": sum(v["objects"] for v in self.lists.values()),
                               "mb": round(sum(v["bytes"] for v in self.lists.values()) / 2**20, 2)},
                "get": {k: dict(v) for k, v in sorted(self.gets.items())},
                "configmaps_secrets_listed_unreferenced": len(listed - referenced),
            }


def _populate(api: ApiServer, n: int, m: int, refs: int, managed_fields: bool = True) -> set[str]:
    """N ZooKeeperConfigs (the first ``refs`` reading a ConfigMap/Secret), M Services; the referenced keys.

    With ``managed_fields`` each is created with three managers' entries, as :func:`seed` does
    (the API server adds its own for the create, and zkop's writes add theirs)."""
    store = api.store

    def managed(body: JSON) -> JSON:
        if managed_fields:
            body["metadata"]["managedFields"] = managed_fields_for(body)
        return body

    ns_rt, svc_rt = store.resolve("", "v1", "namespaces"), store.resolve("", "v1", "services")
    cm_rt, secret_rt = store.resolve("", "v1", "configmaps"), store.resolve("", "v1", "secrets")
    zkc_rt = store.resolve(GROUP, VERSION, PLURAL)
    assert ns_rt and svc_rt and cm_rt and secret_rt and zkc_rt
    store.create(ns_rt, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SERVICE_NAMESPACE}}, {})
    referenced: set[str] = set()
    for i in range(n):
        obj = cr_manifest(i)
        if i < refs:
            name, secret = f"ref-{i:05d}", bool(i % 2)
            value = f"value-{i}".encode()
            store.create(secret_rt if secret else cm_rt, NAMESPACE, managed({
                "apiVersion": "v1", "kind": "Secret" if secret else "ConfigMap",
                "metadata": {"name": name, "namespace": NAMESPACE},
                "data": {"k": base64.b64encode(value).decode() if secret else value.decode()}}), {})
            referenced.add(f"{NAMESPACE}/{name}")
            del obj["spec"]["data"]
            obj["spec"]["dataFrom"] = {"secretKeyRef" if secret else "configMapKeyRef": {"name": name, "key": "k"}}
        store.create(zkc_rt, NAMESPACE, managed(obj), {})
    for i in range(m):
        store.create(svc_rt, SERVICE_NAMESPACE, managed(svc_manifest(i)), {})
    return referenced


def realistic(h: Harness) -> JSON:
    """Run the scenario (see the module docstring) against ``h``'s ZooKeeper."""
    p = h.p
    params: JSON = {"n": p.n, "m": p.m, "refs": min(p.realistic_refs, p.n), "secrets": p.realistic_secrets,
                    "secret_kb": p.realistic_secret_kb, "namespaces": p.realistic_namespaces,
                    "managed_fields": p.realistic_managed_fields, "service_bridge": True, "workers": p.workers}
    with zk_client(h.server) as zk:
        zk.ensure_path(CHROOT)
    load = ListLoad()
    load.install()
    try:
        with ApiServer() as api:
            client = KubeClient(api.api_client())
            try:
                install_crds(client)
            finally:
                client.close()
            started = time.monotonic()
            seeded = h.seed_cluster(api)
            referenced = _populate(api, p.n, p.m, params["refs"], p.realistic_managed_fields)
            log.info("realistic: seeded in %.1f s", time.monotonic() - started)
            kubeconfig = str(api.write_kubeconfig(h.workdir / "kubeconfig-realistic"))
            operator = OperatorProcess(kubeconfig, f"{h.server.hosts}{CHROOT}", [
                *UNTHROTTLED, "--workers", str(p.workers), "--service-bridge", "--service-bridge-workers",
                str(p.workers), "--service-bridge-max-deletes", "0"], log_path=str(h.workdir / "zkop-realistic.log"))
            h.operators.append(operator)
            started = time.monotonic()
            operator.start(wait_ready=False)
            assert operator.proc is not None
            try:
                deadline = started + 120 + p.n * 0.05
                while (synced := h.states(api).get("Synced", 0)) < p.n:
                    if operator.proc.poll() is not None:
                        raise RuntimeError(f"zkop exited:\n{operator.log_tail()}")
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"realistic: {synced} of {p.n} synced\n{operator.log_tail(20)}")
                    time.sleep(0.2)
                synced_seconds = time.monotonic() - started
                h.wait_settled(operator, min_reconciles=p.n, timeout=60 + p.n * 0.01, api=api)
                memory = proc_memory_mb(operator.proc.pid)
            finally:
                h.stop_operator(operator)
    finally:
        load.uninstall()
    return {
        "params": params,
        "seeded": {"namespaces": len(seeded.namespaces), "root_ca_configmaps": seeded.configmaps,
                   "helm_secrets": seeded.secrets, "helm_secret_mb": round(seeded.secret_bytes / 2**20, 1)},
        "seconds_to_synced": round(synced_seconds, 1),
        "rss_mb": memory.get("VmRSS"),
        "peak_rss_mb": memory.get("VmHWM"),
        **load.report(referenced),
    }
