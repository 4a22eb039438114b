"""Go durations, the one parser: ``15s``, ``10m``, ``1h30m``, ``500ms``, ``1.5h``.

:func:`parse_duration` follows Go's ``time.ParseDuration`` (``src/time/format.go``), which
apimachinery's ``metav1.Duration`` and controller-runtime's and client-go's duration flags use: an
optional sign, then ``0`` alone or one or more ``<number><unit>`` components, each number a decimal
with an optional fraction, units ``ns``, ``us`` (or ``µs``/``μs``), ``ms``, ``s``, ``m``, ``h``
(case-sensitive, no spaces). So ``--sync-period 10m`` and a ZooKeeperEnsemble's
``spec.sessionTimeout: 10m`` mean what they mean for Kubernetes. ``zkop run``'s flags add one
extension (``bare_seconds=True``) that keeps existing manifests working: a bare number (``15``,
``2.5``) is seconds, where Go says "missing unit".

:func:`format_duration` prints seconds in that notation for help texts and docs.
This module imports nothing else of zkop.
"""

from __future__ import annotations

import re
from fractions import Fraction

__all__ = ["format_duration", "parse_duration"]

_NANOSECOND = 1
_MICROSECOND = 1000 * _NANOSECOND
_MILLISECOND = 1000 * _MICROSECOND
_SECOND = 1000 * _MILLISECOND
_MINUTE = 60 * _SECOND
_HOUR = 60 * _MINUTE

# Go's unitMap: nanoseconds per unit.
_UNITS = {
    "ns": _NANOSECOND,
    "us": _MICROSECOND,
    "µs": _MICROSECOND,  # U+00B5 micro sign
    "μs": _MICROSECOND,  # U+03BC Greek small letter mu
    "ms": _MILLISECOND,
    "s": _SECOND,
    "m": _MINUTE,
    "h": _HOUR,
}
_MAX_NANOSECONDS = (1 << 63) - 1  # Go's time.Duration is an int64 of nanoseconds (~292 years)
_BARE_NUMBER = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
_COMPONENT = re.compile(r"([0-9]*)(?:\.([0-9]*))?([^0-9.]*)")


def parse_duration(text: str, *, bare_seconds: bool = False) -> float:
    """Parse a Go duration into seconds (with ``bare_seconds``, a bare number is seconds too).

    Args:
        text: e.g. ``"15s"``, ``"1h30m"``, ``"-1.5h"``, ``"300ms"``, ``"0"``.
        bare_seconds: also read a number without a unit (``"2.5"``) as seconds, ``zkop run``'s
            extension for its flags; Go (and a ``metav1.Duration`` field) rejects it.

    Returns:
        Seconds (negative for a leading ``-``), exact to the nanosecond as in Go: digits
        beyond nanosecond precision are truncated.

    Raises:
        ValueError: empty text, a component without digits (``".s"``), a missing unit
            (``"1h30"``; ``"15"`` unless ``bare_seconds``), an unknown unit (``"1d"``, ``"1H"``,
            ``"1 h"``), or more than Go's int64 nanoseconds.  Messages quote the input as Go's do.
    """
    rest = text
    negative = False
    if rest[:1] in ("-", "+"):
        negative = rest[0] == "-"
        rest = rest[1:]
    if rest == "0":  # Go's special case: zero needs no unit
        return 0.0
    if bare_seconds and _BARE_NUMBER.fullmatch(rest):
        seconds = Fraction(rest if not rest.endswith(".") else rest[:-1])
        return float(-seconds if negative else seconds)
    if not rest:
        raise ValueError(f"invalid duration {text!r}")
    total = 0
    while rest:
        if rest[0] not in ".0123456789":
            raise ValueError(f"invalid duration {text!r}")
        match = _COMPONENT.match(rest)
        assert match is not None  # the pattern matches the empty string
        whole, fraction, unit = match.group(1), match.group(2) or "", match.group(3)
        if not whole and not fraction:
            raise ValueError(f"invalid duration {text!r}")  # no digits, e.g. ".s"
        if not unit:
            raise ValueError(f"missing unit in duration {text!r}")
        if unit not in _UNITS:
            raise ValueError(f"unknown unit {unit!r} in duration {text!r}")
        scale = _UNITS[unit]
        nanos = int(whole or "0") * scale
        if fraction:
            digits, divisor = _leading_fraction(fraction)
            # Go: v += uint64(float64(f) * (float64(unit) / scale)) — float64 math, truncated
            nanos += int(float(digits) * (float(scale) / divisor))
        total += nanos
        if total > _MAX_NANOSECONDS + negative:  # Go allows -1<<63
            raise ValueError(f"invalid duration {text!r}")
        rest = rest[match.end():]
    return (-total if negative else total) / _SECOND


def _leading_fraction(digits: str) -> tuple[int, float]:
    """Go's ``leadingFraction``: the digits as an integer and ``10**n`` for the ``n`` digits kept.

    Digits that would overflow an int64 are dropped (they are below a nanosecond anyway).
    """
    value, divisor = 0, 1.0
    for ch in digits:
        if value > _MAX_NANOSECONDS // 10:
            break
        following = value * 10 + int(ch)
        if following > _MAX_NANOSECONDS + 1:
            break
        value, divisor = following, divisor * 10
    return value, divisor


def format_duration(seconds: float) -> str:
    """Print seconds as a Go duration that :func:`parse_duration` reads back.

    Go's ``Duration.String`` without its zero components: ``15`` → ``15s``, ``600`` → ``10m``,
    ``5400`` → ``1h30m``, ``2.5`` → ``2.5s``, ``0.5`` → ``500ms``, ``0`` → ``0s`` (Go prints
    ``10m0s`` and ``1h30m0s``; controller-runtime's help shows those for its defaults).

    Args:
        seconds: any finite number; rounded to whole nanoseconds.
    """
    nanos = round(Fraction(seconds) * _SECOND)
    if nanos == 0:
        return "0s"
    sign = "-" if nanos < 0 else ""
    nanos = abs(nanos)
    if nanos < _SECOND:
        for unit, size in (("ms", _MILLISECOND), ("µs", _MICROSECOND), ("ns", _NANOSECOND)):
            if nanos >= size:
                return sign + _decimal(nanos, size) + unit
    hours, nanos = divmod(nanos, _HOUR)
    minutes, nanos = divmod(nanos, _MINUTE)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else "",
             _decimal(nanos, _SECOND) + "s" if nanos else ""]
    return sign + "".join(parts)


def _decimal(nanos: int, unit: int) -> str:
    """``nanos / unit`` as a decimal without trailing zeros (``1500, 1000`` → ``"1.5"``)."""
    whole, rest = divmod(nanos, unit)
    if not rest:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}.{rest:0{digits}d}".rstrip("0")
