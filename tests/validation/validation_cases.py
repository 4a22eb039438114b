"""One table of ZooKeeperConfigs, each accepted or rejected, for every layer that judges one.

The layers (``test_rejection_table.py`` runs each case through each):

* **server**: kube-apiserver of each tested minor (``POST … ?dryRun=All&fieldValidation=Strict``, as
  kubectl and Flux's dry-run ask): the CRD's OpenAPI schema and its CEL rules
  (``x-kubernetes-validations`` in ``manifests/crd/zookeeperconfigs.yaml``);
* **double**: the in-memory API server (``zkop_testing.apiserver``, CEL through cel-python), which must
  answer what the real server answers;
* **validate**: ``zkop validate`` on the case as a manifest file;
* **spec**: zkop's in-process check :func:`zkop.zkconfig.spec.parse_spec`, which the operator runs on every
  object it reconciles, including objects stored before the CRD had its rules.

A case names who refuses it (``by``):

* ``cel``: a CEL rule of the CRD; ``zkop validate`` *and* ``parse_spec`` refuse it too, with the same words
  (``fragment`` is found in each one's message), so an object stored before the rule existed is refused
  by the operator as it would be by the server;
* ``schema``: the OpenAPI schema or kube-apiserver itself (enum, ``required``, length, ``metadata.name``,
  unknown fields); ``zkop validate`` refuses it, ``parse_spec`` need not (the operator only sees objects
  the server accepted);
* ``zkop``: zkop alone, on purpose, with ``why``: the rule needs what only zkop knows (a flag's value, the
  decoded bytes), so the server accepts;
* ``""``: nobody, every layer accepts.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["CASES", "Case", "case_id", "manifest"]

By = Literal["", "cel", "schema", "zkop"]


def _digest(user: str, password: str) -> str:
    """``user:base64(sha1(user:password))``, what kazoo's ``make_digest_acl_credential`` makes."""
    return f"{user}:{base64.b64encode(hashlib.sha1(f'{user}:{password}'.encode()).digest()).decode()}"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@dataclass(frozen=True)
class Case:
    """One ZooKeeperConfig and who refuses it.

    Attributes:
        name: short, unique; also the object's ``metadata.name`` unless ``metadata`` sets one.
        spec: the ``spec`` (a unique ``path`` is added when it has none and ``"path"`` is not in ``drop``).
        by: who refuses it (see the module docstring); ``""``: accepted everywhere.
        fragment: found in every refusing layer's message, unless ``server``/``zkop`` override it.
        server: the fragment of the API server's message, where its words are not zkop's (OpenAPI's own).
        zkop: the fragment of ``zkop validate``'s (and ``parse_spec``'s) message, likewise.
        why: for ``by="zkop"``, why the CRD cannot say it.
        metadata: extra ``metadata`` fields (``name`` overrides the default).
        drop: top-level ``spec`` keys to leave out.
    """

    name: str
    spec: dict[str, Any] = field(default_factory=dict)
    by: By = ""
    fragment: str = ""
    server: str = ""
    zkop: str = ""
    why: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    drop: tuple[str, ...] = ()

    @property
    def accepted(self) -> bool:
        """Every layer accepts it."""
        return self.by == ""

    @property
    def server_rejects(self) -> bool:
        """kube-apiserver (and the double) refuse it."""
        return self.by in ("cel", "schema")

    def server_fragment(self) -> str:
        """What the API server's message must contain."""
        return self.server or self.fragment

    def zkop_fragment(self) -> str:
        """What ``zkop validate``'s (and ``parse_spec``'s) message must contain."""
        return self.zkop or self.fragment


def case_id(case: Case) -> str:
    """The pytest id of a case."""
    return case.name


def manifest(case: Case, namespace: str | None = None) -> dict[str, Any]:
    """The case as a ZooKeeperConfig object."""
    spec = dict(case.spec)
    if "path" not in spec and "path" not in case.drop:
        spec["path"] = f"/table/{case.name}"
    if "data" not in spec and "stringData" not in spec and "dataFrom" not in spec and "data" not in case.drop:
        spec["data"] = "dHJ1ZQ=="
    metadata: dict[str, Any] = {"name": case.name, **case.metadata}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {"apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperConfig", "metadata": metadata,
            "spec": spec}


