"""TLS and SASL for the ZooKeeper session: kazoo arguments, mounted-file rotation, one-line errors.

* TLS follows kazoo 2.11's ``kazoo.handlers.utils.create_tcp_connection``: a fresh
  ``ssl.SSLContext(PROTOCOL_TLS_CLIENT)`` per connection attempt that loads the system trust store
  (``load_default_certs``; OpenSSL honours ``SSL_CERT_FILE``/``SSL_CERT_DIR``), then ``ca`` if given,
  then the client ``certfile``/``keyfile``. Because the files are read on every attempt, a rotated
  file is used by the next connection; :class:`WatchedFiles` decides when to force one.
  zkop turns kazoo's defaults round: certificates are always verified and the host name is checked
  (``check_hostname=True``) unless explicitly switched off.
* SASL follows kazoo's ``ConnectionHandler._authenticate_with_sasl`` (pure-sasl's
  ``SASLClient(host, service, mechanism, username, password, principal)``; for DIGEST-MD5 kazoo
  fixes the host to ``zk-sasl-md5`` like ZooKeeper's ``SecurityUtils``). GSSAPI uses the Kerberos
  environment of the process (``KRB5_CONFIG``, ``KRB5_CLIENT_KTNAME``, ``KRB5CCNAME``) through the
  ``gssapi`` package.
"""

from __future__ import annotations

import hashlib
import logging
import os
import ssl
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import AuthFailedError, KazooException
from kazoo.protocol.connection import ConnectionHandler

from zkop.zookeeper.threads import join_bounded

__all__ = [
    "SASL_MECHANISMS",
    "CredentialsError",
    "RotationWatcher",
    "SaslConnectionHandler",
    "WatchedFiles",
    "describe_connect_error",
    "install_sasl_handler",
    "read_digest_file",
    "read_sasl_credentials",
    "sasl_options",
    "sasl_principals",
    "x509_subject",
]

log = logging.getLogger(__name__)

#: The SASL mechanisms zkop offers (ZooKeeper's ``SaslServerCallbackHandler`` supports both).
SASL_MECHANISMS = ("DIGEST-MD5", "GSSAPI")


class CredentialsError(ValueError):
    """A credentials file is missing or malformed; the message names the file and what is wrong."""


def read_sasl_credentials(path: str) -> tuple[str, str]:
    """``(user, password)`` from a file holding ``user:password`` (one line, as mounted from a Secret).

    The password may contain ``:``; surrounding white space (a trailing newline) is dropped.

    Raises:
        CredentialsError: the file cannot be read or holds no ``user:password``.
    """
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read().strip()
    except OSError as err:
        raise CredentialsError(f"SASL credentials file {path}: {err.strerror or err}") from None
    user, sep, password = text.partition(":")
    if not sep or not user or not password:
        raise CredentialsError(f"SASL credentials file {path}: expected 'user:password'")
    return user, password


def read_digest_file(path: str) -> tuple[tuple[str, str], ...]:
    """kazoo ``auth_data`` from a file holding digest credentials ``user:password``.

    A missing file means no authentication (the Deployment mounts the Secret as an optional volume).

    Raises:
        CredentialsError: the file exists but holds no ``user:password``, or cannot be read.
    """
    try:
        with open(path, encoding="utf-8") as f:
            credential = f.read().strip()
    except FileNotFoundError:
        return ()
    except OSError as err:
        raise CredentialsError(f"digest credentials file {path}: {err.strerror or err}") from None
    if ":" not in credential:
        raise CredentialsError(f"digest credentials file {path}: expected 'user:password'")
    return (("digest", credential),)


def sasl_options(mechanism: str | None, credentials_file: str | None, principal: str | None = None,
                 service: str = "zookeeper") -> dict[str, Any] | None:
    """kazoo's ``sasl_options`` for ``mechanism`` (``None`` when SASL is off).

    DIGEST-MD5 → ``{"mechanism", "service", "username", "password"}`` read from ``credentials_file``;
    GSSAPI → ``{"mechanism", "service"}`` plus ``"principal"`` when given (else the default principal
    of the credentials cache or client keytab).

    Raises:
        CredentialsError: unknown mechanism, or DIGEST-MD5 without a readable credentials file.
    """
    if mechanism is None:
        return None
    if mechanism not in SASL_MECHANISMS:
        raise CredentialsError(f"SASL mechanism {mechanism!r}: want one of {', '.join(SASL_MECHANISMS)}")
    options: dict[str, Any] = {"mechanism": mechanism, "service": service}
    if mechanism == "DIGEST-MD5":
        if not credentials_file:
            raise CredentialsError("SASL DIGEST-MD5 needs a credentials file (user:password)")
        options["username"], options["password"] = read_sasl_credentials(credentials_file)
    elif principal:
        options["principal"] = principal
    return options


