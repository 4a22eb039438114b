"""``zkop fetch``'s loop: consistent snapshots of a subtree written as files, and the application notified.

A pass reads the subtree with watches armed (:class:`~zkop.mirror.tree.TreeReader`), then proves the snapshot
consistent before anything is written: one round trip to the server (``sync``), then a marker through kazoo's
event queue. ZooKeeper sends a session's watch notifications in order with its replies ("a client will see a
watch event for a znode it is watching before seeing the new data"), so when the marker runs, every change to a
znode read during the pass has been heard. If none was, every value read is the value at that one moment — a
multi-op transaction is either wholly in the snapshot or not at all; if one was, the pass is discarded and
read again. So files never mix two versions and a hook never hears of a partial set.

Changes are gathered until quiet for :attr:`Wait.minimum` seconds, at most :attr:`Wait.maximum` after the first
(consul-template's ``wait {min, max}``). The application is notified (:class:`~zkop.hooks.HookRunner`) only when
what is written differs (SHA-256) from what was last written or, at start, from what the output already held.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from kazoo.exceptions import KazooException
from kazoo.protocol.states import Callback

from zkop.hooks import Change, HookRunner
from zkop.mirror.decide import MirrorSpec, contents
from zkop.mirror.files import write_atomically
from zkop.mirror.snapshot import Snapshot
from zkop.mirror.tree import TreeReader
from zkop.render import Entry, RenderError, SandboxedTemplate, render, write_file_atomically
from zkop.zookeeper.adapter import ZooKeeperAdapter, ZooKeeperError, ZooKeeperUnavailable

__all__ = ["DirectoryOutput", "FileOutput", "Output", "Rendered", "Sidecar", "Wait", "entries_of"]

log = logging.getLogger("zkop.fetch")


@dataclass(frozen=True)
class Wait:
    """Quiescence: write once no change came for ``minimum`` seconds, at the latest ``maximum`` seconds after the
    first change of a burst."""

    minimum: float = 0.05
    maximum: float = 0.2


@dataclass(frozen=True)
class Rendered:
    """What one pass would write: ``values`` by key (to tell which keys changed), the ``digest`` of the output and
    how many znodes were ``skipped``."""

    values: Mapping[str, bytes]
    digest: str
    skipped: int
    payload: object


class Output(Protocol):
    """Where a snapshot goes: :meth:`render` (pure) and :meth:`write` (atomic)."""

    name: str

    def render(self, spec: MirrorSpec, snapshot: Snapshot) -> Rendered:
        """What ``snapshot`` renders to. Raises RenderError: it cannot be rendered (nothing is written)."""

    def write(self, rendered: Rendered) -> bool:
        """Write it atomically; False if the output already held it. Raises OSError."""


def entries_of(spec: MirrorSpec, snapshot: Snapshot) -> list[Entry]:
    """The snapshot's znodes by their names below ``spec.path`` (a single znode: ``spec.key`` or its last name)."""
    if not spec.recursive:
        name = spec.key or spec.path.rsplit("/", 1)[1] or "root"
        return [Entry((name,), node.data) for node in snapshot.nodes]
    return [Entry(tuple(node.relative.split("/")), node.data) for node in snapshot.nodes]


def _digest(values: Mapping[str, bytes]) -> str:
    sha = hashlib.sha256()
    for key in sorted(values):
        sha.update(f"{len(key)}:{key}{len(values[key])}:".encode())
        sha.update(values[key])
    return sha.hexdigest()


class DirectoryOutput:
    """The mirror's keys as files in ``directory`` (:func:`~zkop.mirror.files.write_atomically`)."""

    def __init__(self, directory: str) -> None:
        self.name = directory
        self.directory = directory

    def render(self, spec: MirrorSpec, snapshot: Snapshot) -> Rendered:
        """The files (collisions, invalid keys and unreadable znodes left out and logged)."""
        wanted = contents(spec, snapshot)
        for skipped in wanted.skipped:
            log.warning("left out: %s", skipped.message)
        files = {**{k: v.encode("utf-8") for k, v in wanted.data.items()},
                 **{k: base64.b64decode(v) for k, v in wanted.binary_data.items()}}
        return Rendered(files, _digest(files), len(wanted.skipped), files)

    def write(self, rendered: Rendered) -> bool:
        """Swap the directory's ``..data`` to the new files."""
        assert isinstance(rendered.payload, dict)
        return write_atomically(self.directory, rendered.payload)


class FileOutput:
    """The subtree as one file ``path``, in ``form`` (:data:`zkop.render.FORMATS`) or through ``template``."""

    def __init__(self, path: str, *, form: str | None = None, template: SandboxedTemplate | None = None) -> None:
        if (form is None) == (template is None):
            raise ValueError("--out needs exactly one of --format and --template")
        self.name = path
        self.path = path
        self.form = form
        self.template = template

    def render(self, spec: MirrorSpec, snapshot: Snapshot) -> Rendered:
        """The file's bytes; an unreadable znode (NoAuth) is an error too: the file holds every znode or is not
        written. Raises RenderError."""
        if snapshot.unreadable:
            raise RenderError(f"zkop may not read {', '.join(snapshot.unreadable[:5])} (NoAuth); nothing is written")
        entries = entries_of(spec, snapshot)
        if self.template is not None:
            content = self.template.render(entries, spec.path)
        else:
            assert self.form is not None
            content = render(self.form, entries)
        values = {entry.path: entry.data for entry in entries}
        return Rendered(values, hashlib.sha256(content).hexdigest(), 0, content)

    def write(self, rendered: Rendered) -> bool:
        """Replace the file (temporary file, fsync, rename, fsync of the directory)."""
        assert isinstance(rendered.payload, bytes)
        return write_file_atomically(self.path, rendered.payload)


