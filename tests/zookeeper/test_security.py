"""TLS/SASL options of the session, and rotated credentials files picked up without a restart.

Rotation runs against real servers (:mod:`zkop_testing.zookeeper_secure`): the file behind a path
is replaced as a Secret volume update does (a new inode), and zkop must open a new session whose
identity — the x509 subject, the SASL user — is the new one.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import make_acl, make_digest_acl
from zkop_testing.waiting import EVENTUALLY, result_within, wait_for
from zkop_testing.zookeeper import ZooKeeperInstallation, ZooKeeperServer
from zkop_testing.zookeeper_secure import SecureZooKeeperServer, TestCA, digest_jaas

from zkop.cmd.flags import UsageError
from zkop.cmd.main import build_parser, connection_options
from zkop.zookeeper.adapter import ConnectionOptions, ZooKeeperAdapter
from zkop.zookeeper.security import CredentialsError, WatchedFiles, read_digest_file, sasl_options
from zkop.zookeeper.session import build_client

log = logging.getLogger(__name__)


def parse(*flags: str) -> argparse.Namespace:
    return build_parser().parse_args(["run", *flags])


def test_flags_make_the_kazoo_tls_and_sasl_settings(tmp_path: Path) -> None:
    cred = tmp_path / "cred"
    cred.write_text("zkop:pa:ss\n")
    options = connection_options(parse("--zk-tls-ca-file", "/ca.pem", "--zk-sasl-mechanism", "DIGEST-MD5",
                                       "--zk-sasl-credentials-file", str(cred)))
    assert options.use_tls and options.tls_check_hostname
    client = build_client(options)
    assert (client.use_ssl, client.verify_certs, client.check_hostname, client.ca) == (True, True, True, "/ca.pem")
    assert client._connection.sasl_options == {"mechanism": "DIGEST-MD5", "service": "zookeeper",
                                               "username": "zkop", "password": "pa:ss"}

    # No CA file: TLS still verifies (against the system trust store).
    client = build_client(connection_options(parse("--zk-tls", "--zk-tls-insecure-skip-hostname-verify")))
    assert (client.use_ssl, client.verify_certs, client.check_hostname, client.ca) == (True, True, False, None)
    assert not build_client(connection_options(parse())).use_ssl


def test_gssapi_flags_make_kazoo_sasl_options() -> None:
    """The flags become kazoo's GSSAPI options (a real KDC login: tests/zookeeper/test_kerberos.py)."""
    options = connection_options(parse("--zk-sasl-mechanism", "GSSAPI", "--zk-sasl-principal", "zkop@EXAMPLE.COM",
                                       "--zk-sasl-service", "zk"))
    assert build_client(options)._connection.sasl_options == {
        "mechanism": "GSSAPI", "service": "zk", "principal": "zkop@EXAMPLE.COM"}
    options = connection_options(parse("--zk-sasl-mechanism", "GSSAPI"))
    assert sasl_options(options.sasl_mechanism, None) == {"mechanism": "GSSAPI", "service": "zookeeper"}


