"""Service names, port names and the collision rule (``zkop.services.importer.naming``)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from zkop_testing.apiserver_select import dns1035_label_errors

from zkop.kube.validation import is_dns1035_label
from zkop.services.importer.naming import port_name, service_name, winner


@pytest.mark.parametrize(("source", "prefix", "expected"), [
    ("orders", "", "orders"),
    ("Orders", "", "orders"),
    ("cloud-provider-payment", "", "cloud-provider-payment"),
    ("org.apache.dubbo.demo.DemoService", "", "org-apache-dubbo-demo-demoservice"),
    ("my_service__v2", "", "my-service-v2"),
    ("--edge--", "", "edge"),
    ("8ball", "", "svc-8ball"),
    ("orders", "zk-", "zk-orders"),
    ("Orders", "ZK.", "zk-orders"),
    ("___", "", None),
    ("", "", None),
])
def test_service_names_are_dns1035_labels(source: str, prefix: str, expected: str | None) -> None:
    name = service_name(source, prefix)
    assert name == expected
    if name is not None:
        assert is_dns1035_label(name) and not dns1035_label_errors(name)


def test_long_names_are_cut_and_keep_apart() -> None:
    a = service_name("com.example.platform.billing.internal.InvoiceGenerationServiceV2Implementation")
    b = service_name("com.example.platform.billing.internal.InvoiceGenerationServiceV3Implementation")
    assert a is not None and b is not None and a != b
    assert len(a) == len(b) == 63
    assert a.startswith("com-example-platform-billing-internal-invoicegeneratio-")
    assert not dns1035_label_errors(a) and not dns1035_label_errors(b)
    assert service_name("x" * 63) == "x" * 63  # at the limit: untouched


@pytest.mark.parametrize(("raw", "expected"), [("http", "http"), ("HTTPS", "https"), ("tri", "tri"),
                                               ("grpc_web", "grpc-web"), ("9", "9"), ("--", None)])
def test_port_names(raw: str, expected: str | None) -> None:
    assert port_name(raw) == expected


@dataclass(frozen=True)
class Node:
    path: str
    created_zxid: int


def test_the_oldest_znode_wins_a_name() -> None:
    old, new = Node("/services/orders", 5), Node("/services/Orders", 9)
    assert winner([new, old]) is old
    assert winner([old, new]) is old
    assert winner([Node("/b", 1), Node("/a", 1)]) == Node("/a", 1)
    assert winner([]) is None
