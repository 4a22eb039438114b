"""``hack/demo.sh``, README's first command, end to end: it says what it is doing, shows what converged
(``kubectl get zkc``, znode values as text, ACLs, Events, ownership records) and leaves nothing behind —
after a normal run and after Ctrl-C/SIGTERM under ``--keep-running``.

Each run gets its own empty ``TMPDIR``; it must be empty again afterwards.
"""

from __future__ import annotations

import importlib.util
import os
import queue
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from kazoo.security import ACL, Id, Permissions
from zkop_testing.controlplane import NEWEST
from zkop_testing.zookeeper import DEBIAN, find_zookeeper, port_is_free

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "hack" / "demo.sh"


def _demo_env(tmpdir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "ZKOP_DEMO_SETUP")}
    env["TMPDIR"] = str(tmpdir)
    return env


@pytest.fixture
def tmpdir_for_demo() -> Iterator[Path]:
    """A fresh, empty directory for the demo's ``TMPDIR``, of our own: pytest's ``/tmp/pytest-of-<user>``
    base directories are pruned by concurrent pytest runs of the same user, so a long test there may lose its."""
    tmpdir = Path(tempfile.mkdtemp(prefix="zkop-test-demo-"))
    yield tmpdir
    shutil.rmtree(tmpdir, ignore_errors=True)