@pytest.mark.parametrize(("flags", "message"), [
    (["--zk-tls-cert-file", "/c.pem"], "go together"),
    (["--zk-sasl-mechanism", "DIGEST-MD5"], "needs --zk-sasl-credentials-file"),
    (["--zk-sasl-mechanism", "DIGEST-MD5", "--zk-sasl-credentials-file", "/nonexistent"], "No such file"),
])
def test_incomplete_security_flags_are_usage_errors(flags: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        connection_options(parse(*flags))


def test_malformed_credentials_are_refused(tmp_path: Path) -> None:
    (tmp_path / "c").write_text("no-colon\n")
    with pytest.raises(CredentialsError, match="expected 'user:password'"):
        sasl_options("DIGEST-MD5", str(tmp_path / "c"))
    with pytest.raises(CredentialsError, match="want one of"):
        sasl_options("PLAIN", None)


def test_watched_files_report_content_changes_only(tmp_path: Path) -> None:
    # A Secret volume: path -> ..data/path, ..data -> a timestamped directory swapped on update.
    for version, text in (("v1", "one"), ("v2", "two")):
        (tmp_path / version).mkdir()
        (tmp_path / version / "tls.crt").write_text(text)
    (tmp_path / "..data").symlink_to("v1")
    (tmp_path / "tls.crt").symlink_to("..data/tls.crt")
    files = WatchedFiles([str(tmp_path / "tls.crt"), None])
    assert files.changed() == []
    os.utime(tmp_path / "v1" / "tls.crt")  # touched, same content
    assert files.changed() == []
    (tmp_path / "..data.tmp").symlink_to("v2")
    (tmp_path / "..data.tmp").replace(tmp_path / "..data")
    assert files.changed() == [str(tmp_path / "tls.crt")]
    assert files.changed() == []
    (tmp_path / "..data").unlink()
    assert files.changed() == [str(tmp_path / "tls.crt")]  # vanished


def _states(adapter: ZooKeeperAdapter) -> list[str]:
    seen: list[str] = []
    adapter.add_session_listener(seen.append)
    return seen


@pytest.mark.zookeeper_semantics
def test_a_rotated_client_certificate_opens_a_new_session_with_the_new_identity(
        tmp_path: Path, zookeeper_installation: ZooKeeperInstallation) -> None:
    ca = TestCA(tmp_path / "pki")
    with SecureZooKeeperServer(tmp_path, server_cert=ca.issue("zookeeper", dns=["localhost"]), trust=ca.cert,
                               installation=zookeeper_installation) as server:
        new = ca.issue("zkop-new", stem="admin")
        admin = KazooClient(hosts=server.secure_hosts("localhost"), use_ssl=True, ca=str(ca.cert),
                            certfile=str(new.cert), keyfile=str(new.key), verify_certs=True, check_hostname=True)
        admin.start(timeout=EVENTUALLY)
        admin.create("/rotated", b"for the new certificate", acl=[make_acl("x509", "CN=zkop-new", all=True)])
        admin.stop()
        admin.close()

        mounted = ca.issue("zkop-old", stem="mounted")  # the files zkop is given, rotated in place below
        adapter = ZooKeeperAdapter(ConnectionOptions(
            hosts=server.secure_hosts("localhost"), use_tls=True, tls_ca_file=str(ca.cert),
            tls_cert_file=str(mounted.cert), tls_key_file=str(mounted.key), credentials_check_period=0.1))
        states = _states(adapter)
        adapter.start()
        try:
            with pytest.raises(NoAuthError):
                adapter.client.get("/rotated")
            first = adapter.session_id
            started = time.monotonic()
            ca.issue("zkop-new", stem="mounted")
            wait_for(lambda: adapter.connected and adapter.session_id not in (None, first))
            log.info("rotated TLS certificate in use after %.2f s", time.monotonic() - started)
            assert adapter.client.get("/rotated")[0] == b"for the new certificate"
            wait_for(lambda: states[-2:] == ["LOST", "CONNECTED"])
        finally:
            adapter.stop()


@pytest.mark.zookeeper_semantics
def test_rotated_sasl_credentials_open_a_new_session_as_the_new_user(
        tmp_path: Path, zookeeper_installation: ZooKeeperInstallation) -> None:
    jaas = digest_jaas({"zkop-old": "old-secret", "zkop-new": "new-secret"})
    with SecureZooKeeperServer(tmp_path, jaas=jaas, enforce_sasl=True, installation=zookeeper_installation) as server:
        admin = KazooClient(hosts=server.hosts, sasl_options={
            "mechanism": "DIGEST-MD5", "username": "zkop-new", "password": "new-secret"})
        admin.start(timeout=EVENTUALLY)
        admin.create("/rotated", b"for zkop-new", acl=[make_acl("sasl", "zkop-new", all=True)])
        admin.stop()
        admin.close()

        cred = tmp_path / "credentials"
        cred.write_text("zkop-old:old-secret\n")
        adapter = ZooKeeperAdapter(ConnectionOptions(
            hosts=server.hosts, sasl_mechanism="DIGEST-MD5", sasl_credentials_file=str(cred),
            credentials_check_period=0.1))
        adapter.start()
        try:
            with pytest.raises(NoAuthError):
                adapter.client.get("/rotated")
            first = adapter.session_id
            started = time.monotonic()
            (tmp_path / "credentials.new").write_text("zkop-new:new-secret\n")
            (tmp_path / "credentials.new").replace(cred)
            wait_for(lambda: adapter.connected and adapter.session_id not in (None, first))
            log.info("rotated SASL credentials in use after %.2f s", time.monotonic() - started)
            assert adapter.client.get("/rotated")[0] == b"for zkop-new"
        finally:
            adapter.stop()


@pytest.mark.zookeeper_semantics
def test_the_last_connect_error_names_the_problem_for_the_readiness_probe(
        tmp_path: Path, zookeeper_installation: ZooKeeperInstallation) -> None:
    ca = TestCA(tmp_path / "pki")
    with SecureZooKeeperServer(tmp_path, server_cert=ca.issue("zookeeper", dns=["localhost"]), trust=ca.cert,
                               client_auth="none", installation=zookeeper_installation) as server:
        # An hour's connect timeout: the refused certificate ends start() at once, not the timer.
        adapter = ZooKeeperAdapter(ConnectionOptions(hosts=server.secure_hosts("localhost"), use_tls=True,
                                                     connect_timeout=3600))
        with pytest.raises(Exception, match="server certificate is not trusted"):
            result_within(adapter.start, message="start() waiting out the connect timeout (an hour)")
        assert adapter.last_connect_error is not None and "not trusted" in adapter.last_connect_error
        adapter.stop()


@pytest.mark.zookeeper_semantics
def test_a_rotated_digest_credentials_file_opens_a_new_session(zk_server: ZooKeeperServer, zk_base: str,
                                                               zk: KazooClient, tmp_path: Path) -> None:
    zk.create(f"{zk_base}/rotated", b"for new", acl=[make_digest_acl("new", "new-secret", all=True)])
    auth = tmp_path / "credentials"
    auth.write_text("old:old-secret\n")
    adapter = ZooKeeperAdapter(ConnectionOptions(hosts=f"{zk_server.hosts}{zk_base}", auth=read_digest_file(str(auth)),
                                                 auth_file=str(auth), credentials_check_period=0.1))
    adapter.start()
    try:
        with pytest.raises(NoAuthError):
            adapter.client.get("/rotated")
        first = adapter.session_id
        (tmp_path / "credentials.new").write_text("new:new-secret\n")
        (tmp_path / "credentials.new").replace(auth)
        wait_for(lambda: adapter.connected and adapter.session_id not in (None, first))
        assert adapter.client.get("/rotated")[0] == b"for new"
        adapter.client.delete("/rotated")  # zk_base's clean-up cannot read it
    finally:
        adapter.stop()


def test_connection_errors_are_one_line_naming_the_problem() -> None:
    import ssl

    from zkop.zookeeper.security import describe_connect_error

    mismatch = ssl.SSLCertVerificationError(1, "certificate verify failed")
    mismatch.verify_message = "Hostname mismatch, certificate is not valid for '127.0.0.1'."
    assert "host name mismatch" in describe_connect_error(mismatch, "127.0.0.1:2281")
    untrusted = ssl.SSLCertVerificationError(1, "certificate verify failed")
    untrusted.verify_message = "unable to get local issuer certificate"
    assert "not trusted" in describe_connect_error(untrusted, "zk:2281")
    assert "cannot load the TLS files" in describe_connect_error(FileNotFoundError(2, "No such file or directory"),
                                                                "zk:2281")
    assert describe_connect_error(ConnectionRefusedError(111, "Connection refused"), "zk:2181") == (
        "cannot connect to zk:2181: Connection refused")


def test_zkop_knows_its_x509_and_sasl_identities(tmp_path: Path) -> None:
    from zkop.zookeeper.security import sasl_principals, x509_subject

    cert = TestCA(tmp_path / "pki").issue("zkop")
    assert x509_subject(str(cert.cert)) == "CN=zkop"  # as ZooKeeper's X509AuthenticationProvider names it
    assert x509_subject(str(tmp_path / "missing.pem")) is None
    (tmp_path / "cred").write_text("ops:pw\n")
    assert sasl_principals("DIGEST-MD5", str(tmp_path / "cred"), None) == ("ops",)
    assert sasl_principals("GSSAPI", None, "zkop/host@EXAMPLE.COM") == ("zkop/host@EXAMPLE.COM", "zkop")
    assert sasl_principals(None, None, None) == ()


def test_start_up_logs_a_refused_certificate_once_and_names_it_in_readiness(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/operations.md ("Connecting to a secured ensemble"): ``zkop run`` logs a connection failure once per
    distinct reason while it keeps retrying, and ``/readyz?verbose`` says ``ZooKeeper session not connected: TLS
    to …``. The start-up used to log the same reason again at every retry (about every 10 s) and to say
    ``ZooKeeper start-up (session and probe) not complete``."""
    from zkop.feature.session import ZooKeeperStartup

    ca = TestCA(tmp_path / "pki")
    wrong = TestCA(tmp_path / "wrong", name="wrong CA")
    with SecureZooKeeperServer(tmp_path, server_cert=ca.issue("zookeeper", dns=["localhost"]), trust=ca.cert) as server:
        adapter = ZooKeeperAdapter(ConnectionOptions(hosts=server.secure_hosts("localhost"), use_tls=True,
                                                     tls_ca_file=str(wrong.cert)))
        fatal: list[str] = []
        startup = ZooKeeperStartup(adapter, "/zkop/probe", probe=True, on_fatal=lambda code, why: fatal.append(why))
        waits: list[float] = []

        def quickly(seconds: float) -> None:  # the retries' waits (0.5 s doubling to 10 s), shortened
            waits.append(seconds)
            startup._stop.wait(0.05)

        monkeypatch.setattr(startup, "_sleep", quickly)
        caplog.set_level(logging.INFO, logger="zkop")
        startup.start()
        try:
            wait_for(lambda: len(waits) >= 6, message="six connection attempts failed")
            readiness = startup.readiness()
        finally:
            startup.stop(5.0)
    reason = f"TLS to localhost:{server.secure_port}: the server certificate is not trusted"
    assert readiness is not None and readiness.startswith(f"ZooKeeper session not connected: {reason}"), readiness
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO and reason in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith(f"ZooKeeper connection failed: {reason}"), lines
    assert fatal == [] and not startup.has_synced()