def describe_connect_error(err: BaseException, address: str) -> str:
    """One line naming why a connection attempt to ``address`` (``host:port``) failed.

    Certificate failures come from OpenSSL's verify result (``ssl.SSLCertVerificationError``:
    ``verify_message`` is e.g. ``"unable to get local issuer certificate"`` or
    ``"Hostname mismatch, certificate is not valid for 'x'."``).
    """
    if isinstance(err, ssl.SSLCertVerificationError):
        reason = str(err.verify_message or err.reason or err)
        lowered = reason.lower()
        if "mismatch" in lowered:
            return (f"TLS to {address}: host name mismatch ({reason.rstrip('.')}); connect with a name the "
                    "server certificate lists, or --zk-tls-insecure-skip-hostname-verify")
        if "expired" in lowered:
            return f"TLS to {address}: the server certificate has expired ({reason})"
        return (f"TLS to {address}: the server certificate is not trusted ({reason}); give its CA with "
                "--zk-tls-ca-file or add it to the system trust store")
    if isinstance(err, (FileNotFoundError, PermissionError)) or (
            isinstance(err, ssl.SSLError) and ("PEM" in str(err.reason) or "KEY_VALUES_MISMATCH" in str(err.reason))):
        # kazoo loads the CA, certificate and key files on every attempt (before any socket I/O).
        return (f"TLS to {address}: cannot load the TLS files (--zk-tls-ca-file, --zk-tls-cert-file, "
                f"--zk-tls-key-file): {getattr(err, 'strerror', None) or err}")
    if isinstance(err, ssl.SSLError):
        reason = err.reason or str(err)
        if "CERTIFICATE" in str(reason).upper() or "ALERT" in str(reason).upper():
            return (f"TLS to {address}: the server refused the handshake ({reason}); it may require a client "
                    "certificate its CA trusts (--zk-tls-cert-file/--zk-tls-key-file)")
        return f"TLS to {address}: handshake failed ({reason}); is it a TLS port (secureClientPort)?"
    if isinstance(err, OSError):
        return f"cannot connect to {address}: {err.strerror or err}"
    return f"cannot connect to {address}: {type(err).__name__}: {err}"


@dataclass
class _Seen:
    signature: tuple[int, int, int] | None  # (st_ino, st_size, st_mtime_ns) of the path, symlinks followed
    digest: bytes | None


class WatchedFiles:
    """Cheap change detection for mounted Secret files (certificates, keys, CA, credentials).

    A Kubernetes Secret volume is updated by swapping a ``..data`` symlink, so the file behind a path
    gets a new inode: :meth:`changed` stats each path (``os.stat``, symlinks followed) and reads and
    hashes (SHA-256) only a file whose ``(inode, size, mtime)`` moved, reporting it only when the
    content differs too. A missing file counts as a state of its own. Not thread-safe: call from one
    thread.
    """

    def __init__(self, paths: Iterable[str | None]) -> None:
        self.paths = tuple(sorted({p for p in paths if p}))
        self._seen = {path: self._look(path, None) for path in self.paths}

    @staticmethod
    def _look(path: str, before: _Seen | None) -> _Seen:
        try:
            st = os.stat(path)
        except OSError:
            return _Seen(None, None)
        signature = (st.st_ino, st.st_size, st.st_mtime_ns)
        if before is not None and before.signature == signature:
            return before
        try:
            with open(path, "rb") as f:
                digest = hashlib.sha256(f.read()).digest()
        except OSError:
            return _Seen(None, None)
        return _Seen(signature, digest)

    def changed(self) -> list[str]:
        """The paths whose content changed (or appeared/vanished) since the last call; remembers the new state."""
        result = []
        for path in self.paths:
            before = self._seen[path]
            now = self._look(path, before)
            if now.digest != before.digest:
                result.append(path)
            self._seen[path] = now
        return result


