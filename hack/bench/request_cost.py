"""Per-request CPU of zkop's API client on the real kube-apiserver (issue 42's "per-request client overhead").

``python -m hack.bench.request_cost [--n 2000] [--rounds 2]`` starts a fresh real control plane (the newest
Kubernetes minor the tests use),
creates 50 ZooKeeperConfigs, then sends ``--n`` status merge patches one after another, in turn through:

* ``kube``: :class:`zkop.kube.client.KubeClient`, as zkop sends them (its transport for whole answers);
* ``urllib3``: the same request through the official client's urllib3 pool (``urlopen``), what KubeClient did
  before :mod:`zkop.kube.transport`;
* ``http.client``: the standard library on one kept connection, nothing else: the floor for a Python client.

Each prints the process CPU (``time.process_time``, all threads: the bench's own informer of the objects
included, the same for every variant) and wall time per request; ``--rounds`` repeats the three in turn. The JSON
report on stdout has every round.
"""

from __future__ import annotations

import argparse
import http.client
import json
import shutil
import ssl
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from urllib.parse import urlsplit

import urllib3
from zkop_testing.controlplane import NEWEST

from zkop.kube.client import MERGE_PATCH, KubeClient, resource_path
from zkop.zkconfig.spec import GROUP, PLURAL, VERSION

from .realplane import RealApi

OBJECTS = 50


def _status_path(i: int) -> str:
    return resource_path(GROUP, VERSION, PLURAL, "default", f"o{i % OBJECTS}", "status")


def measure(n: int, rounds: int, minor: str = NEWEST) -> dict[str, list[dict[str, float]]]:
    """Per-request CPU and wall microseconds of each variant, ``rounds`` times, on a fresh real control plane.

    Raises:
        zkop_testing.controlplane.ControlPlaneError: the control plane did not start.
        AssertionError: a request was not answered 200.
    """
    directory = Path(tempfile.mkdtemp(prefix="zkop-request-cost-"))
    try:
        api = RealApi(minor, directory)
        try:
            return _measure(api, n, rounds)
        finally:
            api.stop()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _measure(api: RealApi, n: int, rounds: int) -> dict[str, list[dict[str, float]]]:
    api_client = api.plane.api_client()
    kube = KubeClient(api_client, default_timeout=30)
    for i in range(OBJECTS):
        kube.request("POST", resource_path(GROUP, VERSION, PLURAL, "default"), body={
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "ZooKeeperConfig", "metadata": {"name": f"o{i}"},
            "spec": {"path": f"/request-cost/o{i}", "data": "aGVsbG8="}})
    headers = {**kube._headers(), "Content-Type": MERGE_PATCH, "Accept": "application/json"}

    def body(i: int) -> bytes:
        return json.dumps({"status": {"state": "Synced", "message": f"m{i}"}}).encode()

    def via_kube() -> None:
        for i in range(n):
            kube.request("PATCH", _status_path(i), body={"status": {"state": "Synced", "message": f"m{i}"}},
                         content_type=MERGE_PATCH)

    pool = kube._connection_pool()
    assert pool is not None

    def via_urllib3() -> None:
        for i in range(n):
            answer = pool.urlopen("PATCH", _status_path(i), body=body(i), headers=headers,
                                  timeout=urllib3.Timeout(total=30), retries=kube._retries)
            assert answer.status == 200, answer.status
            json.loads(answer.data)

    configuration = api_client.configuration
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    context.load_cert_chain(configuration.cert_file, configuration.key_file)
    server = urlsplit(configuration.host)
    conn = http.client.HTTPSConnection(server.hostname or "", server.port, context=context)

    def via_http_client() -> None:
        for i in range(n):
            conn.request("PATCH", _status_path(i), body=body(i), headers=headers)
            answer = conn.getresponse()
            data = answer.read()
            assert answer.status == 200, answer.status
            json.loads(data)

    variants: list[tuple[str, Callable[[], None]]] = [
        ("kube", via_kube), ("urllib3", via_urllib3), ("http.client", via_http_client)]
    out: dict[str, list[dict[str, float]]] = {name: [] for name, _ in variants}
    try:
        for _ in range(rounds):
            for name, run in variants:
                cpu, wall = time.process_time(), time.monotonic()
                run()
                out[name].append({"cpu_us_per_request": round((time.process_time() - cpu) * 1e6 / n, 1),
                                  "wall_us_per_request": round((time.monotonic() - wall) * 1e6 / n, 1)})
    finally:
        conn.close()
        kube.close()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: print the report as JSON; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m hack.bench.request_cost",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="requests per variant and round (default 2000)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the three variants (default 2)")
    args = parser.parse_args(argv)
    report = measure(args.n, args.rounds)
    for name, runs in report.items():
        print(f"{name:12} " + "  ".join(f"{r['cpu_us_per_request']:7.1f} us CPU" for r in runs), file=sys.stderr)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
