"""Kubernetes name validation: the DNS label and subdomain rules, in one place.

A port of apimachinery ``pkg/util/validation/validation.go`` (``IsDNS1123Label``,
``IsDNS1123Subdomain``, ``IsDNS1035Label``) and the rules of "Object Names and IDs"
(kubernetes.io/docs/concepts/overview/working-with-objects/names):

* DNS-1123 label — at most 63 characters, lower-case alphanumerics or ``-``, starting and ending
  with an alphanumeric (namespaces, port names);
* DNS-1123 subdomain — at most 253 characters, DNS-1123 labels joined by ``.`` (most object names,
  EndpointSlice names, FQDN endpoint addresses);
* DNS-1035 label — a DNS-1123 label that starts with a letter (Service names).

The ``*_errors`` functions return apimachinery's messages (an empty list means valid), as the API
server answers them in a 422 ``Invalid``; the ``is_*`` functions are their boolean forms.
This module imports nothing else of zkop.
"""

from __future__ import annotations

import re

__all__ = [
    "DNS1035_LABEL_MAX",
    "DNS1123_LABEL_MAX",
    "DNS1123_SUBDOMAIN_MAX",
    "dns1035_label_errors",
    "dns1123_label_errors",
    "dns1123_subdomain_errors",
    "is_dns1035_label",
    "is_dns1123_label",
    "is_dns1123_subdomain",
]

#: ``DNS1123LabelMaxLength``, characters.
DNS1123_LABEL_MAX = 63
#: ``DNS1123SubdomainMaxLength``, characters.
DNS1123_SUBDOMAIN_MAX = 253
#: ``DNS1035LabelMaxLength``, characters.
DNS1035_LABEL_MAX = 63

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + r"(\." + _DNS1123_LABEL_FMT + ")*"
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"

_DNS1123_LABEL = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN = re.compile(_DNS1123_SUBDOMAIN_FMT)
_DNS1035_LABEL = re.compile(_DNS1035_LABEL_FMT)


def _max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def _regex_error(message: str, fmt: str, *examples: str) -> str:
    # apimachinery RegexError: "<msg> (e.g. 'a',  or 'b', regex used for validation is '<fmt>')".
    shown = ",  or ".join(f"'{e}'" for e in examples)
    return f"{message} (e.g. {shown}, regex used for validation is '{fmt}')"


def _errors(value: str, max_length: int, pattern: re.Pattern[str], message: str, *examples: str) -> list[str]:
    # apimachinery: MaxLenError first, then RegexError, both reported.
    errors = []
    if len(value) > max_length:
        errors.append(_max_len_error(max_length))
    if pattern.fullmatch(value) is None:
        errors.append(_regex_error(message, pattern.pattern, *examples))
    return errors


def dns1123_label_errors(value: str) -> list[str]:
    """``IsDNS1123Label``: why ``value`` is not a DNS-1123 label (``[]`` if it is)."""
    return _errors(value, DNS1123_LABEL_MAX, _DNS1123_LABEL,
                   "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
                   "must start and end with an alphanumeric character", "my-name", "123-abc")


def dns1123_subdomain_errors(value: str) -> list[str]:
    """``IsDNS1123Subdomain``: why ``value`` is not a DNS-1123 subdomain (``[]`` if it is)."""
    return _errors(value, DNS1123_SUBDOMAIN_MAX, _DNS1123_SUBDOMAIN,
                   "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                   "'.', and must start and end with an alphanumeric character", "example.com")


def dns1035_label_errors(value: str) -> list[str]:
    """``IsDNS1035Label``: why ``value`` is not a DNS-1035 label (``[]`` if it is)."""
    return _errors(value, DNS1035_LABEL_MAX, _DNS1035_LABEL,
                   "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                   "alphabetic character, and end with an alphanumeric character", "my-name", "abc-123")


def is_dns1123_label(value: str) -> bool:
    """True if ``value`` is a DNS-1123 label (namespaces, port names)."""
    return len(value) <= DNS1123_LABEL_MAX and _DNS1123_LABEL.fullmatch(value) is not None


def is_dns1123_subdomain(value: str) -> bool:
    """True if ``value`` is a DNS-1123 subdomain (object names, EndpointSlice names, FQDN addresses)."""
    return len(value) <= DNS1123_SUBDOMAIN_MAX and _DNS1123_SUBDOMAIN.fullmatch(value) is not None


def is_dns1035_label(value: str) -> bool:
    """True if ``value`` is a DNS-1035 label (Service names)."""
    return len(value) <= DNS1035_LABEL_MAX and _DNS1035_LABEL.fullmatch(value) is not None
