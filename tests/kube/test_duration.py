"""Go durations, the one parser (:mod:`zkop.kube.duration`): the cases of Go's ``time_test.go``
``parseDurationTests``, the flags' bare seconds, and a ZooKeeperEnsemble's ``spec.sessionTimeout``.

Until issue 37 ``zkop.ensembles.spec`` had a parser of its own (a regular expression, positive only):
every input it and the flags' parser disagreed on is a case named after the rule that now decides it.
"""

from __future__ import annotations

import pytest

from zkop.ensembles.spec import InvalidEnsemble, parse_ensemble
from zkop.kube.duration import format_duration, parse_duration


class Rejected(str):
    """An expected ``ValueError`` whose message contains this text."""


# (text, Go (a metav1.Duration field), the flags (bare_seconds=True)): seconds, or Rejected(message fragment).
# Go's cases (src/time/time_test.go), expressed in seconds; the flags read all of them as Go does.
GO = [
    # simple
    ("0", 0.0), ("5s", 5.0), ("30s", 30.0), ("1478s", 1478.0),
    # sign
    ("-5s", -5.0), ("+5s", 5.0), ("-0", 0.0), ("+0", 0.0),
    # decimal
    ("5.0s", 5.0), ("5.6s", 5.6), ("5.s", 5.0), (".5s", 0.5), ("1.0s", 1.0), ("1.00s", 1.0),
    ("1.004s", 1.004), ("1.0040s", 1.004), ("100.00100s", 100.001),
    # different units
    ("10ns", 10e-9), ("11us", 11e-6), ("12µs", 12e-6), ("12μs", 12e-6), ("13ms", 0.013), ("14s", 14.0),
    ("15m", 900.0), ("16h", 57600.0),
    # composite durations
    ("3h30m", 12600.0), ("10.5s4m", 250.5), ("-2m3.4s", -123.4), ("1h2m3s4ms5us6ns", 3723.004005006),
    ("39h9m14.425s", 140954.425),
    # large value; fractions in float64 as Go computes them
    ("52763797000ns", 52.763797), ("9007199254740993ns", 9007199.254740993),
    ("0.3333333333333333333h", 1200.0), ("0.100000000000000000000h", 360.0),
    ("0.830103483285477580700h", 2988.372539827), ("-9223372036854775808ns", -9223372036.854775808),
    ("9223372036854775807ns", 9223372036.854775807),  # the largest Go duration
    ("1.5h", 5400.0), ("1h30m", 5400.0), ("500ms", 0.5), ("10m", 600.0),
    # Go's errors, its message fragment
    ("", Rejected("invalid duration")), ("-", Rejected("invalid duration")), ("s", Rejected("invalid duration")),
    (".", Rejected("invalid duration")), ("-.", Rejected("invalid duration")), (".s", Rejected("invalid duration")),
    ("+.s", Rejected("invalid duration")), ("1d", Rejected("unknown unit 'd'")), ("1H", Rejected("unknown unit 'H'")),
    ("1 h", Rejected("unknown unit ' h'")), ("1h30", Rejected("missing unit")), ("1.5x", Rejected("unknown unit 'x'")),
    ("9223372036854775808ns", Rejected("invalid duration")), ("3000000h", Rejected("invalid duration")),
    ("15 s", Rejected("unknown unit")), ("1e3s", Rejected("unknown unit 'e'")),
]

# zkop run's extension: a bare number is seconds for the flags (manifests written before durations); Go says
# "missing unit".
BARE = [("15", 15.0), ("2.5", 2.5), (".5", 0.5), ("600", 600.0), ("-3", -3.0), ("5.", 5.0), ("00", 0.0)]

TABLE = [pytest.param(text, go, go, id=f"go:{text}") for text, go in GO] + [
    pytest.param(text, Rejected("missing unit"), seconds, id=f"bare-seconds-for-flags-only:{text}")
    for text, seconds in BARE]


@pytest.mark.parametrize(("text", "go", "flags"), TABLE)
def test_parse_follows_go_and_the_flags_add_bare_seconds(text: str, go: float | Rejected,
                                                        flags: float | Rejected) -> None:
    for bare_seconds, expected in ((False, go), (True, flags)):
        if isinstance(expected, Rejected):
            with pytest.raises(ValueError, match=expected):
                parse_duration(text, bare_seconds=bare_seconds)
        else:
            assert parse_duration(text, bare_seconds=bare_seconds) == pytest.approx(expected, abs=1e-9)


def session_timeout(text: str) -> float | None:
    """``spec.sessionTimeout`` of a ZooKeeperEnsemble as zkop reads it (``None``: rejected)."""
    try:
        return parse_ensemble({"connectString": "zk:2181", "sessionTimeout": text}).session_timeout
    except InvalidEnsemble as err:
        assert err.field == "spec.sessionTimeout"
        return None


@pytest.mark.parametrize(("text", "seconds"), [
    pytest.param("10s", 10.0, id="go:number-and-unit"),
    pytest.param("1m30s", 90.0, id="go:composite"),
    pytest.param("1.5h", 5400.0, id="go:fraction"),
    # Inputs the ensemble's own regular expression rejected and the flags' parser (Go's rules) accepted:
    pytest.param("+5s", 5.0, id="go:a-leading-plus-sign"),
    pytest.param(".5s", 0.5, id="go:a-fraction-without-leading-digits"),
    pytest.param("5.s", 5.0, id="go:a-point-without-fraction-digits"),
    pytest.param("12µs", 12e-6, id="go:micro-sign-unit"),
    pytest.param("12μs", 12e-6, id="go:greek-mu-unit"),
    # ... and ones it accepted that Go rejects: more than an int64 of nanoseconds.
    pytest.param("3000000h", None, id="go:more-than-int64-nanoseconds"),
    pytest.param("9223372036854775808ns", None, id="go:one-past-int64-nanoseconds"),
    # The flags' extension is theirs alone: a metav1.Duration field has no bare seconds.
    pytest.param("15", None, id="bare-seconds-for-flags-only"),
    # A session timeout must be positive, whatever Go reads.
    pytest.param("0", None, id="session-timeout-positive:zero"),
    pytest.param("-5s", None, id="session-timeout-positive:negative"),
    pytest.param("soon", None, id="go:not-a-duration"),
])
def test_an_ensembles_session_timeout_is_a_positive_go_duration(text: str, seconds: float | None) -> None:
    got = session_timeout(text)
    assert got == (None if seconds is None else pytest.approx(seconds, abs=1e-9))


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0s"), (15, "15s"), (600, "10m"), (5400, "1h30m"), (2.5, "2.5s"), (0.5, "500ms"), (0.0015, "1.5ms"),
    (3e-6, "3µs"), (1e-9, "1ns"), (3723.004, "1h2m3.004s"), (-90, "-1m30s"), (86400, "24h"),
])
def test_format_prints_go_notation_that_parses_back(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == pytest.approx(seconds, abs=1e-9)
