"""KubeClient against a bare HTTP server: server URLs with a path, request metrics."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import kubernetes.client
import pytest

from zkop.kube import metrics
from zkop.kube.client import KubeClient, WatchStream, resource_path


class _Recorder(BaseHTTPRequestHandler):
    seen: list[tuple[str, str]] = []

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.seen.append((self.command, self.path))
        body = json.dumps({"kind": "Status", "items": []}).encode()
        self.send_response(404 if self.path.endswith("/missing") else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PATCH = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    _Recorder.seen = []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _client(host: str) -> KubeClient:
    configuration = kubernetes.client.Configuration()
    configuration.host = host
    return KubeClient(kubernetes.client.ApiClient(configuration))


def test_server_url_path_is_kept(server: str) -> None:
    # Rancher-proxied clusters and API gateways serve the API below a path.
    client = _client(f"http://{server}/k8s/clusters/c-abc/")
    client.request("GET", resource_path("", "v1", "namespaces"), query={"limit": 5})
    client.request("PATCH", resource_path("", "v1", "configmaps", "ns", "x"), body={"data": {}},
                   content_type="application/merge-patch+json")
    assert _Recorder.seen == [("GET", "/k8s/clusters/c-abc/api/v1/namespaces?limit=5"),
                              ("PATCH", "/k8s/clusters/c-abc/api/v1/namespaces/ns/configmaps/x")]


def test_requests_are_counted_by_code(server: str) -> None:
    from kubernetes.client.exceptions import ApiException

    client = _client(f"http://{server}")
    ok = metrics.REST_CLIENT_REQUESTS.labels("200", "GET", server)
    missing = metrics.REST_CLIENT_REQUESTS.labels("404", "GET", server)
    before_ok, before_missing = ok._value.get(), missing._value.get()
    client.request("GET", "/api/v1/namespaces")
    with pytest.raises(ApiException) as info:
        client.request("GET", "/api/v1/missing")
    assert info.value.status == 404
    assert (ok._value.get() - before_ok, missing._value.get() - before_missing) == (1, 1)


class _Chunks:
    """A urllib3 response stand-in whose body arrives in the given chunks."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    def stream(self, amt: int, decode_content: bool) -> Iterator[bytes]:
        yield from self.chunks

    def close(self) -> None:
        pass


@pytest.mark.parametrize("chunks", [
    [b'{"type":"ADDED","n":1}\n', b'{"type":"MODIFIED","n":2}\n', b'{"type":"DELETED","n":3}\n'],
    [b'{"type":"ADDED","n":1}\n{"type":"MODIFIED","n":2}\n{"type":"DEL', b'ETED","n":3}\n'],
    [b'{"type":"ADD', b'ED","n":1}', b'\n\n  \r\n{"type":"MODIFIED","n":2}\n', b'{"type":"DELETED","n":3}'],
    [b'{"type":"ADDED","n":1}\n{"type":"MODIFIED","n":2}\n{"type":"DELETED","n":3}\n'],
], ids=["one-per-chunk", "split-across-chunks", "blank-lines-and-no-final-newline", "all-in-one-chunk"])
def test_watch_stream_yields_each_event_once_however_chunked(chunks: list[bytes]) -> None:
    events = list(WatchStream(_Chunks(chunks)))
    assert [(e["type"], e["n"]) for e in events] == [("ADDED", 1), ("MODIFIED", 2), ("DELETED", 3)]
