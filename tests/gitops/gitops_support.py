"""Helpers for the GitOps command tests: run results and the hand-made "legacy" znode tree."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from kazoo.security import make_acl, make_digest_acl


@dataclass(frozen=True)
class Run:
    """Exit code and captured output of one ``zkop`` invocation."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


Cli = Callable[..., Run]

ALICE = ("alice", "secret")
ALICE_ALL = make_digest_acl(*ALICE, all=True)
WORLD_READ = make_acl("world", "anyone", read=True)

#: The legacy tree, relative to the chroot: path -> (data, ACL; None is the open ACL).
LEGACY: dict[str, tuple[bytes, list[Any] | None]] = {
    "/app/features/new-engine/enabled": (b"true", None),
    "/app/features/empty-leaf": (b"", None),
    "/app/config": (b"interior=data\n", None),
    "/app/config/db/url": (b"jdbc:postgresql://db:5432/app", None),
    "/app/config/multiline": (b"line one\n  indented\n\ttabbed\nno newline at end", None),
    "/app/config/crlf": (b"a\r\nb\r\n", None),
    "/app/config/yes": (b"yes", None),
    "/app/bin": (bytes(range(256)), None),
    "/app/text": ("Grüße, 世界 🌍\nzweite Zeile\n".encode(), None),
    "/app/MixedCase/Some.Dotted.Name": (b"dotted", None),
    "/app/unicode-\u00fcn\u00efcode": (b"x", None),
    "/app/secure": (b"readable by all, writable by alice", [ALICE_ALL, WORLD_READ]),
    "/app/locked": (b"alice only", [ALICE_ALL]),
    "/app/svc": (b"", None),
}
#: What export must produce: every LEGACY path (the empty interior parents are not exported).
EXPORTED = frozenset(LEGACY)
EPHEMERAL = "/app/svc/instance-1"
SEQUENTIAL = "/app/svc/lock-0000000000"


@dataclass(frozen=True)
class Legacy:
    """The legacy tree under ``base``; ``hosts`` is the chrooted connect string, ``zk`` an alice session."""

    base: str
    hosts: str
    auth_file: str
    zk: KazooClient

    def flags(self, *, auth: bool = True) -> list[str]:
        """``--zk-hosts`` (chrooted) and, with ``auth``, ``--zk-auth-file``."""
        return ["--zk-hosts", self.hosts, *(["--zk-auth-file", self.auth_file] if auth else [])]

    def snapshot(self, paths: frozenset[str] = EXPORTED) -> dict[str, tuple[bytes, list[tuple[int, str, str]]]]:
        """Data and ACL of ``paths`` (relative to the chroot)."""
        result = {}
        for path in sorted(paths):
            data, _ = self.zk.get(self.base + path)
            acl, _ = self.zk.get_acls(self.base + path)
            result[path] = (data, sorted((a.perms, a.id.scheme, a.id.id) for a in acl))
        return result


def files_under(directory: Path) -> dict[str, str]:
    """Relative path -> text of every file under ``directory``."""
    return {p.relative_to(directory).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(directory.rglob("*")) if p.is_file()}


def zkc(path: str, name: str, **spec: Any) -> dict[str, Any]:
    """A ZooKeeperConfig object."""
    return {"apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperConfig",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"path": path, **spec}}


def write_manifests(path: Path, *objects: dict[str, Any]) -> Path:
    """Write ``objects`` as one multi-document YAML file; return ``path``."""
    path.write_text(yaml_dump_all(objects), encoding="utf-8")
    return path


def yaml_dump_all(objects: tuple[dict[str, Any], ...] | list[dict[str, Any]]) -> str:
    import yaml

    return yaml.safe_dump_all(list(objects), sort_keys=False, allow_unicode=True)
