"""Go-style durations: the cases of Go's ``time_test.go`` ``parseDurationTests``, plus bare seconds."""

from __future__ import annotations

import pytest

from zkop.cmd.duration import format_duration, parse_duration

# (text, seconds): Go's valid cases (src/time/time_test.go), expressed in seconds.
VALID = [
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
    ("1.5h", 5400.0), ("1h30m", 5400.0), ("500ms", 0.5), ("10m", 600.0),
    # zkop's extension: a bare number is seconds (manifests written before durations)
    ("15", 15.0), ("2.5", 2.5), (".5", 0.5), ("600", 600.0), ("-3", -3.0),
]

# (text, Go's error message fragment)
INVALID = [
    ("", "invalid duration"), ("-", "invalid duration"), ("s", "invalid duration"),
    (".", "invalid duration"), ("-.", "invalid duration"), (".s", "invalid duration"), ("+.s", "invalid duration"),
    ("1d", "unknown unit 'd'"), ("1H", "unknown unit 'H'"), ("1 h", "unknown unit ' h'"), ("1h30", "missing unit"),
    ("1.5x", "unknown unit 'x'"), ("9223372036854775808ns", "invalid duration"), ("3000000h", "invalid duration"),
    ("15 s", "unknown unit"), ("1e3s", "unknown unit 'e'"),
]


@pytest.mark.parametrize(("text", "seconds"), VALID)
def test_parse_follows_go(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds, abs=1e-9)


@pytest.mark.parametrize(("text", "message"), INVALID)
def test_parse_rejects_what_go_rejects(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_duration(text)


def test_the_largest_go_duration_parses() -> None:
    assert parse_duration("9223372036854775807ns") == pytest.approx(9223372036.854775807)


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0s"), (15, "15s"), (600, "10m"), (5400, "1h30m"), (2.5, "2.5s"), (0.5, "500ms"), (0.0015, "1.5ms"),
    (3e-6, "3µs"), (1e-9, "1ns"), (3723.004, "1h2m3.004s"), (-90, "-1m30s"), (86400, "24h"),
])
def test_format_prints_go_notation_that_parses_back(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == pytest.approx(seconds, abs=1e-9)
