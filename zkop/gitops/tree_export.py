"""``zkop export --tree``: a live znode subtree as one ZooKeeperConfigTree.

The expansion chosen is the one that reproduces the bytes exactly: inline ``entries``, each ``stringData`` for
printable UTF-8 text and base64 ``data`` otherwise (:func:`zkop.gitops.encoding.data_fields`, the rule of
``zkop export``). A properties, YAML or JSON source is never chosen: parsing one back is lossy (comments,
escapes, key order, a value's quoting).

Declared (:func:`plan_tree_export`): every znode below the root that is a leaf, holds data or has a non-open
ACL; an empty interior znode with the open ACL above a declared child is left implied (zkop creates a missing
parent so, empty with the open ACL). ``spec.acl`` is the ACL most entries have (omitted when it is the open
one); an entry with another ACL carries its own. Never declared, each with a note: ephemeral and sequential
znodes (and the subtrees of the latter), excluded subtrees. Problems (the tree is not written, exit 1): the
root's own data or ACL (a tree's root is structure, never written), a redacted ACL, a value whose ACL does not
grant ``world:anyone`` read (it would be in a file; export it with ``--path`` as a ZooKeeperConfig reading a
Secret), an unreadable znode, or a manifest the tree CRD's schema refuses (more than its ``maxItems`` entries:
export the subtrees as trees of their own).

The rendered object is read back and expanded with the operator's rules (:func:`zkop.gitops.validate.check_tree`)
before anything is written: every child's path, bytes and ACL must equal the live znode's.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from zkop.configtree.spec import GROUP, KIND, VERSION
from zkop.gitops.encoding import data_fields
from zkop.gitops.export import Export, ExportedZnode, ExportNote, redacted_acl_reason, withheld
from zkop.gitops.manifests import Location, ManifestObject, dump_yaml, load_yaml
from zkop.gitops.names import manifest_file, object_name
from zkop.gitops.schema import SchemaChecker
from zkop.gitops.tree import Tree, ZNode, is_sequential_name
from zkop.gitops.validate import check_tree
from zkop.zookeeper.acls import is_redacted
from zkop.zookeeper.actions import OPEN_ACL, AclEntry

__all__ = ["plan_tree_export", "tree_object"]


def _acl_spec(acl: tuple[AclEntry, ...]) -> list[dict[str, Any]]:
    return [{"scheme": e.scheme, "id": e.id, "permissions": e.permission_names()} for e in acl]


def tree_object(root: str, nodes: list[ZNode], *, namespace: str | None = None,
                binary: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The ZooKeeperConfigTree declaring ``nodes`` (below ``root``) inline; the paths in ``binary`` as base64
    ``data`` whatever their bytes."""
    metadata: dict[str, Any] = {"name": object_name(root)}
    if namespace:
        metadata["namespace"] = namespace
    counts = Counter(node.acl for node in nodes)
    default = max(counts, key=lambda acl: (counts[acl], acl == OPEN_ACL)) if counts else OPEN_ACL
    entries = []
    for node in nodes:
        fields = data_fields(node.data, force_binary=node.path in binary)
        fields.pop("encoding", None)  # a tree entry's data is always base64
        entry: dict[str, Any] = {"path": node.path[len(root.rstrip("/")) + 1:], **fields}
        if node.acl != default:
            entry["acl"] = _acl_spec(node.acl)
        entries.append(entry)
    spec: dict[str, Any] = {"path": root}
    if default != OPEN_ACL:
        spec["acl"] = _acl_spec(default)
    spec["entries"] = entries
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "metadata": metadata, "spec": spec}


def _render(root: str, nodes: list[ZNode], namespace: str | None, checker: SchemaChecker) -> str | ExportNote:
    """The tree's YAML, verified by expanding it back; or a problem note."""
    binary: frozenset[str] = frozenset()
    for _ in range(2):
        text = dump_yaml(tree_object(root, nodes, namespace=namespace, binary=binary))
        problems, checked = check_tree(ManifestObject(Location(root, 1), load_yaml(text)), checker)
        if checked is None or checked.children is None:
            first = problems[0] if problems else None
            reason = f"{first.field}: {first.rule}" if first is not None else "could not be rendered"
            return ExportNote(root, f"cannot be declared as one tree: {reason}", problem=True)
        got = {c.path: (c.data, c.acl) for c in checked.children}
        wrong = frozenset(n.path for n in nodes if got.get(n.path) != (n.data, n.acl))
        if not wrong and len(got) == len(nodes):
            return text
        binary |= wrong
    return ExportNote(root, "YAML round trip changed the data", problem=True)  # pragma: no cover - base64 holds


def plan_tree_export(tree: Tree, checker: SchemaChecker, *, namespace: str | None = None) -> Export:
    """Decide and render the one ZooKeeperConfigTree of a walked subtree (pure: no I/O).

    Args:
        tree: from :func:`zkop.gitops.tree.walk` (reserved and excluded subtrees skipped, sequential nodes not
            descended).
        checker: the ZooKeeperConfigTree CRD's schema.
        namespace: ``metadata.namespace`` (omitted if ``None``).

    Returns:
        An :class:`~zkop.gitops.export.Export` with one manifest (none if any problem), and the notes.
    """
    export = Export(tree.root)
    root_node = tree.nodes.get(tree.root)
    if root_node is not None and (root_node.data or root_node.acl != OPEN_ACL):
        export.notes.append(ExportNote(tree.root, "the root holds data or a non-open ACL, which a tree never writes "
                                                  "(its root is structure): export it with --path as a "
                                                  "ZooKeeperConfig, or export the subtrees below it", problem=True))
    chosen: list[ZNode] = []
    present: dict[str, bool] = {}  # the node or a descendant is declared
    for node in reversed(tree.nodes.values()):  # children before parents
        below = any(present.get(c.path, False) for c in tree.children(node))
        present[node.path] = below
        if node.path == tree.root:
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
            export.notes.append(ExportNote(node.path, redacted_acl_reason(node.path, redacted), problem=True))
            continue
        if withheld(node):
            export.notes.append(ExportNote(node.path, "its ACL does not grant world:anyone read, so its value is "
                                                      "not written into a tree: export it with --path (a "
                                                      "ZooKeeperConfig reading a Secret)", problem=True))
            continue
        present[node.path] = True
        if below and not node.data and node.acl == OPEN_ACL:
            continue  # implied: created as a parent of a declared child
        chosen.append(node)
    export.notes.extend(ExportNote(u.path, u.reason, problem=True) for u in tree.unreadable)
    if not any(n.problem for n in export.notes):
        rendered = _render(tree.root, sorted(chosen, key=lambda n: n.path), namespace, checker)
        if isinstance(rendered, ExportNote):
            export.notes.append(rendered)
        else:
            export.znodes.append(ExportedZnode(tree.root, object_name(tree.root), manifest_file(tree.root), rendered))
    export.notes.sort(key=lambda n: n.path)
    return export
