"""Every rule of the ZooKeeperMirror reconciler, as pure functions over complete facts.

The reconciler gathers the facts — the mirror's parsed spec (or why it is invalid), the znodes
read under its root (:class:`~zkop.mirror.snapshot.Snapshot`) and the ConfigMap of that name if one
exists — then calls :func:`decide` once and applies the :class:`Decision` through its writer.

Rules, in order:

1. an invalid spec writes nothing: ``Ready=False``/``Stalled``, reason ``InvalidSpec``; a mirror naming a
   ZooKeeperEnsemble that does not run (``spec.ensembleRef``) reads nothing: ``Ready=False``, reason
   ``EnsembleNotFound`` or ``EnsembleNotUsable``, a Warning Event (read once the ensemble runs); a path the admission
   gate refuses (:class:`zkop.feature.gate.Gate`: a reserved root, the tenancy rules, the same as for a
   ZooKeeperConfig's writes) reads, watches and writes nothing: ``Stalled``, the refusal's reason
   (``ReservedPath``, ``NamespaceNotAllowed``, ``PathNotAllowed``) and a Warning Event; a subtree larger than the
   operator's limits (:class:`zkop.mirror.tree.Limits`) is read no further and changes nothing: ``Stalled``,
   reason ``LimitExceeded``, a Warning Event;
2. a ConfigMap of that name the mirror does not own (no ``ownerReference`` with its uid) is
   never written: ``Stalled``, reason ``ConfigMapConflict``;
3. every znode read becomes a key (:func:`zkop.mirror.keys.key_for`): UTF-8 values in ``data``,
   other bytes in ``binaryData``; a key two paths map to, a key kube-apiserver would refuse,
   a znode zkop may not read (``NoAuth``) and, in key order, the values that no longer fit in
   the 1 MiB a ConfigMap may hold (``ValidateConfigMap``: keys and values summed) are left out
   and reported (``Ready=True``, reason ``PartiallyMirrored``, a Warning Event), the rest is mirrored;
4. the ConfigMap is created (owned by the mirror, so the garbage collector deletes it with the
   mirror) or patched only when its contents differ; a deleted znode leaves the ConfigMap;
5. a root that does not exist mirrors nothing (an empty ConfigMap), reason ``RootNotFound``.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Literal

from zkop.feature.ensemble_ref import DEFAULT_ENSEMBLE, ensemble_of
from zkop.feature.tenancy import Refusal
from zkop.kube.types import JSON
from zkop.mirror.keys import key_for, key_problem
from zkop.mirror.snapshot import Snapshot

__all__ = [
    "ANNOTATION_PATH",
    "ANNOTATION_RECURSIVE",
    "MANAGED_LABEL",
    "MAX_CONFIGMAP_BYTES",
    "Contents",
    "Decision",
    "MirrorSpec",
    "Skipped",
    "SpecError",
    "contents",
    "decide",
    "parse_spec",
]

#: ``corev1.MaxSecretSize``: the sum of a ConfigMap's key and value lengths ``ValidateConfigMap`` allows.
MAX_CONFIGMAP_BYTES = 1024 * 1024
#: On every ConfigMap a mirror fills (its informer selects them by it).
MANAGED_LABEL = "platform.example.com/zookeeper-mirror"
#: The root a ConfigMap is mirrored from, and whether recursively: ZooKeeperConfigs refuse a ``dataFrom`` that
#: would write what the mirror reads (``zkop.zkconfig.refs.mirror_loop`` reads the same two names).
ANNOTATION_PATH = "platform.example.com/mirrored-from"
ANNOTATION_RECURSIVE = "platform.example.com/mirrored-recursive"
API_VERSION = "platform.example.com/v1alpha1"
KIND = "ZooKeeperMirror"


class SpecError(ValueError):
    """The spec breaks a rule the CRD's schema did not catch (a pure check)."""


@dataclass(frozen=True)
class MirrorSpec:
    """What a ZooKeeperMirror asks for: ``path`` (absolute), ``recursive``, ``configMap``, ``key`` and the
    ZooKeeperEnsemble it reads (``spec.ensembleRef.name``; ``""``: the flags' ensemble)."""

    path: str
    recursive: bool
    config_map: str
    key: str | None = None
    ensemble: str = DEFAULT_ENSEMBLE


