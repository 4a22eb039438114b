"""The listen backlog is a Go listener's (golang/go ``net/sock_linux.go`` maxListenerBacklog), not socketserver's 5."""

from __future__ import annotations

import http.client
import socket
import struct
import threading

from zkop_testing.apiserver import ApiServer


def kernel_backlog(listener: socket.socket) -> int:
    """The accept queue's length limit the kernel applies to ``listener``: listen(2)'s backlog capped at
    ``net.core.somaxconn``. Linux ``tcp_get_info`` reports it in ``tcpi_sacked`` for a listening socket
    (``struct tcp_info``: eight bytes, then ``__u32`` rto, ato, snd_mss, rcv_mss, unacked, sacked)."""
    info = listener.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 32)
    return int(struct.unpack_from("=I", info, 28)[0])


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

    # With a backlog of 5 the kernel drops the SYNs that find the accept queue full, and clients retry
    # after 1, 3, 7 s ...: the queue the kernel really keeps has room for all of them at once.
    assert kernel_backlog(server._httpd.socket) >= 150
    threads = [threading.Thread(target=one) for _ in range(150)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert statuses == [200] * 150
