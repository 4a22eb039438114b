"""``zkop run --metrics-secure`` as the Deployment runs it: HTTPS, TokenReview, SubjectAccessReview.

The operator process runs as its ServiceAccount on the real kube-apiserver, which issues the scrapers' tokens
(TokenRequest), reviews them and decides the SubjectAccessReviews from the reader ClusterRole shipped in
``manifests/rbac`` under its own RBAC authorizer.
"""

from __future__ import annotations

import contextlib
import shutil
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from zkop_testing.audit import Request, requests, settled
from zkop_testing.controlplane import ControlPlane
from zkop_testing.metrics_access import bind_shipped_reader_role, reader_binding, service_account_token
from zkop_testing.operator import OperatorProcess
from zkop_testing.zkop_install import ZKOP_NAMESPACE, ZKOP_SERVICE_ACCOUNT
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import ApiException, KubeClient

ZKOP_USER = f"system:serviceaccount:{ZKOP_NAMESPACE}:{ZKOP_SERVICE_ACCOUNT}"


@pytest.fixture
def prometheus(control_plane: ControlPlane, kube: KubeClient, namespace: str) -> Iterator[str]:
    """A token of ``<namespace>/prometheus``, bound to the shipped reader ClusterRole (the binding deleted
    afterwards: it is cluster-scoped)."""
    token = service_account_token(kube, namespace, "prometheus")
    bind_shipped_reader_role(kube, namespace, "prometheus")
    yield token
    with contextlib.suppress(ApiException):
        kube.request("DELETE", f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/"
                               f"{reader_binding(namespace, 'prometheus')}")


def _reviews(plane: ControlPlane) -> list[Request]:
    """The TokenReviews and SubjectAccessReviews zkop's ServiceAccount created so far (audit log)."""
    settled(plane, "default")
    return [r for r in requests(plane, namespace="", verbs=("create",), user=ZKOP_USER)
            if r.resource in ("tokenreviews", "subjectaccessreviews")]


def test_zkop_run_metrics_secure(kubeconfig: str, kube: KubeClient, control_plane: ControlPlane, prometheus: str,
                                 zk_server: ZooKeeperServer, zk_base: str, namespace: str) -> None:
    other = service_account_token(kube, namespace, "someone")
    before = len(_reviews(control_plane))
    args = ["--metrics-secure", "--namespace", namespace]
    with OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", args) as proc:
        assert proc.metrics_url.startswith("https://")
        status, body = proc.scrape(prometheus)
        assert status == 200 and "controller_runtime_reconcile_total" in body
        assert proc.scrape() == (401, "Unauthorized\n")
        assert proc.scrape("forged") == (401, "Unauthorized\n")
        assert proc.scrape(other) == (
            403, f"Authorization denied for user system:serviceaccount:{namespace}:someone\n")
        assert proc.probe("/readyz") == 200  # the probes stay plain HTTP
    # zkop asked kube-apiserver with its own credentials (its ServiceAccount's token).
    assert {r.resource for r in _reviews(control_plane)[before:]} == {"tokenreviews", "subjectaccessreviews"}


def test_zkop_run_metrics_secure_with_a_mounted_certificate(kubeconfig: str, kube: KubeClient, prometheus: str,
                                                            zk_server: ZooKeeperServer, zk_base: str,
                                                            tmp_path: Path, namespace: str) -> None:
    certs = tmp_path / "metrics-certs"
    certs.mkdir()
    openssl = shutil.which("openssl")
    assert openssl is not None
    subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(certs / "server.key"), "-out", str(certs / "server.crt"), "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True)
    args = ["--metrics-secure=true", "--metrics-cert-path", str(certs), "--metrics-cert-name", "server.crt",
            "--metrics-cert-key", "server.key", "--namespace", namespace]
    with OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", args) as proc:
        verifying = ssl.create_default_context(cafile=str(certs / "server.crt"))  # no insecureSkipVerify
        status, _ = proc.scrape(prometheus, context=verifying)
        assert status == 200


def test_zkop_run_metrics_secure_false_is_plain_http(kubeconfig: str, kube: KubeClient,
                                                     zk_server: ZooKeeperServer, zk_base: str, namespace: str) -> None:
    args = ["--metrics-secure=false", "--namespace", namespace]
    with OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", args) as proc:
        assert proc.metrics_url.startswith("http://")
        status, body = proc.scrape()
        assert status == 200 and "controller_runtime_reconcile_total" in body


def test_zkop_run_with_an_unusable_certificate_exits_2(kubeconfig: str, kube: KubeClient, tmp_path: Path) -> None:
    (tmp_path / "tls.crt").write_text("not a certificate\n")
    (tmp_path / "tls.key").write_text("not a key\n")
    proc = OperatorProcess(kubeconfig, "127.0.0.1:1", ["--metrics-secure", f"--metrics-cert-dir={tmp_path}"])
    try:
        proc.start(wait_ready=False)
        assert proc.wait(30) == 2
        assert "cannot serve metrics securely" in proc.log_tail()
    finally:
        proc.stop()
