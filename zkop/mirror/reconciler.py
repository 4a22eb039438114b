"""Reconcile one ZooKeeperMirror: pre-check, gather, decide once, apply.

1. pure pre-checks: the spec (:func:`~zkop.mirror.decide.parse_spec`), the ensemble it names
   (:class:`~zkop.mirror.sources.MirrorSources`: the flags', or a running ZooKeeperEnsemble), that ensemble's
   admission gate; nothing is read for an invalid spec, a missing ensemble or a refusal;
2. gather: the znodes under the root on that ensemble (:class:`~zkop.mirror.tree.TreeReader`, watched) and the
   ConfigMap from the label-selected cache;
3. :func:`~zkop.mirror.decide.decide`;
4. apply through the injected :class:`~zkop.mirror.writer.ApiWriter`: the ConfigMap write, the
   status (only when it differs), Warning Events when the reported outcome changes. A create that
   answers AlreadyExists (a foreign ConfigMap is not in that cache) is a concurrent change: the pass
   gathers the ConfigMap from the API server and decides again, through the one replan loop
   (:func:`~zkop.zookeeper.replan.with_replans`).

Watch events (kazoo's thread) map a path to the mirrors whose root covers it
(:meth:`MirrorReconciler.keys_for_path`) and only enqueue.
"""

from __future__ import annotations

import logging

from zkop.feature.ensemble_lookup import EnsembleMissing
from zkop.feature.ensemble_ref import DEFAULT_ENSEMBLE, ensemble_of
from zkop.feature.gate import Gate
from zkop.kube.client import JSON
from zkop.kube.events import now_rfc3339
from zkop.mirror.decide import Decision, MirrorSpec, SpecError, decide, parse_spec
from zkop.mirror.sources import MirrorSource, MirrorSources
from zkop.mirror.tree import NO_LIMITS, Limits
from zkop.mirror.writer import AlreadyExists, ApiWriter
from zkop.runtime.cache import Indexer
from zkop.runtime.conditions import condition
from zkop.runtime.controller import Result, RetryableError
from zkop.runtime.retry import RetryBoundary
from zkop.zookeeper.adapter import ZooKeeperError
from zkop.zookeeper.errors import ConcurrentModification
from zkop.zookeeper.replan import with_replans

__all__ = ["MirrorReconciler", "admitted_specs", "desired_status", "keys_for_path", "keys_naming", "mirror_covers"]

log = logging.getLogger(__name__)

#: At most this many left-out znodes are listed in ``status.skipped``.
MAX_SKIPPED_IN_STATUS = 20
#: Seconds before a mirror whose ZooKeeperEnsemble exists but does not run yet is looked at again (as for a
#: ZooKeeperConfig: never reported as unusable while merely starting).
ENSEMBLE_STARTING_RECHECK = 5.0


def mirror_covers(spec: MirrorSpec, path: str) -> bool:
    """Whether a change of ``path`` can change what ``spec`` mirrors."""
    if path == spec.path:
        return True
    return spec.recursive and path.startswith(spec.path.rstrip("/") + "/")


def admitted_specs(mirrors: Indexer, gate: Gate, ensemble: str = DEFAULT_ENSEMBLE) -> list[tuple[str, MirrorSpec]]:
    """``(key, spec)`` of every mirror in ``mirrors`` naming ``ensemble`` with a valid spec that ensemble's gate
    admits (a refused one is never read nor watched)."""
    specs = []
    for obj in mirrors.list():
        try:
            spec = parse_spec(obj)
        except SpecError:
            continue
        if spec.ensemble != ensemble or gate.admit(obj, spec.path, "read") is not None:
            continue
        meta = obj.get("metadata") or {}
        specs.append((f"{meta.get('namespace')}/{meta.get('name')}", spec))
    return specs


def keys_for_path(mirrors: Indexer, gate: Gate, path: str, ensemble: str = DEFAULT_ENSEMBLE) -> list[str]:
    """The keys of the admitted mirrors of ``ensemble`` a change of ``path`` there concerns (reads only memory:
    kazoo's thread)."""
    return [key for key, spec in admitted_specs(mirrors, gate, ensemble) if mirror_covers(spec, path)]


