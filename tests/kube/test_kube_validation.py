"""apimachinery's DNS name validation (``zkop.kube.validation``), checked against the API server double."""

from __future__ import annotations

import pytest
from zkop_testing.apiserver_select import dns1035_label_errors as double_1035
from zkop_testing.apiserver_select import dns1123_label_errors as double_label
from zkop_testing.apiserver_select import dns1123_subdomain_errors as double_subdomain

from zkop.kube.validation import (
    dns1035_label_errors,
    dns1123_label_errors,
    dns1123_subdomain_errors,
    is_dns1035_label,
    is_dns1123_label,
    is_dns1123_subdomain,
)

SAMPLES = ["default", "a", "1abc", "my-name", "a.b", "a..b", ".a", "a-", "-a", "A", "", "a" * 63, "a" * 64,
           "a" * 253, "a" * 254, "web_1", "x.y-z.example"]


@pytest.mark.parametrize("value", SAMPLES)
def test_messages_match_the_api_server(value: str) -> None:
    assert dns1123_label_errors(value) == double_label(value)
    assert dns1123_subdomain_errors(value) == double_subdomain(value)
    assert dns1035_label_errors(value) == double_1035(value)


@pytest.mark.parametrize("value", SAMPLES)
def test_predicates_agree_with_the_messages(value: str) -> None:
    assert is_dns1123_label(value) == (not dns1123_label_errors(value))
    assert is_dns1123_subdomain(value) == (not dns1123_subdomain_errors(value))
    assert is_dns1035_label(value) == (not dns1035_label_errors(value))


def test_the_three_rules_differ_where_kubernetes_says() -> None:
    assert is_dns1123_label("1abc") and not is_dns1035_label("1abc")
    assert is_dns1123_subdomain("a.b") and not is_dns1123_label("a.b")
    assert not is_dns1123_subdomain("a" * 254) and is_dns1123_subdomain("a" * 253)
