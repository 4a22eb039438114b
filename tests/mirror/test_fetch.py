"""``zkop fetch`` against a real ZooKeeper: once (an init container) and ``--watch`` (a sidecar)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from kazoo.client import KazooClient
from zkop_testing.waiting import EVENTUALLY, wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.cmd.main import main
from zkop.mirror.files import DATA_DIR, write_atomically

LATENCIES: list[float] = []


def visible(directory: Path) -> dict[str, bytes]:
    """The user-visible files and their bytes; a file whose key an update removed between the listing and its
    read (its link goes last, after the swap, as the kubelet's ``AtomicWriter`` does) is left out."""
    found: dict[str, bytes] = {}
    for path in directory.iterdir():
        if not path.name.startswith(".."):
            with contextlib.suppress(FileNotFoundError):
                found[path.name] = path.read_bytes()
    return found


def test_fetch_once_writes_the_mirror_keys_as_files(zk_server: ZooKeeperServer, zk_base: str, zk: KazooClient,
                                                    tmp_path: Path) -> None:
    zk.create(f"{zk_base}/app/db/url", b"jdbc:pg://db", makepath=True)
    zk.create(f"{zk_base}/app/blob", b"\xff\x00")
    zk.create(f"{zk_base}/app/app.properties", "grüße=1\n".encode())
    out = tmp_path / "config"
    code = main(["fetch", "--zk-hosts", f"{zk_server.hosts}{zk_base}", "--path", "/app", "-r", "--dir", str(out)])
    assert code == 0
    assert visible(out) == {"db.url": b"jdbc:pg://db", "blob": b"\xff\x00",
                            "app.properties": "grüße=1\n".encode()}
    assert all((out / name).is_symlink() and os.readlink(out / name) == f"{DATA_DIR}/{name}" for name in visible(out))
    assert main(["fetch", "--zk-hosts", f"{zk_server.hosts}{zk_base}", "--path", "/app/db/url", "--key", "db",
                 "--dir", str(tmp_path / "one")]) == 0
    assert visible(tmp_path / "one") == {"db": b"jdbc:pg://db"}


def test_fetch_exits_1_when_a_znode_is_left_out(zk_server: ZooKeeperServer, zk_base: str, zk: KazooClient,
                                                tmp_path: Path) -> None:
    zk.create(f"{zk_base}/app/a/b", b"1", makepath=True)
    zk.create(f"{zk_base}/app/a.b", b"2")
    zk.create(f"{zk_base}/app/c", b"3")
    out = tmp_path / "config"
    assert main(["fetch", "--zk-hosts", f"{zk_server.hosts}{zk_base}", "--path", "/app", "-r", "--dir", str(out)]) == 1
    assert visible(out) == {"c": b"3"}


def test_fetch_of_a_missing_znode_fails_and_writes_nothing(zk_server: ZooKeeperServer, zk_base: str,
                                                           tmp_path: Path) -> None:
    out = tmp_path / "config"
    assert main(["fetch", "--zk-hosts", f"{zk_server.hosts}{zk_base}", "--path", "/absent", "-r",
                 "--dir", str(out)]) == 1
    assert not out.exists()


def test_atomic_write_replaces_the_set_and_removes_old_payloads(tmp_path: Path) -> None:
    assert write_atomically(tmp_path, {"a": b"1", "b": b"1"})
    first = os.readlink(tmp_path / DATA_DIR)
    assert not write_atomically(tmp_path, {"a": b"1", "b": b"1"})
    assert write_atomically(tmp_path, {"a": b"2"})
    assert visible(tmp_path) == {"a": b"2"}
    assert not (tmp_path / first).exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("..")) == sorted(
        [DATA_DIR, os.readlink(tmp_path / DATA_DIR)])


def _read_set(directory: Path) -> dict[str, bytes] | None:
    """One file set as a reader of a ConfigMap volume sees it (through ``..data``); None mid-swap."""
    try:
        names = [p.name for p in directory.iterdir() if not p.name.startswith("..")]
        target = directory / os.readlink(directory / DATA_DIR)
        return {name: (target / name).read_bytes() for name in names if (target / name).exists()}
    except FileNotFoundError:
        return None  # the payload it resolved was replaced and removed meanwhile: read again


def test_fetch_watch_every_file_set_a_reader_sees_is_one_version(zk_server: ZooKeeperServer, zk_base: str,
                                                                 zk: KazooClient, tmp_path: Path) -> None:
    files = [f"f{i}" for i in range(5)]
    for name in files:
        zk.create(f"{zk_base}/app/{name}", b"v0", makepath=True)
    out = tmp_path / "config"
    proc = subprocess.Popen([sys.executable, "-m", "zkop", "fetch", "--zk-hosts", f"{zk_server.hosts}{zk_base}",
                             "--path", "/app", "-r", "--dir", str(out), "--watch", "--log-level", "warning"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    seen: list[dict[str, bytes]] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            got = _read_set(out) if (out / DATA_DIR).exists() else None
            if got:
                seen.append(got)

    thread = threading.Thread(target=reader, daemon=True)
    try:
        wait_for(lambda: (out / DATA_DIR).exists() and visible(out) == {n: b"v0" for n in files},
                 message="first fetch")
        thread.start()
        for version in range(1, 21):
            value = f"v{version}".encode()
            txn = zk.transaction()
            for name in files:
                txn.set_data(f"{zk_base}/app/{name}", value)
            assert all(r is not None and not isinstance(r, Exception) for r in txn.commit())
            started = time.monotonic()
            wait_for(lambda value=value: visible(out) == {n: value for n in files},  # type: ignore[misc]
                     message=f"version {version} fetched")
            LATENCIES.append(time.monotonic() - started)
        zk.delete(f"{zk_base}/app/f4")
        wait_for(lambda: "f4" not in visible(out), message="deleted znode's file gone")
    finally:
        stop.set()
        if thread.is_alive():
            thread.join(EVENTUALLY)
        proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=EVENTUALLY)[0].decode()
    assert proc.returncode == 0, output
    versions = {frozenset(s.values()) for s in seen}
    mixed = [s for s in seen if len(set(s.values())) > 1]
    assert not mixed, f"a reader saw a mix of versions: {mixed[:3]}"
    assert len(versions) >= 3, f"the reader saw too few versions to mean anything: {versions}"
    print(f"zkop fetch --watch: change to files in max {max(LATENCIES) * 1000:.0f} ms "
          f"(median {sorted(LATENCIES)[len(LATENCIES) // 2] * 1000:.0f} ms) over {len(LATENCIES)} changes; "
          f"reader checked {len(seen)} file sets")
