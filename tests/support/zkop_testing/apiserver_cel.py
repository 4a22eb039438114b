"""The in-memory API server's CEL validation rules (``x-kubernetes-validations``), evaluated with cel-python.

What apiextensions-apiserver ``pkg/apiserver/schema/cel/validation.go`` (``Validator.validate``,
``validateExpressions``) does with a custom resource, as far as zkop's CRD and the tests need it:

* every rule of a schema node is evaluated with ``self`` bound to the node's value, only where
  the value is present and not ``null``; the node's own rules first, then its properties, map
  values and list items (the resource root sees ``apiVersion``, ``kind`` and ``metadata.name``/
  ``generateName`` only, ``model.WithTypeAndObjectMeta``);
* a rule that evaluates to ``false`` is a field error at the node (plus ``fieldPath``) of the
  rule's ``reason`` (``fieldErrorForReason``: ``FieldValueInvalid`` by default, ``Forbidden``,
  ``Required``, ``Duplicate``), with the value for scalars and none for objects and lists; its
  detail is ``messageExpression`` if that evaluates to a non-empty one-line string, else
  ``message``, else ``failed rule: <rule>`` (``ruleMessageOrDefault``);
* a rule whose evaluation fails is ``<error> evaluating rule: <message or rule>``;
* transition rules (naming ``oldSelf``) run only on an update where an old value correlates
  (same object key; list items only in ``x-kubernetes-list-type: map`` lists);
* ratcheting (``CRDValidationRatcheting``, GA since 1.33): a failed rule that does not use ``oldSelf`` is
  dropped when the node's value is unchanged from the old object, or, for a node that does not correlate
  (an item of a list that is not a ``map`` list), when its nearest correlated ancestor is unchanged;
* the caller skips the rules when the schema validation found a blocking error
  (``hasBlockingErr`` in ``registry/customresource/strategy.go``, :data:`BLOCKING`).

Not modelled: the CEL type checker (a call of an unknown function fails at evaluation, not at CRD
creation), the cost estimate and the runtime cost budget, and the Kubernetes CEL libraries beyond
standard CEL (``split``, ``lowerAscii``, ``url``, ``quantity``, ``ip``… are unknown to cel-python);
``docs/apiserver-fidelity.md`` says so. The regular expressions of ``matches`` run on RE2
(``google-re2``), the engine syntax of cel-go's Go ``regexp``.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from celpy import Environment
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.celtypes import BoolType
from celpy.evaluation import CELEvalError

from zkop_testing.apiserver_errors import OMIT, FieldError

__all__ = ["BLOCKED", "BLOCKING", "CelRule", "CelRules", "rule_errors"]

#: Schema error types that keep the rules from being evaluated (``hasBlockingErr``).
BLOCKING = frozenset({"FieldValueNotSupported", "FieldValueRequired", "FieldValueTooLong", "FieldValueTooMany",
                      "FieldValueTypeInvalid"})
#: The error added instead of the rules' (``hasBlockingErr``: ``field.Invalid(nil, nil, …)``; a nil path prints
#: as ``<nil>``).
BLOCKED = FieldError.invalid("<nil>", None, "some validation rules were not checked because the object was invalid; "
                                       "correct the existing errors to complete validation")

_ENV = Environment()
_FIELD_PATH = re.compile(r"(\.[A-Za-z_][A-Za-z0-9_]*)+")
_OLD_SELF = re.compile(r"\boldSelf\b")


@dataclass(frozen=True)
class CelRule:
    """One compiled ``x-kubernetes-validations`` entry.

    Attributes:
        rule, message, message_expression, reason, field_path: as in the CRD.
        uses_old_self: a transition rule.
    """

    rule: str
    message: str
    message_expression: str
    reason: str
    field_path: tuple[str, ...]
    uses_old_self: bool
    program: Any
    message_program: Any

    def error_string(self) -> str:
        """``ruleErrorString``: the message if there is one, else the rule."""
        return self.message.strip() or self.rule.strip()


def _compile(entry: Mapping[str, Any], where: str) -> CelRule:
    """Compile one entry; ``ValueError`` names the entry (the CRD is then refused)."""
    rule = str(entry.get("rule") or "")
    message_expression = str(entry.get("messageExpression") or "")
    field_path = str(entry.get("fieldPath") or "")
    if field_path and _FIELD_PATH.fullmatch(field_path) is None:
        raise ValueError(f"{where}.fieldPath: the in-memory API server supports only '.a.b' field paths, "
                         f"not {field_path!r}")
    try:
        program = _ENV.program(_ENV.compile(rule))
        message_program = _ENV.program(_ENV.compile(message_expression)) if message_expression else None
    except CELParseError as err:
        raise ValueError(f"{where}.rule: compilation failed: {err}") from None
    return CelRule(rule, str(entry.get("message") or ""), message_expression, str(entry.get("reason") or ""),
                   tuple(field_path.split(".")[1:]) if field_path else (), bool(_OLD_SELF.search(rule)),
                   program, message_program)


@dataclass
class _Node:
    rules: tuple[CelRule, ...]
    type: str
    properties: dict[str, _Node]
    additional: _Node | None
    items: _Node | None
    list_map_keys: tuple[str, ...]


def _build(schema: Any, where: str) -> _Node | None:
    if not isinstance(schema, Mapping):
        return None
    rules = tuple(_compile(entry, f"{where}.x-kubernetes-validations[{i}]")
                  for i, entry in enumerate(schema.get("x-kubernetes-validations") or []))
    properties = {}
    for name, sub in (schema.get("properties") or {}).items():
        node = _build(sub, f"{where}.properties[{name}]")
        if node is not None:
            properties[name] = node
    additional = _build(schema.get("additionalProperties"), f"{where}.additionalProperties")
    items = _build(schema.get("items"), f"{where}.items")
    if not rules and not properties and additional is None and items is None:
        return None
    keys = tuple(schema.get("x-kubernetes-list-map-keys") or ()) \
        if schema.get("x-kubernetes-list-type") == "map" else ()
    return _Node(rules, str(schema.get("type") or ""), properties, additional, items, keys)


class CelRules:
    """The ``x-kubernetes-validations`` rules of one ``openAPIV3Schema``, compiled once.

    Args:
        schema: a CRD version's ``openAPIV3Schema``.
        where: its path in the CRD, for the compile errors.

    Raises:
        ValueError: a rule or message expression does not parse (the CRD is refused).
    """

    def __init__(self, schema: Mapping[str, Any], where: str = "openAPIV3Schema") -> None:
        self.root = _build(schema, where)

    def __bool__(self) -> bool:
        return self.root is not None

    def validate(self, obj: Any, old: Any = None) -> list[FieldError]:
        """The errors of every rule ``obj`` breaks (``old``: the object before an update, for
        transition rules and ratcheting; ``None`` on create)."""
        if self.root is None:
            return []
        root = _root_view(obj)
        return list(_walk(self.root, root, _root_view(old) if old is not None else None, old is not None, False, []))


def _root_view(obj: Any) -> Any:
    """``model.WithTypeAndObjectMeta``: the root's ``metadata`` shows only ``name`` and ``generateName``."""
    if not isinstance(obj, Mapping):
        return obj
    view = dict(obj)
    meta = obj.get("metadata")
    if isinstance(meta, Mapping):
        view["metadata"] = {k: meta[k] for k in ("name", "generateName") if k in meta}
    return view