def parse_spec(obj: JSON) -> MirrorSpec:
    """The mirror's spec, defaulted (``configMap``: the mirror's name; ``recursive``: false).

    Raises:
        SpecError: a path that is not absolute or ends with ``/``, ``key`` with ``recursive``.
    """
    spec = obj.get("spec") or {}
    path = spec.get("path")
    if not isinstance(path, str) or not path.startswith("/") or (path != "/" and path.endswith("/")) or "//" in path:
        raise SpecError(f"spec.path {path!r}: an absolute znode path without a trailing '/'")
    recursive = bool(spec.get("recursive", False))
    key = spec.get("key")
    if key is not None and recursive:
        raise SpecError("spec.key: only for a mirror of one znode (recursive: false)")
    if key is not None and key_problem(str(key)) is not None:
        raise SpecError(f"spec.key: {key_problem(str(key))}")
    name = str(spec.get("configMap") or (obj.get("metadata") or {}).get("name"))
    return MirrorSpec(path, recursive, name, str(key) if key is not None else None, ensemble_of(obj))


@dataclass(frozen=True)
class Skipped:
    """A znode left out of the ConfigMap: its path, the reason (``KeyCollision``, ``InvalidKey``,
    ``NoAuth``, ``TooLarge``) and a sentence."""

    path: str
    reason: str
    message: str


@dataclass(frozen=True)
class Contents:
    """What the ConfigMap should hold: ``data`` (text), ``binary_data`` (base64), the znodes left out."""

    data: dict[str, str]
    binary_data: dict[str, str]
    skipped: tuple[Skipped, ...]

    @property
    def count(self) -> int:
        """How many znodes are mirrored."""
        return len(self.data) + len(self.binary_data)


def _default_key(spec: MirrorSpec) -> str:
    return spec.key or key_for(spec.path.rsplit("/", 1)[1] or "root")


def contents(spec: MirrorSpec, snapshot: Snapshot) -> Contents:
    """The keys and values ``snapshot`` maps to under ``spec`` (rule 3), deterministic for equal input."""
    skipped = [Skipped(path, "NoAuth", f"zkop may not read {path} (NoAuth)") for path in snapshot.unreadable]
    by_key: dict[str, list[tuple[str, bytes]]] = {}
    for node in snapshot.nodes:
        key = _default_key(spec) if not spec.recursive else key_for(node.relative)
        by_key.setdefault(key, []).append((node.path, node.data))
    chosen: list[tuple[str, str, bytes]] = []
    for key in sorted(by_key):
        nodes = by_key[key]
        if len(nodes) > 1:
            paths = ", ".join(p for p, _ in sorted(nodes))
            skipped += [Skipped(p, "KeyCollision", f"{paths} all map to key {key!r}; none is mirrored")
                        for p, _ in sorted(nodes)]
            continue
        path, value = nodes[0]
        problem = key_problem(key)
        if problem is not None:
            skipped.append(Skipped(path, "InvalidKey", f"{path}: {problem}"))
            continue
        chosen.append((key, path, value))
    data: dict[str, str] = {}
    binary: dict[str, str] = {}
    used = 0
    for key, path, value in chosen:
        try:
            text: str | None = value.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        encoded = text if text is not None else base64.b64encode(value).decode("ascii")
        size = len(key) + len(value)
        if used + size > MAX_CONFIGMAP_BYTES:
            skipped.append(Skipped(path, "TooLarge", f"{path} ({len(value)} bytes) does not fit in the "
                                   f"{MAX_CONFIGMAP_BYTES} bytes a ConfigMap may hold"))
            continue
        used += size
        (data if text is not None else binary)[key] = encoded
    return Contents(data, binary, tuple(sorted(skipped, key=lambda s: (s.path, s.reason))))


@dataclass(frozen=True)
class Decision:
    """What one pass does: at most one ConfigMap write, the status to show, the Events to send.

    Attributes:
        write: ``("create", body)``, ``("patch", merge patch)`` or ``None``.
        ready, reason, message: the ``Ready`` condition (``stalled`` also sets ``Stalled=True``).
        mirrored: how many znodes the ConfigMap holds.
        skipped: the znodes left out.
        changed: the ConfigMap's contents change with this pass (``status.lastChange`` moves).
        warnings: ``(reason, message)`` Warning Events.
    """

    write: tuple[Literal["create", "patch"], JSON] | None
    ready: bool
    reason: str
    message: str
    stalled: bool = False
    mirrored: int = 0
    skipped: tuple[Skipped, ...] = ()
    changed: bool = False
    warnings: tuple[tuple[str, str], ...] = field(default=())


def owned_by(config_map: JSON, uid: str) -> bool:
    """Whether ``config_map`` carries an ``ownerReference`` to the mirror with ``uid``."""
    refs = (config_map.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("uid") == uid and r.get("kind") == KIND for r in refs)


