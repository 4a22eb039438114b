"""zkop's transport for whole answers (:mod:`zkop.kube.transport`): urllib3's retry rules and TLS settings kept.

Against a scripted TCP server on loopback (what each request gets: an answer, a cut connection, an answer then the
connection closed) and against the real kube-apiserver for TLS (its CA, the admin's client certificate, SNI and the
hostname check). Every request goes through :class:`~zkop.kube.client.KubeClient`, as zkop sends them.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator

import kubernetes.client
import pytest
import urllib3.exceptions
from zkop_testing.controlplane import ControlPlane
from zkop_testing.httpscript import ANSWER, ANSWER_AND_CLOSE, CUT, ScriptedServer
from zkop_testing.waiting import EVENTUALLY, wait_for

from zkop.kube.client import KubeClient, load_api_client


@contextlib.contextmanager
def client_for(script: Callable[[int], str]) -> Iterator[tuple[ScriptedServer, KubeClient]]:
    """zkop's client (default timeout, no rate limit) for a server doing ``script(n)`` with the n-th request."""
    with ScriptedServer(lambda n, line: script(n), body=b'{"a": "ok"}') as server:
        configuration = kubernetes.client.Configuration()
        configuration.host = f"http://127.0.0.1:{server.port}"
        client = KubeClient(kubernetes.client.ApiClient(configuration))
        try:
            yield server, client
        finally:
            client.close()


def test_a_patch_whose_connection_is_cut_after_it_was_sent_is_not_sent_again() -> None:
    with client_for(lambda n: CUT) as (server, client):
        with pytest.raises(urllib3.exceptions.ProtocolError):
            client.request("PATCH", "/api/v1/namespaces/a/configmaps/b", body={"data": {}},
                           content_type="application/merge-patch+json")
        assert server.lines() == [b"PATCH /api/v1/namespaces/a/configmaps/b HTTP/1.1"]


def test_a_get_whose_connection_is_cut_is_retried_on_a_new_connection() -> None:
    with client_for(lambda n: CUT if n < 2 else ANSWER) as (server, client):
        assert client.request("GET", "/api/v1/namespaces/a/configmaps/b") == {"a": "ok"}
        assert server.lines() == [b"GET /api/v1/namespaces/a/configmaps/b HTTP/1.1"] * 3
        assert server.connections == 3


def test_a_get_cut_every_time_fails_after_three_retries() -> None:
    with client_for(lambda n: CUT) as (server, client):
        with pytest.raises(urllib3.exceptions.ProtocolError):
            client.request("GET", "/api/v1/namespaces/a/configmaps/b")
        assert len(server.lines()) == 4  # urllib3's Retry.DEFAULT: the first try and 3 retries


@pytest.mark.parametrize("method", ["PATCH", "POST", "GET"])
def test_a_kept_connection_the_server_closed_while_idle_is_replaced_for_every_method(method: str) -> None:
    with client_for(lambda n: ANSWER_AND_CLOSE) as (server, client):
        body: dict[str, str] | None = None if method == "GET" else {}
        assert client.request(method, "/api/v1/namespaces/a/configmaps/b", body=body) == {"a": "ok"}
        assert server.closed.acquire(timeout=EVENTUALLY)  # the kept connection is closed by the server
        assert client.request(method, "/api/v1/namespaces/a/configmaps/c", body=body) == {"a": "ok"}
        assert len(server.lines()) == 2
        assert server.connections == 2


def test_kept_connections_are_reused() -> None:
    with client_for(lambda n: ANSWER) as (server, client):
        for i in range(5):
            client.request("GET", f"/api/v1/namespaces/a/configmaps/c{i}")
        assert len(server.lines()) == 5
        assert server.connections == 1


def test_no_server_is_a_max_retry_error_naming_the_connection() -> None:
    with socket.create_server(("127.0.0.1", 0)) as placeholder:
        port = placeholder.getsockname()[1]
    configuration = kubernetes.client.Configuration()
    configuration.host = f"http://127.0.0.1:{port}"
    client = KubeClient(kubernetes.client.ApiClient(configuration))
    try:
        with pytest.raises(urllib3.exceptions.MaxRetryError) as caught:
            client.request("PATCH", "/api/v1/namespaces/a/configmaps/b", body={})
        assert isinstance(caught.value.reason, urllib3.exceptions.NewConnectionError)
    finally:
        client.close()


@pytest.mark.parametrize("path", ["/api/v1/namespaces/a\r\nX-Injected: 1", "/api/v1/namespaces/a\nb"])
def test_a_line_break_in_the_request_is_refused_before_anything_is_sent(path: str) -> None:
    with client_for(lambda n: ANSWER) as (server, client):
        with pytest.raises(ValueError, match="line break"):
            client.request("GET", path)
        client.request("GET", "/api/v1/namespaces/a")
        wait_for(server.lines, message="the later request arrived")
        assert server.lines() == [b"GET /api/v1/namespaces/a HTTP/1.1"]


def test_concurrent_requests_each_get_their_own_answer(control_plane: ControlPlane) -> None:
    client = KubeClient(control_plane.api_client())
    try:
        errors: list[BaseException] = []
        names: list[str] = []

        def get(i: int) -> None:
            try:
                names.append(client.request("GET", f"/api/v1/namespaces/{'default' if i % 2 else 'kube-system'}")
                             ["metadata"]["name"])
            except BaseException as err:  # pragma: no cover - reported below
                errors.append(err)

        threads = [threading.Thread(target=get, args=(i,)) for i in range(40)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(EVENTUALLY)
        assert not errors
        assert sorted(names) == ["default"] * 20 + ["kube-system"] * 20
    finally:
        client.close()


def test_the_api_server_is_reached_with_its_ca_and_a_client_certificate(control_plane: ControlPlane) -> None:
    client = KubeClient(load_api_client(str(control_plane.kubeconfig)))
    try:
        review = client.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body={
            "apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
        assert review["status"]["userInfo"]["username"] == "admin"
    finally:
        client.close()


@pytest.mark.parametrize(("server_name", "reached"), [("kubernetes.default", True), ("elsewhere.example", False)])
def test_the_tls_server_name_is_the_name_checked_against_the_certificate(
        control_plane: ControlPlane, server_name: str, reached: bool) -> None:
    api_client = load_api_client(str(control_plane.kubeconfig))
    api_client.configuration.tls_server_name = server_name
    client = KubeClient(kubernetes.client.ApiClient(api_client.configuration))
    try:
        if reached:
            assert client.request("GET", "/api/v1/namespaces/default")["metadata"]["name"] == "default"
        else:
            with pytest.raises(urllib3.exceptions.MaxRetryError) as caught:
                client.request("GET", "/api/v1/namespaces/default")
            assert "elsewhere.example" in str(caught.value.reason)
    finally:
        client.close()


def test_a_server_signed_by_another_ca_is_refused(control_plane: ControlPlane) -> None:
    api_client = load_api_client(str(control_plane.kubeconfig))
    configuration = api_client.configuration
    configuration.ssl_ca_cert = str(control_plane.directory / "pki" / "client-ca.pem")  # not the server's CA
    client = KubeClient(kubernetes.client.ApiClient(configuration))
    try:
        with pytest.raises(urllib3.exceptions.MaxRetryError) as caught:
            client.request("GET", "/api/v1/namespaces/default")
        assert "certificate verify failed" in str(caught.value.reason)
    finally:
        client.close()
