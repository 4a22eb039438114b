"""The secure-metrics flags of ``zkop run`` (controller-runtime / kubebuilder names).

``--metrics-secure`` is kubebuilder's flag (``main.go``: "If set, the metrics endpoint is served
securely via HTTPS. Use --metrics-secure=false to use HTTP instead."), mapped to
controller-runtime's ``metricsserver.Options.SecureServing`` plus
``filters.WithAuthenticationAndAuthorization``.  As in the library its default is off; the
manifests turn it on.  ``--metrics-cert-dir`` (alias ``--metrics-cert-path``, kubebuilder's name),
``--metrics-cert-name`` and ``--metrics-cert-key`` are ``CertDir``, ``CertName`` and ``KeyName``.
"""

from __future__ import annotations

import argparse

__all__ = ["add_flags", "parse_bool"]

_TRUE = {"1", "t", "true", "yes", "y", "on"}
_FALSE = {"0", "f", "false", "no", "n", "off"}


def parse_bool(value: str) -> bool:
    """Go's ``strconv.ParseBool`` spellings (plus yes/no/on/off), for ``--flag=false``.

    Raises:
        argparse.ArgumentTypeError: anything else.
    """
    text = value.strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def add_flags(parser: argparse.ArgumentParser) -> None:
    """Add ``--metrics-secure`` and the certificate flags to ``parser`` (the ``zkop run`` parser)."""
    group = parser.add_argument_group("secure metrics (HTTPS, TokenReview + SubjectAccessReview)")
    group.add_argument("--metrics-secure", type=parse_bool, nargs="?", const=True, default=False,
                       metavar="{true,false}",
                       help="serve /metrics over HTTPS and require a bearer token the API server authenticates "
                            "(TokenReview) and authorises for get on /metrics (SubjectAccessReview); "
                            "--metrics-secure=false serves plain HTTP (default false; the manifests set it)")
    group.add_argument("--metrics-cert-dir", "--metrics-cert-path", dest="metrics_cert_dir", default=None,
                       metavar="DIR",
                       help="directory with the serving certificate and key (e.g. a cert-manager Secret), "
                            "reloaded when they change; default: a self-signed certificate made at start")
    group.add_argument("--metrics-cert-name", default="tls.crt", metavar="FILE",
                       help="certificate file in --metrics-cert-dir (default tls.crt)")
    group.add_argument("--metrics-cert-key", default="tls.key", metavar="FILE",
                       help="private key file in --metrics-cert-dir (default tls.key)")
