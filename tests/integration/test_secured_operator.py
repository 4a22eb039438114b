"""``zkop run`` against a mutual-TLS ZooKeeper: the reason it cannot connect is in its log and readiness
probe, and a CA file fixed in place (a rotated Secret) is picked up without a restart."""

from __future__ import annotations

import shutil
import time
import urllib.error
import urllib.request
from pathlib import Path

from kazoo.client import KazooClient
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import create, synced, zkc
from zkop_testing.waiting import EVENTUALLY, wait_for
from zkop_testing.zookeeper_secure import SecureZooKeeperServer, TestCA

from zkop.kube.client import KubeClient


def _readyz(proc: OperatorProcess) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{proc.health_port}/readyz?verbose", timeout=5) as r:
            return str(r.read().decode())
    except urllib.error.HTTPError as err:
        return str(err.read().decode())
    except OSError:  # not listening yet
        return ""


def test_untrusted_server_is_named_in_log_and_readiness_until_the_ca_file_is_rotated(
        kubeconfig: str, kube: KubeClient, tmp_path: Path, namespace: str) -> None:
    ca = TestCA(tmp_path / "pki")
    wrong = TestCA(tmp_path / "wrong", name="wrong CA")
    mounted = tmp_path / "secret"
    mounted.mkdir()
    shutil.copy(wrong.cert, mounted / "ca.crt")
    client = ca.issue("zkop")
    with SecureZooKeeperServer(tmp_path, server_cert=ca.issue("zookeeper", dns=["localhost"]), trust=ca.cert) as server:
        flags = ["--zk-tls-ca-file", str(mounted / "ca.crt"), "--zk-tls-cert-file", str(client.cert),
                 "--zk-tls-key-file", str(client.key), "--zk-session-timeout", "4", "--namespace", namespace]
        proc = OperatorProcess(kubeconfig, server.secure_hosts("localhost"), flags, log_path=str(tmp_path / "zkop.log"))
        proc.start(wait_ready=False)
        try:
            wait_for(lambda: "server certificate is not trusted" in _readyz(proc),
                     message="readiness names the untrusted certificate")
            assert proc.probe("/readyz") == 500 and proc.probe("/healthz") == 200
            log = (tmp_path / "zkop.log").read_text()
            assert "ZooKeeper connection failed: TLS to localhost" in log
            assert log.count("ZooKeeper connection failed") == 1, "logged once per reason, not per retry"

            replaced = mounted / "ca.crt.new"
            shutil.copy(ca.cert, replaced)
            replaced.replace(mounted / "ca.crt")
            started = time.monotonic()
            wait_for(lambda: proc.probe("/readyz") == 200, message="ready with the rotated CA")
            ready_after = time.monotonic() - started
            acl = [{"scheme": "x509", "id": client.subject, "permissions": ["read", "write", "create", "delete",
                                                                           "admin"]}]
            create(kube, zkc("mtls", "/app/mtls", b"on", acl=acl, namespace=namespace))
            wait_for(lambda: synced(kube, "mtls", namespace))
            print(f"ready {ready_after:.1f} s after the CA file was rotated")
        finally:
            proc.stop()

        own = KazooClient(hosts=server.secure_hosts("localhost"), use_ssl=True, ca=str(ca.cert),
                          certfile=str(client.cert), keyfile=str(client.key), verify_certs=True, check_hostname=True)
        own.start(timeout=EVENTUALLY)
        try:
            assert own.get("/app/mtls")[0] == b"on"
        finally:
            own.stop()
            own.close()
