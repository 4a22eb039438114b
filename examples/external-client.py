#!/usr/bin/env python3
"""How a legacy system outside Kubernetes finds a Kubernetes Service through ZooKeeper.

zkop's service bridge (``zkop run --service-bridge``, default ``--service-bridge-layout flat``
and ``--service-bridge-format json``) publishes each Service as one znode,
``<root>/<namespace>-<name>`` (root ``/kubernetes/services``), holding JSON such as::

    {"namespace": "default", "name": "web", "clusterIP": "10.96.12.7",
     "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}

This script reads that record and prints one ``host:port`` line per port, the way a client
would pick its target. With ``--watch`` it keeps a ZooKeeper watch and prints the record again
each time the bridge rewrites it (a Service changed) or deletes it (the Service is gone)::

    python examples/external-client.py --zk-hosts zk-1:2181,zk-2:2181 default web
    python examples/external-client.py --watch default web

Only ``kazoo`` is needed (``pip install kazoo``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
from collections.abc import Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import ZnodeStat

DEFAULT_ROOT = "/kubernetes/services"


def record_path(root: str, namespace: str, name: str) -> str:
    """The znode of Service ``namespace/name`` in the flat layout: ``<root>/<namespace>-<name>``."""
    return f"{root.rstrip('/')}/{namespace}-{name}"


def endpoints(record: dict[str, Any]) -> list[str]:
    """``"<port name> <clusterIP>:<port>/<protocol>"`` for each port of a bridged Service record.

    Raises :class:`ValueError` for a headless Service (no cluster IP to connect to).
    """
    cluster_ip = record.get("clusterIP")
    if not cluster_ip or cluster_ip == "None":
        raise ValueError("headless Service: it has no cluster IP")
    host = f"[{cluster_ip}]" if ":" in cluster_ip else cluster_ip
    lines = []
    for port in record.get("ports", []):
        label = port.get("name") or "-"
        lines.append(f"{label} {host}:{port['port']}/{port.get('protocol', 'TCP')}")
    return lines


def describe(path: str, data: bytes | None) -> str:
    """A human-readable rendering of the record at ``path`` (``data`` is ``None`` if it is absent)."""
    if data is None:
        return f"{path}: not published (no such Service, or the bridge does not export it)"
    try:
        record = json.loads(data)
        return "\n".join(endpoints(record)) or f"{path}: the Service has no ports"
    except (ValueError, KeyError, TypeError) as err:
        return f"{path}: cannot use this record: {err}"


def build_parser() -> argparse.ArgumentParser:
    """Command-line flags."""
    parser = argparse.ArgumentParser(description="Look up a Kubernetes Service published into ZooKeeper by zkop.")
    parser.add_argument("namespace", help="the Service's namespace")
    parser.add_argument("name", help="the Service's name")
    parser.add_argument("--zk-hosts", default=os.environ.get("ZOOKEEPER_HOSTS", "127.0.0.1:2181"),
                        help="ZooKeeper connect string [ZOOKEEPER_HOSTS] (default 127.0.0.1:2181)")
    parser.add_argument("--root", default=DEFAULT_ROOT, help=f"the bridge's --service-bridge-root ({DEFAULT_ROOT})")
    parser.add_argument("--auth", default=None, help="digest credentials user:password, if the znodes need them")
    parser.add_argument("--watch", action="store_true", help="keep watching and print every change")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Print the Service's endpoints; exit 1 if it is not published (without ``--watch``)."""
    args = build_parser().parse_args(argv)
    auth = [("digest", args.auth)] if args.auth else None
    zk = KazooClient(hosts=args.zk_hosts, read_only=True, auth_data=auth)
    zk.start(timeout=15)
    path = record_path(args.root, args.namespace, args.name)
    try:
        if not args.watch:
            try:
                data, _ = zk.get(path)
            except NoNodeError:
                print(describe(path, None), file=sys.stderr)
                return 1
            print(describe(path, data))
            return 0

        def on_change(data: bytes | None, stat: ZnodeStat | None) -> None:
            version = f" (version {stat.version})" if stat is not None else ""
            print(f"--- {path}{version}\n{describe(path, data)}", flush=True)

        zk.DataWatch(path, on_change)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
        return 0
    finally:
        zk.stop()
        zk.close()


if __name__ == "__main__":
    sys.exit(main())
