"""Run a built zkop image's root filesystem like the Deployment does and prove it works.

Called by ``hack/image-smoke.sh`` (which builds the image, mounts its root filesystem and
cleans up); not meant to be run alone. Needs root (it makes a private mount namespace),
``bwrap`` (bubblewrap), ``setpriv`` and ``unshare`` (util-linux), Debian's ``zookeeper``
package, and the test doubles in ``tests/support``.

What it does, all on loopback:

1. starts a real ZooKeeper server and the in-memory Kubernetes API server
   (``zkop_testing``), and installs the CRDs from ``manifests/crd/``;
2. checks the sandbox: the image's entrypoint runs as uid/gid 65532, the root filesystem
   is read-only, ``/tmp`` (the Deployment's ``emptyDir``) is writable, and neither
   ``zkop_testing`` nor ``zkop.testing`` can be imported;
3. starts the image's ``ENTRYPOINT``/``CMD`` (``zkop run``) with the Deployment's flags,
   the kubeconfig and the ZooKeeper credentials mounted read-only where the Deployment
   mounts its Secret, and waits for ``/readyz`` (and ``/healthz``, ``/metrics``; with the
   Deployment's ``--metrics-secure`` that is HTTPS with the self-signed certificate the image
   makes with its ``openssl``, 200 for a token bound to the shipped reader ClusterRole and 401
   without one);
4. applies a ZooKeeperConfig and waits until the znode holds its data, with the digest
   ACL it asks for, and the resource reports ``Synced`` / ``Ready=True``;
5. sends SIGTERM and expects a clean exit (0) within the grace period.

The sandbox: ``unshare --mount`` as root bind-mounts the image's root filesystem on a
directory uid 65532 can reach; ``setpriv`` drops to uid/gid 65532 with no supplementary
groups and no capabilities; ``bwrap`` (unprivileged, in its own user namespace mapped to
65532) binds that root read-only, a fresh ``/proc`` and ``/dev``, a size-limited tmpfs on
``/tmp`` (the Deployment's only writable mount) and the two read-only files. The network
namespace is the host's, so zkop reaches ZooKeeper and the API server on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from kazoo.client import KazooClient
from kazoo.security import make_digest_acl
from zkop_testing.apiserver import ApiServer
from zkop_testing.zookeeper import ZooKeeperServer, free_port

REPO = Path(__file__).resolve().parent.parent
UID = 65532
AUTH_DIR = "/etc/zkop/zookeeper-auth"  # the Deployment's Secret mount
KUBECONFIG = "/etc/zkop/kubeconfig/config"  # stands in for the in-cluster service account
ZKC = "/apis/platform.example.com/v1alpha1/namespaces/default/zookeeperconfigs"
ZNODE = "/zkop-image-smoke/greeting"
GREETING = "hello from the zkop image"
T = TypeVar("T")


def say(message: str) -> None:
    """One progress line, flushed (the shell script's output interleaves with ours)."""
    print(f"image-smoke: {message}", flush=True)


def wait_for(what: str, check: Callable[[], T | None], timeout: float, *,
             alive: Callable[[], None] | None = None) -> T:
    """Poll ``check`` until it returns a value that is not ``None``/``False``."""
    deadline = time.monotonic() + timeout
    while True:
        if alive is not None:
            alive()
        value = check()
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.2)


def api(base: str, method: str, path: str, body: Any = None) -> Any:
    """A JSON request to the API server (plain HTTP on loopback)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def http_status(url: str, token: str | None = None) -> int:
    """The status code of a GET (``Authorization: Bearer <token>`` when given), 0 when nothing answers.

    HTTPS certificates are not verified (zkop's self-signed metrics certificate, as Prometheus'
    ``insecureSkipVerify``).
    """
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=2,
                                    context=context) as response:
            return int(response.status)
    except urllib.error.HTTPError as err:
        return int(err.code)
    except OSError:
        return 0


def image_config(path: Path) -> tuple[list[str], list[str], list[str], str]:
    """Entrypoint, Cmd, Env and User from ``buildah inspect``'s JSON."""
    config = json.loads(path.read_text())["OCIv1"]["config"]
    return (list(config.get("Entrypoint") or []), list(config.get("Cmd") or []), list(config.get("Env") or []),
            str(config.get("User") or ""))


