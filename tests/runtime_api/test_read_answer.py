"""How zkop's transport reads an answer (:func:`zkop.kube.transport.read_answer`, RFC 9112's framing).

Each well-formed answer is read by ``http.client.HTTPResponse`` too, and both must agree on status, reason, body
and whether the connection closes after it; headers are urllib3's ``HTTPHeaderDict``, as callers read them when
urllib3 sent every request (a repeated field's values joined, case-insensitive). Malformed answers raise what
``http.client`` raises, which the transport turns into urllib3's errors. Against the real kube-apiserver, a list
big enough to come chunked and a small object that comes with ``Content-Length`` are read whole.
"""

from __future__ import annotations

import http.client
import io
import json
from typing import Any

import pytest
from zkop_testing.controlplane import ControlPlane

from zkop.kube.client import KubeClient
from zkop.kube.transport import MAX_HEADERS, Answer, Transport, read_answer


class _Sock:
    """What ``http.client.HTTPResponse`` needs of a socket: ``makefile``."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(io.BytesIO(self.data))


def ours(data: bytes, method: str = "GET") -> tuple[Answer, bytes]:
    """Our reading of ``data``, and what is left unread after it."""
    fp = io.BufferedReader(io.BytesIO(data))
    head = read_answer(fp, method)
    return head, fp.read()


def stdlib(data: bytes, method: str = "GET") -> tuple[int, str, bytes, bool]:
    response = http.client.HTTPResponse(_Sock(data), method=method)  # type: ignore[arg-type]
    response.begin()
    body = response.read()
    return response.status, response.reason, body, bool(response.will_close)


BODY = json.dumps({"kind": "ZooKeeperConfig", "spec": {"path": "/a", "data": "x" * 3000}}).encode()


def chunked(body: bytes, size: int, *, extension: str = "", trailers: str = "") -> bytes:
    parts = [b"%x%s\r\n%s\r\n" % (len(body[i:i + size]), extension.encode(), body[i:i + size])
             for i in range(0, len(body), size)]
    return b"".join(parts) + b"0\r\n" + trailers.encode() + b"\r\n"


WELL_FORMED: dict[str, tuple[str, bytes]] = {
    "content-length": ("PATCH", b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                       % (len(BODY), BODY)),
    "chunked, as kube-apiserver sends a big list": (
        "GET", b"HTTP/1.1 200 OK\r\nAudit-Id: 1\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(BODY, 1000)),
    "chunked with extensions and trailer fields": (
        "GET", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        + chunked(BODY, 7, extension=";name=value", trailers="Expires: never\r\nX-Trailer: 1\r\n")),
    "no length, closed after": ("GET", b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + BODY),
    "no length at all": ("GET", b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" + BODY),
    "HTTP/1.0": ("GET", b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}"),
    "HTTP/1.0 keep-alive": ("GET", b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n{}"),
    "Connection: close among tokens": ("GET", b"HTTP/1.1 200 OK\r\nConnection: Upgrade, Close\r\n"
                                              b"Content-Length: 2\r\n\r\n{}"),
    "204 without a body": ("DELETE", b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"),
    "HEAD has no body whatever its length says": ("HEAD", b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"),
    "interim 100 Continue skipped": ("POST", b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\n"
                                             b"Content-Length: 2\r\n\r\n{}"),
    "a 429 with Retry-After": ("GET", b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\n"
                                      b"Content-Length: 2\r\n\r\n{}"),
    "no reason phrase": ("GET", b"HTTP/1.1 200\r\nContent-Length: 2\r\n\r\n{}"),
    "LF line ends": ("GET", b"HTTP/1.1 200 OK\nContent-Length: 2\n\n{}"),
}


@pytest.mark.parametrize("name", list(WELL_FORMED))
def test_a_well_formed_answer_is_read_as_http_client_reads_it(name: str) -> None:
    method, data = WELL_FORMED[name]
    head, left = ours(data, method)
    assert (head.status, head.reason, head.data, head.will_close) == stdlib(data, method)
    if not head.will_close:
        assert left == b"", "a kept connection's next answer would start mid-body"


def test_the_next_answer_on_a_kept_connection_starts_where_the_last_ended() -> None:
    first = WELL_FORMED["chunked with extensions and trailer fields"][1]
    second = WELL_FORMED["content-length"][1]
    fp = io.BufferedReader(io.BytesIO(first + second))
    assert read_answer(fp, "GET").data == BODY
    assert read_answer(fp, "PATCH").data == BODY
    assert fp.read() == b""


def test_headers_are_case_insensitive_and_a_repeated_field_keeps_every_value() -> None:
    head, _ = ours(b"HTTP/1.1 200 OK\r\nWarning: 299 - \"first\"\r\nwarning: 299 - \"second\"\r\n"
                   b"X-Kubernetes-PF-FlowSchema-UID: abc\r\nX-Folded: one\r\n two\r\nContent-Length: 0\r\n\r\n")
    assert head.headers.getlist("WARNING") == ['299 - "first"', '299 - "second"']
    assert head.headers.get("warning") == '299 - "first", 299 - "second"'  # as urllib3 joined them
    assert head.headers.get("x-kubernetes-pf-flowschema-uid") == "abc"
    assert head.headers.get("x-folded") == "one two"


MALFORMED: dict[str, tuple[bytes, type[Exception]]] = {
    "nothing at all": (b"", http.client.RemoteDisconnected),
    "not HTTP": (b"SSH-2.0-OpenSSH\r\n\r\n", http.client.BadStatusLine),
    "a status that is not three digits": (b"HTTP/1.1 2000 OK\r\n\r\n", http.client.BadStatusLine),
    "a body shorter than its Content-Length": (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}",
                                               http.client.IncompleteRead),
    "a chunk cut short": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n{}",
                          http.client.IncompleteRead),
    "a chunk size that is not hex": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
                                     http.client.IncompleteRead),
    "conflicting Content-Length": (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}x",
                                   http.client.HTTPException),
    "a Content-Length that is not a number": (b"HTTP/1.1 200 OK\r\nContent-Length: \xb2\r\n\r\n{}",
                                              http.client.HTTPException),
    "a header line without a colon": (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", http.client.HTTPException),
    "too many headers": (b"HTTP/1.1 200 OK\r\n" + b"X-A: 1\r\n" * (MAX_HEADERS + 1) + b"\r\n",
                         http.client.HTTPException),
    "a line too long": (b"HTTP/1.1 200 OK\r\nX-A: " + b"a" * 70000 + b"\r\n\r\n", http.client.LineTooLong),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_a_malformed_answer_raises_what_http_client_raises(name: str) -> None:
    data, error = MALFORMED[name]
    with pytest.raises(error):
        ours(data)


def transport_of(client: KubeClient) -> Transport:
    transport = client._transport  # the transport KubeClient sends through
    assert isinstance(transport, Transport)
    return transport


def test_the_api_servers_chunked_and_content_length_answers_are_read_whole(control_plane: ControlPlane) -> None:
    client = KubeClient(control_plane.api_client())
    namespace = "read-answer"
    try:
        client.request("POST", "/api/v1/namespaces", body={"metadata": {"name": namespace}})
        for i in range(40):
            client.request("POST", f"/api/v1/namespaces/{namespace}/configmaps",
                           body={"metadata": {"name": f"c{i}", "labels": {"read": "answer"}},
                                 "data": {"k": "v" * 1000}})
        transport = transport_of(client)
        listed = transport.request("GET", f"/api/v1/namespaces/{namespace}/configmaps?labelSelector=read%3Danswer",
                                   body=None, headers={"Accept": "application/json"}, timeout=30)
        assert listed.headers.get("transfer-encoding") == "chunked"  # over Go net/http's buffer: chunked
        items: list[dict[str, Any]] = json.loads(listed.data)["items"]
        assert sorted(i["metadata"]["name"] for i in items) == sorted(f"c{i}" for i in range(40))
        one = transport.request("GET", f"/api/v1/namespaces/{namespace}/configmaps/c0", body=None,
                                headers={"Accept": "application/json"}, timeout=30)
        small = transport.request("GET", f"/api/v1/namespaces/{namespace}", body=None,
                                  headers={"Accept": "application/json"}, timeout=30)
        assert json.loads(one.data)["data"]["k"] == "v" * 1000
        assert small.headers.get("content-length") == str(len(small.data))
        assert json.loads(small.data)["metadata"]["name"] == namespace
    finally:
        client.request("DELETE", f"/api/v1/namespaces/{namespace}")
        client.close()
