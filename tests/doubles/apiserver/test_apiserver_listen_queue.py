"""The listen backlog is a Go listener's (golang/go ``net/sock_linux.go`` maxListenerBacklog), not socketserver's 5."""

from __future__ import annotations

import http.client
import threading
import time

from zkop_testing.apiserver import ApiServer


def test_many_simultaneous_fresh_connections_are_not_refused_or_retried(server: ApiServer) -> None:
    assert server._httpd is not None and server._httpd.request_queue_size >= 4096
    statuses: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(150)

    def one() -> None:
        start.wait()
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        try:
            conn.request("GET", "/version")
            code = conn.getresponse().status
        finally:
            conn.close()
        with lock:
            statuses.append(code)

    began = time.monotonic()
    threads = [threading.Thread(target=one) for _ in range(150)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    # with a backlog of 5 the kernel drops SYNs and clients retry after 1, 3, 7 s ...
    assert statuses == [200] * 150
    assert time.monotonic() - began < 5