def sandbox(rootfs: Path, stage: Path, env: Sequence[str], argv: Sequence[str], tmp_size: int) -> list[str]:
    """The command line that runs ``argv`` from ``rootfs`` as 65532, read-only, like the Deployment."""
    inner = [
        "bwrap", "--unshare-user", "--uid", str(UID), "--gid", str(UID),
        "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
        "--die-with-parent", "--new-session",
        "--ro-bind", str(stage / "root"), "/",
        "--proc", "/proc", "--dev", "/dev",
        "--size", str(tmp_size), "--perms", "1777", "--tmpfs", "/tmp",
        "--ro-bind", str(stage / "auth"), AUTH_DIR,
        "--ro-bind", str(stage / "kubeconfig"), str(Path(KUBECONFIG).parent),
        "--remount-ro", "/",
        "--chdir", "/tmp", "--clearenv",
    ]
    for item in env:
        key, _, value = item.partition("=")
        inner += ["--setenv", key, value]
    inner += ["--", *argv]
    drop = ["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups", "--inh-caps=-all",
            "--bounding-set=-all", "--no-new-privs"]
    # As root, in a private mount namespace: make the root filesystem reachable for 65532.
    script = (f"mount --bind {shlex.quote(str(rootfs))} {shlex.quote(str(stage / 'root'))} && "
              f"exec {shlex.join([*drop, *inner])}")
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the smoke test; 0 when every check passed."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rootfs", required=True, type=Path, help="the mounted root filesystem of the image")
    parser.add_argument("--image-config", required=True, type=Path, help="`buildah inspect` JSON of the image")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds for each wait (default 60)")
    args = parser.parse_args(argv)
    for tool in ("bwrap", "setpriv", "unshare"):
        if shutil.which(tool) is None:
            raise SystemExit(f"image-smoke: {tool} not found")
    if os.geteuid() != 0:
        raise SystemExit("image-smoke: run as root (a private mount namespace makes the root filesystem reachable)")
    entrypoint, cmd, image_env, user = image_config(args.image_config)
    if user != f"{UID}:{UID}":
        raise SystemExit(f"image-smoke: the image's USER is {user!r}, want {UID}:{UID}")
    deployment = yaml.safe_load((REPO / "manifests/manager/deployment.yaml").read_text())
    pod = deployment["spec"]["template"]["spec"]
    (container,) = [c for c in pod["containers"] if c["name"] == "manager"]
    writable = [m["mountPath"] for m in container["volumeMounts"] if not m.get("readOnly")]
    if writable != ["/tmp"] or not container["securityContext"]["readOnlyRootFilesystem"]:
        raise SystemExit(f"image-smoke: the Deployment's writable mounts changed ({writable}); update this script")
    tmp_limit = next(v for v in pod["volumes"] if v["name"] == "tmp")["emptyDir"]["sizeLimit"]
    tmp_size = int(tmp_limit.removesuffix("Mi")) * 1024 * 1024

    stage = Path(tempfile.mkdtemp(prefix="zkop-image-smoke-"))
    operator: subprocess.Popen[bytes] | None = None
    log_path = stage / "zkop.log"
    try:
        stage.chmod(0o755)
        for sub in ("root", "auth", "kubeconfig"):
            (stage / sub).mkdir(mode=0o750)
            os.chown(stage / sub, 0, UID)
        (stage / "root").chmod(0o755)
        # Mount points, as a container runtime makes them in the container's own (throw-away) layer.
        for mount_point in (AUTH_DIR, str(Path(KUBECONFIG).parent)):
            (args.rootfs / mount_point.lstrip("/")).mkdir(parents=True, exist_ok=True)
        credentials = stage / "auth" / "credentials"
        credentials.write_text("zkop:smoke-password\n")
        os.chown(credentials, 0, UID)
        credentials.chmod(0o440)  # the Deployment's defaultMode with fsGroup 65532

        with ZooKeeperServer() as zookeeper, ApiServer() as apiserver:
            say(f"ZooKeeper {zookeeper.hosts}, in-memory API server {apiserver.url}")
            kubeconfig = apiserver.write_kubeconfig(stage / "kubeconfig" / "config")
            os.chown(kubeconfig, 0, UID)
            kubeconfig.chmod(0o440)
            # Every CRD the install makes: the Deployment's args enable the features whose kinds need theirs.
            for path in sorted((REPO / "manifests/crd").glob("*.yaml")):
                if path.name != "kustomization.yaml":
                    api(apiserver.url, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                        yaml.safe_load(path.read_text()))
            api(apiserver.url, "POST", "/api/v1/namespaces",  # manifests/manager/namespace.yaml: the Lease lives there
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "zkop-system"}})
            env = [*image_env, "HOME=/tmp", f"ZOOKEEPER_HOSTS={zookeeper.hosts}", "POD_NAMESPACE=zkop-system",
                   "POD_NAME=zkop-controller-manager-smoke"]

            probe = (
                "import os, sys, importlib.util as u\n"
                "assert (os.getuid(), os.geteuid(), os.getgid()) == (65532, 65532, 65532), os.getuid()\n"
                "for p in ('/usr/smoke', '/etc/smoke', sys.prefix + '/smoke'):\n"
                "    try:\n        open(p, 'w')\n    except OSError as e:\n        assert e.errno == 30, e\n"
                "    else:\n        raise SystemExit(p + ' is writable')\n"
                "open('/tmp/smoke', 'w').write('ok')\n"
                "open('/etc/zkop/zookeeper-auth/credentials').read()\n"
                "assert u.find_spec('zkop_testing') is None, 'zkop_testing is importable'\n"
                "import zkop\n"
                "assert u.find_spec('zkop.testing') is None, 'zkop.testing is importable'\n"
                "print('uid', os.getuid(), 'gid', os.getgid(), 'read-only root, writable /tmp, no test doubles')\n"
            )
            check = subprocess.run(sandbox(args.rootfs, stage, env, ["python3", "-c", probe], tmp_size),
                                   capture_output=True, text=True, timeout=60)
            if check.returncode != 0:
                raise SystemExit(f"image-smoke: sandbox check failed:\n{check.stdout}{check.stderr}")
            say(f"sandbox: {check.stdout.strip()}")

            metrics_port, health_port = free_port(), free_port()
            flags = [
                a for a in container["args"]
                if not a.startswith(("--metrics-bind-address", "--health-probe-bind-address"))
            ]
            if flags[0] != cmd[0]:
                raise SystemExit(f"image-smoke: the Deployment's args start with {flags[0]!r}, the image's CMD {cmd}")
            command = [*entrypoint, *flags, f"--metrics-bind-address=127.0.0.1:{metrics_port}",
                       f"--health-probe-bind-address=127.0.0.1:{health_port}", f"--kubeconfig={KUBECONFIG}"]
            say(f"starting {shlex.join(command)} as {UID}:{UID} (read-only root, tmpfs /tmp)")
            with open(log_path, "wb") as log:
                operator = subprocess.Popen(sandbox(args.rootfs, stage, env, command, tmp_size),
                                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            started = time.monotonic()

            def alive() -> None:
                if operator is not None and operator.poll() is not None:
                    raise RuntimeError(f"zkop exited with {operator.returncode}")

            health = f"http://127.0.0.1:{health_port}"
            wait_for("/readyz 200", lambda: http_status(f"{health}/readyz") == 200, args.timeout, alive=alive)
            secure = "--metrics-secure" in flags
            metrics_url = f"{'https' if secure else 'http'}://127.0.0.1:{metrics_port}/metrics"
            token = None
            if secure:  # Prometheus' view: a ServiceAccount token bound to the shipped reader role
                reader = yaml.safe_load((REPO / "manifests/rbac/metrics_reader_role.yaml").read_text())
                api(apiserver.url, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", reader)
                api(apiserver.url, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
                    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                    "metadata": {"name": "prometheus"}, "subjects": [
                        {"kind": "ServiceAccount", "name": "prometheus", "namespace": "monitoring"}],
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                "name": reader["metadata"]["name"]}})
                token = apiserver.auth.service_account_token("monitoring", "prometheus")
            healthz, metrics = http_status(f"{health}/healthz"), http_status(metrics_url, token)
            say(f"/readyz 200 after {time.monotonic() - started:.1f} s; /healthz {healthz}, {metrics_url} {metrics}")
            if (healthz, metrics) != (200, 200):
                raise RuntimeError("/healthz or /metrics did not answer 200")
            if secure and http_status(metrics_url) != 401:
                raise RuntimeError("/metrics answered a request without a token")

            zkop_pids = _descendants(operator.pid)
            uids = {line.split()[1] for pid in zkop_pids for line in _status(pid) if line.startswith("Uid:")}
            if uids != {str(UID)}:
                raise RuntimeError(f"processes under the sandbox run as uids {sorted(uids)}, want {UID}")

            api(apiserver.url, "POST", ZKC, {
                "apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperConfig",
                "metadata": {"name": "image-smoke", "namespace": "default"},
                "spec": {"path": ZNODE, "stringData": GREETING,
                         "acl": [{"scheme": "digest", "id": _digest_id("zkop", "smoke-password"),
                                  "permissions": ["read", "write", "create", "delete", "admin"]},
                                 {"scheme": "world", "id": "anyone", "permissions": ["read"]}]},
            })
            zk = KazooClient(hosts=zookeeper.hosts)
            zk.start(timeout=15)
            try:
                def converged() -> dict[str, Any] | None:
                    status = api(apiserver.url, "GET", f"{ZKC}/image-smoke").get("status") or {}
                    ready = [c for c in status.get("conditions", []) if c.get("type") == "Ready"]
                    if status.get("state") != "Synced" or not ready or ready[0].get("status") != "True":
                        return None
                    found = zk.exists(ZNODE)
                    return dict(status) if found is not None and zk.get(ZNODE)[0] == GREETING.encode() else None

                status = wait_for("the ZooKeeperConfig to converge", converged, args.timeout, alive=alive)
                acl, _ = zk.get_acls(ZNODE)
                schemes = sorted(f"{a.id.scheme}:{a.id.id.split(':')[0]}" for a in acl)
                if schemes != ["digest:zkop", "world:anyone"]:
                    raise RuntimeError(f"unexpected ACL on {ZNODE}: {acl}")
                say(f"converged: {ZNODE} = {GREETING!r}, ACL {schemes}, state {status['state']}, "
                    f"observedGeneration {status.get('observedGeneration')}")
            finally:
                zk.stop()
                zk.close()

            # The kubelet signals the container's main process; bwrap passes on its child's exit code.
            for pid in zkop_pids:
                os.kill(pid, signal.SIGTERM)
            code = operator.wait(45)
            operator = None
            if code != 0:
                raise RuntimeError(f"zkop exited with {code} after SIGTERM, want 0")
            say("SIGTERM: zkop exited 0")
        say("PASS")
        return 0
    except Exception as err:
        print(f"image-smoke: FAIL: {err}", file=sys.stderr, flush=True)
        if log_path.exists():
            tail = log_path.read_text(errors="replace").splitlines()[-60:]
            print("image-smoke: zkop's log (last 60 lines):\n" + "\n".join(tail), file=sys.stderr, flush=True)
        return 1
    finally:
        if operator is not None and operator.poll() is None:
            os.killpg(operator.pid, signal.SIGKILL)
            operator.wait()
        shutil.rmtree(stage, ignore_errors=True)


def _digest_id(user: str, password: str) -> str:
    acl = make_digest_acl(user, password, all=True)
    return str(acl.id.id)


def _status(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return []


def _descendants(root: int) -> list[int]:
    """The processes below ``root`` that run python (zkop), found through ``/proc``."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            ppid = next((int(line.split()[1]) for line in _status(int(entry.name)) if line.startswith("PPid:")), 0)
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            todo.append(child)
            name = next((line.split()[1] for line in _status(child) if line.startswith("Name:")), "")
            if name.startswith(("python", "zkop")):
                found.append(child)
    if not found:
        raise RuntimeError("no zkop process found under the sandbox")
    return found


if __name__ == "__main__":
    sys.exit(main())
