"""The real control plane in the in-memory API server's place (``python -m hack.bench --control-plane real``).

:class:`RealApi` gives the scenarios what they use of :class:`zkop_testing.apiserver.ApiServer` --
``url``, ``api_client``, ``write_kubeconfig``, ``request_log``, ``clear_request_log``, ``store`` (create,
patch, delete, list) and ``stop`` -- on etcd + kube-apiserver + kube-controller-manager built from source
(:class:`zkop_testing.controlplane.ControlPlane`), so every scenario runs unchanged on either.

Where the double reads its own memory, the real plane is asked over HTTP, by the bench's own identity
(User-Agent :data:`INTERNAL_AGENT`, left out of every count):

* **request log**: the API server's audit log (``Metadata`` level, which the plane always writes), one
  :class:`~zkop_testing.apiserver.RequestRecord` per request at ``ResponseComplete`` (a WATCH at
  ``ResponseStarted``: it completes only when it ends); the control plane's own requests (users
  ``system:*``: kube-controller-manager's controllers, the API server's loopback client) are left out;
* **states**: a watch of every ZooKeeperConfig kept by zkop's own informer in the bench's process
  (:meth:`RealApi.states`), not a LIST per poll, which would cost the API server far more than what is
  measured;
* **what it costs the cluster** (:meth:`RealApi.cost`): kube-apiserver's and etcd's CPU from
  ``/proc/<pid>/stat``, and etcd's writes from its ``/metrics`` (``etcd_mvcc_put_total``: keys put,
  ``etcd_mvcc_txn_total``: transactions, ``etcd_mvcc_delete_total``).
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import threading
import urllib.request
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from zkop_testing.apiserver import RequestRecord
from zkop_testing.controlplane import BUILD_SCRIPT, MINORS, ControlPlane
from zkop_testing.crds import crd_established, install_crds
from zkop_testing.waiting import wait_for

from zkop.kube.client import ApiException, KubeClient, resource_path
from zkop.runtime.cache.informer import Informer
from zkop.runtime.cache.reflector import ResourceRef
from zkop.zkconfig.spec import GROUP, PLURAL, VERSION

from .measure import proc_cpu_seconds, state_counts
from .params import JSON

log = logging.getLogger("bench")

#: User-Agent of the bench's own requests to the real plane (seeding, the state watch): never counted.
INTERNAL_AGENT = "zkop-bench-internal"
#: etcd's counters read by :meth:`RealApi.cost` (present in etcd 3.5 and 3.6, ``server/storage/mvcc/metrics.go``).
ETCD_COUNTERS = ("etcd_mvcc_put_total", "etcd_mvcc_txn_total", "etcd_mvcc_delete_total", "etcd_mvcc_range_total")

#: The plane's own Service range (``/24``) holds 254 ClusterIPs; the bridge scenario creates M (1,000+)
#: Services. kube-apiserver takes the last value of a repeated flag.
SERVICE_RANGE = ("--service-cluster-ip-range=10.0.0.0/16,fd00:10:96::/112",)
#: Content type of a server-side apply (``k8s.io/apimachinery`` ``types.ApplyYAMLPatchType``; JSON is YAML).
APPLY_PATCH = "application/apply-patch+yaml"

Resource = tuple[str, str, str]


def cached_minor(candidates: Sequence[str] = MINORS) -> str | None:
    """The first of ``candidates`` (Kubernetes minors) whose binaries are built
    (``hack/control-plane/build.sh --cached``, which builds nothing), else ``None``."""
    import subprocess

    for minor in candidates:
        done = subprocess.run(["bash", str(BUILD_SCRIPT), "--version", minor, "--cached"], capture_output=True,
                              text=True, check=False)
        if done.returncode == 0 and done.stdout.strip():
            return minor
    return None


class HttpStore:
    """The few store operations the scenarios use, over HTTP as the bench (:data:`INTERNAL_AGENT`).

    Resources are ``(group, version, plural)`` tuples; errors are :class:`~zkop.kube.client.ApiException`.
    """

    def __init__(self, kube: KubeClient, threads: int = 8) -> None:
        self.kube = kube
        self.threads = threads

    @staticmethod
    def resolve(group: str, version: str, plural: str) -> Resource:
        """The resource handle of ``group/version/plural``."""
        return (group, version, plural)

    def create(self, rt: Resource, namespace: str | None, body: JSON, _options: Any, *,
               field_manager: str | None = None) -> JSON:
        """POST ``body`` (into its own ``metadata.namespace`` when ``namespace`` is ``None`` and it names one),
        recorded under ``field_manager`` (the API server's default: the User-Agent's program name); the
        created object."""
        namespace = namespace if namespace is not None else (body.get("metadata") or {}).get("namespace")
        return self.kube.request("POST", resource_path(*rt, namespace), body=body,
                                 query={"fieldManager": field_manager})

    def create_many(self, rt: Resource, namespace: str | None, bodies: Iterator[JSON], *,
                    field_manager: str | None = None) -> int:
        """POST every body from :attr:`threads` threads (:meth:`create`); how many were created."""
        with ThreadPoolExecutor(self.threads) as pool:
            return sum(1 for _ in pool.map(
                lambda body: self.create(rt, namespace, body, {}, field_manager=field_manager), bodies))

    def apply(self, rt: Resource, namespace: str | None, body: JSON, manager: str) -> JSON:
        """Server-side apply ``body`` (``PATCH`` :data:`APPLY_PATCH`, ``force=true``) as field manager
        ``manager``, into ``namespace`` or its own ``metadata.namespace``; the object as stored."""
        meta = body["metadata"]
        namespace = namespace if namespace is not None else meta.get("namespace")
        return self.kube.request("PATCH", resource_path(*rt, namespace, meta["name"]), body=body,
                                 content_type=APPLY_PATCH, query={"fieldManager": manager, "force": True})

    def apply_many(self, rt: Resource, namespace: str | None, bodies: Iterable[JSON], manager: str) -> int:
        """:meth:`apply` every body from :attr:`threads` threads; how many were applied."""
        with ThreadPoolExecutor(self.threads) as pool:
            return sum(1 for _ in pool.map(lambda body: self.apply(rt, namespace, body, manager), bodies))

    def patch(self, rt: Resource, namespace: str, name: str, body: bytes, content_type: str, _rv: Any,
              _options: Any) -> JSON:
        """PATCH ``name`` with ``body`` (bytes of JSON) as ``content_type``."""
        return self.kube.request("PATCH", resource_path(*rt, namespace, name),
                                 body=json.loads(body), content_type=content_type)

    def delete(self, rt: Resource, namespace: str, name: str, _options: Any, _query: Any) -> None:
        """DELETE ``name``."""
        self.kube.request("DELETE", resource_path(*rt, namespace, name))

    def iter_objects(self, rt: Resource) -> Iterator[JSON]:
        """Every object of ``rt`` (one LIST)."""
        yield from self.kube.request("GET", resource_path(*rt)).get("items") or []


class RealApi:
    """A real control plane of ``minor`` with zkop's CRD, in ``directory`` (removed by :meth:`stop`).

    Raises:
        zkop_testing.controlplane.ControlPlaneError: it could not start.
    """

    def __init__(self, minor: str, directory: Path) -> None:
        self.plane = ControlPlane(minor, directory=directory, apiserver_args=SERVICE_RANGE)
        self.directory = directory
        self._records: list[RequestRecord] = []
        self._base = 0
        self._offset = 0
        self._partial = b""
        self.plane.start()
        self.kube = KubeClient(self.plane.api_client(), user_agent=INTERNAL_AGENT, default_timeout=60)
        install_crds(self.kube)
        wait_for(lambda: crd_established(self.kube), message="zkop's CRD established", ignore=(ApiException,))
        self.store = HttpStore(self.kube)
        self._crs = Informer(self.kube, ResourceRef(GROUP, VERSION, PLURAL), resync_period=0, name="bench-states",
                             transform=None)
        self._crs.start()
        self._crs.wait_for_sync(60)

    @property
    def url(self) -> str:
        """The API server's URL."""
        return self.plane.url

    @property
    def pids(self) -> dict[str, int]:
        """Process id of ``etcd``, ``kube-apiserver`` and ``kube-controller-manager``."""
        return dict(self.plane.state()["pids"])

    def api_client(self) -> Any:
        """A new admin :class:`kubernetes.client.ApiClient`."""
        return self.plane.api_client()

    def write_kubeconfig(self, path: Path) -> Path:
        """An admin kubeconfig at ``path`` (zkop runs as the admin here: RBAC is not what is measured)."""
        return self.plane.write_kubeconfig(path)

    def stop(self) -> None:
        """Stop the watch, the plane, and remove its directory."""
        self._crs.stop()
        self.kube.close()
        self.plane.stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    # --- what the double keeps in memory ----------------------------------------------------

    @property
    def request_log(self) -> list[RequestRecord]:
        """Requests since :meth:`clear_request_log`, read from the audit log up to now."""
        self._read_audit()
        return self._records[self._base:]

    def clear_request_log(self) -> None:
        """Forget the requests so far."""
        self._read_audit()
        self._base = len(self._records)

    def _read_audit(self) -> None:
        """Read the audit log's new lines into the request log.

        Raises:
            RuntimeError: the log is shorter than what was read (rotated: the counts would lose requests).
        """
        try:
            with self.plane.audit_log.open("rb") as fh:
                if fh.seek(0, 2) < self._offset:
                    raise RuntimeError(f"{self.plane.audit_log} was rotated: requests would go uncounted")
                fh.seek(self._offset)
                chunk = fh.read()
        except FileNotFoundError:
            return
        self._offset += len(chunk)
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            record = audit_record(line)
            if record is not None:
                self._records.append(record)

    def states(self) -> Counter[str]:
        """``status.state`` of every ZooKeeperConfig from the bench's watch (``Synced`` only at its generation)."""
        return state_counts(self._crs.indexer.list())

    def cost(self) -> dict[str, float]:
        """kube-apiserver's and etcd's CPU seconds so far, and etcd's :data:`ETCD_COUNTERS`."""
        pids = self.pids
        out = {"apiserver_cpu_s": proc_cpu_seconds(pids["kube-apiserver"]),
               "etcd_cpu_s": proc_cpu_seconds(pids["etcd"])}
        with urllib.request.urlopen(f"http://127.0.0.1:{self.plane.etcd_port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name in ETCD_COUNTERS:
                out[name] = float(value)
        return out

    def storage_requests(self) -> Counter[str]:
        """kube-apiserver's requests to etcd so far, any client's, by ``"<operation> <resource>"`` (``"update
        zookeeperconfigs"``): its ``etcd_requests_total`` counter from ``/metrics``
        (``k8s.io/apiserver/pkg/storage/etcd3/metrics``). A ``get`` of one object during an update is
        ``GuaranteedUpdate`` reading the live object after its cached copy proved stale."""
        with urllib.request.urlopen(f"{self.url}/metrics", context=self.plane.admin_ssl_context(),
                                    timeout=30) as answer:
            text = answer.read().decode()
        out: Counter[str] = Counter()
        for line in text.splitlines():
            if not line.startswith("etcd_requests_total{"):
                continue
            labels_text, _, value = line[len("etcd_requests_total{"):].rpartition("} ")
            labels = dict(_LABEL.findall(labels_text))
            out[f"{labels.get('operation', '')} {labels.get('resource', '')}"] += int(float(value))
        return out

    def response_bytes(self) -> Counter[tuple[str, str]]:
        """Bytes of every response kube-apiserver has written so far, any client's, by ``(verb, resource)``
        (``("LIST", "secrets")``): its ``apiserver_response_sizes_sum`` histogram sums from ``/metrics``
        (``k8s.io/apiserver/pkg/endpoints/metrics``; subresources left out)."""
        with urllib.request.urlopen(f"{self.url}/metrics", context=self.plane.admin_ssl_context(),
                                    timeout=30) as answer:
            text = answer.read().decode()
        out: Counter[tuple[str, str]] = Counter()
        for line in text.splitlines():
            if not line.startswith("apiserver_response_sizes_sum{"):
                continue
            labels_text, _, value = line[len("apiserver_response_sizes_sum{"):].rpartition("} ")
            labels = dict(_LABEL.findall(labels_text))
            if not labels.get("subresource"):
                out[(labels.get("verb", ""), labels.get("resource", ""))] += int(float(value))
        return out


_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


class ApiserverProfile:
    """kube-apiserver's CPU profile over a window, as ``with ApiserverProfile(api, out):``.

    Go's ``net/http/pprof`` ``/debug/pprof/profile?seconds=S``, which kube-apiserver serves to an authorized user
    (``--profiling``, on by default; the bench is ``system:masters``), fetched in slices of ``slice_seconds``
    one after the other until the window ends, each written to ``<out>-<i>.pb.gz``: ``go tool pprof -top
    <out>-*.pb.gz`` merges them. The slice running when the window ends is waited for (at most one slice more).

    Args:
        slice_seconds: the length of one profile (whole seconds, as the endpoint takes them).
    """

    def __init__(self, api: RealApi, out: Path, slice_seconds: int = 5) -> None:
        self.api, self.out, self.slice_seconds = api, out, slice_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="apiserver-pprof", daemon=True)
        self._context = api.plane.admin_ssl_context()

    def __enter__(self) -> ApiserverProfile:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self._thread.start()
        log.info("kube-apiserver CPU profile to %s-*.pb.gz", self.out)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(self.slice_seconds + 30)

    def _run(self) -> None:
        # As the bench's own identity: not counted among the requests measured (audit_record).
        request = urllib.request.Request(f"{self.api.url}/debug/pprof/profile?seconds={self.slice_seconds}",
                                         headers={"User-Agent": INTERNAL_AGENT})
        i = 0
        while not self._stop.is_set():
            with urllib.request.urlopen(request, timeout=self.slice_seconds + 30, context=self._context) as answer:
                Path(f"{self.out}-{i}.pb.gz").write_bytes(answer.read())
            i += 1