_OPS = _digest("ops", "ops-password")
_ALL = ["read", "write", "create", "delete", "admin"]
_NOT_BASE64 = "is not valid base64 (RFC 4648, standard alphabet, padded)"
_EXACTLY_ONE = "exactly one of spec.data, spec.stringData and spec.dataFrom must be set"
_FORBIDDEN = "path contains a forbidden character"
_RESERVED = "paths under /zookeeper are reserved for the ZooKeeper server"

CASES: tuple[Case, ...] = (
    # ---------------------------------------------------------------- accepted
    Case("prototype", {"path": "/app/features/new-recommendation-engine/enabled", "data": "dHJ1ZQ=="}),
    Case("string-data", {"stringData": "grüße"}),
    Case("empty-data", {"data": ""}),
    Case("binary-data", {"data": _b64(bytes(range(256))), "encoding": "binary"}),
    Case("every-field", {"data": "dHJ1ZQ==", "encoding": "utf-8", "syncPolicy": "createOnly",
                         "deletionPolicy": "Orphan",
                         "acl": [{"scheme": "world", "id": "anyone", "permissions": _ALL}]}),
    Case("config-map-ref", {"dataFrom": {"configMapKeyRef": {"name": "app", "key": "flag"}}}),
    Case("secret-ref", {"dataFrom": {"secretKeyRef": {"name": "app", "key": "password"}}}),
    Case("adopt-existing", {"adoptExisting": True}),
    Case("null-data-beside-string-data", {"data": None, "stringData": "x"}),  # a null is pruned first
    Case("three-dots-segment", {"path": "/a/.../b"}),
    Case("dot-in-a-segment", {"path": "/a.b/c-d_e/.hidden/x."}),
    Case("zookeeperx", {"path": "/zookeeperx/a"}),
    Case("no-break-space", {"path": "/a/\u00a0"}),
    Case("non-ascii", {"path": "/ünïcode/ok/\u00a1/\ud7ff/\uf900/\uffef"}),
    Case("longest-path", {"path": "/" + "a" * 4095}),
    Case("acl-digest-and-world", {"acl": [{"scheme": "digest", "id": _OPS, "permissions": _ALL},
                                          {"scheme": "world", "id": "anyone", "permissions": ["read"]}]}),
    Case("acl-other-schemes", {"acl": [{"scheme": "ip", "id": "10.0.0.0/8", "permissions": ["read"]},
                                       {"scheme": "sasl", "id": "zkop@EXAMPLE.COM", "permissions": _ALL},
                                       {"scheme": "x509", "id": "CN=zkop,O=example", "permissions": ["read"]},
                                       {"scheme": "auth", "id": "", "permissions": ["read", "admin"]}]}),
    # zkop checks that an ACL does not lock it out only when it knows its identities (zkop run).
    Case("acl-without-zkop", {"acl": [{"scheme": "world", "id": "anyone", "permissions": ["read"]}]}),
    Case("acl-256-entries", {"acl": [{"scheme": "ip", "id": f"10.0.{i // 256}.{i % 256}", "permissions": ["read"]}
                                     for i in range(256)]}),
    # ---------------------------------------------------------------- spec.path (CEL)
    Case("path-empty", {"path": ""}, "cel", "path must be a non-empty string"),
    Case("path-relative", {"path": "app/x"}, "cel", "path must be absolute (start with '/')"),
    Case("path-root", {"path": "/"}, "cel", "the root znode '/' cannot be managed"),
    Case("path-trailing-slash", {"path": "/app/x/"}, "cel", "path must not end with '/'"),
    Case("path-empty-segment", {"path": "/app//x"}, "cel", "path contains an empty segment ('//')"),
    Case("path-dot-segment", {"path": "/app/./x"}, "cel", "path contains a relative segment"),
    Case("path-dot-dot-segment", {"path": "/app/../x"}, "cel", "path contains a relative segment"),
    Case("path-dot-dot-last", {"path": "/app/.."}, "cel", "path contains a relative segment"),
    Case("path-dot-last", {"path": "/app/."}, "cel", "path contains a relative segment"),
    Case("path-nul", {"path": "/a\x00b"}, "cel", _FORBIDDEN),
    Case("path-control", {"path": "/a\x01"}, "cel", _FORBIDDEN),
    Case("path-unit-separator", {"path": "/a\x1f"}, "cel", _FORBIDDEN),
    Case("path-newline", {"path": "/a\nb"}, "cel", _FORBIDDEN),
    Case("path-delete", {"path": "/a\x7f"}, "cel", _FORBIDDEN),
    Case("path-c1-control", {"path": "/a\x9f"}, "cel", _FORBIDDEN),
    Case("path-private-use", {"path": "/a\ue000"}, "cel", _FORBIDDEN),
    Case("path-private-use-last", {"path": "/a\uf8ff"}, "cel", _FORBIDDEN),
    Case("path-specials", {"path": "/a\ufff0"}, "cel", _FORBIDDEN),
    Case("path-replacement-character", {"path": "/a\ufffd"}, "cel", _FORBIDDEN),
    Case("path-noncharacter", {"path": "/a\uffff"}, "cel", _FORBIDDEN),
    Case("path-astral", {"path": "/a\U0001f600"}, "cel", _FORBIDDEN),
    # JSON's "\ud800": kube-apiserver decodes a lone surrogate to U+FFFD, zkop sees U+D800; both refuse it.
    Case("path-lone-surrogate", {"path": "/a\ud800"}, "cel", _FORBIDDEN),
    Case("path-reserved", {"path": "/zookeeper"}, "cel", _RESERVED),
    Case("path-under-reserved", {"path": "/zookeeper/quota/x"}, "cel", _RESERVED),
    # ---------------------------------------------------------------- data, the data source (CEL)
    Case("none-of-the-three", {}, "cel", _EXACTLY_ONE, drop=("data",)),
    Case("data-and-string-data", {"data": "dHJ1ZQ==", "stringData": "true"}, "cel", _EXACTLY_ONE),
    Case("all-three", {"data": "", "stringData": "", "dataFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
         "cel", _EXACTLY_ONE),
    Case("data-from-empty", {"dataFrom": {}}, "cel", "exactly one of configMapKeyRef and secretKeyRef must be set"),
    Case("data-from-both", {"dataFrom": {"configMapKeyRef": {"name": "a", "key": "k"},
                                         "secretKeyRef": {"name": "a", "key": "k"}}},
         "cel", "exactly one of configMapKeyRef and secretKeyRef must be set"),
    # ---------------------------------------------------------------- spec.acl (CEL)
    Case("acl-world-not-anyone", {"acl": [{"scheme": "world", "id": "everyone", "permissions": ["read"]}]},
         "cel", "the world scheme has the one id 'anyone', not 'everyone'"),
    Case("acl-digest-redacted", {"acl": [{"scheme": "digest", "id": "ops:x", "permissions": ["read"]}]},
         "cel", "digest id 'ops:x' is a redaction marker"),
    Case("acl-digest-password", {"acl": [{"scheme": "digest", "id": "ops:ops-password", "permissions": ["read"]}]},
         "cel", "digest id 'ops:ops-password' is not user:base64(sha1(user:password))"),
    Case("acl-digest-no-user", {"acl": [{"scheme": "digest", "id": _OPS[3:], "permissions": ["read"]}]},
         "cel", "is not user:base64(sha1(user:password))"),
    Case("acl-digest-not-base64",
         {"acl": [{"scheme": "digest", "id": "ops:" + "!" * 27 + "=", "permissions": ["read"]}]},
         "cel", "is not user:base64(sha1(user:password))"),
    Case("acl-second-entry", {"acl": [{"scheme": "digest", "id": _OPS, "permissions": _ALL},
                                      {"scheme": "world", "id": "all", "permissions": ["read"]}]},
         "cel", "the world scheme has the one id 'anyone', not 'all'"),
    # ---------------------------------------------------------------- OpenAPI schema and kube-apiserver itself
    Case("data-not-base64", {"data": "dHJ1ZQ=!"}, "schema", server="should match '^[A-Za-z0-9+/]*={0,2}$'",
         zkop="does not match the pattern ^[A-Za-z0-9+/]*={0,2}$"),
    Case("data-with-space", {"data": "dHJ1 ZQ=="}, "schema", "[A-Za-z0-9+/]*={0,2}$"),
    Case("path-too-long", {"path": "/" + "a" * 4096}, "schema", server="Too long: may not be more than 4096",
         zkop="must be at most 4096 characters long"),
    Case("path-missing", {}, "schema", server="spec.path: Required value", zkop="spec.path: is required",
         drop=("path",)),
    Case("path-not-a-string", {"path": 5}, "schema", "must be of type string"),
    Case("encoding-unknown", {"encoding": "latin1"}, "schema", "latin1"),
    Case("sync-policy-unknown", {"syncPolicy": "always"}, "schema", "always"),
    Case("deletion-policy-unknown", {"deletionPolicy": "delete"}, "schema", "delete"),
    Case("adopt-existing-not-a-boolean", {"adoptExisting": "yes"}, "schema", "must be of type boolean"),
    Case("data-from-key-missing", {"dataFrom": {"configMapKeyRef": {"name": "app"}}}, "schema",
         server="spec.dataFrom.configMapKeyRef.key: Required value", zkop="spec.dataFrom.configMapKeyRef.key"),
    Case("acl-empty", {"acl": []}, "schema", "at least 1 items"),
    Case("acl-257-entries", {"acl": [{"scheme": "ip", "id": f"10.1.{i // 256}.{i % 256}", "permissions": ["read"]}
                                     for i in range(257)]}, "schema",
         server="must have at most 256 items", zkop="must have at most 256 items"),
    Case("acl-unknown-scheme", {"acl": [{"scheme": "kerberos", "id": "x", "permissions": ["read"]}]}, "schema",
         "kerberos"),
    Case("acl-unknown-permission", {"acl": [{"scheme": "world", "id": "anyone", "permissions": ["execute"]}]},
         "schema", "execute"),
    Case("acl-no-permissions", {"acl": [{"scheme": "world", "id": "anyone", "permissions": []}]}, "schema",
         "at least 1 items"),
    Case("acl-entry-without-id", {"acl": [{"scheme": "world", "permissions": ["read"]}]}, "schema",
         server="spec.acl[0].id: Required value", zkop="spec.acl[0].id"),
    Case("acl-id-too-long", {"acl": [{"scheme": "sasl", "id": "u" * 4097, "permissions": ["read"]}]}, "schema",
         server="Too long: may not be more than 4096", zkop="must be at most 4096 characters long"),
    Case("unknown-field", {"strngData": "typo"}, "schema", "unknown field"),
    Case("name-not-dns", {}, "schema", "metadata.name", metadata={"name": "Bad_Name"}),
    # ---------------------------------------------------------------- zkop alone
    # size(self) % 4 == 0 would say it at no CEL cost, but the CRD has always taken unpadded values and the
    # project's own test manifests use them ("v1", "x"); zkop refuses them (InvalidSpec).
    Case("data-unpadded", {"data": "dHJ1ZQ"}, "zkop", _NOT_BASE64,
         why="the CRD has always accepted unpadded base64 in its pattern; manifests that did must stay accepted"),
    Case("data-one-char", {"data": "x"}, "zkop", _NOT_BASE64,
         why="the CRD has always accepted unpadded base64 in its pattern; manifests that did must stay accepted"),
    Case("data-not-utf-8", {"data": _b64(b"\xff\xfe")}, "zkop", "is not valid UTF-8",
         why="the bytes are base64 in the object; CEL in kube-apiserver cannot decode them"),
    Case("data-over-max-data-bytes", {"data": _b64(b"x" * 1_000_001), "encoding": "binary"}, "zkop",
         "more than the limit of 1000000 bytes",
         why="--max-data-bytes is zkop's flag, the CRD cannot know its value"),
)
