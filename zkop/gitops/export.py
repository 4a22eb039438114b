"""``zkop export``: a live znode subtree as ZooKeeperConfig manifests.

Exported (:func:`plan_export`): every leaf, and every interior node with data or a non-open ACL
(``include_empty``: every interior node). Never: ``/``, ``/zookeeper``, excluded subtrees, the
ownership registry, ephemeral and sequential nodes with their subtrees (each skipped one gets a
note). A redacted ACL (``digest:user:x``, ZOOKEEPER-1392) is a problem, never a manifest with a
fake id.

Each manifest (``stringData`` for printable UTF-8, else base64 ``data`` with ``encoding: binary``;
``spec.acl`` unless open) is read back and checked as ``zkop validate`` does, and compared with the
live node, before anything is written; one that fails is reported instead. A value whose znode's ACL
does not grant ``world:anyone`` read is never written (:func:`withheld`): its manifest reads it from a
Secret named after the object (``dataFrom.secretKeyRef``, key :data:`SECRET_KEY`), for the user to create.
Files are laid out by :func:`zkop.gitops.names.manifest_file`, with a ``kustomization.yaml`` listing them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from zkop.gitops.encoding import data_fields
from zkop.gitops.manifests import Location, ManifestObject, Manifests, dump_yaml, load_yaml
from zkop.gitops.names import manifest_file, object_name
from zkop.gitops.schema import SchemaChecker
from zkop.gitops.tree import Tree, ZNode, is_sequential_name
from zkop.gitops.validate import validate_manifests
from zkop.zkconfig.spec import DEFAULT_MAX_DATA_BYTES, GROUP, KIND, VERSION
from zkop.zookeeper.acls import is_redacted, world_readable
from zkop.zookeeper.actions import OPEN_ACL, AclEntry

__all__ = [
    "KUSTOMIZATION",
    "Export",
    "ExportConflict",
    "ExportNote",
    "ExportedZnode",
    "manifest_object",
    "plan_export",
    "redacted_acl_reason",
    "withheld",
    "write_export",
]

KUSTOMIZATION = "kustomization.yaml"

#: The Secret key a withheld value is read from (:func:`withheld`).
SECRET_KEY = "value"


class ExportConflict(Exception):
    """Files to be written already exist and ``force`` was not given; nothing was written."""

    def __init__(self, files: list[Path]) -> None:
        shown = ", ".join(map(str, files[:5])) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
        super().__init__(f"{len(files)} file(s) already exist: {shown}; use --force to overwrite")
        self.files = files


@dataclass(frozen=True)
class ExportedZnode:
    """One manifest: the znode's path, the object name, its file (relative to the export dir), the YAML, and the
    Secret the manifest reads the value from instead of holding it (``None``: the value is in the manifest)."""

    path: str
    name: str
    file: PurePosixPath
    text: str
    secret: str | None = None


@dataclass(frozen=True)
class ExportNote:
    """A znode not exported. ``problem``: it should have been (exit 1); else skipped by rule."""

    path: str
    reason: str
    problem: bool = False


@dataclass
class Export:
    """What :func:`plan_export` decided: manifests in path order, and notes."""

    root: str
    znodes: list[ExportedZnode] = field(default_factory=list)
    notes: list[ExportNote] = field(default_factory=list)

    @property
    def problems(self) -> list[ExportNote]:
        """Notes about znodes that could not be exported."""
        return [n for n in self.notes if n.problem]

    def kustomization(self) -> str:
        """``kustomization.yaml`` listing every manifest (kustomize ``Kustomization`` v1beta1)."""
        return dump_yaml({
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": [str(z.file) for z in self.znodes],
        })


def redacted_acl_reason(path: str, redacted: list[AclEntry]) -> str:
    """Why a znode whose ACL came back redacted is not exported, and how to fix it."""
    ids = ", ".join(f"digest:{e.id}" for e in redacted)
    return (f"ACL redacted by ZooKeeper ({ids}: the digest is hidden from clients without ADMIN on the znode); "
            f"no manifest written with a fake id — run zkop export with credentials that have ADMIN on {path} "
            "(--zk-auth-file)")


def _acl_spec(acl: tuple[AclEntry, ...]) -> list[dict[str, Any]]:
    return [{"scheme": e.scheme, "id": e.id, "permissions": e.permission_names()} for e in acl]


def withheld(node: ZNode) -> bool:
    """True if ``node``'s value is not exported: it holds data and its ACL does not grant ``world:anyone`` read
    (a value someone kept from other readers, such as one zkop wrote from a Secret), so no file or output may
    show it."""
    return bool(node.data) and not world_readable(node.acl)


def manifest_object(path: str, data: bytes, acl: tuple[AclEntry, ...], *, namespace: str | None = None,
                    force_binary: bool = False, secret: str | None = None) -> dict[str, Any]:
    """The ZooKeeperConfig declaring a znode with ``data`` and ``acl`` (see the module docstring); with ``secret``
    the value is not written: ``dataFrom.secretKeyRef`` names key :data:`SECRET_KEY` of that Secret instead
    (``encoding: binary``, which takes any bytes, so not even whether the value is text is shown)."""
    metadata: dict[str, Any] = {"name": object_name(path)}
    if namespace:
        metadata["namespace"] = namespace
    value: dict[str, Any] = (
        {"dataFrom": {"secretKeyRef": {"name": secret, "key": SECRET_KEY}}, "encoding": "binary"}
        if secret is not None else data_fields(data, force_binary=force_binary))
    spec: dict[str, Any] = {"path": path, **value}
    if acl != OPEN_ACL:
        spec["acl"] = _acl_spec(acl)
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "metadata": metadata, "spec": spec}


def _render(node: ZNode, namespace: str | None, checker: SchemaChecker, max_data_bytes: int) -> str | ExportNote:
    """YAML for ``node``, verified by reading it back; or a problem note. A :func:`withheld` value is not in it."""
    rule = "could not be rendered"
    secret = object_name(node.path) if withheld(node) else None
    for force_binary in (False, True):
        text = dump_yaml(manifest_object(node.path, node.data, node.acl, namespace=namespace,
                                         force_binary=force_binary, secret=secret))
        loaded = load_yaml(text)
        manifests = Manifests(objects=[ManifestObject(Location(node.path, 1), loaded)])
        result = validate_manifests(manifests, checker, max_data_bytes=max_data_bytes, strict=True)
        if result.errors:
            first = result.errors[0]
            return ExportNote(node.path, f"cannot be declared: {first.field}: {first.rule}", problem=True)
        if secret is not None:
            return text  # valid; the value is the Secret's, to be created from the live one
        desired = result.objects[0].desired
        if desired is not None and desired.data == node.data and desired.acl == node.acl:
            return text
        rule = "YAML round trip changed the data"
    return ExportNote(node.path, rule, problem=True)  # pragma: no cover - binary form always round-trips


def plan_export(tree: Tree, checker: SchemaChecker, *, namespace: str | None = None, include_empty: bool = False,
                max_data_bytes: int = DEFAULT_MAX_DATA_BYTES) -> Export:
    """Decide and render the manifests for a walked tree (pure: no I/O).

    Args:
        tree: from :func:`zkop.gitops.tree.walk` (with reserved and excluded subtrees skipped
            and sequential nodes not descended).
        checker: the CRD schema, to verify every manifest.
        namespace: ``metadata.namespace`` of every object (omitted if ``None``).
        include_empty: also export empty interior znodes with the open ACL.
        max_data_bytes: larger znodes are problems (the operator would refuse them).
    """
    export = Export(tree.root)
    present: dict[str, bool] = {}  # the node or a descendant is exported
    chosen: list[ZNode] = []
    for node in reversed(tree.nodes.values()):  # children before parents
        below = any(present[c.path] for c in tree.children(node))
        present[node.path] = below
        if node.path == "/":
            continue
        if node.ephemeral_owner:
            export.notes.append(ExportNote(node.path, f"ephemeral node (session 0x{node.ephemeral_owner:x}): "
                                                      "belongs to a running client, not to Git"))
            continue
        if is_sequential_name(node.name):
            export.notes.append(ExportNote(node.path, "sequential node: belongs to running clients, not to Git"))
            continue
        redacted = [e for e in node.acl if is_redacted(e)]
        if redacted:
            present[node.path] = True
            export.notes.append(ExportNote(node.path, redacted_acl_reason(node.path, redacted), problem=True))
            continue
        if below and not node.data and node.acl == OPEN_ACL and not include_empty:
            continue
        present[node.path] = True
        chosen.append(node)
    export.notes.extend(ExportNote(u.path, u.reason, problem=True) for u in tree.unreadable)
    names: dict[str, str] = {}
    files: dict[str, str] = {}
    for node in reversed(chosen):  # parents first
        rendered = _render(node, namespace, checker, max_data_bytes)
        if isinstance(rendered, ExportNote):
            export.notes.append(rendered)
            continue
        name, file = object_name(node.path), manifest_file(node.path)
        if name in names:  # a 40-bit digest collision
            export.notes.append(ExportNote(node.path, f"object name {name} is also derived from {names[name]}",
                                           problem=True))
            continue
        names[name] = node.path
        folded = str(file).casefold()
        if folded in files:
            export.notes.append(ExportNote(node.path, f"file {file} differs from {files[folded]} only in case; "
                                                      "check out on case-sensitive file systems only"))
        files.setdefault(folded, str(file))
        export.znodes.append(ExportedZnode(node.path, name, file, rendered, name if withheld(node) else None))
    export.notes.sort(key=lambda n: n.path)
    return export


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.zkop-tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_export(export: Export, directory: Path, *, force: bool = False) -> list[Path]:
    """Write the manifests and ``kustomization.yaml`` under ``directory`` (created if needed).

    Without ``force`` nothing is written if any target file exists; with ``force``
    those files are overwritten. Other files in ``directory`` are never touched
    (a manifest of a znode deleted since an earlier export stays; remove it by hand).

    Returns:
        The files written, manifests in path order, ``kustomization.yaml`` last.

    Raises:
        ExportConflict: targets exist and ``force`` is false.
        OSError: the directory or a file cannot be written.
    """
    targets = {directory / z.file: z.text for z in export.znodes}
    targets[directory / KUSTOMIZATION] = export.kustomization()
    existing = [p for p in targets if p.exists() or p.is_symlink()]
    if existing and not force:
        raise ExportConflict(existing)
    for path, text in targets.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_atomically(path, text)
    return list(targets)
