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

On the real control plane (:attr:`Params.control_plane` ``"real"``) the API server is a fresh etcd +
kube-apiserver + kube-controller-manager seeded through kube-apiserver by :mod:`hack.bench.realseed`
(server-side apply, so every ``managedFields`` entry is the real field manager's; the ``kube-root-ca.crt``
ConfigMaps are kube-controller-manager's own), and the LIST load is read from what the plane records
(:func:`audit_load`); ``cluster`` adds what zkop's start cost kube-apiserver and etcd.

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
from urllib.parse import parse_qsl, urlsplit

from zkop_testing.apiserver import ApiServer
from zkop_testing.apiserver_realistic import SeedReport, managed_fields_for
from zkop_testing.crds import install_crds
from zkop_testing.operator import OperatorProcess
from zkop_testing.waiting import wait_for

from zkop.kube.client import KubeClient, resource_path
from zkop.zkconfig.spec import GROUP, PLURAL, VERSION

from .harness import Harness
from .measure import proc_memory_mb, zk_client
from .params import JSON, UNTHROTTLED, cr_manifest, cr_name, svc_manifest
from .realplane import RealApi, cost_delta
from .realseed import REAL_SEEDING, put_many, seed_real

__all__ = ["ListLoad", "audit_load", "realistic"]

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


def _objects(n: int, refs: int) -> tuple[list[tuple[str, JSON]], list[JSON], set[str]]:
    """The scenario's own objects: ``(plural, body)`` of the ConfigMaps/Secrets the first ``refs``
    ZooKeeperConfigs read, the N ZooKeeperConfigs, and the referenced ``namespace/name`` keys."""
    sources: list[tuple[str, JSON]] = []
    configs: list[JSON] = []
    referenced: set[str] = set()
    for i in range(n):
        obj = cr_manifest(i)
        if i < refs:
            name, secret = f"ref-{i:05d}", bool(i % 2)
            value = f"value-{i}".encode()
            sources.append(("secrets" if secret else "configmaps", {
                "apiVersion": "v1", "kind": "Secret" if secret else "ConfigMap",
                "metadata": {"name": name, "namespace": NAMESPACE},
                "data": {"k": base64.b64encode(value).decode() if secret else value.decode()}}))
            referenced.add(f"{NAMESPACE}/{name}")
            del obj["spec"]["data"]
            obj["spec"]["dataFrom"] = {"secretKeyRef" if secret else "configMapKeyRef": {"name": name, "key": "k"}}
        configs.append(obj)
    return sources, configs, referenced


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
    zkc_rt = store.resolve(GROUP, VERSION, PLURAL)
    assert ns_rt and svc_rt and zkc_rt
    store.create(ns_rt, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SERVICE_NAMESPACE}}, {})
    sources, configs, referenced = _objects(n, refs)
    for plural, body in sources:
        rt = store.resolve("", "v1", plural)
        assert rt is not None
        store.create(rt, NAMESPACE, managed(body), {})
    for obj in configs:
        store.create(zkc_rt, NAMESPACE, managed(obj), {})
    for i in range(m):
        store.create(svc_rt, SERVICE_NAMESPACE, managed(svc_manifest(i)), {})
    return referenced


def _populate_real(api: RealApi, n: int, m: int, refs: int, managed_fields: bool = True) -> set[str]:
    """:func:`_populate` on the real plane: every object server-side applied by the GitOps tool's field
    manager (:func:`~.realseed.put_many`; plain creates without ``managed_fields``); the referenced keys."""
    store = api.store
    put_many(api, store.resolve("", "v1", "namespaces"), None, [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SERVICE_NAMESPACE}}],
        managed_fields=managed_fields)
    sources, configs, referenced = _objects(n, refs)
    for plural in ("configmaps", "secrets"):
        put_many(api, store.resolve("", "v1", plural), NAMESPACE, [b for k, b in sources if k == plural],
                 managed_fields=managed_fields)
    put_many(api, store.resolve(GROUP, VERSION, PLURAL), NAMESPACE, configs, managed_fields=managed_fields)
    put_many(api, store.resolve("", "v1", "services"), SERVICE_NAMESPACE, (svc_manifest(i) for i in range(m)),
             managed_fields=managed_fields)
    return referenced


