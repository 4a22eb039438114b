"""Validation rules of built-in kinds the in-memory API server applies, ported from kubernetes/kubernetes.

* :func:`path_segment_name_errors` — apimachinery ``pkg/api/validation/path/name.go``
  ``IsValidPathSegmentName``: the only name rule of core/v1 Events (``registry/rest/create.go``
  ``BeforeCreate`` runs ``ValidateObjectMetaAccessor`` with ``path.ValidatePathSegmentName``);
* :func:`event_errors` — ``pkg/apis/core/validation/events.go`` ``ValidateEventCreate`` /
  ``ValidateEventUpdate`` (``legacyValidateEvent`` for every Event; the strict rules only for
  events.k8s.io/v1 requests);
* :func:`lease_spec_errors` — ``pkg/apis/coordination/validation/validation.go`` ``ValidateLeaseSpec``;
* :func:`service_selector_errors`, :func:`port_name_errors` — ``pkg/apis/core/validation/validation.go``
  ``ValidateService`` (``spec.selector`` with ``ValidateLabels``; ``targetPort`` by ``ValidatePortNumOrName``,
  apimachinery ``util/validation`` ``IsValidPortName``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from zkop_testing.apiserver_errors import FieldError
from zkop_testing.apiserver_select import dns1123_subdomain_errors, label_value_errors, qualified_name_errors

__all__ = ["event_errors", "lease_spec_errors", "path_segment_name_errors", "port_name_errors",
           "service_selector_errors"]

JSON = dict[str, Any]

_REPORTING_INSTANCE_LIMIT = 128
_ACTION_LIMIT = 128
_REASON_LIMIT = 128
_NOTE_LIMIT = 1024
_LEASE_STRATEGIES = ("OldestEmulationVersion",)
# events.k8s.io/v1 name -> core/v1 name, for the error paths of strict (events.k8s.io) validation
_EVENTS_V1_IMMUTABLE = ("involvedObject", "reason", "message", "source", "firstTimestamp", "lastTimestamp", "count",
                        "type", "eventTime", "action", "related", "reportingComponent", "reportingInstance")


def path_segment_name_errors(name: str) -> list[str]:
    """``IsValidPathSegmentName``: a name may not be ``.``/``..`` nor contain ``/`` or ``%``."""
    for illegal in (".", ".."):
        if name == illegal:
            return [f"may not be '{illegal}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in name]


def _empty(value: Any) -> bool:
    return value in (None, "", 0, {}, [])


def event_errors(obj: Mapping[str, Any], old: Mapping[str, Any] | None, group: str) -> list[FieldError]:
    """Validation of an Event in core/v1 storage layout, for a request to ``group`` (``""`` or ``events.k8s.io``)."""
    errors = _legacy_event_errors(obj)
    if group != "events.k8s.io":
        return errors  # "No further validation for backwards compatibility."
    if old is None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        errors.extend(FieldError.invalid("metadata.name", name, m) for m in dns1123_subdomain_errors(name))
        errors.extend(_series_errors(obj))
        if _empty(obj.get("eventTime")):
            errors.append(FieldError.required("eventTime"))
        if obj.get("type") not in ("Normal", "Warning"):
            errors.append(FieldError.invalid("type", "", f"has invalid value: {obj.get('type') or ''}"))
        for key in ("firstTimestamp", "lastTimestamp", "count"):
            if not _empty(obj.get(key)):
                errors.append(FieldError.invalid(key, "", "needs to be unset"))
        source = obj.get("source") or {}
        if isinstance(source, Mapping) and (source.get("component") or source.get("host")):
            errors.append(FieldError.invalid("source", "", "needs to be unset"))
        return errors
    if obj.get("series") != old.get("series"):
        errors.extend(_series_errors(obj))
    for key in _EVENTS_V1_IMMUTABLE:
        if obj.get(key) != old.get(key):
            wire = "reportingController" if key == "reportingComponent" else key
            errors.append(FieldError.invalid(wire, obj.get(key), "field is immutable"))
    return errors


def _series_errors(obj: Mapping[str, Any]) -> list[FieldError]:
    series = obj.get("series")
    if not isinstance(series, Mapping):
        return []
    errors = []
    if int(series.get("count") or 0) < 2:
        errors.append(FieldError.invalid("series.count", "", "should be at least 2"))
    if _empty(series.get("lastObservedTime")):
        errors.append(FieldError.required("series.lastObservedTime"))
    return errors


def _legacy_event_errors(obj: Mapping[str, Any]) -> list[FieldError]:
    """``legacyValidateEvent``."""
    errors: list[FieldError] = []
    namespace = str((obj.get("metadata") or {}).get("namespace") or "")
    involved = obj.get("involvedObject") or {}
    involved_ns = str(involved.get("namespace") or "") if isinstance(involved, Mapping) else ""
    mismatch = FieldError.invalid("involvedObject.namespace", involved_ns, "does not match event.namespace")
    if _empty(obj.get("eventTime")):
        if not involved_ns:
            if namespace not in ("", "default"):
                errors.append(mismatch)
        elif namespace != involved_ns:
            errors.append(mismatch)
    else:
        if not involved_ns and namespace not in ("default", "kube-system"):
            errors.append(mismatch)
        controller = str(obj.get("reportingComponent") or "")
        if not controller:
            errors.append(FieldError.required("reportingController"))
        errors.extend(FieldError.invalid("reportingController", controller, m)
                      for m in qualified_name_errors(controller))
        for key, wire, limit in (("reportingInstance", "reportingInstance", _REPORTING_INSTANCE_LIMIT),
                                 ("action", "action", _ACTION_LIMIT), ("reason", "reason", _REASON_LIMIT)):
            value = str(obj.get(key) or "")
            if not value:
                errors.append(FieldError.required(wire))
            if len(value) > limit:
                errors.append(FieldError.invalid(wire, "", f"can have at most {limit} characters"))
        if len(str(obj.get("message") or "")) > _NOTE_LIMIT:
            errors.append(FieldError.invalid("message", "", f"can have at most {_NOTE_LIMIT} characters"))
    errors.extend(FieldError.invalid("namespace", namespace, m) for m in dns1123_subdomain_errors(namespace))
    return errors


def lease_spec_errors(spec: Mapping[str, Any]) -> list[FieldError]:
    """``ValidateLeaseSpec``."""
    errors: list[FieldError] = []
    duration = spec.get("leaseDurationSeconds")
    if duration is not None and duration <= 0:
        errors.append(FieldError.invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    transitions = spec.get("leaseTransitions")
    if transitions is not None and transitions < 0:
        errors.append(FieldError.invalid("spec.leaseTransitions", transitions,
                                         "must be greater than or equal to 0"))
    strategy = spec.get("strategy")
    if strategy is not None:
        if "/" not in str(strategy):
            if strategy not in _LEASE_STRATEGIES:
                errors.append(FieldError.not_supported("spec.strategy.strategy", strategy, list(_LEASE_STRATEGIES)))
        else:
            errors.extend(FieldError.invalid("spec.strategy.strategy", strategy, m)
                          for m in qualified_name_errors(str(strategy)))
    if spec.get("preferredHolder") and not strategy:
        errors.append(FieldError.forbidden("spec.preferredHolder", "may only be specified if `strategy` is defined"))
    return errors


def service_selector_errors(spec: Mapping[str, Any]) -> list[FieldError]:
    """``ValidateLabels(service.Spec.Selector, "spec.selector")``."""
    errors: list[FieldError] = []
    selector = spec.get("selector") or {}
    if not isinstance(selector, Mapping):
        return errors
    for key, value in selector.items():
        errors.extend(FieldError.invalid("spec.selector", key, m) for m in qualified_name_errors(str(key)))
        errors.extend(FieldError.invalid("spec.selector", value, m) for m in label_value_errors(str(value)))
    return errors


_PORT_NAME_CHARSET = re.compile(r"^[-a-z0-9]+$")
_PORT_NAME_LETTER = re.compile(r"[a-z]")


def port_name_errors(name: str) -> list[str]:
    """``IsValidPortName`` (an IANA_SVC_NAME): at most 15 characters, ``[-a-z0-9]``, a letter, no ``--``."""
    errors = []
    if len(name) > 15:
        errors.append("must be no more than 15 characters")
    if not _PORT_NAME_CHARSET.match(name):
        errors.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not _PORT_NAME_LETTER.search(name):
        errors.append("must contain at least one letter (a-z)")
    if "--" in name:
        errors.append("must not contain consecutive hyphens")
    if name and (name[0] == "-" or name[-1] == "-"):
        errors.append("must not begin or end with a hyphen")
    return errors