def keys_naming(mirrors: Indexer, ensemble: str) -> list[str]:
    """The keys of the mirrors whose ``spec.ensembleRef`` names ``ensemble`` (reads only memory)."""
    return [f"{(o.get('metadata') or {}).get('namespace')}/{(o.get('metadata') or {}).get('name')}"
            for o in mirrors.list() if ensemble_of(o) == ensemble]


def desired_status(old: JSON, decision: Decision, generation: int, config_map: str | None, now: str) -> JSON:
    """The mirror's status after ``decision`` (``lastChange`` moves only when the ConfigMap's contents do)."""
    conditions = old.get("conditions") or []
    ready = condition(conditions, "Ready", "True" if decision.ready else "False", decision.reason,
                      decision.message, generation, now)
    new: JSON = {
        "observedGeneration": generation, "conditions": [ready], "mirrored": decision.mirrored,
        "skipped": [{"path": s.path, "reason": s.reason, "message": s.message}
                    for s in decision.skipped[:MAX_SKIPPED_IN_STATUS]],
        "configMap": config_map, "lastChange": now if decision.changed else old.get("lastChange"),
    }
    if decision.stalled:
        new["conditions"].append(condition(conditions, "Stalled", "True", decision.reason, decision.message,
                                           generation, now))
    return {k: v for k, v in new.items() if v is not None}


def _same(old: JSON, new: JSON) -> bool:
    """Whether patching ``new`` over ``old`` would change nothing."""
    return all(old.get(k) == v for k, v in new.items())


