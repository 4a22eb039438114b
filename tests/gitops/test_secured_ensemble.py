"""``zkop export/diff/sync`` against secured ZooKeeper servers: TLS (server-verified and mutual, x509
ACLs, host name checking, the system trust store) and SASL DIGEST-MD5 with ``enforce.auth.enabled``.

The servers are real (the suite's default line, :mod:`zkop_testing.zookeeper_secure`), with a CA made
per module; failures must be one clear line on stderr and exit code 2, not a hang.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from gitops_support import Cli, Run, write_manifests, zkc
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from zkop_testing.waiting import EVENTUALLY, result_within
from zkop_testing.zookeeper_secure import Issued, SecureZooKeeperServer, TestCA, digest_jaas

from zkop.cmd.main import connection_options

ALL = ["read", "write", "create", "delete", "admin"]
#: The connect timeout a refused connection must not wait out: an hour, so that no wait of the test can be it.
HOUR = 3600.0


def refused_at_once(monkeypatch: pytest.MonkeyPatch, command: Callable[[], Run]) -> Run:
    """``command()`` with a connect timeout of an hour, on a thread of its own: its result once it returns.

    A refusal the command notices (a certificate or a login the server rejects) returns at once; one it would
    only give up on at the connect timeout would still be waiting when this stops waiting, minutes later.
    """
    monkeypatch.setattr("zkop.cmd.gitops.connection_options",
                        lambda args: dataclasses.replace(connection_options(args), connect_timeout=HOUR))
    return result_within(command, message="a refused connection waiting out the connect timeout (an hour)")


@dataclass(frozen=True)
class Tls:
    server: SecureZooKeeperServer
    ca: TestCA
    zkop: Issued
    other: Issued

    def flags(self, host: str = "localhost", *, ca: bool = True) -> list[str]:
        return ["--zk-hosts", self.server.secure_hosts(host), "--zk-tls-cert-file", str(self.zkop.cert),
                "--zk-tls-key-file", str(self.zkop.key), *(["--zk-tls-ca-file", str(self.ca.cert)] if ca else [])]


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tls]:
    directory = tmp_path_factory.mktemp("tls")
    ca = TestCA(directory / "pki")
    # The server certificate names "localhost" only: connecting to 127.0.0.1 is a host name mismatch.
    server_cert = ca.issue("zookeeper", dns=["localhost"])
    with SecureZooKeeperServer(directory, server_cert=server_cert, trust=ca.cert, client_auth="need") as server:
        yield Tls(server, ca, ca.issue("zkop"), ca.issue("other"))


def tls_client(tls: Tls, who: Issued) -> KazooClient:
    client = KazooClient(hosts=tls.server.secure_hosts("localhost"), use_ssl=True, ca=str(tls.ca.cert),
                         certfile=str(who.cert), keyfile=str(who.key), verify_certs=True, check_hostname=True)
    client.start(timeout=EVENTUALLY)
    return client


def test_mutual_tls_manages_a_znode_under_an_x509_acl_only_zkop_can_read(cli: Cli, tls: Tls,
                                                                        tmp_path: Path) -> None:
    acl = [{"scheme": "x509", "id": tls.zkop.subject, "permissions": ALL}]
    manifest = write_manifests(tmp_path / "m.yaml", zkc("/mtls/app/flag", "flag", stringData="on", acl=acl))
    started = time.monotonic()
    run = cli("sync", *tls.flags(), "-f", str(manifest))
    assert run.code == 0, run.err
    logging.getLogger(__name__).info("zkop sync over mutual TLS: %.2f s", time.monotonic() - started)
    assert cli("diff", *tls.flags(), "-f", str(manifest)).code == 0

    exported = cli("export", *tls.flags(), "--path", "/mtls", "-d", str(tmp_path / "out"))
    assert exported.code == 0, exported.err
    objects = [yaml.safe_load(f.read_text()) for f in (tmp_path / "out").rglob("*.yaml")]
    [flag] = [o for o in objects if o.get("kind") == "ZooKeeperConfig" and o["spec"]["path"].endswith("/flag")]
    assert flag["spec"]["acl"] == acl

    other = tls_client(tls, tls.other)
    try:
        with pytest.raises(NoAuthError):
            other.get("/mtls/app/flag")
    finally:
        other.stop()
        other.close()
    own = tls_client(tls, tls.zkop)
    try:
        assert own.get("/mtls/app/flag")[0] == b"on"
    finally:
        own.stop()
        own.close()


def test_a_host_name_the_certificate_does_not_list_is_refused_at_once(cli: Cli, tls: Tls, tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = write_manifests(tmp_path / "m.yaml", zkc("/hostname/x", "x", stringData="1"))
    run = refused_at_once(monkeypatch, lambda: cli("diff", *tls.flags("127.0.0.1"), "-f", str(manifest)))
    assert run.code == 2
    [line] = [line for line in run.err.splitlines() if "error" in line]
    assert "host name mismatch" in line and "127.0.0.1" in line, run.err

    run = cli("sync", *tls.flags("127.0.0.1"), "--zk-tls-insecure-skip-hostname-verify", "-f", str(manifest))
    assert run.code == 0, run.err
    assert "without host name verification" in run.err + caplog.text


def test_without_a_ca_file_the_system_trust_store_decides(cli: Cli, tls: Tls, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = write_manifests(tmp_path / "m.yaml", zkc("/truststore/x", "x", stringData="1"))
    for command in ("diff", "sync"):
        run = cli(command, *tls.flags(ca=False), "-f", str(manifest))
        assert run.code == 2
        assert "server certificate is not trusted" in run.err, run.err
    run = cli("export", *tls.flags(ca=False), "--path", "/", "-d", str(tmp_path / "out"))
    assert run.code == 2 and "not trusted" in run.err

    # OpenSSL's default verify paths honour SSL_CERT_FILE: the CA added there is trusted.
    monkeypatch.setenv("SSL_CERT_FILE", str(tls.ca.cert))
    run = cli("sync", *tls.flags(ca=False), "-f", str(manifest))
    assert run.code == 0, run.err


def test_a_client_certificate_from_another_ca_is_refused_by_the_server(cli: Cli, tls: Tls, tmp_path: Path) -> None:
    stranger = TestCA(tmp_path / "stranger", name="stranger CA").issue("zkop")
    manifest = write_manifests(tmp_path / "m.yaml", zkc("/stranger/x", "x", stringData="1"))
    run = cli("diff", "--zk-hosts", tls.server.secure_hosts("localhost"), "--zk-tls-ca-file", str(tls.ca.cert),
              "--zk-tls-cert-file", str(stranger.cert), "--zk-tls-key-file", str(stranger.key), "-f", str(manifest))
    assert run.code == 2
    assert "could not connect" in run.err, run.err


# --- SASL -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sasl_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureZooKeeperServer]:
    directory = tmp_path_factory.mktemp("sasl")
    jaas = digest_jaas({"zkop": "zkop-secret", "other": "other-secret"})
    with SecureZooKeeperServer(directory, jaas=jaas, enforce_sasl=True) as server:
        yield server


def test_sasl_digest_md5_manages_a_znode_with_a_sasl_acl_and_wrong_credentials_fail_clearly(
        cli: Cli, sasl_server: SecureZooKeeperServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.write_text("zkop:zkop-secret\n")
    bad.write_text("zkop:wrong\n")
    acl = [{"scheme": "sasl", "id": "zkop", "permissions": ALL}]
    manifest = write_manifests(tmp_path / "m.yaml", zkc("/sasl/app", "app", stringData="v1", acl=acl))
    flags = ["--zk-hosts", sasl_server.hosts, "--zk-sasl-mechanism", "DIGEST-MD5"]

    started = time.monotonic()
    run = cli("sync", *flags, "--zk-sasl-credentials-file", str(good), "-f", str(manifest))
    assert run.code == 0, run.err
    logging.getLogger(__name__).info("zkop sync over SASL DIGEST-MD5: %.2f s", time.monotonic() - started)
    assert cli("diff", *flags, "--zk-sasl-credentials-file", str(good), "-f", str(manifest)).code == 0

    run = refused_at_once(monkeypatch, lambda: cli("diff", *flags, "--zk-sasl-credentials-file", str(bad),
                                                   "-f", str(manifest)))
    assert run.code == 2
    assert "rejected the SASL DIGEST-MD5 authentication" in run.err, run.err

    other = KazooClient(hosts=sasl_server.hosts, sasl_options={
        "mechanism": "DIGEST-MD5", "username": "other", "password": "other-secret"})
    other.start(timeout=EVENTUALLY)
    try:
        with pytest.raises(NoAuthError):
            other.get("/sasl/app")
    finally:
        other.stop()
        other.close()