def _run_zkop(h: Harness, api: ApiServer | RealApi, kubeconfig: str) -> tuple[float, dict[str, float]]:
    """``zkop run --service-bridge`` on ``api`` until every ZooKeeperConfig is Synced and the controllers are
    quiet; seconds to all Synced and its ``VmRSS``/``VmHWM`` then (zkop stopped afterwards)."""
    p = h.p
    # zkop authenticates as production installations do: a value from a Secret is written readable by zkop's own
    # identity only, which needs one (docs/operations.md, "Values from a Secret").
    auth = h.workdir / "zk-auth"
    auth.write_text("zkop-bench:zkop-bench\n", encoding="utf-8")
    operator = OperatorProcess(kubeconfig, f"{h.server.hosts}{CHROOT}", [
        *UNTHROTTLED, "--workers", str(p.workers), "--service-bridge", "--service-bridge-workers",
        str(p.workers), "--service-bridge-max-deletes", "0", "--zk-auth-file", str(auth)],
        log_path=str(h.workdir / "zkop-realistic.log"))
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
        return synced_seconds, proc_memory_mb(operator.proc.pid)
    finally:
        h.stop_operator(operator)


def _seeded(report: SeedReport) -> JSON:
    return {"namespaces": len(report.namespaces), "root_ca_configmaps": report.configmaps,
            "helm_secrets": report.secrets, "helm_secret_mb": round(report.secret_bytes / 2**20, 1)}


def realistic(h: Harness) -> JSON:
    """Run the scenario (see the module docstring) against ``h``'s ZooKeeper, on the in-memory API server or
    (:attr:`Params.control_plane` ``"real"``) on a fresh real control plane."""
    p = h.p
    params: JSON = {"n": p.n, "m": p.m, "refs": min(p.realistic_refs, p.n), "secrets": p.realistic_secrets,
                    "secret_kb": p.realistic_secret_kb, "namespaces": p.realistic_namespaces,
                    "managed_fields": p.realistic_managed_fields, "service_bridge": True, "workers": p.workers,
                    "control_plane": p.control_plane}
    with zk_client(h.server) as zk:
        zk.ensure_path(CHROOT)
    if p.control_plane == "real":
        return {"params": params, **_realistic_real(h, params["refs"])}
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
            synced_seconds, memory = _run_zkop(h, api, kubeconfig)
    finally:
        load.uninstall()
    return {
        "params": params,
        "seeded": _seeded(seeded),
        "seconds_to_synced": round(synced_seconds, 1),
        "rss_mb": memory.get("VmRSS"),
        "peak_rss_mb": memory.get("VmHWM"),
        **load.report(referenced),
    }


def _realistic_real(h: Harness, refs: int) -> JSON:
    """The scenario on a fresh real control plane (:mod:`hack.bench.realseed` seeds it); what it found."""
    p = h.p
    api = RealApi(p.k8s_minor, h.workdir / "plane-realistic")
    try:
        started = time.monotonic()
        seeded = seed_real(api, namespaces=p.realistic_namespaces, helm_secrets=p.realistic_secrets,
                           secret_kb=p.realistic_secret_kb, managed_fields=p.realistic_managed_fields)
        referenced = _populate_real(api, p.n, p.m, refs, p.realistic_managed_fields)
        wait_for(lambda: sum(api.states().values()) == p.n, timeout=h.scaled_timeout(60, 0.01),
                 message=f"{p.n} ZooKeeperConfigs in the bench's watch")
        seed_seconds = time.monotonic() - started
        log.info("realistic: control plane seeded in %.1f s", seed_seconds)
        kubeconfig = str(api.write_kubeconfig(h.workdir / "kubeconfig-realistic"))
        api.clear_request_log()
        sizes = api.response_bytes()
        cost = api.cost()
        synced_seconds, memory = _run_zkop(h, api, kubeconfig)
        sizes = api.response_bytes() - sizes
        cluster = cost_delta(cost, api.cost(), p.n)
        load = audit_load(api, referenced, sizes)
        sample = api.kube.request("GET", resource_path(GROUP, VERSION, PLURAL, NAMESPACE, cr_name(0)))
    finally:
        api.stop()
    return {
        "seeded": {**_seeded(seeded), "seconds": round(seed_seconds, 1),
                   "how": REAL_SEEDING if p.realistic_managed_fields else "plain creates"},
        "seconds_to_synced": round(synced_seconds, 1),
        "rss_mb": memory.get("VmRSS"),
        "peak_rss_mb": memory.get("VmHWM"),
        "cluster": cluster,
        # The real field manager's record of the first ZooKeeperConfig once zkop has written it.
        "managed_fields_sample": [{k: entry.get(k) for k in ("manager", "operation", "subresource")}
                                  for entry in sample["metadata"].get("managedFields") or []],
        **load,
    }


