"""``--metrics-secure``: HTTPS, TokenReview and SubjectAccessReview through the Manager, against the API double.

Real TLS (Python's ``ssl`` as the client), real reviews (the double answers them from the RBAC
objects created here through the API), the Manager serving as ``zkop run`` does.
"""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from zkop_testing.apiserver import ApiServer
from zkop_testing.metrics_access import bind_shipped_reader_role
from zkop_testing.waiting import EVENTUALLY, wait_for

from zkop.kube.client import KubeClient
from zkop.runtime import metrics_auth
from zkop.runtime.certs import CertificateError, WatchedCertificate, self_signed
from zkop.runtime.manager import Manager, ManagerOptions
from zkop.runtime.metrics_auth import AuthError, DelegatingAuth, bearer_token
from zkop.runtime.serving import SecureServing, start_metrics_server


def insecure() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def get(url: str, token: str | None = None, *, context: ssl.SSLContext | None = None,
        method: str = "GET") -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    request = urllib.request.Request(url, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10, context=context or insecure()) as r:
            return int(r.status), r.read().decode()
    except urllib.error.HTTPError as err:
        return int(err.code), err.read().decode()


def peer_certificate(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            insecure().wrap_socket(raw, server_hostname="localhost") as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return der


def make_pair(directory: Path, cn: str = "localhost") -> None:
    """A self-signed tls.crt/tls.key in ``directory`` (what cert-manager's Secret volume holds)."""
    directory.mkdir(parents=True, exist_ok=True)
    openssl = shutil.which("openssl")
    assert openssl is not None
    subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(directory / "tls.key.new"), "-out", str(directory / "tls.crt.new"),
                    "-days", "1", "-subj", f"/CN={cn}", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True)
    (directory / "tls.key.new").replace(directory / "tls.key")
    (directory / "tls.crt.new").replace(directory / "tls.crt")


@pytest.fixture
def kube(apiserver: ApiServer) -> Iterator[KubeClient]:
    """The operator's client (its User-Agent marks the reviews it sends in the request log)."""
    client = KubeClient(apiserver.api_client(), user_agent="zkop-operator/test")
    yield client
    client.close()


@pytest.fixture
def manager(kube: KubeClient) -> Iterator[Manager]:
    mgr = Manager(ManagerOptions(metrics_bind_address="127.0.0.1:0", health_probe_bind_address="127.0.0.1:0",
                                 metrics_secure=True), kube)
    thread = threading.Thread(target=mgr.run, daemon=True)
    thread.start()
    wait_for(lambda: mgr.metrics_server is not None and mgr.health is not None, message="metrics server started")
    yield mgr
    mgr.stop()
    thread.join(EVENTUALLY)


def test_secure_metrics_through_the_manager(manager: Manager, apiserver: ApiServer, kube: KubeClient) -> None:
    assert manager.metrics_server is not None and manager.health is not None
    url = manager.metrics_server.url
    assert url.startswith("https://127.0.0.1:") and url.endswith("/metrics")
    prometheus = apiserver.auth.service_account_token("monitoring", "prometheus")
    stranger = apiserver.auth.service_account_token("default", "stranger")
    bind_shipped_reader_role(kube, "monitoring", "prometheus")

    status, body = get(url, prometheus)
    assert status == 200 and "# TYPE" in body
    assert get(url) == (401, "Unauthorized\n")
    assert get(url, "not-a-token") == (401, "Unauthorized\n")
    assert get(url, "") == (401, "Unauthorized\n")
    assert get(url, stranger) == (403, "Authorization denied for user system:serviceaccount:default:stranger\n")
    # Only /metrics is filtered; other paths are 404 without asking anyone.
    assert get(url.replace("/metrics", "/other"))[0] == 404
    # Plain HTTP on the HTTPS port is refused (the TLS handshake fails), probes stay plain HTTP.
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        urllib.request.urlopen(url.replace("https://", "http://"), timeout=5).read()
    with urllib.request.urlopen(f"http://127.0.0.1:{manager.health.port}/healthz", timeout=5) as r:
        assert r.status == 200

    # The reviews went to the API server as the operator, with the attributes controller-runtime sends.
    reviews = apiserver.auth.reviews
    sars = [spec for kind, spec in reviews if kind == "SubjectAccessReview"]
    assert {"path": "/metrics", "verb": "get"} in [s["nonResourceAttributes"] for s in sars]
    assert sars[0]["user"] == "system:serviceaccount:monitoring:prometheus"
    assert "system:serviceaccounts:monitoring" in sars[0]["groups"] and sars[0]["uid"]
    logged = {(r.group, r.resource, r.verb) for r in apiserver.request_log if r.user_agent.startswith("zkop-operator/")}
    assert {("authentication.k8s.io", "tokenreviews", "create"),
            ("authorization.k8s.io", "subjectaccessreviews", "create")} <= logged