def _changed_keys(before: Mapping[str, bytes] | None, after: Mapping[str, bytes]) -> tuple[str, ...]:
    if before is None:
        return tuple(sorted(after))
    return tuple(sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k)))


class Sidecar:
    """Reads ``spec``'s znodes through ``adapter`` into ``output`` and notifies ``hooks``; see the module docstring.

    Thread-safe for :meth:`stop` (a signal handler may call it).
    """

    def __init__(self, adapter: ZooKeeperAdapter, spec: MirrorSpec, output: Output, *, hooks: HookRunner | None = None,
                 wait: Wait = Wait(), retry_interval: float = 1.0) -> None:
        self.adapter = adapter
        self.spec = spec
        self.output = output
        self.hooks = hooks
        self.wait = wait
        self.retry_interval = retry_interval
        self._changed = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._generation = 0
        self._last_digest: str | None = None
        self._last_values: Mapping[str, bytes] | None = None
        self.reader = TreeReader(adapter, self._on_change)
        adapter.add_watch_listener(self._on_change)

    def _on_change(self, path: str = "") -> None:
        with self._lock:
            self._generation += 1
        self._changed.set()

    def _on_state(self, state: str) -> None:
        if state == "CONNECTED":
            self.reader.forget_all()
            self.adapter.forget_all()
        self._on_change()

    def stop(self) -> None:
        """End :meth:`watch` (after the pass under way)."""
        self._stop.set()
        self._changed.set()

    def _barrier(self, timeout: float) -> None:
        """Return once every watch notification sent before a fresh round trip has run its listeners."""
        client = self.adapter.client
        if not self.adapter.connected:
            raise ZooKeeperUnavailable("not connected")
        try:
            client.sync_async("/").get(timeout=timeout)
        except (KazooException, OSError, client.handler.timeout_exception) as err:
            raise ZooKeeperUnavailable(f"sync: {type(err).__name__}") from None
        done = threading.Event()
        client.handler.dispatch_callback(Callback("watch", done.set, ()))
        if not done.wait(timeout):
            raise ZooKeeperUnavailable("kazoo's event thread did not answer")

    def read(self) -> Snapshot | None:
        """One consistent snapshot, or None if a change was heard while reading (read again).

        Raises:
            ZooKeeperUnavailable: not connected; ZooKeeperError: another ZooKeeper error.
        """
        with self._lock:
            generation = self._generation
        snapshot = self.reader.snapshot(self.spec.path, recursive=self.spec.recursive)
        self._barrier(self.adapter.options.session_timeout)
        with self._lock:
            return snapshot if generation == self._generation else None

    def once(self) -> tuple[bool, int]:
        """Write the output once (no hooks): (written, znodes left out).

        Raises:
            FileNotFoundError: ``spec.path`` does not exist (nothing written); RenderError; OSError;
            ZooKeeperUnavailable, ZooKeeperError.
        """
        while True:
            snapshot = self.read()
            if snapshot is not None:
                break
        if not snapshot.root_exists:
            raise FileNotFoundError(f"znode {self.spec.path} does not exist")
        rendered = self.output.render(self.spec, snapshot)
        written = self.output.write(rendered)
        if written:
            log.info("wrote %d values from %s into %s", len(rendered.values), self.spec.path, self.output.name)
        return written, rendered.skipped

    def _apply(self, snapshot: Snapshot) -> None:
        rendered = self.output.render(self.spec, snapshot)
        written = self.output.write(rendered)
        if self._last_digest is None and not written:
            log.info("%s already holds the content of %s", self.output.name, self.spec.path)
        elif rendered.digest != self._last_digest:
            keys = _changed_keys(self._last_values, rendered.values)
            log.info("wrote %s (%d changed keys, digest %s)", self.output.name, len(keys), rendered.digest[:12])
            if self.hooks is not None:
                self.hooks.submit(Change(keys, rendered.digest, self.output.name))
        self._last_digest, self._last_values = rendered.digest, dict(rendered.values)

    def _quiesce(self) -> None:
        first = time.monotonic()
        while not self._stop.is_set():
            self._changed.clear()
            left = min(self.wait.minimum, first + self.wait.maximum - time.monotonic())
            if left <= 0 or not self._changed.wait(left):
                return

    def watch(self) -> int:
        """Keep the output up to date until :meth:`stop`; returns the exit code (0; 2 on an error that ends it)."""
        self.adapter.watch_subtrees("fetch", [self.spec.path], whole=True)
        self.adapter.add_session_listener(self._on_state)
        self._changed.set()
        while not self._stop.is_set():
            self._changed.wait()
            if self._stop.is_set():
                break
            self._quiesce()
            if self._stop.is_set():
                break
            self._changed.clear()
            try:
                snapshot = self.read()
            except ZooKeeperUnavailable as err:
                log.warning("ZooKeeper unavailable (%s); retrying", err)
                self._stop.wait(self.retry_interval)
                self._changed.set()
                continue
            except ZooKeeperError as err:
                log.error("%s", err)
                return 2
            if snapshot is None:
                log.debug("changed while read; reading again")
                self._changed.set()
                continue
            if not snapshot.root_exists:
                log.warning("znode %s does not exist yet; waiting for it", self.spec.path)
                continue
            try:
                self._apply(snapshot)
            except RenderError as err:
                log.error("%s", err)
            except OSError as err:
                log.error("cannot write %s: %s", self.output.name, err)
                return 2
        return 0
