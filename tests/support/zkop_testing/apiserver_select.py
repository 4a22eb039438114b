"""Label and field selectors, and the name/label syntax rules of Kubernetes.

Label selectors follow ``k8s.io/apimachinery/pkg/labels`` (Kubernetes docs,
"Labels and Selectors"): comma-separated requirements, each one of ``key``,
``!key``, ``key=value``, ``key==value``, ``key!=value``, ``key in (a,b)``,
``key notin (a)``, ``key>1``, ``key<1``. Field selectors follow
``k8s.io/apimachinery/pkg/fields``: ``field=value``, ``field==value``,
``field!=value``, comma-AND, ``\\`` escapes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

__all__ = [
    "FieldSelector",
    "LabelSelector",
    "SelectorError",
    "dns1035_label_errors",
    "dns1123_label_errors",
    "dns1123_subdomain_errors",
    "label_value_errors",
    "qualified_name_errors",
]


class SelectorError(ValueError):
    """A selector string could not be parsed (answered as 400 ``BadRequest``)."""


_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = _DNS1123_LABEL + r"(\." + _DNS1123_LABEL + r")*"
_DNS1035_LABEL = r"[a-z]([-a-z0-9]*[a-z0-9])?"
_QUALIFIED_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE = r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"


def _dns_errors(value: str, max_length: int, regex: str, rule: str) -> list[str]:
    errs = []
    if len(value) > max_length:
        errs.append(f"must be no more than {max_length} characters")
    if not re.fullmatch(regex, value):
        errs.append(f"{rule}, regex used for validation is '{regex}')")
    return errs


def dns1123_subdomain_errors(value: str) -> list[str]:
    """``validation.IsDNS1123Subdomain``: messages for an invalid subdomain (max 253 chars)."""
    return _dns_errors(value, 253, _DNS1123_SUBDOMAIN,
                       "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                       "'.', and must start and end with an alphanumeric character (e.g. 'example.com'")


def dns1123_label_errors(value: str) -> list[str]:
    """``validation.IsDNS1123Label``: messages for an invalid label (max 63 chars)."""
    return _dns_errors(value, 63, _DNS1123_LABEL,
                       "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
                       "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc'")


def dns1035_label_errors(value: str) -> list[str]:
    """``validation.IsDNS1035Label``: messages for an invalid DNS-1035 label (Service names)."""
    return _dns_errors(value, 63, _DNS1035_LABEL,
                       "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                       "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
                       "'abc-123'")


def qualified_name_errors(value: str) -> list[str]:
    """``validation.IsQualifiedName``: ``[prefix/]name`` as used by label keys and finalizers."""
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
        errs: list[str] = []
    elif len(parts) == 2:
        prefix, name = parts
        errs = []
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + e for e in dns1123_subdomain_errors(prefix))
    else:
        return [
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
            "validation is '" + _QUALIFIED_NAME + "') with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    if name and not re.fullmatch(_QUALIFIED_NAME, name):
        errs.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
            "an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
            "validation is '" + _QUALIFIED_NAME + "')"
        )
    return errs


def label_value_errors(value: str) -> list[str]:
    """``validation.IsValidLabelValue``."""
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not re.fullmatch(_LABEL_VALUE, value):
        errs.append(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
            "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
            "'12345', regex used for validation is '" + _LABEL_VALUE + "')"
        )
    return errs


# --------------------------------------------------------------------------- label selectors

_OPERATOR_CHARS = "=!<>(),"


def _tokenize(text: str) -> list[str]:
    tokens: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if ch in "(),":
            tokens.append(ch)
            i += 1
            continue
        if ch in "=!<>":
            two = text[i:i + 2]
            if two in ("==", "!="):
                tokens.append(two)
                i += 2
            else:
                tokens.append(ch)
                i += 1
            continue
        j = i
        while j < n and not text[j].isspace() and text[j] not in _OPERATOR_CHARS:
            j += 1
        tokens.append(text[i:j])
        i = j
    return tokens


@dataclass(frozen=True)
class _Requirement:
    key: str
    op: str  # exists, !, =, !=, in, notin, gt, lt
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        if self.op in ("!=", "notin"):
            return not present or value not in self.values
        if self.op in ("gt", "lt"):
            if not present:
                return False
            try:
                number = int(str(value))
            except ValueError:
                return False
            bound = int(self.values[0])
            return number > bound if self.op == "gt" else number < bound
        raise AssertionError(self.op)


class LabelSelector:
    """A parsed label selector; ``LabelSelector("")`` matches everything.

    Raises:
        SelectorError: the text is not a valid selector (bad syntax, invalid key or value).
    """

    def __init__(self, text: str | None) -> None:
        self.text = text or ""
        self.requirements = self._parse(self.text)

    @property
    def empty(self) -> bool:
        """True when the selector selects everything."""
        return not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """Whether an object with ``labels`` is selected."""
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    @staticmethod
    def _check_key(key: str) -> None:
        errs = qualified_name_errors(key)
        if errs:
            raise SelectorError(f'unable to parse requirement: Invalid value: "{key}": {"; ".join(errs)}')

    @staticmethod
    def _check_value(value: str) -> None:
        errs = label_value_errors(value)
        if errs:
            raise SelectorError(f'unable to parse requirement: Invalid value: "{value}": {"; ".join(errs)}')

    def _parse(self, text: str) -> list[_Requirement]:
        tokens = _tokenize(text)
        reqs: list[_Requirement] = []
        pos = 0

        def peek() -> str | None:
            return tokens[pos] if pos < len(tokens) else None

        def is_ident(tok: str | None) -> bool:
            return tok is not None and tok not in ("(", ")", ",", "=", "==", "!=", "!", "<", ">")

        while pos < len(tokens):
            tok = tokens[pos]
            if tok == "!":
                pos += 1
                key = peek()
                if not is_ident(key):
                    raise SelectorError(f"found '{key}', expected: identifier after '!'")
                assert key is not None
                self._check_key(key)
                pos += 1
                reqs.append(_Requirement(key, "!"))
            elif is_ident(tok):
                key = tok
                self._check_key(key)
                pos += 1
                op = peek()
                if op is None or op == ",":
                    reqs.append(_Requirement(key, "exists"))
                elif op in ("=", "==", "!="):
                    pos += 1
                    value = peek()
                    if value is None or value == ",":
                        value = ""
                    elif is_ident(value):
                        pos += 1
                    else:
                        raise SelectorError(f"found '{value}', expected: identifier")
                    self._check_value(value)
                    reqs.append(_Requirement(key, "!=" if op == "!=" else "=", (value,)))
                elif op in ("in", "notin"):
                    pos += 1
                    if peek() != "(":
                        raise SelectorError(f"found '{peek()}', expected: '('")
                    pos += 1
                    values: list[str] = []
                    expect_value = True
                    while True:
                        t = peek()
                        if t is None:
                            raise SelectorError("found '', expected: ')'")
                        if t == ")":
                            if expect_value and values:
                                values.append("")
                            pos += 1
                            break
                        if t == ",":
                            if expect_value:
                                values.append("")
                            expect_value = True
                            pos += 1
                            continue
                        if not is_ident(t) or not expect_value:
                            raise SelectorError(f"found '{t}', expected: ',', ')' or identifier")
                        values.append(t)
                        expect_value = False
                        pos += 1
                    if not values:
                        raise SelectorError("for 'in', 'notin' operators, values set can't be empty")
                    for v in values:
                        self._check_value(v)
                    reqs.append(_Requirement(key, op, tuple(values)))
                elif op in ("<", ">"):
                    pos += 1
                    value = peek()
                    if value is None or not is_ident(value):
                        raise SelectorError(f"found '{value}', expected: integer")
                    try:
                        int(value)
                    except ValueError as exc:
                        raise SelectorError(
                            f"for 'Gt', 'Lt' operators, the value must be an integer: {value}") from exc
                    pos += 1
                    reqs.append(_Requirement(key, "gt" if op == ">" else "lt", (value,)))
                else:
                    raise SelectorError(f"found '{op}', expected: in, notin, =, ==, !=, gt, lt")
            else:
                raise SelectorError(f"found '{tok}', expected: !, identifier, or 'end of string'")
            if pos < len(tokens):
                if tokens[pos] != ",":
                    raise SelectorError(f"found '{tokens[pos]}', expected: ',' or 'end of string'")
                pos += 1
                if pos == len(tokens):
                    raise SelectorError("found '', expected: identifier")
        return reqs


# --------------------------------------------------------------------------- field selectors


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            current.append(text[i:i + 2])
            i += 2
            continue
        if ch == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    parts.append("".join(current))
    return parts


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            out.append(text[i + 1])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


class FieldSelector:
    """A parsed field selector; terms are ``(field, op, value)`` with ``op`` ``=`` or ``!=``.

    Raises:
        SelectorError: bad syntax.
    """

    def __init__(self, text: str | None) -> None:
        self.text = text or ""
        self.terms: list[tuple[str, str, str]] = []
        if not self.text.strip():
            return
        for part in _split_unescaped(self.text, ","):
            for op, norm in (("!=", "!="), ("==", "="), ("=", "=")):
                idx = _find_unescaped(part, op)
                if idx >= 0:
                    key = part[:idx].strip()
                    value = _unescape(part[idx + len(op):])
                    self.terms.append((key, norm, value))
                    break
            else:
                raise SelectorError(f"invalid selector: '{self.text}'; can't understand '{part}'")

    @property
    def empty(self) -> bool:
        """True when the selector selects everything."""
        return not self.terms

    def check_fields(self, supported: Callable[[str], bool], unsupported_message: Callable[[str], str]) -> None:
        """Raise :class:`SelectorError` (with ``unsupported_message(field)``) for unknown fields."""
        for key, _, _ in self.terms:
            if not supported(key):
                raise SelectorError(unsupported_message(key))

    def matches(self, fields: Mapping[str, str]) -> bool:
        """Whether an object whose selectable fields are ``fields`` is selected."""
        for key, op, value in self.terms:
            actual = fields.get(key, "")
            if (actual == value) != (op == "="):
                return False
        return True


def _find_unescaped(text: str, needle: str) -> int:
    i = 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text.startswith(needle, i):
            return i
        i += 1
    return -1