def _walk(node: _Node, value: Any, old: Any, correlated: bool, parent_unchanged: bool,
          path: list[str | int]) -> Iterator[FieldError]:
    """``correlated``: ``old`` is this node's old value; ``parent_unchanged``: the nearest correlated ancestor is
    unchanged (``ratchetingOptions``: a node that does not correlate ratchets with its nearest parent)."""
    if value is None:
        return
    unchanged = value == old if correlated else parent_unchanged
    for rule in node.rules:
        error = _evaluate(rule, node, value, old, correlated, unchanged, path)
        if error is not None:
            yield error
    if isinstance(value, Mapping):
        old_map = old if correlated and isinstance(old, Mapping) else {}
        for key, item in value.items():
            sub = node.properties.get(key) if key in node.properties else node.additional
            if sub is not None:
                yield from _walk(sub, item, old_map.get(key), correlated and key in old_map, unchanged, [*path, key])
    elif isinstance(value, list) and node.items is not None:
        for i, item in enumerate(value):
            old_item, found = _correlate(node.list_map_keys, item, old if correlated else None)
            yield from _walk(node.items, item, old_item, found, unchanged, [*path, i])


def _correlate(keys: tuple[str, ...], item: Any, old: Any) -> tuple[Any, bool]:
    """The old item of a ``map`` list with the same keys (``makeMapList``); other lists do not correlate."""
    if not keys or not isinstance(old, list) or not isinstance(item, Mapping):
        return None, False
    for candidate in old:
        if isinstance(candidate, Mapping) and all(candidate.get(k) == item.get(k) for k in keys):
            return candidate, True
    return None, False