def test_results_are_cached_like_controller_runtime(manager: Manager, apiserver: ApiServer,
                                                    kube: KubeClient) -> None:
    assert manager.metrics_server is not None
    url = manager.metrics_server.url
    token = apiserver.auth.service_account_token("monitoring", "prometheus")
    bind_shipped_reader_role(kube, "monitoring", "prometheus")
    assert get(url, token)[0] == 200
    before = len(apiserver.auth.reviews)
    for _ in range(3):
        assert get(url, token)[0] == 200
    assert len(apiserver.auth.reviews) == before, "token and decision were cached"
    # Revoking the token does not end access before the token cache expires (1 minute, as CR).
    apiserver.auth.revoke(token)
    assert get(url, token)[0] == 200


def test_delegating_auth_ttls_and_errors(apiserver: ApiServer, kube: KubeClient,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # The caches' clock is the test's: on the real one, "the denial is still cached" was a 100 ms window
    # (deny_ttl) around the API requests that bind the role, which a busy machine missed.
    now = [1000.0]
    monkeypatch.setattr(metrics_auth, "time", SimpleNamespace(monotonic=lambda: now[0], sleep=time.sleep))
    auth = DelegatingAuth(kube, token_ttl=20, allow_ttl=20, deny_ttl=10, attempts=2, backoff=0.01)
    token = apiserver.auth.service_account_token("monitoring", "prometheus")
    user = auth.authenticate(token)
    assert user is not None and user.username == "system:serviceaccount:monitoring:prometheus"
    assert auth.authorize(user, "get", "/metrics") == (False, "")
    bind_shipped_reader_role(kube, "monitoring", "prometheus")
    now[0] += 9.9
    assert auth.authorize(user, "get", "/metrics") == (False, ""), "a denial is cached for deny_ttl"
    now[0] += 0.1
    allowed, reason = auth.authorize(user, "get", "/metrics")
    assert allowed and 'ClusterRole "zkop-metrics-reader"' in reason
    assert auth.authorize(user, "post", "/metrics")[0] is False  # the verb is the lower-case method
    apiserver.auth.revoke(token)
    now[0] += 9.9
    assert auth.authenticate(token) == user, "a TokenReview is cached for token_ttl"
    now[0] += 0.1
    assert auth.authenticate(token) is None
    apiserver.fail_requests(1.0, codes=(500,))
    try:
        with pytest.raises(AuthError, match="TokenReview: HTTP 500"):
            auth.authenticate("other-token")
    finally:
        apiserver.fail_requests(0)


def test_api_server_failure_answers_500(apiserver: ApiServer, kube: KubeClient) -> None:
    auth = DelegatingAuth(kube, attempts=1)
    server = start_metrics_server("127.0.0.1:0", SecureServing(auth))
    assert server is not None
    try:
        apiserver.fail_requests(1.0, codes=(500,))
        assert get(server.url, "some-token") == (500, "Authentication failed\n")
    finally:
        apiserver.fail_requests(0)
        server.shutdown()


def test_mounted_certificate_is_verified_and_reloaded(apiserver: ApiServer, kube: KubeClient,
                                                      tmp_path: Path) -> None:
    certs = tmp_path / "certs"
    make_pair(certs, "first")
    auth = DelegatingAuth(kube)
    server = start_metrics_server("127.0.0.1:0", SecureServing(auth, cert_dir=str(certs)))
    assert server is not None
    try:
        token = apiserver.auth.service_account_token("monitoring", "prometheus")
        bind_shipped_reader_role(kube, "monitoring", "prometheus")
        # Verified against the mounted certificate (as Prometheus with tlsConfig.ca would).
        verifying = ssl.create_default_context(cafile=str(certs / "tls.crt"))
        assert get(server.url, token, context=verifying)[0] == 200
        first = peer_certificate(server.port)
        time.sleep(0.01)
        make_pair(certs, "second")  # cert-manager renews the Secret
        second = peer_certificate(server.port)
        assert second != first and second == ssl.PEM_cert_to_DER_cert((certs / "tls.crt").read_text())
        verifying = ssl.create_default_context(cafile=str(certs / "tls.crt"))
        assert get(server.url, token, context=verifying)[0] == 200
    finally:
        server.shutdown()


def test_a_broken_rotation_keeps_the_previous_certificate(tmp_path: Path) -> None:
    make_pair(tmp_path)
    watched = WatchedCertificate(tmp_path / "tls.crt", tmp_path / "tls.key")
    first = watched.context()
    (tmp_path / "tls.key").write_text("not a key\n")  # half-way through a rotation
    assert watched.context() is first and watched.reloads == 0
    make_pair(tmp_path)
    assert watched.context() is not first and watched.reloads == 1


def test_missing_files_fall_back_to_self_signed_and_bad_ones_fail(apiserver: ApiServer, kube: KubeClient,
                                                                  tmp_path: Path) -> None:
    auth = DelegatingAuth(kube)
    server = start_metrics_server("127.0.0.1:0", SecureServing(auth, cert_dir=str(tmp_path / "absent")))
    assert server is not None
    try:
        assert get(server.url)[0] == 401  # served, with a generated certificate
    finally:
        server.shutdown()
    (tmp_path / "tls.crt").write_text("garbage\n")
    (tmp_path / "tls.key").write_text("garbage\n")
    with pytest.raises(CertificateError, match="cannot load the key pair"):
        start_metrics_server("127.0.0.1:0", SecureServing(auth, cert_dir=str(tmp_path)))


def test_self_signed_certificate_names_localhost(tmp_path: Path) -> None:
    context = self_signed(["zkop.example", "10.0.0.1"])
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]

        def serve() -> None:
            conn, _ = listener.accept()
            with context.wrap_socket(conn, server_side=True) as tls:
                tls.recv(1)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        der = peer_certificate(port)
        thread.join(EVENTUALLY)
    pem = tmp_path / "peer.pem"
    pem.write_text(ssl.DER_cert_to_PEM_cert(der))
    decoded = ssl._ssl._test_decode_cert(str(pem))  # type: ignore[attr-defined]
    assert ("DNS", "localhost") in decoded["subjectAltName"]
    assert ("IP Address", "127.0.0.1") in decoded["subjectAltName"]
    assert ("DNS", "zkop.example") in decoded["subjectAltName"]
    assert ("IP Address", "10.0.0.1") in decoded["subjectAltName"]
    assert not list(Path("/tmp").glob("zkop-metrics-cert-*")), "the generated key is not left on disk"


def test_self_signed_without_openssl_fails_clearly() -> None:
    with pytest.raises(CertificateError, match="openssl"):
        self_signed(openssl="/nonexistent/openssl")


def test_plain_http_stays_available(kube: KubeClient) -> None:
    mgr = Manager(ManagerOptions(metrics_bind_address="127.0.0.1:0", health_probe_bind_address="0"), kube)
    mgr._start_servers()
    try:
        assert mgr.metrics_server is not None and mgr.metrics_server.url.startswith("http://")
        with urllib.request.urlopen(mgr.metrics_server.url, timeout=5) as r:
            assert r.status == 200
    finally:
        mgr._close_servers()


def test_secure_metrics_need_a_client() -> None:
    with pytest.raises(ValueError, match="secure metrics"):
        Manager(ManagerOptions(metrics_secure=True))


@pytest.mark.parametrize(("header", "token"), [
    ("Bearer abc", "abc"), ("bearer abc", "abc"), ("  Bearer abc  ", "abc"), ("Bearer", None), ("Bearer ", None),
    ("Basic abc", None), ("", None), ("Bearer a b", None),
])
def test_bearer_token(header: str, token: str | None) -> None:
    assert bearer_token(header) == token