def audit_record(line: bytes) -> RequestRecord | None:
    """The request one audit-log line records, or ``None`` if it is not one to count.

    Counted: the ``ResponseComplete`` stage (a ``watch`` at ``ResponseStarted``), of any user but the
    control plane's own (``system:*``) and the bench's (:data:`INTERNAL_AGENT`).
    """
    try:
        event = json.loads(line)
    except ValueError:
        return None
    verb = event.get("verb", "")
    stage = event.get("stage")
    if stage != ("ResponseStarted" if verb == "watch" else "ResponseComplete"):
        return None
    if str((event.get("user") or {}).get("username", "")).startswith("system:"):
        return None
    agent = str(event.get("userAgent", ""))
    if agent.startswith(INTERNAL_AGENT):
        return None
    ref = event.get("objectRef") or {}
    return RequestRecord(verb, ref.get("resource", ""), ref.get("subresource", ""), ref.get("namespace", ""),
                         ref.get("name", ""), ref.get("apiGroup", ""), agent)


def cost_delta(before: dict[str, float], after: dict[str, float], n: int) -> JSON:
    """What a window cost the cluster, per item of ``n``: API server and etcd CPU ms, etcd puts and txns."""
    def d(key: str) -> float:
        return after.get(key, 0.0) - before.get(key, 0.0)

    return {
        "apiserver_cpu_s": round(d("apiserver_cpu_s"), 3),
        "apiserver_cpu_ms_per_cr": round(d("apiserver_cpu_s") * 1000 / n, 3),
        "etcd_cpu_s": round(d("etcd_cpu_s"), 3),
        "etcd_cpu_ms_per_cr": round(d("etcd_cpu_s") * 1000 / n, 3),
        "etcd_puts": int(d("etcd_mvcc_put_total")),
        "etcd_puts_per_cr": round(d("etcd_mvcc_put_total") / n, 3),
        "etcd_txns": int(d("etcd_mvcc_txn_total")),
        "etcd_deletes": int(d("etcd_mvcc_delete_total")),
        "etcd_ranges": int(d("etcd_mvcc_range_total")),
    }


