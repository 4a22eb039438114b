"""The object store of the in-memory API server: verbs, resource versions, event history and watchers.

Semantics follow kube-apiserver's generic registry (``k8s.io/apiserver/pkg/registry/generic/registry/store.go``)
and the Kubernetes documentation "API Concepts" (resource versions, efficient
detection of changes, retrieving large results in chunks) and "Finalizers".

* One global integer resource version (as etcd's revision): every stored
  change takes the next value; list ``metadata.resourceVersion`` is the current one.
* Writes that leave the stored object unchanged are not written: no new
  resource version, no watch event (``GuaranteedUpdate`` short-circuit).
* A bounded history of events backs watches from a resource version and
  lists at an exact resource version; anything older is answered with 410.
* All changes happen under one lock, and watchers are registered under the
  same lock, so a watch from a list's resource version misses nothing.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import copy
import json
import random
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from zkop_testing import apiserver_apply as managed_fields
from zkop_testing import apiserver_errors as errs
from zkop_testing.apiserver_errors import ApiError, FieldError, GoRaw, go_repr
from zkop_testing.apiserver_kinds import (
    CRD_CLEANUP_FINALIZER,
    SERVICE_CIDR,
    SERVICE_CIDR_V6,
    BuiltinSet,
    CustomResourceStrategy,
    ResourceType,
    Strategy,
    builtin_resource_types,
    custom_resource_types,
    metadata_errors,
    now_time,
)
from zkop_testing.apiserver_patch import apply_json_patch, apply_merge_patch, apply_strategic_merge_patch
from zkop_testing.apiserver_select import FieldSelector, LabelSelector, SelectorError

__all__ = ["Store", "WatchEvent", "Watcher"]

JSON = dict[str, Any]

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
_GENERATE_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_CONTINUE_TOO_OLD = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list "
    "without the continue parameter, or use the continue token in this response to retrieve the remainder of "
    "the results. Continuing with the provided token results in an inconsistent list - objects that were "
    "created, modified, or deleted between the time the first chunk was returned and now may show up in the list."
)


@dataclass(eq=False)
class WatchEvent:
    """One stored change. ``obj`` is the object after the change (for ``DELETED``: the last
    stored state with the deletion's resource version), ``prev`` the object before it."""

    rv: int
    storage_key: tuple[str, str]
    type: str
    obj: JSON
    prev: JSON | None


@dataclass(eq=False)
class _Storage:
    key: tuple[str, str]
    strategy: Strategy
    objects: dict[str, JSON] = field(default_factory=dict)
    #: The keys of :attr:`objects` in order, kept in step by ``_insert``/``_remove`` (built on first use):
    #: a LIST page starts at its continue key by bisection instead of sorting every key again, as
    #: etcd reads a key range. Without it a paginated LIST of N objects costs O(N²/limit).
    sorted_keys: list[str] | None = None

    def ordered_keys(self) -> list[str]:
        """The keys of :attr:`objects`, sorted (the caller must hold the store's lock and not modify it)."""
        if self.sorted_keys is None:
            self.sorted_keys = sorted(self.objects)
        return self.sorted_keys


def _meta(obj: Mapping[str, Any]) -> JSON:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _obj_key(namespaced: bool, namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if namespaced else name


def _key_of(obj: Mapping[str, Any], namespaced: bool) -> str:
    meta = _meta(obj)
    return _obj_key(namespaced, meta.get("namespace", ""), str(meta.get("name", "")))


def _non_meta(obj: Mapping[str, Any]) -> JSON:
    return {k: v for k, v in obj.items() if k not in ("metadata", "apiVersion", "kind")}


def _parse_bool(value: str | None) -> bool:
    return (value or "").strip() in ("1", "t", "T", "true", "TRUE", "True")


def _parse_rv(value: str, what: str = "resourceVersion") -> int:
    try:
        number = int(value)
    except ValueError as exc:
        raise errs.bad_request(f'invalid {what} "{value}"') from exc
    if number < 0:
        raise errs.bad_request(f'invalid {what} "{value}"')
    return number


def _dry_run(query: Mapping[str, str], options: Mapping[str, Any] | None = None) -> bool:
    values = [query.get("dryRun", "")]
    if options:
        values.extend(str(v) for v in options.get("dryRun") or [])
    for value in values:
        if value == "All":
            return True
        if value:
            raise errs.ApiError(400, "BadRequest", f'Unsupported value: "{value}": supported values: "All"')
    return False


class Watcher:
    """An open watch: a queue of events filled by the store, drained by the HTTP thread.

    ``closed`` ends the stream cleanly (server stop, CRD removed, watch expired);
    ``dropped`` means the connection is to be cut abruptly (:meth:`ApiServer.drop_watches`).
    """

    def __init__(self, rt: ResourceType, namespace: str | None, labels: LabelSelector, fields: FieldSelector,
                 bookmarks: bool) -> None:
        self.rt = rt
        self.namespace = namespace
        self.labels = labels
        self.fields = fields
        self.bookmarks = bookmarks
        self.cond = threading.Condition()
        self.queue: deque[WatchEvent | JSON] = deque()
        self.closed = False
        self.dropped = False
        self.on_drop: Callable[[], None] | None = None
        #: set by the HTTP thread once the response headers are flushed: from then on a cut
        #: reaches the client as a truncated stream, not as a connection closed before any
        #: response (which urllib3 retries, so the watch would silently reopen)
        self.streaming = False
        #: the resource version the watch started from (bookmarks are sent only past it)
        self.start_rv = 0

    def push(self, item: WatchEvent | JSON) -> None:
        """Queue an event (or an already rendered ``{"type":..., "object":...}`` dict)."""
        with self.cond:
            self.queue.append(item)
            self.cond.notify_all()

    def close(self) -> None:
        """End the stream cleanly after the queued events."""
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def drop(self) -> None:
        """Cut the connection abruptly: now if the response headers are out, else right after them.

        A connection closed before any response is one urllib3 retries (a watch is a GET), so the
        watch would silently reopen; the HTTP thread sends the headers of a watch dropped before
        them and then finds it dropped, so the client always sees a truncated stream."""
        with self.cond:
            self.dropped = True
            self.cond.notify_all()
            streaming = self.streaming
        if streaming and self.on_drop is not None:
            self.on_drop()

    def start_streaming(self) -> None:
        """Called by the HTTP thread once the response headers are flushed (see :meth:`drop`)."""
        with self.cond:
            self.streaming = True

    def take(self) -> list[WatchEvent | JSON]:
        """Remove and return everything queued."""
        with self.cond:
            items = list(self.queue)
            self.queue.clear()
            return items

    def wait(self, timeout: float) -> None:
        """Block until something is queued, the watch is closed/dropped, or ``timeout`` seconds pass."""
        with self.cond:
            if not self.queue and not self.closed and not self.dropped:
                self.cond.wait(timeout)

    def matches(self, obj: Mapping[str, Any]) -> bool:
        """Whether ``obj`` (storage layout) is selected by this watch's namespace and selectors."""
        meta = _meta(obj)
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        if not self.labels.matches(meta.get("labels")):
            return False
        return self.fields.empty or self.fields.matches(self.rt.strategy.field_values(obj))

    def render(self, item: WatchEvent | JSON) -> JSON | None:
        """The wire event for a queued item, or ``None`` when it is filtered out.

        Selector transitions follow the watch cache: an object that starts
        matching is ``ADDED``, one that stops matching is ``DELETED`` (its previous
        content with the event's resource version).
        """
        if isinstance(item, dict):
            return item
        cur = item.type != "DELETED" and self.matches(item.obj)
        old = item.prev is not None and self.matches(item.prev)
        if item.type == "DELETED":
            if not old:
                return None
            return {"type": "DELETED", "object": self.rt.strategy.to_version(item.obj, self.rt)}
        if cur and not old:
            return {"type": "ADDED", "object": self.rt.strategy.to_version(item.obj, self.rt)}
        if cur and old:
            return {"type": "MODIFIED", "object": self.rt.strategy.to_version(item.obj, self.rt)}
        if old and not cur:
            assert item.prev is not None
            gone = dict(item.prev)
            gone["metadata"] = dict(_meta(item.prev))
            gone["metadata"]["resourceVersion"] = str(item.rv)
            return {"type": "DELETED", "object": self.rt.strategy.to_version(gone, self.rt)}
        return None


class Store:
    """All objects, the global resource version, the event history and the open watches.

    Thread-safe: every public method takes the store lock.

    Args:
        history_size: number of events retained for watches and exact-version lists.
    """

    def __init__(self, history_size: int = 10000) -> None:
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self.rv = 0
        self.history_size = max(1, history_size)
        #: seconds a read at a future resourceVersion waits before 504 (kube-apiserver: 3 s)
        self.future_rv_wait = 3.0
        self._history: deque[WatchEvent] = deque()
        self._floor = 0
        self._storages: dict[tuple[str, str], _Storage] = {}
        self._endpoints: dict[tuple[str, str, str], ResourceType] = {}
        self._watchers: dict[tuple[str, str], set[Watcher]] = {}
        self._ns_counts: Counter[str] = Counter()
        self._rng = random.Random()
        self.builtins = BuiltinSet()
        for rt in builtin_resource_types(self.builtins):
            self._add_endpoint(rt)
        self._bootstrap()

    # ------------------------------------------------------------------ setup
    def _add_endpoint(self, rt: ResourceType) -> None:
        self._endpoints[(rt.group, rt.version, rt.plural)] = rt
        if rt.storage_key not in self._storages:
            self._storages[rt.storage_key] = _Storage(rt.storage_key, rt.strategy)

    def _bootstrap(self) -> None:
        ns_rt = self._endpoints[("", "v1", "namespaces")]
        for name in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self.create(ns_rt, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}, {})
        svc_rt = self._endpoints[("", "v1", "services")]
        self.create(svc_rt, "default", {
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "targetPort": 6443,
                                                          "protocol": "TCP"}]},
        }, {})
        # kube-apiserver's default ServiceCIDR, from --service-cluster-ip-range.
        self.create(self._endpoints[("networking.k8s.io", "v1", "servicecidrs")], None, {
            "apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": {"name": "kubernetes"},
            "spec": {"cidrs": [str(SERVICE_CIDR), str(SERVICE_CIDR_V6)]},
        }, {})
        with self._lock:
            # Like a freshly started kube-apiserver's watch cache: nothing older than "now" is replayable.
            self._history.clear()
            self._floor = self.rv

    # ------------------------------------------------------------------ lookup
    def resolve(self, group: str, version: str, plural: str) -> ResourceType | None:
        """The endpoint serving ``group/version/plural``, or ``None``."""
        with self._lock:
            return self._endpoints.get((group, version, plural))

    def endpoints(self) -> list[ResourceType]:
        """All served endpoints."""
        with self._lock:
            return list(self._endpoints.values())

    def current_rv(self) -> int:
        """The current global resource version."""
        with self._lock:
            return self.rv

    def _storage(self, rt: ResourceType) -> _Storage:
        storage = self._storages.get(rt.storage_key)
        if storage is None:
            raise errs.not_found(rt.group, rt.plural, "")
        return storage

    def _out(self, obj: JSON, rt: ResourceType) -> JSON:
        return rt.strategy.to_version(obj, rt)

    # ------------------------------------------------------------------ primitive commits (lock held)
    def _emit(self, storage: _Storage, type_: str, obj: JSON, prev: JSON | None) -> None:
        event = WatchEvent(self.rv, storage.key, type_, obj, prev)
        if len(self._history) >= self.history_size:
            dropped = self._history.popleft()
            self._floor = dropped.rv
        self._history.append(event)
        for watcher in self._watchers.get(storage.key, ()):
            watcher.push(event)
        self._changed.notify_all()

    def _insert(self, storage: _Storage, obj: JSON) -> None:
        self.rv += 1
        _meta(obj)["resourceVersion"] = str(self.rv)
        key = _key_of(obj, storage.strategy.namespaced)
        if storage.sorted_keys is not None and key not in storage.objects:
            bisect.insort(storage.sorted_keys, key)
        storage.objects[key] = obj
        if storage.strategy.namespaced:
            self._ns_counts[str(_meta(obj).get("namespace"))] += 1
        self._emit(storage, "ADDED", obj, None)

    def _replace(self, storage: _Storage, new: JSON, old: JSON) -> None:
        self.rv += 1
        _meta(new)["resourceVersion"] = str(self.rv)
        storage.objects[_key_of(new, storage.strategy.namespaced)] = new
        self._emit(storage, "MODIFIED", new, old)

    def _remove(self, storage: _Storage, old: JSON) -> JSON:
        self.rv += 1
        final = dict(old)
        final["metadata"] = dict(_meta(old))
        final["metadata"]["resourceVersion"] = str(self.rv)
        key = _key_of(old, storage.strategy.namespaced)
        del storage.objects[key]
        if storage.sorted_keys is not None:
            index = bisect.bisect_left(storage.sorted_keys, key)
            if index < len(storage.sorted_keys) and storage.sorted_keys[index] == key:
                del storage.sorted_keys[index]
        namespace = str(_meta(old).get("namespace", ""))
        if storage.strategy.namespaced:
            self._ns_counts[namespace] -= 1
        self._emit(storage, "DELETED", final, old)
        storage.strategy.on_removed(self, old)
        if storage.strategy.namespaced and self._ns_counts[namespace] <= 0:
            del self._ns_counts[namespace]
            self._maybe_finalize(self._storages[("", "namespaces")], namespace)
        if isinstance(storage.strategy, CustomResourceStrategy) and not storage.objects:
            crds = self._storages.get(("apiextensions.k8s.io", "customresourcedefinitions"))
            if crds is not None:
                self._maybe_finalize(crds, storage.strategy.crd_name)
        return final

    def _maybe_finalize(self, storage: _Storage, key: str) -> None:
        """Remove a terminating object whose finalizers are gone and whose controller is done."""
        obj = storage.objects.get(key)
        if obj is None or not _meta(obj).get("deletionTimestamp"):
            return
        if not storage.strategy.can_finalize(self, obj):
            return
        finalizers = list(_meta(obj).get("finalizers") or [])
        if CRD_CLEANUP_FINALIZER in finalizers and storage.key == ("apiextensions.k8s.io",
                                                                    "customresourcedefinitions"):
            finalizers.remove(CRD_CLEANUP_FINALIZER)
            if finalizers:  # the cleanup controller removes only its own finalizer
                new = copy.deepcopy(obj)
                new["metadata"]["finalizers"] = finalizers
                self._replace(storage, new, obj)
                return
        if not finalizers:
            self._remove(storage, obj)

    # ------------------------------------------------------------------ StoreHooks
    def namespace_is_empty(self, namespace: str) -> bool:
        """No object lives in ``namespace``."""
        return self._ns_counts.get(namespace, 0) <= 0

    def delete_namespace_contents(self, namespace: str) -> None:
        """Delete every object in ``namespace`` (what the namespace controller does)."""
        for storage in list(self._storages.values()):
            if not storage.strategy.namespaced:
                continue
            for key, obj in sorted(storage.objects.items()):
                if _meta(obj).get("namespace") == namespace and key in storage.objects:
                    self._delete_object(storage, storage.objects[key], dry_run=False)

    def crd_has_objects(self, crd: Mapping[str, Any]) -> bool:
        """Custom resources of this CRD still exist."""
        storage = self._storages.get(self._crd_storage_key(crd))
        return storage is not None and bool(storage.objects)

    def delete_crd_objects(self, crd: Mapping[str, Any]) -> None:
        """Delete all custom resources of a terminating CRD (what the CRD cleanup controller does)."""
        storage = self._storages.get(self._crd_storage_key(crd))
        if storage is None:
            return
        for key in sorted(storage.objects):
            if key in storage.objects:
                self._delete_object(storage, storage.objects[key], dry_run=False)

    @staticmethod
    def _crd_storage_key(crd: Mapping[str, Any]) -> tuple[str, str]:
        spec = crd.get("spec") or {}
        return (str(spec.get("group")), str((spec.get("names") or {}).get("plural")))

    def register_crd(self, crd: Mapping[str, Any]) -> None:
        """Serve the versions of a CRD (called after create and update)."""
        key = self._crd_storage_key(crd)
        storage = self._storages.get(key)
        previous = storage.strategy if storage and isinstance(storage.strategy, CustomResourceStrategy) else None
        types = custom_resource_types(crd, previous)
        for ep_key in [k for k, rt in self._endpoints.items() if rt.storage_key == key]:
            del self._endpoints[ep_key]
        for rt in types:
            self._add_endpoint(rt)

    def end_watches(self, crd: Mapping[str, Any]) -> None:
        """End the watches of a CRD's custom resources cleanly (its spec changed)."""
        for watcher in self._watchers.pop(self._crd_storage_key(crd), set()):
            watcher.close()

    def unregister_crd(self, crd: Mapping[str, Any]) -> None:
        """Stop serving a removed CRD; its watches end."""
        key = self._crd_storage_key(crd)
        for ep_key in [k for k, rt in self._endpoints.items() if rt.storage_key == key]:
            del self._endpoints[ep_key]
        self._storages.pop(key, None)
        for watcher in self._watchers.pop(key, set()):
            watcher.close()

    # ------------------------------------------------------------------ decoding
    def _decode_body(self, rt: ResourceType, body: Any) -> JSON:
        if not isinstance(body, dict):
            raise errs.bad_request(
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: json: cannot unmarshal '
                f"{type(body).__name__} into Go value of type struct")
        kind = body.get("kind")
        if kind not in (None, "") and kind != rt.kind:
            raise errs.bad_request(f"the object provided is unrecognized (must be of type {rt.kind}): "
                                   f'kind "{kind}" does not match')
        api_version = body.get("apiVersion")
        if api_version not in (None, "") and api_version != rt.api_version:
            raise errs.bad_request(f"the API version in the data ({api_version}) does not match the expected API "
                                   f"version ({rt.api_version})")
        if "metadata" in body and not isinstance(body["metadata"], dict):
            raise errs.bad_request(f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                                   "metadata must be an object")
        obj = rt.strategy.decode(dict(body), rt)
        obj.setdefault("metadata", {})
        return rt.strategy.from_version(obj, rt)

    # ------------------------------------------------------------------ validation helpers
    def _name_errors(self, rt: ResourceType, name: str) -> list[FieldError]:
        return [FieldError.invalid("metadata.name", name, m) for m in rt.strategy.name_errors(name)]

    def _check_namespace(self, rt: ResourceType, namespace: str | None, name: str) -> None:
        """NamespaceLifecycle admission: 404 for a missing namespace, 403 for a terminating one."""
        if not rt.namespaced or namespace is None:
            return
        ns = self._storages[("", "namespaces")].objects.get(namespace)
        if ns is None:
            raise errs.not_found("", "namespaces", namespace)
        if _meta(ns).get("deletionTimestamp"):
            raise errs.forbidden(
                rt.group, rt.plural, name,
                f"unable to create new content in namespace {namespace} because it is being terminated",
                [{"reason": "NamespaceTerminating", "message": f"namespace {namespace} is being terminated",
                  "field": "metadata.namespace"}])

    def _check_request_namespace(self, rt: ResourceType, obj: JSON, namespace: str | None) -> None:
        meta = _meta(obj)
        if rt.namespaced:
            given = meta.get("namespace") or ""
            if given and given != namespace:
                raise errs.bad_request("the namespace of the provided object does not match the namespace sent "
                                       "on the request")
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)

    # ------------------------------------------------------------------ get / list
    def get(self, rt: ResourceType, namespace: str | None, name: str) -> JSON:
        """GET one object (in ``rt``'s version).

        Raises:
            ApiError: 404 ``NotFound``.
        """
        with self._lock:
            obj = self._storage(rt).objects.get(_obj_key(rt.namespaced, namespace, name))
            if obj is None:
                raise errs.not_found(rt.group, rt.plural, name)
            return self._out(obj, rt)

    def _selectors(self, rt: ResourceType, query: Mapping[str, str]) -> tuple[LabelSelector, FieldSelector]:
        try:
            labels = LabelSelector(query.get("labelSelector"))
            fields = FieldSelector(query.get("fieldSelector"))
            fields.check_fields(lambda f: rt.strategy.supports_field(f, rt),
                                lambda f: f"field label not supported: {f}")
        except SelectorError as exc:
            raise errs.bad_request(str(exc)) from exc
        return labels, fields

    def _state_at(self, storage: _Storage, rv: int, *, continuing: bool = False) -> dict[str, JSON]:
        """The objects of ``storage`` at ``rv``: :attr:`_Storage.objects` itself (not a copy: the
        caller holds the lock) when nothing changed since, else a reconstructed copy."""
        if rv >= self.rv:
            return storage.objects
        if rv < self._floor:
            if continuing:
                raise errs.expired(_CONTINUE_TOO_OLD)
            raise errs.expired("The resourceVersion for the provided list is too old.")
        state = dict(storage.objects)
        for event in reversed(self._history):
            if event.rv <= rv:
                break
            if event.storage_key != storage.key:
                continue
            key = _key_of(event.obj, storage.strategy.namespaced)
            if event.type == "ADDED":
                state.pop(key, None)
            elif event.prev is not None:
                state[key] = event.prev
        return state

    def _wait_for_rv(self, rv: int) -> None:
        deadline = time.monotonic() + self.future_rv_wait
        while self.rv < rv:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ApiError(504, "Timeout", f"Too large resource version: {rv}, current: {self.rv}",
                               {"causes": [{"reason": "ResourceVersionTooLarge",
                                            "message": "Too large resource version"}], "retryAfterSeconds": 1})
            self._changed.wait(remaining)

    def list_objects(self, rt: ResourceType, namespace: str | None, query: Mapping[str, str]) -> JSON:
        """LIST with selectors, ``limit``/``continue`` and resource version semantics.

        ``resourceVersion`` unset, ``""`` or ``"0"``: the current state.
        ``resourceVersionMatch=NotOlderThan``: the current state (waits up to 3 s
        for a future version, then 504). ``resourceVersionMatch=Exact`` (or a
        non-zero version with ``limit``): the state at that version, 410
        ``Expired`` when it is older than the retained history.

        Raises:
            ApiError: 400 bad selector or token, 410, 422 invalid list options, 504.
        """
        labels, fields = self._selectors(rt, query)
        rv_text = query.get("resourceVersion", "")
        match = query.get("resourceVersionMatch", "")
        token = query.get("continue", "")
        limit_text = query.get("limit", "")
        option_errors: list[FieldError] = []
        if match:
            if match not in ("Exact", "NotOlderThan"):
                option_errors.append(FieldError.not_supported("resourceVersionMatch", match,
                                                              ["Exact", "NotOlderThan"]))
            elif not rv_text:
                option_errors.append(FieldError.forbidden("resourceVersionMatch", "resourceVersionMatch is "
                                                          "forbidden unless resourceVersion is provided"))
            elif match == "Exact" and rv_text == "0":
                option_errors.append(FieldError.forbidden("resourceVersionMatch", 'resourceVersionMatch "exact" is '
                                                          'forbidden for resourceVersion "0"'))
            if token:
                option_errors.append(FieldError.forbidden("resourceVersionMatch", "resourceVersionMatch is "
                                                          "forbidden when continue is provided"))
        if token and rv_text not in ("", "0"):
            option_errors.append(FieldError.forbidden("resourceVersion", "specifying resource version is not "
                                                      "allowed when using continue"))
        if option_errors:
            raise errs.invalid("meta.k8s.io", "ListOptions", "", option_errors)
        limit = 0
        if limit_text:
            try:
                limit = max(0, int(limit_text))
            except ValueError as exc:
                raise errs.bad_request(f'invalid limit "{limit_text}"') from exc
        start = ""
        with self._lock:
            storage = self._storage(rt)
            if token:
                snapshot_rv, start = self._decode_continue(token)
                if snapshot_rv == -1:  # the token of an expired continuation: the latest state
                    snapshot_rv = self.rv
                try:
                    state = self._state_at(storage, snapshot_rv, continuing=True)
                except ApiError as exc:
                    # etcd3/store.go handleCompactedErrorForPaging: 410 with a fresh token (resourceVersion
                    # -1) that continues from the same key at the latest version, inconsistently.
                    exc.list_meta = {"continue": self._encode_continue(-1, start)}
                    raise
            elif rv_text not in ("", "0"):
                wanted = _parse_rv(rv_text)
                exact = match == "Exact" or (not match and limit > 0)
                if exact:
                    if wanted > self.rv:
                        self._wait_for_rv(wanted)
                    state = self._state_at(storage, wanted)
                    snapshot_rv = wanted
                else:
                    self._wait_for_rv(wanted)
                    state = storage.objects
                    snapshot_rv = self.rv
            else:
                state = storage.objects
                snapshot_rv = self.rv
            keys = storage.ordered_keys() if state is storage.objects else sorted(state)
            first = bisect.bisect_right(keys, start) if start else 0
            # Without selectors every key matches: stop after limit + 1, the rest is counted.
            unfiltered = namespace is None and labels.empty and fields.empty
            selected: list[tuple[str, JSON]] = []
            unseen = 0  # keys after an early stop: all match
            for position in range(first, len(keys)):
                if unfiltered and limit and len(selected) > limit:
                    unseen = len(keys) - position
                    break
                key = keys[position]
                obj = state[key]
                meta = _meta(obj)
                if namespace is not None and meta.get("namespace") != namespace:
                    continue
                if not labels.matches(meta.get("labels")):
                    continue
                if not fields.empty and not fields.matches(rt.strategy.field_values(obj)):
                    continue
                selected.append((key, obj))
            list_meta: JSON = {"resourceVersion": str(snapshot_rv)}
            if limit and len(selected) > limit:
                remaining = len(selected) - limit + unseen
                selected = selected[:limit]
                list_meta["continue"] = self._encode_continue(snapshot_rv, selected[-1][0])
                if labels.empty and fields.empty:
                    list_meta["remainingItemCount"] = remaining
            items = [self._out(obj, rt) for _, obj in selected]
        if rt.builtin:
            items = [{k: v for k, v in item.items() if k not in ("apiVersion", "kind")} for item in items]
        return {"apiVersion": rt.api_version, "kind": rt.list_kind, "metadata": list_meta, "items": items}

    @staticmethod
    def _encode_continue(rv: int, start: str) -> str:
        raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start}, separators=(",", ":"))
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @staticmethod
    def _decode_continue(token: str) -> tuple[int, str]:
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            data = json.loads(raw)
            return int(data["rv"]), str(data["start"])
        except (binascii.Error, ValueError, KeyError, TypeError) as exc:
            raise errs.bad_request(f"continue key is not valid: {exc}") from exc

    # ------------------------------------------------------------------ create
    def create(self, rt: ResourceType, namespace: str | None, body: Any, query: Mapping[str, str]) -> JSON:
        """POST: create an object; returns it as stored (201).

        Raises:
            ApiError: 400 (bad body, namespace mismatch), 403 (terminating namespace),
                404 (missing namespace), 405 (terminating CRD), 409 ``AlreadyExists``,
                422 ``Invalid``, 500 (``resourceVersion`` set on create, as kube-apiserver).
        """
        dry_run = _dry_run(query)
        obj = self._decode_body(rt, body)
        with self._lock:
            return self._out(self._create_locked(rt, namespace, obj, dry_run), rt)

    def _create_locked(self, rt: ResourceType, namespace: str | None, obj: JSON, dry_run: bool) -> JSON:
        storage = self._storage(rt)
        strategy = rt.strategy
        self._check_request_namespace(rt, obj, namespace)
        meta = _meta(obj)
        name = str(meta.get("name") or "")
        self._check_namespace(rt, namespace, name)
        if isinstance(strategy, CustomResourceStrategy):
            crd = self._storages[("apiextensions.k8s.io", "customresourcedefinitions")].objects.get(
                strategy.crd_name)
            if crd is not None and _meta(crd).get("deletionTimestamp"):
                raise errs.method_not_allowed("create not allowed while custom resource definition is terminating")
        errors: list[FieldError] = []
        if not name and meta.get("generateName"):
            prefix = str(meta["generateName"])[:58]
            name = prefix + "".join(self._rng.choice(_GENERATE_CHARS) for _ in range(5))
            meta["name"] = name
        rv_given = meta.pop("resourceVersion", None)
        meta["creationTimestamp"] = now_time()
        meta["uid"] = str(uuid.uuid4())
        for key in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):  # managedFields: on_write
            meta.pop(key, None)
        if strategy.has_generation:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        strategy.prepare_create(self, obj, rt)
        if not name:
            errors.append(FieldError.required("metadata.name", "name or generateName is required"))
        else:
            errors.extend(self._name_errors(rt, name))
        errors.extend(metadata_errors(meta))
        errors.extend(strategy.validate(self, obj, None, rt))
        if errors:
            raise errs.invalid(rt.group, rt.kind, name, errors)
        key = _obj_key(rt.namespaced, namespace, name)
        if key in storage.objects:
            raise errs.already_exists(rt.group, rt.plural, name)
        if rv_given not in (None, ""):
            raise ApiError(500, "", "resourceVersion should not be set on objects to be created")
        managed_fields.on_write(self, rt, None, obj, None)
        if dry_run:
            return obj
        strategy.commit_create(self, obj)
        self._insert(storage, obj)
        strategy.after_create(self, obj)
        return obj

    # ------------------------------------------------------------------ update
    def update(self, rt: ResourceType, namespace: str | None, name: str, body: Any, subresource: str | None,
               query: Mapping[str, str]) -> tuple[int, JSON]:
        """PUT: replace an object (or its ``status``); returns ``(http_status, object)``.

        Raises:
            ApiError: 400 (name/namespace mismatch), 404, 409 ``Conflict`` (stale
                ``resourceVersion``), 422 (invalid, or no ``resourceVersion`` for kinds
                that require one).
        """
        dry_run = _dry_run(query)
        obj = self._decode_body(rt, body)
        with self._lock:
            code, result = self._update_locked(rt, namespace, name, obj, subresource, dry_run)
            return code, self._out(result, rt)

    def _update_locked(self, rt: ResourceType, namespace: str | None, name: str, obj: JSON,
                       subresource: str | None, dry_run: bool) -> tuple[int, JSON]:
        storage = self._storage(rt)
        strategy = rt.strategy
        meta = _meta(obj)
        body_name = meta.get("name")
        if body_name and body_name != name:
            raise errs.bad_request(f"the name of the object ({body_name}) does not match the name on the URL "
                                   f"({name})")
        meta["name"] = name
        self._check_request_namespace(rt, obj, namespace)
        key = _obj_key(rt.namespaced, namespace, name)
        old = storage.objects.get(key)
        rv_text = str(meta.get("resourceVersion") or "")
        if old is None:
            if strategy.allow_create_on_update and not subresource and not rv_text:
                return 201, self._create_locked(rt, namespace, obj, dry_run)
            raise errs.not_found(rt.group, rt.plural, name)
        old_meta = _meta(old)
        if rv_text:
            _parse_rv(rv_text)
            if rv_text != old_meta.get("resourceVersion"):
                raise errs.conflict(rt.group, rt.plural, name, "the object has been modified; please apply your "
                                    "changes to the latest version and try again")
        elif not strategy.allow_unconditional_update:
            raise errs.invalid(rt.group, rt.kind, name, [FieldError.invalid(
                "metadata.resourceVersion", GoRaw("0x0"), "must be specified for an update")])
        errors: list[FieldError] = []
        if subresource == "status":
            new = copy.deepcopy(old)
            if "status" in obj:
                new["status"] = obj["status"]
            else:
                new.pop("status", None)
        else:
            new = obj
            new_meta = _meta(new)
            if new_meta.get("uid") and new_meta["uid"] != old_meta.get("uid"):
                errors.append(FieldError.invalid("metadata.uid", new_meta["uid"], "field is immutable"))
            for field_name in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                               "generation"):
                if field_name in old_meta:
                    new_meta[field_name] = old_meta[field_name]
                else:
                    new_meta.pop(field_name, None)
            new_meta.pop("selfLink", None)  # managedFields: see managed_fields.on_write
            if rt.has_status:
                if "status" in old:
                    new["status"] = copy.deepcopy(old["status"])
                else:
                    new.pop("status", None)
            strategy.prepare_update(self, new, old, rt)
        _meta(new)["resourceVersion"] = old_meta.get("resourceVersion")
        # The update starts from the object as read, which is defaulted: defaults are materialised in
        # what is stored, but count as no spec change.
        strategy.read_defaults(new, rt)
        if subresource is None and strategy.has_generation and _non_meta(new) != _non_meta(self._out(old, rt)):
            _meta(new)["generation"] = int(old_meta.get("generation") or 0) + 1
        new_meta = _meta(new)
        if old_meta.get("deletionTimestamp"):
            added = [f for f in new_meta.get("finalizers") or [] if f not in (old_meta.get("finalizers") or [])]
            if added:
                errors.append(FieldError.forbidden("metadata.finalizers", "no new finalizers can be added if the "
                                                   f"object is being deleted, found new finalizers {go_repr(added)}"))
        errors.extend(metadata_errors(new_meta))
        if subresource == "status":
            errors.extend(strategy.validate_status(self, new, old, rt))
        else:
            errors.extend(strategy.validate(self, new, old, rt))
        if errors:
            raise errs.invalid(rt.group, rt.kind, name, errors)
        # against the object as read: defaults it materialises are nobody's change
        managed_fields.on_write(self, rt, self._out(old, rt), new, subresource)
        if new_meta.get("deletionTimestamp") and not new_meta.get("finalizers") and \
                strategy.can_finalize(self, new):
            # The update empties the finalizers of a terminating object: it is deleted instead.
            # The watch sees DELETED with the last stored state; the caller gets its own object back.
            if not dry_run:
                self._remove(storage, old)
            return 200, new
        if new == old:
            return 200, old
        if dry_run:
            return 200, new
        strategy.commit_update(self, new, old)
        self._replace(storage, new, old)
        strategy.after_update(self, new, old)
        return 200, new

    # ------------------------------------------------------------------ patch
    def patch(self, rt: ResourceType, namespace: str | None, name: str, body: bytes, content_type: str,
              subresource: str | None, query: Mapping[str, str]) -> JSON:
        """PATCH with merge patch, JSON patch or (built-ins only) strategic merge patch.

        A ``metadata.resourceVersion`` in the patched object is a precondition
        (409 when stale); without it the patch applies to the current object.

        Raises:
            ApiError: 400 malformed patch, 404, 409, 415 unsupported patch type
                (strategic merge on custom resources; apply patches, which the HTTP front end
                routes to :func:`zkop_testing.apiserver_apply.apply_patch`), 422.
        """
        media = content_type.split(";")[0].strip().lower()
        accepted = [JSON_PATCH, MERGE_PATCH, APPLY_PATCH]
        if rt.strategy.strategic_merge:
            accepted.append(STRATEGIC_MERGE_PATCH)
        if media not in accepted or media == APPLY_PATCH:
            raise errs.unsupported_media_type(media, accepted)
        try:
            patch = json.loads(body or b"null")
        except ValueError as exc:
            raise errs.bad_request(f"error decoding patch: {exc}") from exc
        dry_run = _dry_run(query)
        with self._lock:
            storage = self._storage(rt)
            old = storage.objects.get(_obj_key(rt.namespaced, namespace, name))
            if old is None:
                raise errs.not_found(rt.group, rt.plural, name)
            current = copy.deepcopy(self._out(old, rt))
            if media == JSON_PATCH:
                patched = apply_json_patch(current, patch)
            elif media == MERGE_PATCH:
                if not isinstance(patch, dict):
                    raise errs.bad_request("json: cannot unmarshal into Go value of type map[string]interface {}")
                patched = apply_merge_patch(current, patch)
            else:
                patched = apply_strategic_merge_patch(current, patch)
            if not isinstance(patched, dict):
                raise errs.bad_request("the patched object is not a JSON object")
            patched.setdefault("apiVersion", rt.api_version)
            patched.setdefault("kind", rt.kind)
            obj = self._decode_body(rt, patched)
            _, result = self._update_locked(rt, namespace, name, obj, subresource, dry_run)
            return self._out(result, rt)

    # ------------------------------------------------------------------ delete
    def _delete_object(self, storage: _Storage, obj: JSON, dry_run: bool) -> tuple[bool, JSON]:
        """Delete or start terminating ``obj``; returns ``(removed, object to answer with)``."""
        strategy = storage.strategy
        meta = _meta(obj)
        if meta.get("deletionTimestamp"):
            return False, obj
        if meta.get("finalizers") or strategy.needs_finalization(obj):
            new = copy.deepcopy(obj)
            new_meta = new["metadata"]
            new_meta["deletionTimestamp"] = now_time()
            new_meta["deletionGracePeriodSeconds"] = 0
            if int(new_meta.get("generation") or 0) > 0:
                new_meta["generation"] = int(new_meta["generation"]) + 1
            strategy.on_terminating(new)
            if dry_run:
                return False, new
            self._replace(storage, new, obj)
            strategy.after_terminating(self, new)
            self._maybe_finalize(storage, _key_of(new, strategy.namespaced))
            return False, new
        if dry_run:
            return True, obj
        return True, self._remove(storage, obj)

    def delete(self, rt: ResourceType, namespace: str | None, name: str, options: Mapping[str, Any],
               query: Mapping[str, str]) -> JSON:
        """DELETE one object.

        With finalizers (or for namespaces and CRDs, which have controllers to
        run) the object gets ``deletionTimestamp`` and stays; deleting it again is
        a no-op returning it. Otherwise it is removed and the answer is the object
        (kinds with ``ReturnDeletedObject``: Services, custom resources, ...) or a
        ``Status`` with ``status: Success``.

        Raises:
            ApiError: 403 (system namespaces), 404, 409 (failed ``preconditions``).
        """
        dry_run = _dry_run(query, options)
        preconditions = options.get("preconditions") or {}
        with self._lock:
            storage = self._storage(rt)
            obj = storage.objects.get(_obj_key(rt.namespaced, namespace, name))
            if obj is None:
                raise errs.not_found(rt.group, rt.plural, name)
            meta = _meta(obj)
            qualified = rt.kind
            if preconditions.get("uid") and preconditions["uid"] != meta.get("uid"):
                raise errs.conflict(rt.group, qualified, name, f"the UID in the precondition ({preconditions['uid']}) "
                                    f"does not match the UID in record ({meta.get('uid')}). The object might have "
                                    "been deleted and then recreated")
            if preconditions.get("resourceVersion") and preconditions["resourceVersion"] != meta.get(
                    "resourceVersion"):
                raise errs.conflict(rt.group, qualified, name, "the ResourceVersion in the precondition "
                                    f"({preconditions['resourceVersion']}) does not match the ResourceVersion in "
                                    f"record ({meta.get('resourceVersion')}). The object might have been modified")
            if rt.storage_key == ("", "namespaces") and name in ("default", "kube-system", "kube-public"):
                raise errs.forbidden("", "namespaces", name, "this namespace may not be deleted")
            removed, result = self._delete_object(storage, obj, dry_run)
            if removed and not rt.strategy.return_deleted_object:
                return errs.status_success(name, rt.group, rt.plural, str(meta.get("uid", "")))
            return self._out(result, rt)

    def delete_collection(self, rt: ResourceType, namespace: str | None, options: Mapping[str, Any],
                          query: Mapping[str, str]) -> JSON:
        """DELETE on a collection (with selectors); answers with the list of deleted objects."""
        dry_run = _dry_run(query, options)
        labels, fields = self._selectors(rt, query)
        with self._lock:
            storage = self._storage(rt)
            items = []
            for key in sorted(storage.objects):
                obj = storage.objects.get(key)
                if obj is None:
                    continue
                meta = _meta(obj)
                if namespace is not None and meta.get("namespace") != namespace:
                    continue
                if not labels.matches(meta.get("labels")) or (
                        not fields.empty and not fields.matches(rt.strategy.field_values(obj))):
                    continue
                _, result = self._delete_object(storage, obj, dry_run)
                items.append(self._out(result, rt))
            return {"apiVersion": rt.api_version, "kind": rt.list_kind,
                    "metadata": {"resourceVersion": str(self.rv)}, "items": items}

    # ------------------------------------------------------------------ watch
    def open_watch(self, rt: ResourceType, namespace: str | None, query: Mapping[str, str]) -> Watcher:
        """Register a watch and queue its initial events.

        ``resourceVersion`` unset/``""``/``"0"``: synthetic ``ADDED`` for every
        current object, then live events. ``resourceVersion=N``: every retained
        event after ``N``; older than the history -> a single 410 ``ERROR`` event.
        ``sendInitialEvents=true`` (needs ``resourceVersionMatch=NotOlderThan`` and
        ``allowWatchBookmarks=true``) ends the initial events with a bookmark
        annotated ``k8s.io/initial-events-end``.

        Raises:
            ApiError: 400 bad selector, 422 invalid options.
        """
        labels, fields = self._selectors(rt, query)
        bookmarks = _parse_bool(query.get("allowWatchBookmarks"))
        rv_text = query.get("resourceVersion", "")
        send_initial = query.get("sendInitialEvents")
        match = query.get("resourceVersionMatch", "")
        if send_initial is not None and send_initial != "":
            problems = []
            if match != "NotOlderThan":
                problems.append(FieldError.forbidden("resourceVersionMatch", "sendInitialEvents requires setting "
                                                     "resourceVersionMatch to NotOlderThan"))
            if _parse_bool(send_initial) and not bookmarks:
                problems.append(FieldError.forbidden("allowWatchBookmarks", "allowWatchBookmarks must be true when "
                                                     "sendInitialEvents is set"))
            if problems:
                raise errs.invalid("meta.k8s.io", "ListOptions", "", problems)
        elif match:
            raise errs.invalid("meta.k8s.io", "ListOptions", "", [FieldError.forbidden(
                "resourceVersionMatch", "resourceVersionMatch is forbidden for watch unless sendInitialEvents is "
                "provided")])
        watcher = Watcher(rt, namespace, labels, fields, bookmarks)
        with self._lock:
            storage = self._storage(rt)
            watcher.start_rv = _parse_rv(rv_text) if rv_text not in ("", "0") else self.rv
            initial = _parse_bool(send_initial) if send_initial not in (None, "") else rv_text in ("", "0")
            if initial:
                for key in sorted(storage.objects):
                    obj = storage.objects[key]
                    watcher.queue.append(WatchEvent(int(_meta(obj).get("resourceVersion") or 0), storage.key,
                                                    "ADDED", obj, None))
                if _parse_bool(send_initial):
                    watcher.queue.append({"type": "BOOKMARK", "object": self.bookmark_object(
                        rt, self.rv, {"k8s.io/initial-events-end": "true"})})
            elif rv_text not in ("", "0"):
                since = _parse_rv(rv_text)
                if since < self._floor:
                    status = errs.expired(f"too old resource version: {since} ({self._floor})").status()
                    status.pop("details", None)
                    watcher.queue.append({"type": "ERROR", "object": status})
                    watcher.closed = True
                    return watcher
                for event in self._history:
                    if event.rv > since and event.storage_key == storage.key:
                        watcher.queue.append(event)
            self._watchers.setdefault(storage.key, set()).add(watcher)
        return watcher

    def close_watch(self, watcher: Watcher) -> None:
        """Unregister a watch."""
        with self._lock:
            watchers = self._watchers.get(watcher.rt.storage_key)
            if watchers is not None:
                watchers.discard(watcher)

    def open_watches(self) -> list[Watcher]:
        """All registered watches."""
        with self._lock:
            return [w for ws in self._watchers.values() for w in ws]

    def bookmark_rv(self, watcher: Watcher) -> int | None:
        """The resource version a bookmark may carry now, or ``None`` while events are still queued."""
        with self._lock:
            with watcher.cond:
                if watcher.queue:
                    return None
            return self.rv

    @staticmethod
    def bookmark_object(rt: ResourceType, rv: int, annotations: Mapping[str, str] | None = None) -> JSON:
        """The object of a ``BOOKMARK`` event: only kind, apiVersion and metadata.resourceVersion."""
        meta: JSON = {"resourceVersion": str(rv)}
        if annotations:
            meta["annotations"] = dict(annotations)
        return {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}

    # ------------------------------------------------------------------ hooks
    def expire_history(self) -> None:
        """Forget all events: watches and exact lists from any older version now get 410."""
        with self._lock:
            self._history.clear()
            self._floor = self.rv

    def close_all_watches(self) -> None:
        """End every watch cleanly (server shutdown)."""
        with self._lock:
            watchers = [w for ws in self._watchers.values() for w in ws]
        for watcher in watchers:
            watcher.close()

    def iter_objects(self, rt: ResourceType) -> Iterable[JSON]:
        """Current objects of ``rt`` (storage layout; for diagnostics)."""
        with self._lock:
            return list(self._storage(rt).objects.values())
