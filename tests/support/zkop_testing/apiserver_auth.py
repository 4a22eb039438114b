"""TokenReview, SubjectAccessReview and RBAC objects for the in-memory API server.

What kube-apiserver answers a component that delegates authentication and authorisation to it
(controller-runtime's metrics filter, kube-rbac-proxy, aggregated API servers):

* ``POST /apis/authentication.k8s.io/v1/tokenreviews`` [k8s pkg/registry/authentication/tokenreview/storage.go]:
  ``spec.token`` is required (400 ``BadRequest`` "token is required for TokenReview in
  authentication" otherwise); the answer is ``201`` with the spec echoed and ``status``:
  ``authenticated: true`` and ``user`` {username, uid, groups} for a token the double knows
  (:meth:`AuthRegistry.add_token`, :meth:`AuthRegistry.service_account_token`), else
  ``error: "invalid bearer token"`` and no ``authenticated``.  ``status.audiences`` is the
  request's ``spec.audiences`` or, when none, the API server's audience
  (``https://kubernetes.default.svc.cluster.local``); a token issued for other audiences is not
  authenticated.
* ``POST /apis/authorization.k8s.io/v1/subjectaccessreviews``
  [k8s pkg/registry/authorization/subjectaccessreview/rest.go, pkg/apis/authorization/validation]:
  exactly one of ``resourceAttributes`` and ``nonResourceAttributes``, and ``user`` or
  ``groups`` (422 otherwise); the decision comes from
  the RBAC objects stored in the double, evaluated like kube's RBAC authoriser
  [k8s plugin/pkg/auth/authorizer/rbac/rbac.go, pkg/registry/rbac/validation/rule.go]:

  - the group ``system:masters`` is always allowed (kube-apiserver's privileged-group authoriser);
  - ClusterRoleBindings grant their ClusterRole everywhere, RoleBindings grant their Role or
    ClusterRole in their namespace only (so non-resource URLs only through ClusterRoleBindings);
  - a subject matches by ``User`` name, ``Group`` name, or ``ServiceAccount``
    (``system:serviceaccount:<namespace>:<name>``; the namespace defaults to the binding's);
  - a rule matches on ``verbs`` (or ``*``); for resources on ``apiGroups``, ``resources``
    (``*``, ``<resource>/<subresource>``, ``*/<subresource>``) and ``resourceNames`` (empty = any);
    for non-resource URLs on ``nonResourceURLs`` (``*``, exact, or a prefix ending in ``*``);
  - allowed: ``status.allowed: true`` and ``reason`` ``RBAC: allowed by ClusterRoleBinding "b" of
    ClusterRole "r" to User "u"``; otherwise ``allowed: false`` with no reason (RBAC has no
    opinion; nothing is ever explicitly ``denied``).

  Not evaluated: aggregated ClusterRoles (``aggregationRule``; the rules stored on the object
  count, as the aggregation controller would have filled them), ``extra``, ``uid``, and a
  binding to a role that does not exist grants nothing (as in kube).

The double still accepts every token on its own requests: these reviews are answers for other
components, not a gate in front of the double.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from zkop_testing import apiserver_errors as errs
from zkop_testing.apiserver_errors import FieldError
from zkop_testing.apiserver_kinds import ResourceType, Strategy
from zkop_testing.apiserver_store import Store

__all__ = ["API_AUDIENCE", "RBAC_GROUP", "AuthRegistry", "UserInfo", "auth_resource_types"]

JSON = dict[str, Any]

RBAC_GROUP = "rbac.authorization.k8s.io"
AUTHENTICATION_GROUP = "authentication.k8s.io"
AUTHORIZATION_GROUP = "authorization.k8s.io"
#: kube-apiserver's default ``--api-audiences`` (the service account issuer).
API_AUDIENCE = "https://kubernetes.default.svc.cluster.local"
PRIVILEGED_GROUP = "system:masters"


@dataclass(frozen=True)
class UserInfo:
    """Who a token stands for (``TokenReview.status.user``); ``audiences`` empty = the API server's."""

    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    audiences: tuple[str, ...] = ()

    def to_json(self) -> JSON:
        user: JSON = {"username": self.username}
        if self.uid:
            user["uid"] = self.uid
        if self.groups:
            user["groups"] = list(self.groups)
        return user


class _RbacStrategy(Strategy):
    """RBAC kinds: stored as given (the client model prunes unknown fields), no generation."""

    def __init__(self, plural: str, kind: str, namespaced: bool) -> None:
        self.group = RBAC_GROUP
        self.plural = plural
        self.kind = kind
        self.namespaced = namespaced


class _ReviewStrategy(Strategy):
    """TokenReview / SubjectAccessReview: create-only, never stored (answered by :class:`AuthRegistry`)."""

    def __init__(self, group: str, plural: str, kind: str) -> None:
        self.group = group
        self.plural = plural
        self.kind = kind
        self.namespaced = False