def cost_rates(before: dict[str, float], after: dict[str, float], seconds: float) -> JSON:
    """What an idle window cost the cluster, per second: API server and etcd CPU (% of one core), etcd puts."""
    def d(key: str) -> float:
        return after.get(key, 0.0) - before.get(key, 0.0)

    return {
        "seconds": round(seconds, 1),
        "apiserver_cpu_percent": round(d("apiserver_cpu_s") / seconds * 100, 2),
        "etcd_cpu_percent": round(d("etcd_cpu_s") / seconds * 100, 2),
        "etcd_puts_per_s": round(d("etcd_mvcc_put_total") / seconds, 3),
        "etcd_txns_per_s": round(d("etcd_mvcc_txn_total") / seconds, 3),
        "etcd_ranges_per_s": round(d("etcd_mvcc_range_total") / seconds, 3),
    }


def plane_idle(api: RealApi, seconds: float) -> JSON:
    """The control plane left alone for ``seconds`` (only the bench's own watch open): :func:`cost_rates`.

    What the plane costs without zkop (its own leases, kube-controller-manager's resyncs), which the
    idle figure with zkop running is read against.
    """
    import time

    before = api.cost()
    started = time.monotonic()
    time.sleep(seconds)
    return cost_rates(before, api.cost(), time.monotonic() - started)