class RotationWatcher:
    """Checks :class:`WatchedFiles` every ``period`` seconds on a daemon thread and reports changes.

    ``on_change(paths)`` runs on the watcher's thread (it may block, e.g. to open a new session).
    :meth:`check` runs the same check now from any thread (kazoo's connection thread calls it before
    each connection attempt, so a reconnect uses and absorbs the new files); a lock serialises them.

    Args:
        period: seconds between checks (> 0).
        on_change: called with the changed paths, outside the lock.
    """

    def __init__(self, files: WatchedFiles, period: float,
                 on_change: Callable[[list[str]], None]) -> None:
        self.files = files
        self.period = period
        self._on_change = on_change
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._finished = False

    def check(self) -> list[str]:
        """The paths changed since the last check (see :meth:`WatchedFiles.changed`)."""
        with self._lock:
            return self.files.changed()

    def start(self) -> None:
        """Start the periodic thread (no-op without files, if already running or once stopped)."""
        if not self.files.paths or self._thread is not None or self._stop.is_set():
            return
        self._thread = threading.Thread(target=self._run, name="zk-credentials-watch", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the periodic thread and wait at most ``timeout`` seconds for it (and an ``on_change`` in progress).

        Idempotent; called on the watcher's own thread (from ``on_change``), it does not wait.
        """
        self._stop.set()
        join_bounded(self._thread, timeout)

    def ended(self) -> bool:
        """True if the thread ended before :meth:`stop` (an exception nothing caught): rotations go unseen.

        Decided by the thread's loop having returned, not by ``is_alive()``: a thread being started is not alive
        yet either, and a health check in that moment took it for dead (zkop exited 1 at start-up under load)."""
        return self._finished and not self._stop.is_set()

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.period):
                changed = self.check()
                if changed:
                    try:
                        self._on_change(changed)
                    except Exception:
                        log.exception("handling rotated credentials files failed")
        finally:
            self._finished = True


class SaslConnectionHandler(ConnectionHandler):  # type: ignore[misc]
    """kazoo's ``ConnectionHandler`` whose SASL failures all end as ``AuthFailedError``.

    With ``enforce.auth.enabled`` a ZooKeeper 3.8 server answers a failed SASL exchange with the
    error ``SessionClosedRequireSasl``; kazoo 2.11's ``_authenticate_with_sasl`` raises it, its
    connection loop has no handler for it ("Unhandled exception in connection loop") and the
    connection thread dies, leaving the client neither connected nor retrying. As
    ``AuthFailedError`` it takes kazoo's own path instead: state ``AUTH_FAILED`` (LOST), pending
    requests failed with ``AuthFailedError``, no further attempts.

    Attributes:
        sasl_failure: why the last exchange failed, one line (the server's refusal, or the client
            library's error such as GSSAPI's "No Kerberos credentials available"), or ``None``.
    """

    sasl_failure: str | None = None

    def _authenticate_with_sasl(self, host: str, timeout: float) -> None:
        try:
            super()._authenticate_with_sasl(host, timeout)
        except KazooException as err:
            cause = err.__cause__
            if cause is not None and str(cause):
                self.sasl_failure = f"{type(cause).__name__}: {cause}"
            elif isinstance(err, AuthFailedError):
                self.sasl_failure = str(err) or "the server closed the connection"
            else:
                self.sasl_failure = f"the server answered {type(err).__name__}"
            if isinstance(err, AuthFailedError):
                raise
            raise AuthFailedError(f"SASL authentication refused: {self.sasl_failure}") from err
        self.sasl_failure = None


def install_sasl_handler(client: Any) -> None:
    """Make ``client``'s connection a :class:`SaslConnectionHandler` (kazoo builds its own in ``__init__``)."""
    client._connection.__class__ = SaslConnectionHandler


#: OpenSSL long attribute names → the short names Java's ``X500Principal.getName()`` (RFC 2253) prints.
_RFC2253_NAMES = {"commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU", "countryName": "C",
                  "localityName": "L", "stateOrProvinceName": "ST", "domainComponent": "DC", "userId": "UID",
                  "streetAddress": "STREET"}


def _rfc2253_escape(value: str) -> str:
    escaped = "".join(f"\\{ch}" if ch in ',+"\\<>;' else ch for ch in value)
    if escaped.startswith(("#", " ")):
        escaped = "\\" + escaped
    return escaped[:-1] + "\\ " if escaped.endswith(" ") else escaped


def x509_subject(cert_file: str | None) -> str | None:
    """The ``x509`` ACL id ZooKeeper gives a client presenting ``cert_file`` (PEM), or ``None``.

    ZooKeeper's ``X509AuthenticationProvider`` uses ``X500Principal.getName()``: RFC 2253, most
    specific RDN first (``CN=zkop,OU=platform,O=Example``). The certificate is decoded with the
    standard library's OpenSSL binding (``ssl._ssl._test_decode_cert``); an unreadable file gives
    ``None`` (identity unknown).
    """
    if not cert_file:
        return None
    try:
        decoded = ssl._ssl._test_decode_cert(cert_file)  # type: ignore[attr-defined]
    except (OSError, ssl.SSLError, ValueError):
        return None
    rdns = []
    for rdn in reversed(decoded.get("subject", ())):
        rdns.append("+".join(f"{_RFC2253_NAMES.get(key, key)}={_rfc2253_escape(value)}" for key, value in rdn))
    return ",".join(rdns) or None


def sasl_principals(mechanism: str | None, credentials_file: str | None, principal: str | None) -> tuple[str, ...]:
    """The ``sasl`` ACL ids a SASL login may hold: the DIGEST-MD5 user, or the GSSAPI principal both
    as given and reduced to its primary (``zkop/host@REALM`` → ``zkop``, what the server keeps with
    ``kerberos.removeHostFromPrincipal`` and ``kerberos.removeRealmFromPrincipal``). Empty if unknown."""
    if mechanism == "DIGEST-MD5" and credentials_file:
        try:
            return (read_sasl_credentials(credentials_file)[0],)
        except CredentialsError:
            return ()
    if mechanism == "GSSAPI" and principal:
        primary = principal.split("@", 1)[0].split("/", 1)[0]
        return tuple(dict.fromkeys((principal, primary)))
    return ()
