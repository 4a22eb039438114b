"""``zkop fetch --watch`` with hooks and rendered files, against a real ZooKeeper: each hook fires once per content
change, never for a partial set, not for an outage; an application reloads through each of the three hooks."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from zkop_testing.waiting import EVENTUALLY, wait_for
from zkop_testing.zookeeper import ZooKeeperEnsemble, ZooKeeperServer, connected_client

from zkop.cmd.main import main

#: The exec hook of these tests: records what the application would see when told (the file, read whole, and the
#: environment zkop gives the command).
RECORDER = """
import json, os, sys
with open(os.environ["ZKOP_OUTPUT"], "rb") as f:
    content = f.read().decode()
entry = {"content": content, "digest": os.environ["ZKOP_DIGEST"],
         "keys": os.environ["ZKOP_CHANGED_KEYS"].split("\\n") if os.environ["ZKOP_CHANGED_KEYS"] else []}
with open(sys.argv[1], "a") as log:
    log.write(json.dumps(entry) + "\\n")
"""


def _records(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line]


@contextlib.contextmanager
def sidecar(hosts: str, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    """``zkop fetch --watch`` as a process; stopped (SIGTERM, exit 0) on leaving."""
    proc = subprocess.Popen([sys.executable, "-m", "zkop", "fetch", "--zk-hosts", hosts, "--watch",
                             "--log-level", "warning", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=EVENTUALLY)[0].decode()
        assert proc.returncode == 0, output
        assert "Traceback" not in output, output


def _recorder(tmp_path: Path) -> tuple[str, Path]:
    script = tmp_path / "recorder.py"
    script.write_text(RECORDER)
    log = tmp_path / "notified.jsonl"
    return f"{sys.executable} {script} {log}", log


def test_exec_hook_once_per_change_never_a_partial_set_and_bounded_under_a_burst(
        zk_server: ZooKeeperServer, zk_base: str, zk: KazooClient, tmp_path: Path) -> None:
    names = [f"f{i}" for i in range(5)]
    for name in names:
        zk.create(f"{zk_base}/app/{name}", b"v0", makepath=True)
    zk.create(f"{zk_base}/app/counter", b"-1")
    command, log = _recorder(tmp_path)
    out = tmp_path / "app.json"
    with sidecar(f"{zk_server.hosts}{zk_base}", "--path", "/app", "-r", "--out", str(out), "--format", "json",
                 "--exec", command):
        wait_for(lambda: len(_records(log)) == 1, message="the first write notifies once")
        first = json.loads(_records(log)[0]["content"])
        assert first == {**{n: "v0" for n in names}, "counter": "-1"}
        assert sorted(_records(log)[0]["keys"]) == sorted([*names, "counter"])
        # 20 multi-op transactions, each changing every f* znode, interleaved with 100 writes of one znode in ~1 s.
        started = time.monotonic()
        for i in range(100):
            if i % 5 == 0:
                txn = zk.transaction()
                for name in names:
                    txn.set_data(f"{zk_base}/app/{name}", f"v{i // 5 + 1}".encode())
                assert not any(isinstance(r, Exception) for r in txn.commit())
            zk.set(f"{zk_base}/app/counter", str(i).encode())
            time.sleep(max(0.0, started + (i + 1) / 100 - time.monotonic()))  # the load's shape: 100 writes in 1 s
        final = {**{n: "v20" for n in names}, "counter": "99"}
        wait_for(lambda: _records(log) and json.loads(_records(log)[-1]["content"]) == final,
                 message="the last notification shows the final content")
        assert json.loads(out.read_text()) == final
    records = _records(log)
    contents = [json.loads(r["content"]) for r in records]
    mixed = [c for c in contents if len({c[n] for n in names}) != 1]
    assert not mixed, f"a hook saw a partial transaction: {mixed[:3]}"
    digests = [r["digest"] for r in records]
    assert all(a != b for a, b in itertools.pairwise(digests)), "two notifications for one content"
    assert len(records) <= 1 + 25, f"{len(records)} notifications for a 1 s burst of 120 changes"
    print(f"exec hook: {len(records) - 1} notifications for 100 writes and 20 transactions in 1 s "
          f"(--wait 50ms:200ms)")


def test_no_notification_for_an_outage_and_one_for_a_change_made_meanwhile(
        zk_ensemble: ZooKeeperEnsemble, tmp_path: Path) -> None:
    root = f"/fetch-outage-{uuid.uuid4().hex[:8]}"
    member = zk_ensemble.member(0)
    others = ",".join(zk_ensemble.member(i).hosts for i in range(1, zk_ensemble.size))
    with connected_client(others) as zk:
        zk.create(f"{root}/a", b"v0", makepath=True)
        zk.create(f"{root}/b", b"v0")
        command, log = _recorder(tmp_path)
        # The sidecar's only server is member 0: stopping it is an outage for the sidecar, not for the ensemble.
        with sidecar(member.hosts, "--path", root, "-r", "--out", str(tmp_path / "app.properties"),
                     "--format", "properties", "--exec", command, "--wait", "50ms:200ms"):
            wait_for(lambda: len(_records(log)) == 1, message="first notification")
            member.stop()
            member.start()
            zk.set(f"{root}/a", b"v1")
            wait_for(lambda: len(_records(log)) >= 2 and "a=v1" in _records(log)[-1]["content"],
                     message="notified of the change after the restart")
            assert len(_records(log)) == 2, "a notification for the outage itself"
            member.stop()
            txn = zk.transaction()
            txn.set_data(f"{root}/a", b"v2")
            txn.set_data(f"{root}/b", b"v2")
            txn.commit()
            member.start()
            wait_for(lambda: len(_records(log)) >= 3, message="notified of the change made while it was away")
            zk.set(f"{root}/a", b"v3")  # a marker: nothing came between the two
            wait_for(lambda: "a=v3" in _records(log)[-1]["content"], message="marker change")
        records = _records(log)
        assert [r["content"] for r in records] == ["a=v0\nb=v0\n", "a=v1\nb=v0\n", "a=v2\nb=v2\n", "a=v3\nb=v2\n"]
        assert records[2]["keys"] == ["a", "b"] and records[3]["keys"] == ["a"]
        zk.delete(root, recursive=True)


# --- an application fed by the sidecar ----------------------------------------------------------------------

#: A small application: serves its configuration's ``greeting`` and reloads the file on SIGHUP or on
#: ``POST /actuator/refresh`` (Spring Boot Actuator's endpoint); prints ``{"seen": value, "at": time}`` on each load.
APP = """
import http.server, json, os, signal, sys, threading, time
config, pid_file = sys.argv[1], sys.argv[2]
state = {"value": None}
def load(*_):
    value = None
    with open(config, encoding="iso-8859-1") as f:
        for line in f:
            if line.startswith("greeting="):
                value = line.rstrip("\\n").split("=", 1)[1]
    print(json.dumps({"loads": value}), flush=True)
    if value != state["value"]:
        state["value"] = value
        print(json.dumps({"seen": value, "at": time.time()}), flush=True)
