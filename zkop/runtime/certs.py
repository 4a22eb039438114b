"""Serving certificates for the secure ``/metrics`` endpoint: mounted files, reloaded on change, or self-signed.

As controller-runtime [CR pkg/metrics/server/server.go ``createListener``]: ``tls.crt``/``tls.key``
in the certificate directory, reloaded on change [CR pkg/certwatcher/certwatcher.go], else a
self-signed certificate for ``localhost``/``127.0.0.1`` (``certutil.GenerateSelfSignedCertKeyWithFixtures``).

* :class:`WatchedCertificate` compares the files' ``stat`` signature before each new connection
  (no thread; the next scrape sees a rotation, e.g. the kubelet swapping ``..data``); a pair that
  cannot be loaded yet (cert and key written one after the other) keeps the previous context, as
  certwatcher does.
* :func:`self_signed` makes an ECDSA P-256 key and a one-year certificate with the ``openssl``
  command (Python's ``ssl`` cannot, and ``cryptography`` is not a dependency) in a private
  temporary directory, deleted at once.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import shutil
import ssl
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

__all__ = ["CertificateError", "WatchedCertificate", "self_signed", "server_context"]

log = logging.getLogger(__name__)

#: Days a self-signed certificate is valid (client-go's ``GenerateSelfSignedCertKey``: one year).
SELF_SIGNED_DAYS = 365


class CertificateError(Exception):
    """A certificate could not be loaded or generated; the message says which file and why."""


def server_context(cert_file: str | Path, key_file: str | Path) -> ssl.SSLContext:
    """A TLS server context (TLS 1.2 or newer, Python's default ciphers) holding the key pair.

    Raises:
        CertificateError: a file is missing or unreadable, not PEM, or the key does not match.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(str(cert_file), str(key_file))
    except (OSError, ssl.SSLError) as err:
        raise CertificateError(f"cannot load the key pair {cert_file}, {key_file}: {err}") from err
    return context


def _signature(path: Path) -> tuple[int, int, int, int]:
    st = path.stat()
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class WatchedCertificate:
    """A key pair on disk, loaded now and again whenever the files change.

    Args:
        cert_file: PEM certificate (chain), e.g. ``<cert-dir>/tls.crt``.
        key_file: PEM private key, e.g. ``<cert-dir>/tls.key``.

    Raises:
        CertificateError: the pair cannot be loaded at start.
    """

    def __init__(self, cert_file: str | Path, key_file: str | Path) -> None:
        self.cert_file = Path(cert_file)
        self.key_file = Path(key_file)
        self._lock = threading.Lock()
        self._signature = self._current_signature()
        self._context = server_context(self.cert_file, self.key_file)
        #: Number of successful reloads after the first load (for tests and logs).
        self.reloads = 0

    def _current_signature(self) -> tuple[tuple[int, int, int, int], ...] | None:
        try:
            return (_signature(self.cert_file), _signature(self.key_file))
        except OSError:
            return None

    def context(self) -> ssl.SSLContext:
        """The context for a new connection, reloaded first when either file changed."""
        signature = self._current_signature()
        with self._lock:
            if signature is None or signature == self._signature:
                return self._context
            try:
                self._context = server_context(self.cert_file, self.key_file)
            except CertificateError as err:
                log.warning("keeping the previous metrics serving certificate: %s", err)
                return self._context
            self._signature = signature
            self.reloads += 1
        log.info("metrics serving certificate reloaded from %s", self.cert_file)
        return self._context


def self_signed(hosts: Sequence[str] = (), *, openssl: str | None = None) -> ssl.SSLContext:
    """A server context with a fresh self-signed certificate for ``localhost``, ``127.0.0.1`` and ``hosts``.

    Args:
        hosts: extra subject alternative names; IPv4/IPv6 literals become ``IP:``, the rest ``DNS:``.
        openssl: the ``openssl`` executable; default: found on ``$PATH``.

    Raises:
        CertificateError: no ``openssl`` found, or it failed (its stderr is in the message).
    """
    executable = openssl or shutil.which("openssl")
    if executable is None:
        raise CertificateError("no 'openssl' on PATH to generate a self-signed metrics certificate; "
                               "install it or mount a certificate and pass --metrics-cert-dir")
    names = ["DNS:localhost", "IP:127.0.0.1"]
    for host in hosts:
        entry = f"IP:{host}" if _is_ip(host) else f"DNS:{host}"
        if entry not in names:
            names.append(entry)
    workdir = tempfile.mkdtemp(prefix="zkop-metrics-cert-")
    try:
        cert, key = Path(workdir, "tls.crt"), Path(workdir, "tls.key")
        command = [executable, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                   "-nodes", "-keyout", str(key), "-out", str(cert), "-days", str(SELF_SIGNED_DAYS),
                   "-subj", "/CN=localhost", "-addext", f"subjectAltName={','.join(names)}",
                   "-addext", "extendedKeyUsage=serverAuth"]
        try:
            subprocess.run(command, check=True, capture_output=True, text=True, timeout=60,
                           env={**os.environ, "OPENSSL_CONF": os.devnull})
        except (OSError, subprocess.SubprocessError) as err:
            detail = getattr(err, "stderr", "") or str(err)
            raise CertificateError(f"openssl could not generate a self-signed certificate: {detail.strip()}") from err
        return server_context(cert, key)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
