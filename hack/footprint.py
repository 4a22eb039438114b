"""zkop's real-cluster footprint: RSS and start-up LIST load in a realistically seeded cluster.

A stand-alone measurement (not a test, no assertions) kept apart from ``hack/bench.py`` while
that is being split into a package; ``docs/performance.md`` ("Real-cluster footprint") reports
its figures. It starts a real ZooKeeper and the in-memory API server, seeds the API server like
a real cluster (:func:`zkop_testing.apiserver_realistic.seed`: ``kube-root-ca.crt`` in every
namespace, Helm release Secrets, ``managedFields`` on every object), creates N ZooKeeperConfigs
(``--refs`` of them reading ``spec.dataFrom`` from a ConfigMap or Secret) and M Services, runs
``zkop run --service-bridge`` as its own process, waits until every ZooKeeperConfig is
``Synced`` and the bridge has settled, then reports (one JSON object on stdout):

* ``rss_mb`` / ``peak_rss_mb``: ``VmRSS`` / ``VmHWM`` of the zkop process;
* ``list``: per resource, the LIST responses zkop received during start-up (requests, objects,
  bytes of JSON) -- counted by wrapping the API server's response writer for zkop's User-Agent;
* ``get``: single-object GETs the same way; ``secrets_listed_unreferenced``: Secrets and
  ConfigMaps zkop received in a LIST that no ZooKeeperConfig references.

Usage::

    .venv/bin/python hack/footprint.py --n 2000 --m 1000 --secrets 2000 --secret-kb 50
    .venv/bin/python hack/footprint.py --n 10000 --m 5000 --secrets 2000 --secret-kb 50   # the scale run
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
for extra in (REPO, REPO / "tests" / "support"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from kazoo.client import KazooClient  # noqa: E402
from zkop_testing.apiserver import ApiServer  # noqa: E402
from zkop_testing.apiserver_realistic import seed  # noqa: E402
from zkop_testing.crds import install_crds  # noqa: E402
from zkop_testing.operator import OperatorProcess  # noqa: E402
from zkop_testing.zookeeper import ZooKeeperServer  # noqa: E402

from zkop.kube.client import KubeClient  # noqa: E402
from zkop.zkconfig.spec import GROUP, PLURAL, VERSION  # noqa: E402

JSON = dict[str, Any]
log = logging.getLogger("footprint")
NAMESPACE = "bench"
SERVICE_NAMESPACE = "bench-svc"
CHROOT = "/footprint"
ZKOP_AGENT = "zkop"


class ListLoad:
    """Counts the LIST and GET responses the API server sends to zkop (by ``User-Agent``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lists: dict[str, Counter[str]] = {}
        self.gets: dict[str, Counter[str]] = {}
        self.listed_names: dict[str, set[str]] = {"configmaps": set(), "secrets": set()}

    def install(self) -> None:
        """Wrap ``ApiServer._send`` (a static method: the one place every response is written)."""
        original = ApiServer._send

        def counting(handler: Any, code: int, body: Any, headers: Any = None,
                     content_type: str = "application/json") -> None:
            agent = str(handler.headers.get("User-Agent") or "")
            if handler.command == "GET" and code == 200 and agent.startswith(ZKOP_AGENT) and isinstance(body, dict):
                self.record(handler.path, body)
            original(handler, code, body, headers, content_type)

        ApiServer._send = staticmethod(counting)  # type: ignore[method-assign]

    def record(self, path: str, body: JSON) -> None:
        size = len(json.dumps(body, separators=(",", ":")))
        route = path.split("?", 1)[0].rstrip("/").split("/")
        with self.lock:
            if isinstance(body.get("items"), list):
                plural = route[-1]
                entry = self.lists.setdefault(plural, Counter())
                entry["requests"] += 1
                entry["objects"] += len(body["items"])
                entry["bytes"] += size
                if plural in self.listed_names:
                    for item in body["items"]:
                        meta = item.get("metadata") or {}
                        self.listed_names[plural].add(f"{meta.get('namespace')}/{meta.get('name')}")
            elif "watch" not in path:
                plural = route[-2] if len(route) >= 2 else "?"
                entry = self.gets.setdefault(plural, Counter())
                entry["requests"] += 1
                entry["bytes"] += size


def proc_memory_mb(pid: int) -> dict[str, float]:
    """``VmRSS`` and ``VmHWM`` of ``pid`` in MiB."""
    found: dict[str, float] = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = round(int(value.split()[0]) / 1024, 1)
    return found


def create_all(api: ApiServer, args: argparse.Namespace) -> set[str]:
    """The ZooKeeperConfigs, the objects they reference and the Services; returns the referenced keys."""
    store = api.store
    ns_rt, svc_rt = store.resolve("", "v1", "namespaces"), store.resolve("", "v1", "services")
    cm_rt, secret_rt = store.resolve("", "v1", "configmaps"), store.resolve("", "v1", "secrets")
    zkc_rt = store.resolve(GROUP, VERSION, PLURAL)
    assert ns_rt and svc_rt and cm_rt and secret_rt and zkc_rt
    for name in (NAMESPACE, SERVICE_NAMESPACE):
        store.create(ns_rt, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}, {})
    referenced: set[str] = set()
    for i in range(args.n):
        spec: JSON = {"path": f"/bench/app/cr-{i:06d}"}
        if i < args.refs:
            kind = "secretKeyRef" if i % 2 else "configMapKeyRef"
            name = f"ref-{i:05d}"
            if i % 2:
                store.create(secret_rt, NAMESPACE, {"apiVersion": "v1", "kind": "Secret", "metadata": {
                    "name": name, "namespace": NAMESPACE}, "data": {"k": base64.b64encode(b"v%d" % i).decode()}}, {})
            else:
                store.create(cm_rt, NAMESPACE, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
                    "name": name, "namespace": NAMESPACE}, "data": {"k": f"v{i}"}}, {})
            referenced.add(f"{NAMESPACE}/{name}")
            spec["dataFrom"] = {kind: {"name": name, "key": "k"}}
        else:
            spec["data"] = base64.b64encode(f"value-{i}".encode()).decode()
        store.create(zkc_rt, NAMESPACE, {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ZooKeeperConfig",
                                         "metadata": {"name": f"cr-{i:06d}", "namespace": NAMESPACE},
                                         "spec": spec}, {})
    for i in range(args.m):
        name = f"svc-{i:06d}"
        store.create(svc_rt, SERVICE_NAMESPACE, {
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": SERVICE_NAMESPACE, "labels": {"app": name}},
            "spec": {"selector": {"app": name}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}, {})
    return referenced


def synced_count(api: ApiServer) -> int:
    rt = api.store.resolve(GROUP, VERSION, PLURAL)
    assert rt is not None
    return sum(1 for o in api.store.iter_objects(rt) if (o.get("status") or {}).get("state") == "Synced"
               and (o.get("status") or {}).get("observedGeneration") == o["metadata"].get("generation"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="ZooKeeperConfigs")
    parser.add_argument("--m", type=int, default=1000, help="Services")
    parser.add_argument("--refs", type=int, default=100, help="ZooKeeperConfigs that read a ConfigMap/Secret")
    parser.add_argument("--secrets", type=int, default=2000, help="unrelated Helm release Secrets")
    parser.add_argument("--secret-kb", type=int, default=50)
    parser.add_argument("--namespaces", type=int, default=20)
    parser.add_argument("--no-managed-fields", action="store_true")
    parser.add_argument("--empty", action="store_true", help="no realistic seeding (the old measurement)")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds after sync before RSS is read")
    parser.add_argument("--workdir", default="/tmp/zkop-footprint")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(message)s")
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    load = ListLoad()
    load.install()
    result: JSON = {"params": {k: v for k, v in vars(args).items() if k != "workdir"}}
    zk = ZooKeeperServer()
    zk.start()
    try:
        client = KazooClient(hosts=zk.hosts)
        client.start(timeout=30)
        client.ensure_path(CHROOT)
        client.stop()
        client.close()
        with ApiServer() as api:
            kube = KubeClient(api.api_client())
            install_crds(kube)
            kube.close()
            started = time.monotonic()
            if not args.empty:
                report = seed(api, namespaces=args.namespaces, helm_secrets=args.secrets, secret_kb=args.secret_kb,
                              managed_fields=not args.no_managed_fields)
                result["seeded"] = {"namespaces": len(report.namespaces), "configmaps": report.configmaps,
                                    "secrets": report.secrets, "secret_mb": round(report.secret_bytes / 2**20, 1)}
            referenced = create_all(api, args)
            log.info("seeded in %.1f s", time.monotonic() - started)
            kubeconfig = str(api.write_kubeconfig(workdir / "kubeconfig"))
            operator = OperatorProcess(kubeconfig, f"{zk.hosts}{CHROOT}", [
                "--workers", "8", "--service-bridge", "--service-bridge-workers", "8",
                "--service-bridge-max-deletes", "0"], log_path=str(workdir / "zkop.log"))
            started = time.monotonic()
            operator.start(wait_ready=False)
            assert operator.proc is not None
            try:
                deadline = started + 120 + args.n * 0.05
                while (done := synced_count(api)) < args.n:
                    if operator.proc.poll() is not None:
                        raise RuntimeError(f"zkop exited:\n{operator.log_tail()}")
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"{done} of {args.n} synced\n{operator.log_tail(20)}")
                    time.sleep(0.5)
                result["seconds_to_synced"] = round(time.monotonic() - started, 1)
                time.sleep(args.settle)  # measured after start-up, not waiting for a condition
                result.update({k.replace("VmRSS", "rss_mb").replace("VmHWM", "peak_rss_mb"): v
                               for k, v in proc_memory_mb(operator.proc.pid).items()})
            finally:
                operator.stop()
        with load.lock:
            result["list"] = {k: dict(v) for k, v in sorted(load.lists.items())}
            result["list_total"] = {"objects": sum(v["objects"] for v in load.lists.values()),
                                    "mb": round(sum(v["bytes"] for v in load.lists.values()) / 2**20, 2)}
            result["get"] = {k: dict(v) for k, v in sorted(load.gets.items())}
            listed = load.listed_names["configmaps"] | load.listed_names["secrets"]
            result["configmaps_secrets_listed_unreferenced"] = len(listed - referenced)
    finally:
        zk.stop()
    json.dump(result, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
