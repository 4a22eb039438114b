"""Names derived from znode paths: Kubernetes object names and export file paths.

Object names must be DNS-1123 subdomains, namespaces DNS-1123 labels (Kubernetes "Object Names
and IDs"; the checks are :mod:`zkop.kube.validation`'s, re-exported here). :func:`object_name` is
a pure function of the path:

* a path whose every segment is a dash-separated run of ``[a-z0-9]`` maps to its segments joined
  by ``.``: ``/app/features/new-engine/enabled`` → ``app.features.new-engine.enabled``;
* any other path is slugged and gets ``--`` plus the first 10 hex digits of the SHA-256 of the
  path: ``/App/Some.Name`` → ``app.some-name--3b1f…``.

Only names of the second kind contain ``--``, once, so two paths share a name only if their
digests collide (40 bits).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from pathlib import PurePosixPath

from zkop.kube.validation import DNS1123_LABEL_MAX, DNS1123_SUBDOMAIN_MAX, is_dns1123_label, is_dns1123_subdomain

__all__ = [
    "DNS1123_LABEL_MAX",
    "DNS1123_SUBDOMAIN_MAX",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "manifest_file",
    "object_name",
]

_PLAIN_SEGMENT = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
_DIGEST_CHARS = 10
_SEPARATOR = "--"

#: Longest encoded file or directory name written by :func:`manifest_file`, bytes
#: (most file systems allow 255; room is left for ``.yaml`` and editors' temp files).
MAX_FILE_COMPONENT = 200
_SAFE_FILE_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")


def _digest(path: str) -> str:
    return hashlib.sha256(path.encode("utf-8", errors="surrogatepass")).hexdigest()[:_DIGEST_CHARS]


def _slug(segment: str) -> str:
    """Lower-case ASCII approximation of a segment: accents dropped, anything else → ``-``, never empty."""
    folded = unicodedata.normalize("NFKD", segment.casefold())
    chars = [ch if ("a" <= ch <= "z" or "0" <= ch <= "9") else "-" for ch in folded if not unicodedata.combining(ch)]
    slug = re.sub("-+", "-", "".join(chars)).strip("-")
    return slug or "x"


def object_name(path: str) -> str:
    """The ZooKeeperConfig name for the znode ``path`` (a valid absolute path, not ``/``).

    Returns:
        A DNS-1123 subdomain, stable (a pure function of ``path``) and unique per path
        up to a 40-bit SHA-256 prefix collision; see the module docstring for the rule.
    """
    segments = path.strip("/").split("/")
    if all(_PLAIN_SEGMENT.fullmatch(s) for s in segments):
        name = ".".join(segments)
        if len(name) <= DNS1123_SUBDOMAIN_MAX:
            return name
    base = ".".join(_slug(s) for s in segments)
    base = base[: DNS1123_SUBDOMAIN_MAX - len(_SEPARATOR) - _DIGEST_CHARS].rstrip("-.")
    return f"{base}{_SEPARATOR}{_digest(path)}"


def _encode_component(segment: str) -> str:
    """Percent-encode one path segment for use as a file or directory name.

    ASCII letters, digits, ``-``, ``_`` and ``.`` are kept; every other byte of the
    segment's UTF-8 is ``%XX``. A leading ``.`` (hidden file) and the ``.`` of a
    trailing ``.yaml`` (which would clash with manifest files) are encoded too, so
    a directory name never equals a manifest file name. Over-long results are
    shortened and suffixed with ``~`` and a digest (``~`` is otherwise always encoded).
    """
    raw = segment.encode("utf-8", errors="surrogatepass")
    out = "".join(chr(b) if chr(b) in _SAFE_FILE_CHARS else f"%{b:02X}" for b in raw)
    if out.startswith("."):
        out = "%2E" + out[1:]
    if out.endswith(".yaml"):
        out = out[: -len(".yaml")] + "%2Eyaml"
    if len(out) > MAX_FILE_COMPONENT:
        cut = MAX_FILE_COMPONENT - 17
        while "%" in out[cut - 2 : cut]:  # do not split a %XX escape
            cut -= 1
        out = out[:cut] + "~" + hashlib.sha256(raw).hexdigest()[:16]
    return out


def manifest_file(path: str) -> PurePosixPath:
    """Relative file of the manifest for ``path`` in an export: the tree, mirrored.

    ``/app/features/x`` → ``app/features/x.yaml``; the manifest of a child of
    ``/app/features/x`` lives in the directory ``app/features/x/``. Segments are
    encoded by a reversible percent-encoding (see :func:`_encode_component`), so
    distinct paths never share a file on a case-sensitive file system.
    """
    parts = [_encode_component(s) for s in path.strip("/").split("/")]
    return PurePosixPath(*parts[:-1], parts[-1] + ".yaml")