def auth_resource_types() -> list[ResourceType]:
    """The endpoints this module adds: RBAC's four kinds, ``tokenreviews`` and ``subjectaccessreviews``."""
    rbac = [("clusterroles", "clusterrole", "ClusterRole", False),
            ("clusterrolebindings", "clusterrolebinding", "ClusterRoleBinding", False),
            ("roles", "role", "Role", True), ("rolebindings", "rolebinding", "RoleBinding", True)]
    types = [ResourceType(RBAC_GROUP, "v1", plural, singular, kind, namespaced,
                          _RbacStrategy(plural, kind, namespaced), model=f"V1{kind}")
             for plural, singular, kind, namespaced in rbac]
    types.append(ResourceType(AUTHENTICATION_GROUP, "v1", "tokenreviews", "tokenreview", "TokenReview", False,
                              _ReviewStrategy(AUTHENTICATION_GROUP, "tokenreviews", "TokenReview"),
                              verbs=("create",)))
    types.append(ResourceType(AUTHORIZATION_GROUP, "v1", "subjectaccessreviews", "subjectaccessreview",
                              "SubjectAccessReview", False,
                              _ReviewStrategy(AUTHORIZATION_GROUP, "subjectaccessreviews", "SubjectAccessReview"),
                              verbs=("create",)))
    return types


def _verb_matches(rule: Mapping[str, Any], verb: str) -> bool:
    verbs = rule.get("verbs") or []
    return "*" in verbs or verb in verbs


def _resource_rule_allows(rule: Mapping[str, Any], attrs: Mapping[str, Any]) -> bool:
    if not _verb_matches(rule, str(attrs.get("verb", ""))):
        return False
    groups = rule.get("apiGroups") or []
    if "*" not in groups and str(attrs.get("group", "")) not in groups:
        return False
    resource = str(attrs.get("resource", ""))
    subresource = str(attrs.get("subresource", ""))
    combined = f"{resource}/{subresource}" if subresource else resource
    resources = rule.get("resources") or []
    if not any(r == "*" or r == combined or (subresource and r == f"*/{subresource}") for r in resources):
        return False
    names = rule.get("resourceNames") or []
    return not names or str(attrs.get("name", "")) in names


def _non_resource_rule_allows(rule: Mapping[str, Any], attrs: Mapping[str, Any]) -> bool:
    if not _verb_matches(rule, str(attrs.get("verb", ""))):
        return False
    path = str(attrs.get("path", ""))
    for url in rule.get("nonResourceURLs") or []:
        if url == "*" or url == path or (url.endswith("*") and path.startswith(url[:-1])):
            return True
    return False


def _subject_matches(subject: Mapping[str, Any], binding_namespace: str, user: str, groups: Sequence[str]) -> bool:
    kind = subject.get("kind")
    name = str(subject.get("name", ""))
    if kind == "User":
        return name == user
    if kind == "Group":
        return name in groups
    if kind == "ServiceAccount":
        namespace = str(subject.get("namespace") or binding_namespace)
        return bool(namespace) and user == f"system:serviceaccount:{namespace}:{name}"
    return False