class MirrorReconciler:
    """Reconciles ZooKeeperMirrors (keys ``namespace/name``).

    Args:
        mirrors: the mirrors informer's indexer.
        config_maps: the indexer of ConfigMaps carrying :data:`~zkop.mirror.decide.MANAGED_LABEL`.
        writer: every API write (the dry-run seam).
        sources: every ensemble's source (:class:`~zkop.mirror.sources.MirrorSources`): its admission gate, which a
            mirror passes before anything is read or watched for it (reads, held to the same rules as a
            ZooKeeperConfig's writes; the reserved roots below a mirror's root are never read), its watched reader
            and its watched roots; the flags' is ``sources.default``.
        limits: how much one mirror may have zkop read (the operator's ``--mirror-max-*``).
    """

    def __init__(self, mirrors: Indexer, config_maps: Indexer, writer: ApiWriter, *, sources: MirrorSources,
                 limits: Limits = NO_LIMITS) -> None:
        self.limits = limits
        self.mirrors = mirrors
        self.config_maps = config_maps
        self.writer = writer
        self.sources = sources
        #: A ZooKeeper failure leaves a pass as a RetryableError.
        self.retry = RetryBoundary(ZooKeeperError)

    def keys_for_path(self, path: str) -> list[str]:
        """The mirrors of the flags' ensemble a change of ``path`` there concerns (kazoo's thread: no I/O)."""
        return keys_for_path(self.mirrors, self.sources.default.gate, path)

    def keys_naming(self, ensemble: str) -> list[str]:
        """The mirrors naming ZooKeeperEnsemble ``ensemble`` (its runtime or tenancy changed, its session is back)."""
        return keys_naming(self.mirrors, ensemble)

    def keys_for_config_map(self, obj: JSON) -> list[str]:
        """ConfigMaps informer mapping: the mirrors that own the ConfigMap."""
        meta = obj.get("metadata") or {}
        return [f"{meta.get('namespace')}/{ref.get('name')}" for ref in meta.get("ownerReferences") or []
                if ref.get("kind") == "ZooKeeperMirror"]

    def all_keys(self) -> list[str]:
        """Every mirror's key."""
        return [f"{(o.get('metadata') or {}).get('namespace')}/{(o.get('metadata') or {}).get('name')}"
                for o in self.mirrors.list()]

    def _keep_roots_watched(self) -> None:
        """On each ensemble read so far, watch the roots of the mirrors its gate admits, and no others."""
        for name, source in self.sources.known():
            roots = frozenset(spec.path for _, spec in admitted_specs(self.mirrors, source.gate, name))
            if roots != source.roots:
                source.roots = roots
                source.watch_roots(sorted(roots))

    def reconcile(self, key: str) -> Result:
        """One pass for mirror ``key`` (see the module docstring).

        Raises:
            RetryableError: ZooKeeper or the API server failed; the key is retried with backoff.
        """
        mirror = self.mirrors.get(key)
        self._keep_roots_watched()
        if mirror is None or (mirror.get("metadata") or {}).get("deletionTimestamp"):
            return Result()  # the garbage collector deletes the owned ConfigMap
        namespace = str(mirror["metadata"]["namespace"])
        spec: MirrorSpec | SpecError
        try:
            spec = parse_spec(mirror)
        except SpecError as err:
            spec = err
        source = self.sources.get(spec.ensemble) if isinstance(spec, MirrorSpec) else None
        if isinstance(source, EnsembleMissing) and source.reason is None:
            # The ensemble exists and its runtime is being made: its registration enqueues the mirror again.
            return Result(requeue_after=ENSEMBLE_STARTING_RECHECK)
        missing = (source.reason, source.message) if isinstance(source, EnsembleMissing) and source.reason else None
        refusal = (source.gate.admit(mirror, spec.path, "read")
                   if isinstance(spec, MirrorSpec) and isinstance(source, MirrorSource) else None)
        if isinstance(spec, SpecError) or not isinstance(source, MirrorSource) or refusal is not None:
            decision = decide(mirror, spec, None, None, refusal=refusal, ensemble_missing=missing)  # nothing is read
        else:
            decision = self.writer.applied(self._converge(key, mirror, namespace, spec, source),
                                           f"{namespace}/{spec.config_map}")
        self._report(mirror, decision, spec.config_map if isinstance(spec, MirrorSpec) else None)
        return Result()

    def _converge(self, key: str, mirror: JSON, namespace: str, spec: MirrorSpec, source: MirrorSource) -> Decision:
        """Gather, decide, write; decide again on a concurrent change (:func:`~zkop.zookeeper.replan.with_replans`).

        The znodes are read once; a create that meets a ConfigMap the label-selected cache does not hold
        (AlreadyExists) is a concurrent change: the next attempt reads that ConfigMap from the API server.

        Raises:
            RetryableError: ZooKeeper failed, or the ConfigMap kept changing through every attempt.
        """
        with self.retry.retrying(key):
            snapshot = source.reader.snapshot(spec.path, recursive=spec.recursive,
                                              exclude=source.gate.excluded(spec.path), limits=self.limits)

        def attempt(n: int) -> Decision:
            existing = (self.config_maps.get(f"{namespace}/{spec.config_map}") if n == 0
                        else self.writer.get_config_map(namespace, spec.config_map))
            decision = decide(mirror, spec, snapshot, existing)
            write = decision.write
            if write is None:
                return decision
            try:
                self.writer.write_config_map(namespace, spec.config_map, write)
            except AlreadyExists as err:
                raise ConcurrentModification(f"ConfigMap {spec.config_map} exists") from err
            if write[0] == "create":
                self.writer.event(mirror, "Normal", "Created", f"ConfigMap {spec.config_map} created from {spec.path}")
            return decision

        def on_conflict(n: int, err: ConcurrentModification) -> None:
            log.info("zookeeper-mirror %s: %s, not in the cache (attempt %d); deciding again", key, err, n + 1)

        try:
            return with_replans(attempt, on_conflict)
        except ConcurrentModification:
            raise RetryableError(f"{key}: ConfigMap {spec.config_map} changed meanwhile") from None

    def _report(self, mirror: JSON, decision: Decision, config_map: str | None) -> None:
        old = mirror.get("status") or {}
        new = desired_status(old, decision, int(mirror["metadata"].get("generation") or 0), config_map,
                             now_rfc3339())
        if _same(old, new):
            return
        previous: JSON = next((c for c in old.get("conditions") or [] if c.get("type") == "Ready"), {})
        if (previous.get("reason"), previous.get("message")) != (decision.reason, decision.message):
            for reason, message in decision.warnings:
                self.writer.event(mirror, "Warning", reason, message)
        self.writer.patch_status(mirror, new)