#: Query parameters of a paginated LIST page that :func:`audit_load` drops to list the same collection at once.
_PAGING = frozenset({"limit", "continue", "resourceVersion", "resourceVersionMatch", "allowWatchBookmarks",
                     "timeoutSeconds", "sendInitialEvents"})


def audit_load(api: RealApi, referenced: set[str], sizes: Counter[tuple[str, str]]) -> JSON:
    """:meth:`ListLoad.report` on the real plane, from what it records itself.

    Requests: zkop's (``User-Agent`` :data:`ZKOP_AGENT`) successful ``list`` and ``get`` requests in the API
    server's audit log (subresources left out). Bytes: ``sizes``, kube-apiserver's own response sizes over
    zkop's run (``apiserver_response_sizes_sum``, :meth:`RealApi.response_bytes`; the plane's and the bench's
    requests in that window are watches, which it does not count). Objects, and which Secrets and ConfigMaps
    were listed: each LIST zkop started (its first page) is listed again by the bench, unpaginated, with the
    same namespace and selectors, after zkop stopped.
    """
    lists: dict[str, Counter[str]] = {}
    gets: dict[str, Counter[str]] = {}
    first_pages: list[tuple[str, str]] = []
    for event in api.plane.audit_events():
        ref = event.get("objectRef") or {}
        verb = event.get("verb")
        if (event.get("stage") != "ResponseComplete" or verb not in ("list", "get") or ref.get("subresource")
                or not str(event.get("userAgent", "")).startswith(ZKOP_AGENT)
                or (event.get("responseStatus") or {}).get("code") != 200):
            continue
        resource = str(ref.get("resource", ""))
        (lists if verb == "list" else gets).setdefault(resource, Counter())["requests"] += 1
        uri = str(event.get("requestURI", ""))
        if verb == "list" and "continue=" not in uri:
            first_pages.append((resource, uri))
    listed: dict[str, set[str]] = {"configmaps": set(), "secrets": set()}
    for resource, uri in first_pages:
        parts = urlsplit(uri)
        query = {k: v for k, v in parse_qsl(parts.query) if k not in _PAGING}
        items = api.kube.request("GET", parts.path, query=query).get("items") or []
        lists[resource]["objects"] += len(items)
        for item in items if resource in listed else ():
            meta = item.get("metadata") or {}
            listed[resource].add(f"{meta.get('namespace')}/{meta.get('name')}")
    for verb, by_resource in (("LIST", lists), ("GET", gets)):
        for resource, entry in by_resource.items():
            entry["bytes"] = int(sizes.get((verb, resource), 0))
    return {
        "list": {k: dict(v) for k, v in sorted(lists.items())},
        "list_total": {"objects": sum(v["objects"] for v in lists.values()),
                       "mb": round(sum(v["bytes"] for v in lists.values()) / 2**20, 2)},
        "get": {k: dict(v) for k, v in sorted(gets.items())},
        "configmaps_secrets_listed_unreferenced": len((listed["configmaps"] | listed["secrets"]) - referenced),
        "counted_from": "kube-apiserver's audit log (requests), apiserver_response_sizes_sum (bytes), "
                        "the same LISTs again after the run (objects)",
    }