class AuthRegistry:
    """Known tokens and the review endpoints of one :class:`~zkop_testing.apiserver.ApiServer`.

    Creating it adds :func:`auth_resource_types` to ``store``'s endpoints (so they show in
    discovery and requests to them are logged like any other).

    Args:
        store: the API server's store; RBAC objects are read from it on every review.
    """

    def __init__(self, store: Store) -> None:
        self._store = store
        for rt in auth_resource_types():
            store._add_endpoint(rt)
        self._tokens: dict[str, UserInfo] = {}
        self._lock = threading.Lock()
        #: The reviews answered so far, as ``(kind, spec)`` (tests count the operator's cache hits).
        self.reviews: list[tuple[str, JSON]] = []

    # ------------------------------------------------------------------ tokens
    def add_token(self, token: str, username: str, groups: Iterable[str] = (), *, uid: str = "",
                  audiences: Iterable[str] = ()) -> None:
        """Make ``token`` authenticate as ``username`` (``system:authenticated`` is added to ``groups``)."""
        all_groups = tuple(dict.fromkeys([*groups, "system:authenticated"]))
        with self._lock:
            self._tokens[token] = UserInfo(username, uid, all_groups, tuple(audiences))

    def service_account_token(self, namespace: str, name: str, *, audiences: Iterable[str] = ()) -> str:
        """A new token of the ServiceAccount ``namespace/name`` (like ``kubectl create token``).

        It authenticates as ``system:serviceaccount:<namespace>:<name>`` in the groups
        ``system:serviceaccounts``, ``system:serviceaccounts:<namespace>`` and ``system:authenticated``.
        """
        token = "sa-" + secrets.token_urlsafe(24)
        self.add_token(token, f"system:serviceaccount:{namespace}:{name}",
                       ("system:serviceaccounts", f"system:serviceaccounts:{namespace}"),
                       uid=secrets.token_hex(16), audiences=audiences)
        return token

    def revoke(self, token: str) -> None:
        """Forget ``token`` (a deleted ServiceAccount, an expired token)."""
        with self._lock:
            self._tokens.pop(token, None)

    # ------------------------------------------------------------------ reviews
    def serves(self, rt: ResourceType) -> bool:
        """True for the review endpoints (answered by :meth:`review`, never stored)."""
        return isinstance(rt.strategy, _ReviewStrategy)

    def review(self, rt: ResourceType, body: Any) -> JSON:
        """Answer a TokenReview or SubjectAccessReview create (the 201 body).

        Raises:
            ApiError: 400 for a body that is not an object or a TokenReview without a token,
                422 for an invalid SubjectAccessReview spec.
        """
        if not isinstance(body, dict):
            raise errs.bad_request("the body of the request is not a JSON object")
        spec = body.get("spec") if isinstance(body.get("spec"), dict) else {}
        assert isinstance(spec, dict)
        with self._lock:
            self.reviews.append((rt.kind, dict(spec)))
        status = self._token_review(spec) if rt.kind == "TokenReview" else self._subject_access_review(spec)
        meta = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
        return {"kind": rt.kind, "apiVersion": rt.api_version,
                "metadata": {**(meta or {}), "creationTimestamp": None}, "spec": spec, "status": status}

    def _token_review(self, spec: Mapping[str, Any]) -> JSON:
        token = spec.get("token")
        if not token:
            raise errs.bad_request("token is required for TokenReview in authentication")
        wanted = [str(a) for a in spec.get("audiences") or []] or [API_AUDIENCE]
        with self._lock:
            user = self._tokens.get(str(token))
        if user is None:
            return {"user": {}, "error": "invalid bearer token"}
        issued_for = user.audiences or (API_AUDIENCE,)
        matching = [a for a in wanted if a in issued_for]
        if not matching:
            return {"user": {}, "error": "token audiences do not match the requested audiences"}
        return {"authenticated": True, "user": user.to_json(), "audiences": matching}

    def _subject_access_review(self, spec: Mapping[str, Any]) -> JSON:
        resource = spec.get("resourceAttributes")
        non_resource = spec.get("nonResourceAttributes")
        errors = []
        if resource is not None and non_resource is not None:
            errors.append(FieldError.invalid("spec.nonResourceAttributes", non_resource,
                                             "cannot be specified in combination with resourceAttributes"))
        if resource is None and non_resource is None:
            errors.append(FieldError.invalid("spec.resourceAttributes", None,
                                             "exactly one of nonResourceAttributes or resourceAttributes must be "
                                             "specified"))
        user = str(spec.get("user") or "")
        groups = [str(g) for g in spec.get("groups") or []]
        if not user and not groups:
            errors.append(FieldError.invalid("spec.user", user, "at least one of user or group must be specified"))
        if errors:
            raise errs.invalid(AUTHORIZATION_GROUP, "SubjectAccessReview", "", errors)
        if PRIVILEGED_GROUP in groups:
            return {"allowed": True}
        reason = self._rbac_allows(user, groups, resource, non_resource)
        return {"allowed": True, "reason": reason} if reason else {"allowed": False}

    def _rbac_allows(self, user: str, groups: Sequence[str], resource: Mapping[str, Any] | None,
                     non_resource: Mapping[str, Any] | None) -> str | None:
        """The RBAC reason when some binding allows the request, else ``None``."""
        namespace = str((resource or {}).get("namespace") or "")
        bindings = [(b, "ClusterRoleBinding") for b in self._list("clusterrolebindings", None)]
        if resource is not None and namespace:
            bindings += [(b, "RoleBinding") for b in self._list("rolebindings", namespace)]
        for binding, binding_kind in bindings:
            meta = binding.get("metadata") or {}
            binding_ns = str(meta.get("namespace") or "")
            subject = next((s for s in binding.get("subjects") or []
                            if _subject_matches(s, binding_ns, user, groups)), None)
            if subject is None:
                continue
            ref = binding.get("roleRef") or {}
            role = self._role(str(ref.get("kind", "")), str(ref.get("name", "")), binding_ns)
            if role is None:
                continue
            for rule in role.get("rules") or []:
                allowed = (_resource_rule_allows(rule, resource) if resource is not None
                           else _non_resource_rule_allows(rule, non_resource or {}))
                if allowed:
                    where = f' in namespace "{binding_ns}"' if binding_ns else ""
                    return (f'RBAC: allowed by {binding_kind} "{meta.get("name")}"{where} of {ref.get("kind")} '
                            f'"{ref.get("name")}" to {subject.get("kind")} "{subject.get("name")}"')
        return None

    def _list(self, plural: str, namespace: str | None) -> list[JSON]:
        rt = self._store.resolve(RBAC_GROUP, "v1", plural)
        assert rt is not None
        items: list[JSON] = self._store.list_objects(rt, namespace, {})["items"]
        return items

    def _role(self, kind: str, name: str, namespace: str) -> JSON | None:
        if kind == "ClusterRole":
            items = self._list("clusterroles", None)
        elif kind == "Role" and namespace:
            items = self._list("roles", namespace)
        else:
            return None
        role: JSON | None = next((r for r in items if (r.get("metadata") or {}).get("name") == name), None)
        return role