def desired_config_map(mirror: JSON, spec: MirrorSpec, wanted: Contents) -> JSON:
    """The ConfigMap a mirror owns (controller reference: the garbage collector deletes it with the mirror)."""
    meta = mirror["metadata"]
    return {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": spec.config_map, "namespace": meta["namespace"],
            "labels": {MANAGED_LABEL: str(meta["name"])},
            "annotations": {ANNOTATION_PATH: spec.path, ANNOTATION_RECURSIVE: str(spec.recursive).lower()},
            "ownerReferences": [{"apiVersion": API_VERSION, "kind": KIND, "name": meta["name"], "uid": meta["uid"],
                                 "controller": True, "blockOwnerDeletion": False}],
        },
        "data": dict(wanted.data), "binaryData": dict(wanted.binary_data),
    }


def _patch(existing: JSON, desired: JSON) -> JSON | None:
    """The merge patch that turns ``existing`` into ``desired`` (data, binaryData, annotations), or None."""
    patch: JSON = {}
    for field_name in ("data", "binaryData"):
        have, want = existing.get(field_name) or {}, desired[field_name]
        if have != want:
            patch[field_name] = {**{k: None for k in have if k not in want}, **want}
    have_ann = (existing.get("metadata") or {}).get("annotations") or {}
    want_ann = desired["metadata"]["annotations"]
    if any(have_ann.get(k) != v for k, v in want_ann.items()):
        patch["metadata"] = {"annotations": want_ann}
    if not patch:
        return None
    patch.setdefault("metadata", {})["resourceVersion"] = (existing.get("metadata") or {}).get("resourceVersion")
    return patch


def decide(mirror: JSON, spec: MirrorSpec | SpecError, snapshot: Snapshot | None, existing: JSON | None, *,
           refusal: Refusal | None = None, ensemble_missing: tuple[str, str] | None = None) -> Decision:
    """The one decision of a pass over complete facts (the rules in the module docstring).

    ``snapshot`` is ``None`` only with a ``SpecError``, a ``refusal`` or ``ensemble_missing`` (nothing is read for
    any); ``refusal``: why the admission gate does not let zkop read ``spec.path`` for this mirror;
    ``ensemble_missing``: ``(reason, message)``, why the ZooKeeperEnsemble the mirror names cannot be used
    (``EnsembleNotFound``, ``EnsembleNotUsable``; not stalled: the mirror is read once the ensemble runs).
    """
    if isinstance(spec, SpecError):
        return Decision(None, False, "InvalidSpec", str(spec), stalled=True, warnings=(("InvalidSpec", str(spec)),))
    if ensemble_missing is not None:
        reason, message = ensemble_missing[0], f"{ensemble_missing[1]}; nothing is read"
        return Decision(None, False, reason, message, warnings=((reason, message),))
    if refusal is not None:
        message = f"{refusal.message}; nothing is read"
        return Decision(None, False, refusal.reason, message, stalled=True, warnings=((refusal.reason, message),))
    assert snapshot is not None
    if snapshot.exceeded is not None:
        message = f"the mirror reads {snapshot.exceeded}; the ConfigMap is left as it was (mirror a smaller subtree)"
        return Decision(None, False, "LimitExceeded", message, stalled=True, warnings=(("LimitExceeded", message),))
    assert snapshot is not None
    uid = str(mirror["metadata"]["uid"])
    if existing is not None and not owned_by(existing, uid):
        message = (f"ConfigMap {spec.config_map} exists and is not owned by this mirror; zkop leaves it unchanged "
                   "(delete it or choose another spec.configMap)")
        return Decision(None, False, "ConfigMapConflict", message, stalled=True,
                        warnings=(("ConfigMapConflict", message),))
    wanted = contents(spec, snapshot)
    desired = desired_config_map(mirror, spec, wanted)
    write: tuple[Literal["create", "patch"], JSON] | None
    if existing is None:
        write = ("create", desired)
    else:
        patch = _patch(existing, desired)
        write = ("patch", patch) if patch is not None else None
    changed = write is not None and (existing is None or "data" in write[1] or "binaryData" in write[1])
    if not snapshot.root_exists:
        return Decision(write, True, "RootNotFound", f"{spec.path} does not exist in ZooKeeper; nothing to mirror",
                        changed=changed)
    if wanted.skipped:
        reasons = sorted({s.reason for s in wanted.skipped})
        message = (f"{wanted.count} znodes mirrored, {len(wanted.skipped)} left out ({', '.join(reasons)}): "
                   + "; ".join(s.message for s in wanted.skipped[:5]))
        return Decision(write, True, "PartiallyMirrored", message, mirrored=wanted.count, skipped=wanted.skipped,
                        changed=changed, warnings=(("PartiallyMirrored", message),))
    return Decision(write, True, "Mirrored", f"{wanted.count} znodes of {spec.path} mirrored into ConfigMap "
                    f"{spec.config_map}", mirrored=wanted.count, changed=changed)
