"""``zkop fetch``: a znode or a subtree written into a directory, once or kept up to date.

For workloads that want files instead of a ConfigMap: an init container runs ``zkop fetch --path P
--dir D`` before the application starts, a sidecar ``--watch``. The files are exactly the keys a
ZooKeeperMirror of the same path would put in its ConfigMap (:mod:`zkop.mirror.keys`; collisions,
invalid keys and unreadable znodes are left out and logged), written atomically
(:func:`zkop.mirror.files.write_atomically`). Only reads: the session gets no write surface.
"""

from __future__ import annotations

import argparse
import base64
import logging
import signal
import threading
from types import FrameType
from typing import Any

from zkop.cmd.flags import EXIT_ERROR, LOG_LEVELS, log_level, positive_duration, znode_path
from zkop.mirror.decide import MirrorSpec, contents
from zkop.mirror.files import write_atomically
from zkop.mirror.tree import TreeReader
from zkop.zookeeper.adapter import ZooKeeperAdapter, ZooKeeperError, ZooKeeperUnavailable

__all__ = ["add_command", "fetch_files"]

log = logging.getLogger("zkop.fetch")


def add_command(sub: Any) -> None:
    """Add ``fetch`` to the subparsers ``sub``."""
    from zkop.cmd.main import add_zookeeper_flags

    fetch = sub.add_parser(
        "fetch", help="write a znode or subtree into a directory (once, or kept up to date with --watch)",
        description="Write the znode at --path (with --recursive, every znode below it) into --dir as files named "
                    "like a ZooKeeperMirror's ConfigMap keys, atomically as the kubelet updates a ConfigMap "
                    "volume. Exit 0 ok, 1 some znodes left out or --path missing, 2 error.")
    add_zookeeper_flags(fetch, writes=False)
    fetch.add_argument("--path", required=True, type=znode_path, metavar="PATH", help="the znode or subtree root")
    fetch.add_argument("--dir", required=True, metavar="DIRECTORY", help="directory to write into")
    fetch.add_argument("-r", "--recursive", action="store_true", help="every znode below --path, not only it")
    fetch.add_argument("--key", default=None, metavar="NAME",
                       help="file name of a single znode (default: its last path name)")
    fetch.add_argument("--watch", action="store_true", help="keep running and rewrite on every change")
    fetch.add_argument("--debounce", type=positive_duration, default=0.05, metavar="DURATION",
                       help="with --watch, wait this long after a change for more (default 50ms)")
    fetch.add_argument("--log-level", type=log_level, default="info", metavar="{" + ",".join(LOG_LEVELS) + "}")
    fetch.add_argument("--log-format", default="text", choices=["text", "json"])
    fetch.set_defaults(func=_run_fetch)


def fetch_files(reader: TreeReader, spec: MirrorSpec, directory: str) -> tuple[bool, int]:
    """Read ``spec``'s znodes and write them into ``directory``; returns (written, znodes left out).

    Raises:
        FileNotFoundError: ``spec.path`` does not exist (nothing written).
    """
    snapshot = reader.snapshot(spec.path, recursive=spec.recursive)
    if not snapshot.root_exists:
        raise FileNotFoundError(f"znode {spec.path} does not exist")
    wanted = contents(spec, snapshot)
    for skipped in wanted.skipped:
        log.warning("left out: %s", skipped.message)
    files = {**{k: v.encode("utf-8") for k, v in wanted.data.items()},
             **{k: base64.b64decode(v) for k, v in wanted.binary_data.items()}}
    written = write_atomically(directory, files)
    if written:
        log.info("wrote %d files from %s into %s", len(files), spec.path, directory)
    return written, len(wanted.skipped)


def _run_fetch(args: argparse.Namespace) -> int:
    from zkop.cmd.main import connection_options

    spec = MirrorSpec(args.path, bool(args.recursive), "", args.key)
    changed = threading.Event()
    stop = threading.Event()
    adapter = ZooKeeperAdapter(connection_options(args))
    reader = TreeReader(adapter, lambda path: changed.set())
    adapter.add_watch_listener(lambda path: changed.set())

    def on_state(state: str) -> None:
        if state == "CONNECTED":
            reader.forget_all()
            adapter.forget_all()
            changed.set()

    try:
        adapter.start()
    except ZooKeeperError as err:
        log.error("cannot connect to ZooKeeper: %s", err)
        return EXIT_ERROR
    try:
        if args.watch:
            adapter.watch_subtrees("fetch", [args.path], whole=True)

            def on_signal(signum: int, frame: FrameType | None) -> None:
                stop.set()
                changed.set()

            signal.signal(signal.SIGTERM, on_signal)
            signal.signal(signal.SIGINT, on_signal)
            adapter.add_session_listener(on_state)
        skipped = 0
        while True:
            changed.clear()
            try:
                _, skipped = fetch_files(reader, spec, args.dir)
            except ZooKeeperUnavailable as err:
                if not args.watch:
                    log.error("%s", err)
                    return EXIT_ERROR
                log.warning("ZooKeeper unavailable (%s); retrying", err)
                stop.wait(1.0)
                changed.set()
            except FileNotFoundError as err:
                if not args.watch:
                    log.error("%s; nothing written", err)
                    return 1
                log.warning("%s yet; waiting for it", err)
            except (ZooKeeperError, OSError) as err:
                log.error("%s", err)
                return EXIT_ERROR
            if not args.watch:
                return 1 if skipped else 0
            changed.wait()
            if stop.is_set():
                return 0
            stop.wait(args.debounce)
            if stop.is_set():
                return 0
    finally:
        adapter.stop()
