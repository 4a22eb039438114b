"""Local demo: real ZooKeeper + in-memory API server + ``zkop run``, with ``examples/`` applied.

Run through ``hack/demo.sh`` (which installs what is needed). It prints the
znodes zkop wrote and each ZooKeeperConfig's status, then stops everything,
or with ``--keep-running`` waits for Ctrl-C so you can play with the
printed kubeconfig (``kubectl --kubeconfig … get zkc``) and ZooKeeper.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import yaml
from zkop_testing.apiserver import ApiServer
from zkop_testing.crds import install_crds
from zkop_testing.operator import OperatorProcess
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer, connected_client

from zkop.kube.client import KubeClient, resource_path

REPO = Path(__file__).resolve().parent.parent
ZKC = ("platform.example.com", "v1alpha1", "zookeeperconfigs")


KINDS = {"ZooKeeperConfig": ZKC, "ConfigMap": ("", "v1", "configmaps"), "Secret": ("", "v1", "secrets")}


def apply(kube: KubeClient, doc: dict[str, Any]) -> None:
    """Create one object (ZooKeeperConfig, ConfigMap or Secret) from a manifest."""
    namespace = doc["metadata"].get("namespace", "default")
    kube.request("POST", resource_path(*KINDS[doc["kind"]], namespace), body=doc)


def main() -> int:
    """Run the demo; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keep-running", action="store_true", help="wait for Ctrl-C before stopping")
    args = parser.parse_args()
    # SIGTERM cleans up like Ctrl-C (the operator and ZooKeeper are stopped by the with-blocks).
    signal.signal(signal.SIGTERM, lambda signum, frame: (_ for _ in ()).throw(KeyboardInterrupt()))
    workdir = Path(tempfile.mkdtemp(prefix="zkop-demo-"))
    # examples/acl.yaml grants write access to the digest user ops; zkop authenticates as ops.
    credentials = workdir / "zookeeper-credentials"
    credentials.write_text("ops:ops-password\n")
    ok = False
    with ZooKeeperServer() as zookeeper, ApiServer() as apiserver, contextlib.ExitStack() as stack:
        kubeconfig = str(workdir / "kubeconfig")
        apiserver.write_kubeconfig(kubeconfig)
        print(f">> ZooKeeper {zookeeper.hosts}; API server {apiserver.url}; kubeconfig {kubeconfig}")
        kube = KubeClient(apiserver.api_client())
        install_crds(kube)
        with OperatorProcess(kubeconfig, zookeeper.hosts, ["--zk-auth-file", str(credentials)],
                             log_path=str(workdir / "zkop.log")) as operator:
            print(f">> zkop run is ready (log {operator.log_path})")
            manifests = [d for f in sorted((REPO / "examples").glob("*.yaml"))
                         for d in yaml.safe_load_all(f.read_text()) if d and d.get("kind") in KINDS]
            manifests.sort(key=lambda d: d["kind"] == "ZooKeeperConfig")  # referenced objects first
            docs = [d for d in manifests if d["kind"] == "ZooKeeperConfig"]
            for doc in manifests:
                apply(kube, doc)
                target = f" -> {doc['spec']['path']}" if doc["kind"] == "ZooKeeperConfig" else ""
                print(f">> applied {doc['kind']} {doc['metadata']['name']}{target}")

            def all_settled() -> list[dict[str, Any]] | None:
                items: list[dict[str, Any]] = kube.request("GET", resource_path(*ZKC))["items"]
                states = [(i.get("status") or {}).get("state") for i in items]
                done = len(items) == len(docs) and all(s in ("Synced", "OutOfSync", "Error") for s in states)
                return items if done else None

            items = wait_for(all_settled, timeout=30, message="all ZooKeeperConfigs reconciled")
            zk = stack.enter_context(connected_client(zookeeper.hosts))
            print("\n== znodes in ZooKeeper")
            for item in items:
                path = item["spec"]["path"]
                found = zk.exists(path)
                print(f"{path}  version={found.version}  data={zk.get(path)[0]!r}" if found else f"{path}  (absent)")
            print("\n== kubectl get zkc")
            print(f"{'NAME':36} {'PATH':48} {'STATE':10} READY")
            for item in items:
                status = item.get("status") or {}
                ready = next((c["status"] for c in status.get("conditions", []) if c["type"] == "Ready"), "")
                print(f"{item['metadata']['name']:36} {item['spec']['path']:48} {status.get('state', ''):10} {ready}")
            print("\n== status of new-recommendation-engine-enabled")
            first = next(i for i in items if i["metadata"]["name"] == "new-recommendation-engine-enabled")
            print(yaml.safe_dump(first["status"], sort_keys=False))
            expected = base64.b64decode(first["spec"]["data"])
            ok = zk.get(first["spec"]["path"])[0] == expected and first["status"]["state"] == "Synced"
            stack.close()
            if args.keep_running:
                print(">> running; Ctrl-C to stop. The in-memory API server serves no OpenAPI documents, so use")
                print(f">>   kubectl --kubeconfig {kubeconfig} apply --validate=false -f ...  and  get zkc -o yaml")
                with contextlib.suppress(KeyboardInterrupt):
                    threading.Event().wait()
        print(">> stopped")
    if ok:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print(f">> kept {workdir} (zkop.log) for a look")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
