"""``zkop run --metrics-secure`` as the Deployment runs it: HTTPS, TokenReview, SubjectAccessReview.

The operator process talks to the in-memory API server, which knows the tokens issued here and
decides the SubjectAccessReviews from the reader ClusterRole shipped in ``manifests/rbac``.
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path

from zkop_testing.apiserver import ApiServer
from zkop_testing.metrics_access import reader_token
from zkop_testing.operator import OperatorProcess
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import KubeClient


def test_zkop_run_metrics_secure(kubeconfig: str, kube: KubeClient, apiserver: ApiServer,
                                 zk_server: ZooKeeperServer, zk_base: str) -> None:
    prometheus = reader_token(apiserver, kube)
    other = apiserver.auth.service_account_token("default", "someone")
    with OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", ["--metrics-secure"]) as proc:
        assert proc.metrics_url.startswith("https://")
        status, body = proc.scrape(prometheus)
        assert status == 200 and "controller_runtime_reconcile_total" in body
        assert proc.scrape() == (401, "Unauthorized\n")
        assert proc.scrape("forged") == (401, "Unauthorized\n")
        assert proc.scrape(other) == (403, "Authorization denied for user system:serviceaccount:default:someone\n")
        assert proc.probe("/readyz") == 200  # the probes stay plain HTTP
    # zkop asked with its own credentials (the kubeconfig's), as its ServiceAccount would.
    used = {(r.group, r.resource, r.verb) for r in apiserver.request_log if r.user_agent.startswith("zkop-operator/")}
    assert {("authentication.k8s.io", "tokenreviews", "create"),
            ("authorization.k8s.io", "subjectaccessreviews", "create")} <= used


def test_zkop_run_metrics_secure_with_a_mounted_certificate(kubeconfig: str, kube: KubeClient,
                                                            apiserver: ApiServer, zk_server: ZooKeeperServer,
                                                            zk_base: str, tmp_path: Path) -> None:
    certs = tmp_path / "metrics-certs"
    certs.mkdir()
    openssl = shutil.which("openssl")
    assert openssl is not None
    subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(certs / "server.key"), "-out", str(certs / "server.crt"), "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True)
    token = reader_token(apiserver, kube)
    args = ["--metrics-secure=true", "--metrics-cert-path", str(certs), "--metrics-cert-name", "server.crt",
            "--metrics-cert-key", "server.key"]
    with OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", args) as proc:
        verifying = ssl.create_default_context(cafile=str(certs / "server.crt"))  # no insecureSkipVerify
        status, _ = proc.scrape(token, context=verifying)
        assert status == 200


def test_zkop_run_metrics_secure_false_is_plain_http(kubeconfig: str, kube: KubeClient,
                                                     zk_server: ZooKeeperServer, zk_base: str) -> None:
    with OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", ["--metrics-secure=false"]) as proc:
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