class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        if self.path == "/actuator/refresh":
            load()
            self.send_response(200); self.send_header("Content-Type", "application/json"); self.end_headers()
            self.wfile.write(b'["greeting"]')
        else:
            self.send_response(404); self.end_headers()
    def log_message(self, *args):
        pass
signal.signal(signal.SIGHUP, load)
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
load()
with open(pid_file + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(pid_file + ".tmp", pid_file)
print(json.dumps({"port": server.server_address[1]}), flush=True)
server.serve_forever()
"""


class App:
    """The application above as a process named ``name`` (its ``argv[0]``)."""

    def __init__(self, tmp_path: Path, config: Path, name: str) -> None:
        script = tmp_path / "app.py"
        script.write_text(APP)
        self.pid_file = tmp_path / "app.pid"
        self.proc = subprocess.Popen(["bash", "-c", 'exec -a "$0" "$@"', name, sys.executable, str(script),
                                      str(config), str(self.pid_file)], stdout=subprocess.PIPE, text=True)
        self.events: list[dict[str, Any]] = []
        self.port = int(self._next("port"))

    def _next(self, key: str) -> Any:
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            assert line, "the application exited"
            event = json.loads(line)
            self.events.append(event)
            if key in event:
                return event[key]

    def wait_seen(self, value: str) -> float:
        """Block until the application loaded ``value``; return when (its clock: ``time.time()``)."""
        while True:
            seen = [e for e in self.events if "seen" in e]
            if seen and seen[-1]["seen"] == value:
                return float(seen[-1]["at"])
            self._next("seen")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(EVENTUALLY)
        assert self.proc.stdout is not None
        self.proc.stdout.close()


def _hook_flags(kind: str, app: App, tmp_path: Path, name: str) -> Sequence[str]:
    if kind == "exec":  # the way confd's reload_cmd is used: the user asks for a shell themselves
        return ["--exec", f"sh -c 'kill -HUP \"$(cat {app.pid_file})\"'"]
    if kind == "signal":
        return ["--signal", "HUP", "--process-name", name]
    return ["--notify-url", f"http://127.0.0.1:{app.port}/actuator/refresh"]


@pytest.mark.parametrize("kind", ["exec", "signal", "notify-url"])
def test_an_application_reloads_through_each_hook(kind: str, zk_server: ZooKeeperServer, zk_base: str,
                                                  zk: KazooClient, tmp_path: Path) -> None:
    zk.create(f"{zk_base}/app/greeting", b"hello", makepath=True)
    config = tmp_path / "app.properties"
    assert main(["fetch", "--zk-hosts", f"{zk_server.hosts}{zk_base}", "--path", "/app", "-r",
                 "--out", str(config), "--format", "properties"]) == 0  # the init container
    name = f"zkop-app-{uuid.uuid4().hex[:6]}"
    app = App(tmp_path, config, name)
    try:
        assert app.wait_seen("hello")
        latencies = []
        with sidecar(f"{zk_server.hosts}{zk_base}", "--path", "/app", "-r", "--out", str(config),
                     "--format", "properties", *_hook_flags(kind, app, tmp_path, name)):
            for version in range(1, 6):
                value = f"hello-{version}"
                written = time.time()
                zk.set(f"{zk_base}/app/greeting", value.encode())
                seen_at = app.wait_seen(value)
                if version > 1:  # the first one also waits for the sidecar's start
                    latencies.append(seen_at - written)
        assert [e["seen"] for e in app.events if "seen" in e] == ["hello", *(f"hello-{v}" for v in range(1, 6))]
        # told once per change: not at the sidecar's start (the init container wrote the same), never twice
        assert [e["loads"] for e in app.events if "loads" in e] == ["hello", *(f"hello-{v}" for v in range(1, 6))]
        print(f"fetch sidecar --{kind}: znode write to the application's new value in median "
              f"{sorted(latencies)[len(latencies) // 2] * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms "
              f"over {len(latencies)} changes after the first (--wait 50ms:200ms)")
    finally:
        app.stop()


def test_an_unrenderable_subtree_writes_nothing_and_notifies_nothing(zk_server: ZooKeeperServer, zk_base: str,
                                                                     zk: KazooClient, tmp_path: Path) -> None:
    zk.create(f"{zk_base}/app/a", b"1", makepath=True)
    out = tmp_path / "app.json"
    command, log = _recorder(tmp_path)
    with sidecar(f"{zk_server.hosts}{zk_base}", "--path", "/app", "-r", "--out", str(out), "--format", "json",
                 "--exec", command) as proc:
        wait_for(lambda: len(_records(log)) == 1, message="first notification")
        zk.create(f"{zk_base}/app/a/b", b"2")  # a: both a value and an object
        zk.create(f"{zk_base}/app/blob", b"\xff")
        zk.set(f"{zk_base}/app/a", b"")  # a is structure again; blob is still not UTF-8
        zk.delete(f"{zk_base}/app/blob")
        wait_for(lambda: json.loads(out.read_text()) == {"a": {"b": "2"}}, message="renderable again")
        wait_for(lambda: len(_records(log)) == 2, message="one notification for the new content")
    assert proc.stdout is not None
    assert [json.loads(r["content"]) for r in _records(log)] == [{"a": "1"}, {"a": {"b": "2"}}]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


def test_fetch_once_renders_each_format_and_refuses_a_collision(zk_server: ZooKeeperServer, zk_base: str,
                                                                zk: KazooClient, tmp_path: Path) -> None:
    zk.create(f"{zk_base}/app/db/url", b"jdbc:pg://db", makepath=True)
    zk.create(f"{zk_base}/app/..data/x", b"not a path", makepath=True)
    hosts = f"{zk_server.hosts}{zk_base}"
    assert main(["fetch", "--zk-hosts", hosts, "--path", "/app", "-r", "--out", str(tmp_path / "a.json"),
                 "--format", "json"]) == 0
    assert json.loads((tmp_path / "a.json").read_text()) == {"db": {"url": "jdbc:pg://db"},
                                                             "..data": {"x": "not a path"}}
    assert main(["fetch", "--zk-hosts", hosts, "--path", "/app", "-r", "--out", str(tmp_path / "a.env"),
                 "--format", "env"]) == 0
    assert (tmp_path / "a.env").read_text() == "DB_URL='jdbc:pg://db'\n__DATA_X='not a path'\n"
    template = tmp_path / "t.tmpl"
    template.write_text("url={{ tree.db.url }}\n")
    assert main(["fetch", "--zk-hosts", hosts, "--path", "/app", "-r", "--out", str(tmp_path / "t.out"),
                 "--template", str(template)]) == 0
    assert (tmp_path / "t.out").read_text() == "url=jdbc:pg://db\n"
    zk.create(f"{zk_base}/app/db.url", b"other")
    before = (tmp_path / "a.json").read_bytes()
    assert main(["fetch", "--zk-hosts", hosts, "--path", "/app", "-r", "--out", str(tmp_path / "a.json"),
                 "--format", "properties"]) == 1
    assert (tmp_path / "a.json").read_bytes() == before


def test_znode_names_cannot_move_a_directory_write_out_of_its_directory(zk_server: ZooKeeperServer, zk_base: str,
                                                                        zk: KazooClient, tmp_path: Path) -> None:
    zk.create(f"{zk_base}/app/..data", b"evil", makepath=True)
    zk.create(f"{zk_base}/app/..x/y", b"evil", makepath=True)
    zk.create(f"{zk_base}/app/...", b"evil")
    zk.create(f"{zk_base}/app/ok", b"1")
    out = tmp_path / "config"
    assert main(["fetch", "--zk-hosts", f"{zk_server.hosts}{zk_base}", "--path", "/app", "-r", "--dir", str(out)]) == 1
    assert sorted(os.listdir(tmp_path)) == ["config"]
    assert (out / "ok").read_bytes() == b"1" and (out / "..data").is_symlink()
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith("..")) == ["ok"]


@pytest.mark.parametrize("args", [
    ["--dir", "D", "--key", "../x"], ["--dir", "D", "--key", "a/b"], ["--dir", "D", "--key", "..data"],
    ["--dir", "D", "--exec", "true"], ["--out", "F"], ["--dir", "D", "--format", "json"],
    ["--out", "F", "--format", "json", "--watch", "--signal", "HUP"],
    ["--out", "F", "--format", "json", "--watch", "--notify-url", "file:///etc/passwd"],
    ["--out", "F", "--format", "json", "--watch", "--wait", "5s:1s"],
])
def test_bad_flag_combinations_are_usage_errors(args: list[str], zk_server: ZooKeeperServer,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["fetch", "--zk-hosts", zk_server.hosts, "--path", "/app", *args])
    assert exit_.value.code == 2
    assert "error:" in capsys.readouterr().err
