"""``zkop diff``: what ``sync`` would change, as a unified diff per znode.

A znode differs exactly when :func:`zkop.zkconfig.plan.plan_sync` plans an
action for it (the operator's own decision): absent, other bytes, or another
ACL (the ACL is always read). A ``createOnly`` znode with other bytes is
reported (status ``outOfSync``) but does not count, because the operator leaves
it alone; an ephemeral node in the way is an error. With prune roots, znodes
:mod:`zkop.gitops.prune` would delete are differences too.

Text data (both sides printable UTF-8, ``encoding: utf-8``) is shown as a
unified diff (``--- zk:/path`` live, ``+++`` manifest); anything else as a
byte summary, like ``diff``'s "Binary files differ". ``dataFrom`` of a ConfigMap
in the same input is compared like ``data``; other ``dataFrom`` objects cannot be
resolved offline and are skipped without reading the znode — no Secret byte is
ever read or printed. The live bytes of a znode whose ACL does not grant ``world:anyone`` read (a value
someone kept from other readers, such as one zkop wrote from a Secret) are never printed either, in a
diff or a prune: only that they differ, with sizes.

Exit status (as ``diff`` and ``kubectl diff``): 0 no differences, 1 differences,
2 error.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Literal

from zkop.gitops.encoding import as_text
from zkop.gitops.sync import skipped_ref
from zkop.gitops.tree import ZNode
from zkop.gitops.validate import CheckedObject
from zkop.zkconfig.plan import plan_sync
from zkop.zookeeper.acls import world_readable
from zkop.zookeeper.actions import AclEntry, CreateNode, Observed, SetAcl, SetData, describe_acl_entry

__all__ = ["NO_NEWLINE", "ZnodeDiff", "acl_diff", "data_diff", "diff_object", "diff_prune", "hidden_diff"]

Status = Literal["equal", "differs", "outOfSync", "skipped", "error"]
NO_NEWLINE = "\\ No newline at end of file"


@dataclass(frozen=True)
class ZnodeDiff:
    """The comparison of one znode.

    Attributes:
        path: the znode.
        status: ``equal``, ``differs``, ``outOfSync`` (createOnly, not counted), ``skipped`` or ``error``.
        changes: what differs: ``create``, ``data``, ``acl``, ``delete``.
        text: the unified diff / byte summary (empty when equal or skipped).
        message: one sentence, never data.
        object: ``file:line ZooKeeperConfig ns/name``; empty for a prune deletion.
    """

    path: str
    status: Status
    changes: tuple[str, ...] = ()
    text: str = ""
    message: str = ""
    object: str = ""

    def to_json(self) -> dict[str, Any]:
        """The comparison as a JSON object with the attribute names as keys (``text`` as ``diff``)."""
        return {"path": self.path, "status": self.status, "changes": list(self.changes), "diff": self.text,
                "message": self.message, "object": self.object}


def _lines(text: str) -> list[str]:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += "\n" + NO_NEWLINE + "\n"
    return lines


def data_diff(path: str, old: bytes | None, new: bytes | None, *, old_label: str, new_label: str,
              binary: bool = False) -> str:
    """A unified diff of two versions of a znode's data (``None``: absent), or a byte summary.

    The summary (``binary``, or either side not printable UTF-8) gives lengths and
    the first differing byte offset only. Lines end with ``\\n``; a missing final
    newline is marked as GNU diff does.
    """
    old_text = as_text(old) if old is not None else ""
    new_text = as_text(new) if new is not None else ""
    if old is None or new is None:
        size = len(new or b"") if old is None else len(old)
        if binary or old_text is None or new_text is None or size == 0:
            state = "absent in ZooKeeper" if old is None else "declared by no manifest"
            return f"{'Binary' if size else 'Empty'} znode zk:{path} is {state} ({size} bytes)\n"
    elif binary or old_text is None or new_text is None:
        index = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), min(len(old), len(new)))
        return (f"Binary znode zk:{path} differs: live {len(old)} bytes, manifest {len(new)} bytes, "
                f"first difference at byte {index}\n")
    lines = difflib.unified_diff(_lines(old_text), _lines(new_text), fromfile=f"zk:{path}\t{old_label}",
                                 tofile=f"zk:{path}\t{new_label}")
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def hidden_diff(path: str, old: bytes | None, new: bytes | None) -> str:
    """The summary of a change whose live value may not be shown (its ACL keeps it from other readers)."""
    live = f"{len(old)} bytes" if old is not None else "absent"
    wanted = f"manifest {len(new)} bytes" if new is not None else "deleted: no manifest declares it"
    return (f"Protected znode zk:{path} differs: live {live} (not shown: its ACL does not grant world:anyone read), "
            f"{wanted}\n")


def acl_diff(path: str, old: tuple[AclEntry, ...], new: tuple[AclEntry, ...]) -> str:
    """A unified diff of two ACLs, one entry a line (zkCli's form)."""
    lines = difflib.unified_diff([describe_acl_entry(e) + "\n" for e in old],
                                 [describe_acl_entry(e) + "\n" for e in new],
                                 fromfile=f"zk:{path}\tACL, live", tofile=f"zk:{path}\tACL, manifest")
    return "".join(lines)


def diff_object(checked: CheckedObject, observed: Observed | None) -> ZnodeDiff:
    """Compare one validated object with its znode as read (``None``: absent); pure.

    ``checked.desired`` must be set (skip ``dataFrom`` objects with :func:`skipped`).
    ``observed`` should carry the ACL (read it with ``expected_acl=None``).
    """
    desired = checked.desired
    assert desired is not None
    what = checked.describe()
    plan = plan_sync(desired, observed)
    if plan.outcome.state == "Error":
        return ZnodeDiff(desired.path, "error", message=plan.outcome.message, object=what)
    binary = desired.encoding == "binary"
    live = f"live, version {observed.version}" if observed is not None else "absent"
    if plan.outcome.state == "OutOfSync" and observed is not None:
        text = (data_diff(desired.path, observed.data, desired.data, old_label=live, new_label=what, binary=binary)
                if observed.acl is None or world_readable(observed.acl)
                else hidden_diff(desired.path, observed.data, desired.data))
        return ZnodeDiff(desired.path, "outOfSync", (), text, plan.outcome.message, what)
    if not plan.actions:
        return ZnodeDiff(desired.path, "equal", message=plan.outcome.message, object=what)
    changes: list[str] = []
    parts: list[str] = []
    for action in plan.actions:
        if isinstance(action, CreateNode):
            changes.append("create")
            parts.append(data_diff(desired.path, None, desired.data, old_label=live, new_label=what, binary=binary))
        elif isinstance(action, SetData) and observed is not None:
            changes.append("data")
            parts.append(data_diff(desired.path, observed.data, desired.data, old_label=live, new_label=what,
                                   binary=binary) if observed.acl is None or world_readable(observed.acl)
                         else hidden_diff(desired.path, observed.data, desired.data))
        elif isinstance(action, SetAcl) and observed is not None and observed.acl is not None:
            changes.append("acl")
            parts.append(acl_diff(desired.path, observed.acl, desired.acl))
    header = f"diff zk:{desired.path} {checked.manifest.location}\n"
    return ZnodeDiff(desired.path, "differs", tuple(changes), header + "".join(parts),
                     f"znode {desired.path}: {', '.join(changes)} differ{'s' if len(changes) == 1 else ''}", what)


def skipped(checked: CheckedObject) -> ZnodeDiff:
    """The result for a ``dataFrom`` object: not compared, nothing read."""
    assert checked.unresolved is not None
    return ZnodeDiff(checked.path, "skipped", message=skipped_ref(checked.unresolved), object=checked.describe())


def diff_prune(node: ZNode) -> ZnodeDiff:
    """The deletion ``sync --prune`` would make of an undeclared znode (its bytes only if world-readable)."""
    text = (data_diff(node.path, node.data, None, old_label=f"live, version {node.version}",
                      new_label="deleted: no manifest declares it") if world_readable(node.acl)
            else hidden_diff(node.path, node.data, None))
    return ZnodeDiff(node.path, "differs", ("delete",), f"diff zk:{node.path} (prune)\n{text}",
                     f"znode {node.path} would be pruned")
