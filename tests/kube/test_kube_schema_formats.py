"""``date-time`` and ``date`` as kube-apiserver checks them (kube-openapi ``pkg/validation/strfmt/default.go``)."""

from __future__ import annotations

import pytest

from zkop.kube.schema import FORMATS


@pytest.mark.parametrize(("text", "valid"), [
    ("2026-01-01T00:00:00Z", True),
    ("2026-01-01t00:00:00z", True),  # IsDateTime lower-cases before matching
    ("2026-01-01T00:00:00.123456+02:00", True),
    ("2026-01-01 00:00:00Z", False),  # no "t": a space is no separator
    ("2026-01-01T24:00:00Z", False),
    ("2026-01-01T00:00:00", False),  # an offset is required
    ("2026-1-01T00:00:00Z", False),  # time.Parse("2006-01-02") wants two digits
    ("2026-02-30T00:00:00Z", False),
])
def test_date_time(text: str, valid: bool) -> None:
    assert FORMATS.conforms(text, "date-time") is valid


def test_date() -> None:
    assert FORMATS.conforms("2026-01-31", "date") and not FORMATS.conforms("2026-1-31", "date")