def _no_process_mentions(text: str) -> bool:
    """True if no running process has ``text`` in its command line (zkop run gets the kubeconfig path)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            return False
    return True


# The id names the minor so that the suite's conftest builds its control plane before the tests start.
@pytest.mark.parametrize("control_plane", ["memory", "real"], ids=["in-memory", f"k8s-{NEWEST}"])
def test_demo_shows_what_converged_and_leaves_nothing_behind(tmpdir_for_demo: Path, control_plane: str) -> None:
    tmpdir = tmpdir_for_demo
    done = subprocess.run([str(DEMO), "--control-plane", control_plane], env=_demo_env(tmpdir),
                          capture_output=True, text=True, timeout=280, check=False)
    out = done.stdout
    assert done.returncode == 0, f"{out}\n{done.stderr}"
    # progress, one line per step with the elapsed seconds
    started = {"memory": "starting the in-memory Kubernetes API server",
               "real": "starting etcd, kube-apiserver and kube-controller-manager"}[control_plane]
    for what in ("starting ZooKeeper", started, "with zkop's CRD; starting `zkop run`", "applying examples/",
                 "waiting for zkop to reconcile"):
        assert re.search(rf"^>> \[ *\d+s\] .*{re.escape(what)}", out, re.MULTILINE), what
    # the suite's default ZooKeeper (the newest line, or what ZKOP_ZOOKEEPER_DEFAULT names), resolved by demo.sh
    zookeeper = find_zookeeper()
    release = "3.8.0" if zookeeper.name == DEBIAN else zookeeper.name
    assert re.search(rf"^>> \[ *\d+s\] ZooKeeper {re.escape(release)} serves on 127\.0\.0\.1:\d+; ", out,
                     re.MULTILINE), out
    if control_plane == "real":
        assert re.search(rf"^>> \[ *\d+s\] Kubernetes {re.escape(NEWEST)} on https://127\.0\.0\.1:\d+ ",
                         out, re.MULTILINE), out
    # a real `kubectl get zkc -A`: the Table the API server builds from the CRD's printer columns
    assert re.search(r"^NAMESPACE +NAME +PATH +POLICY +STATE +READY +AGE$", out, re.MULTILINE), out
    assert re.search(r"^default +payments-routing-rules +/app/routing/payments/rules +createOrUpdate +Synced +True +"
                     r"\d+s$", out, re.MULTILINE), out
    assert re.search(r"^default +search-degradation-switch +/app/degradation/search/enabled +createOnly +Synced +"
                     r"True +\d+s$", out, re.MULTILINE), out
    # znode values as text, per spec.encoding; never Python's bytes repr
    assert "b'" not in out
    assert re.search(r"^/app/features/new-recommendation-engine/enabled  <- default/new-recommendation-engine"
                     r"-enabled .*\n    value: true$", out, re.MULTILINE), out
    assert '    value: {"primary": "eu-west", "failover": "eu-central"}\n' in out
    assert '    value: {"canary": {"weight": 5, "header": "x-canary"}}  (+ final newline)\n' in out
    # ACLs in zkCli notation
    assert "    acl:   digest:ops:Rmvt8l8VUbmpurbNUjest0kMlgU=:cdrwa\n    acl:   world:anyone:r\n" in out
    assert "    acl:   world:anyone:cdrwa\n" in out
    # the Events zkop emitted
    assert re.search(r"^LAST SEEN +TYPE +REASON +OBJECT +MESSAGE$", out, re.MULTILINE), out
    assert re.search(r"^\S+ +Normal +Created +payments-routing-rules +znode /app/routing/payments/rules created",
                     out, re.MULTILINE), out
    # the ownership records, decoded
    assert re.search(r"^/app/routing/payments/rules  owned by ZooKeeperConfig default/payments-routing-rules  "
                     r"\(cluster 'default', uid [0-9a-f-]{36}\)$", out, re.MULTILINE), out
    # nothing left behind
    assert sorted(os.listdir(tmpdir)) == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_demo_keep_running_stops_everything_on_a_signal(tmpdir_for_demo: Path, signum: signal.Signals) -> None:
    tmpdir = tmpdir_for_demo
    proc = subprocess.Popen([str(DEMO), "--keep-running"], env=_demo_env(tmpdir), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines: queue.Queue[str] = queue.Queue()
    out = ""

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put("")  # EOF

    threading.Thread(target=read, daemon=True).start()
    try:
        deadline = time.monotonic() + 200
        while not out.endswith("\n") or not out.splitlines()[-1].startswith("   ZooKeeper:"):
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"--keep-running did not report it is running:\n{out}")
            if not line:
                pytest.fail(f"the demo exited early ({proc.wait()}):\n{out}")
            out += line
        kubeconfig = Path(re.findall(r"export KUBECONFIG=(\S+)", out)[0])
        port = int(re.findall(r"ZooKeeper \S+ serves on 127\.0\.0\.1:(\d+)", out)[0])
        workdir = kubeconfig.parent
        assert workdir.parent == tmpdir and workdir.name.startswith("zkop-demo-")
        # the ZooKeeper credentials: a private directory, a file only its owner can read
        assert stat.S_IMODE(workdir.stat().st_mode) == 0o700
        assert stat.S_IMODE((workdir / "zookeeper-credentials").stat().st_mode) == 0o600
        assert not port_is_free(port) and not _no_process_mentions(str(kubeconfig))
        proc.send_signal(signum)
        proc.wait(timeout=60)
        rest = "".join(iter(lines.get, ""))
    finally:
        if proc.poll() is None:  # a failed assertion: let the demo clean up, kill it only if it does not
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, out + rest
    assert "stopped; removed" in rest, rest
    assert port_is_free(port), "ZooKeeper still runs"
    assert _no_process_mentions(str(kubeconfig)), "zkop run still runs"
    assert sorted(os.listdir(tmpdir)) == []


def _load_demo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("zkop_demo", REPO / "hack" / "demo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("zkop_demo", module)
    spec.loader.exec_module(module)
    return module


def test_demo_shows_values_and_acls_for_people() -> None:
    demo = _load_demo()
    assert demo.show_value(b"true", "utf-8") == "true"
    assert demo.show_value(b"a\nb\n", "utf-8") == "a\n           b  (+ final newline)"
    assert demo.show_value(b"\x00\x01", "binary") == "AAE=  (binary, shown as base64; 2 bytes)"
    assert demo.show_value(b"\xff", "utf-8") == "ff  (hex: not valid UTF-8)"
    assert demo.show_acl(ACL(Permissions.READ | Permissions.ADMIN, Id("digest", "ops:HASH"))) == "digest:ops:HASH:ra"
    assert demo.show_acl(ACL(Permissions.ALL, Id("world", "anyone"))) == "world:anyone:cdrwa"
    assert demo.show_owner(b'{"clusterId":"c","managedBy":"zkop","name":"n","namespace":"ns","uid":"u"}') == \
        "ZooKeeperConfig ns/n  (cluster 'c', uid u)"