def _text(path: list[str | int]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _evaluate(rule: CelRule, node: _Node, value: Any, old: Any, correlated: bool, unchanged: bool,
              path: list[str | int]) -> FieldError | None:
    if rule.uses_old_self and not correlated:
        return None  # transition rules need a comparable old value
    try:
        ok = _result(rule, value, old if rule.uses_old_self else None)
    except CELEvalError as err:
        return FieldError.invalid(_text(path), node.type, f"{err.args[0] if err.args else err} evaluating rule: "
                                                          f"{rule.error_string()}")
    if ok:
        return None
    if not rule.uses_old_self and unchanged:
        return None  # ratcheting: an unchanged value keeps passing (a warning on a real server)
    detail = _message(rule, value) or rule.message.strip() or f"failed rule: {rule.error_string()}"
    where = _text([*path, *rule.field_path])
    shown = OMIT if node.type in ("object", "array") else value
    if rule.reason == "FieldValueForbidden":
        return FieldError.forbidden(where, detail)
    if rule.reason == "FieldValueRequired":
        return FieldError.required(where, detail)
    if rule.reason == "FieldValueDuplicate":
        return FieldError.duplicate(where, shown)
    return FieldError.invalid(where, shown, detail)


def _result(rule: CelRule, value: Any, old: Any) -> bool:
    """The rule's verdict; cached on small values, since an unchanged spec is validated on every write."""
    value_text, old_text = json.dumps(value, sort_keys=True), json.dumps(old, sort_keys=True)
    if len(value_text) + len(old_text) > _CACHED_TEXT:
        return _run(rule.program, value_text, old_text) is True
    return _cached(rule.program, value_text, old_text) is True


#: Values (as JSON text) up to this size are cached with their verdict; a 1 MB ``spec.data`` is not kept.
_CACHED_TEXT = 16384


def _run(program: Any, value: str, old: str) -> Any:
    activation = {"self": json_to_cel(json.loads(value)), "oldSelf": json_to_cel(json.loads(old))}
    result = program.evaluate(activation)
    if isinstance(result, CELEvalError):
        raise result
    return bool(result) if isinstance(result, BoolType) else result


_cached = functools.lru_cache(maxsize=16384)(_run)


def _message(rule: CelRule, value: Any) -> str:
    """``messageExpression``'s string, or ``""`` when it fails or is not a non-empty one-line string."""
    if rule.message_program is None:
        return ""
    try:
        text = rule.message_program.evaluate({"self": json_to_cel(value)})
    except CELEvalError:
        return ""
    if not isinstance(text, str) or "\n" in text or not text.strip():
        return ""
    return text.strip()


def rule_errors(rules: CelRules, obj: Any, old: Any, schema_errors: list[FieldError]) -> list[FieldError]:
    """What kube-apiserver appends after the schema errors: :data:`BLOCKED` if one of them blocks the rules,
    else the rules' errors (``strategy.go`` Validate/ValidateUpdate, ``status_strategy.go``)."""
    if not rules:
        return []
    if any(e.type in BLOCKING for e in schema_errors):
        return [BLOCKED]
    return rules.validate(obj, old)
