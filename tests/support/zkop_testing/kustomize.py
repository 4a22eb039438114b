"""Test support: a small kustomize renderer and RBAC utilities for zkop's manifests.

:func:`render` builds a kustomization directory the way ``kubectl kustomize`` does, for the
subset of kustomize that zkop's manifests use (resources, components, namespace, labels,
JSON6902 patches, images, literal/file generators without name hashes). Anything outside that
subset raises :class:`UnsupportedKustomizeFeature` instead of rendering something different;
``test_install_manifests.py`` also compares the result with the real ``kubectl kustomize``
wherever kubectl is installed.

:func:`rbac_rules` flattens the RBAC of a rendered install into ``(apiGroup, resource, verb)``
triples, for comparing with the requests zkop actually sends. CRD schemas: :mod:`zkop.kube.schema`.
"""

from __future__ import annotations

import base64
import copy
import re
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import jsonpatch
import yaml

__all__ = [
    "CLUSTER_SCOPED_KINDS",
    "REPO",
    "Obj",
    "UnsupportedKustomizeFeature",
    "containers",
    "find",
    "kubectl_kustomize",
    "load_documents",
    "object_id",
    "pod_spec",
    "rbac_rules",
    "render",
]

#: The repository root.
REPO = Path(__file__).resolve().parents[3]  # the repository (tests/support/zkop_testing/ → root)

Obj = dict[str, Any]

#: Kinds that the namespace transformer leaves alone (kustomize's list, the ones that matter here).
CLUSTER_SCOPED_KINDS = frozenset({
    "APIService", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "IngressClass",
    "MutatingWebhookConfiguration", "Namespace", "PersistentVolume", "PriorityClass", "RuntimeClass",
    "StorageClass", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
    "ValidatingWebhookConfiguration",
})

_KUSTOMIZATION_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
_FIELDS = frozenset({
    "apiVersion", "kind", "resources", "components", "namespace", "labels", "patches", "images",
    "secretGenerator", "configMapGenerator",
})
_WORKLOAD_KINDS = frozenset({"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"})


class UnsupportedKustomizeFeature(Exception):
    """The kustomization uses something :func:`render` does not implement."""


def load_documents(path: Path) -> list[Obj]:
    """Every non-empty YAML document in ``path``."""
    with path.open(encoding="utf-8") as f:
        return [doc for doc in yaml.safe_load_all(f) if doc]


def object_id(obj: Obj) -> tuple[str, str, str, str]:
    """``(group, kind, namespace, name)``: how kustomize tells resources apart."""
    group = obj["apiVersion"].rpartition("/")[0]
    meta = obj.get("metadata", {})
    return group, obj["kind"], meta.get("namespace", ""), meta["name"]


def find(rendered: Iterable[Obj], kind: str, name: str | None = None) -> list[Obj]:
    """The objects of ``kind`` (and ``name``, if given) in ``rendered``."""
    return [o for o in rendered if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]


# --------------------------------------------------------------------------------------------
# kustomize subset
# --------------------------------------------------------------------------------------------


def _kustomization(directory: Path) -> Obj:
    for name in _KUSTOMIZATION_NAMES:
        path = directory / name
        if path.is_file():
            docs = load_documents(path)
            k: Obj = docs[0] if docs else {}
            unknown = set(k) - _FIELDS
            if unknown:
                raise UnsupportedKustomizeFeature(f"{path}: fields {sorted(unknown)}")
            return k
    raise FileNotFoundError(f"no kustomization file in {directory}")


def render(directory: Path | str) -> list[Obj]:
    """Build the kustomization in ``directory`` like ``kubectl kustomize`` (see the module doc)."""
    return _build(Path(directory).resolve())


def _build(directory: Path) -> list[Obj]:
    k = _kustomization(directory)
    if k.get("kind") == "Component":
        raise UnsupportedKustomizeFeature(f"{directory} is a Component; list it under components:")
    return _accumulate(directory, k, [])


def _apply_component(directory: Path, objs: list[Obj]) -> list[Obj]:
    k = _kustomization(directory)
    if k.get("kind") != "Component":
        raise UnsupportedKustomizeFeature(f"{directory} is listed as a component but is not kind: Component")
    return _accumulate(directory, k, objs)


def _accumulate(directory: Path, k: Obj, objs: list[Obj]) -> list[Obj]:
    """kustomize's order: resources, then components, then generators, then the transformers."""
    for entry in k.get("resources", []):
        objs = _add(objs, _load_resource(directory, entry))
    for entry in k.get("components", []):
        objs = _apply_component((directory / entry).resolve(), objs)
    objs = _add(objs, _generate(directory, k))
    return _transform(directory, k, objs)


def _add(objs: list[Obj], new: list[Obj]) -> list[Obj]:
    seen = {object_id(o) for o in objs}
    for obj in new:
        oid = object_id(obj)
        if oid in seen:
            raise ValueError(f"duplicate resource {oid}")
        seen.add(oid)
    return [*objs, *new]


def _load_resource(directory: Path, entry: str) -> list[Obj]:
    if "://" in entry or entry.startswith("github.com/"):
        raise UnsupportedKustomizeFeature(f"remote resource {entry}")
    path = (directory / entry).resolve()
    if path.is_dir():
        return _build(path)
    if not path.is_relative_to(directory):
        raise ValueError(f"{entry}: files must be inside the kustomization root {directory}")
    return load_documents(path)


def _generate(directory: Path, k: Obj) -> list[Obj]:
    out: list[Obj] = []
    for kind, field in (("ConfigMap", "configMapGenerator"), ("Secret", "secretGenerator")):
        for gen in k.get(field, []):
            unknown = set(gen) - {"name", "namespace", "literals", "files", "options", "type"}
            options = gen.get("options", {})
            if unknown or not options.get("disableNameSuffixHash") or set(options) - {
                "disableNameSuffixHash", "labels", "annotations"
            }:
                raise UnsupportedKustomizeFeature(f"{field} {gen.get('name')}: only literals/files without hash")
            data: dict[str, str] = {}
            for literal in gen.get("literals", []):
                key, _, value = literal.partition("=")
                data[key] = value
            for spec in gen.get("files", []):
                key, sep, rel = spec.partition("=")
                file = directory / (rel if sep else key)
                data[key if sep else file.name] = file.read_text(encoding="utf-8")
            meta: Obj = {"name": gen["name"]}
            if gen.get("namespace"):
                meta["namespace"] = gen["namespace"]
            if options.get("labels"):
                meta["labels"] = dict(options["labels"])
            if options.get("annotations"):
                meta["annotations"] = dict(options["annotations"])
            obj: Obj = {"apiVersion": "v1", "kind": kind, "metadata": meta}
            if kind == "Secret":
                obj["type"] = gen.get("type", "Opaque")
                obj["data"] = {key: base64.b64encode(v.encode()).decode() for key, v in data.items()}
            else:
                obj["data"] = data
            out.append(obj)
    return out


def _transform(directory: Path, k: Obj, objs: list[Obj]) -> list[Obj]:
    objs = copy.deepcopy(objs)
    for patch in k.get("patches", []):
        _apply_patch(directory, patch, objs)
    if k.get("namespace"):
        _set_namespace(k["namespace"], objs)
    for label in k.get("labels", []):
        _add_labels(label, objs)
    for image in k.get("images", []):
        _set_image(image, objs)
    return objs


def _matches(target: Obj, obj: Obj) -> bool:
    unknown = set(target) - {"group", "version", "kind", "name", "namespace"}
    if unknown:
        raise UnsupportedKustomizeFeature(f"patch target selectors {sorted(unknown)}")
    group, _, version = obj["apiVersion"].rpartition("/")
    values = {"group": group, "version": version, "kind": obj["kind"], "name": obj["metadata"]["name"],
              "namespace": obj["metadata"].get("namespace", "")}
    return all(re.fullmatch(str(pattern), values[key]) for key, pattern in target.items())


def _apply_patch(directory: Path, spec: Obj, objs: list[Obj]) -> None:
    if set(spec) - {"path", "patch", "target"}:
        raise UnsupportedKustomizeFeature(f"patch fields {sorted(spec)}")
    text = spec["patch"] if "patch" in spec else (directory / spec["path"]).read_text(encoding="utf-8")
    body = yaml.safe_load(text)
    if not isinstance(body, list) or "target" not in spec:
        raise UnsupportedKustomizeFeature("only JSON6902 patches with a target are supported")
    matched = [o for o in objs if _matches(spec["target"], o)]
    if not matched:
        raise ValueError(f"patch target {spec['target']} matches nothing")
    for obj in matched:
        patched = jsonpatch.apply_patch(obj, body)
        obj.clear()
        obj.update(patched)


def _set_namespace(namespace: str, objs: list[Obj]) -> None:
    for obj in objs:
        kind = obj["kind"]
        if kind == "Namespace":
            obj["metadata"]["name"] = namespace
        elif kind not in CLUSTER_SCOPED_KINDS:
            obj["metadata"]["namespace"] = namespace
        if kind in ("RoleBinding", "ClusterRoleBinding"):
            for subject in obj.get("subjects", []):
                if subject.get("kind") == "ServiceAccount" and subject.get("name") == "default":
                    subject["namespace"] = namespace


def _add_labels(spec: Obj, objs: list[Obj]) -> None:
    if spec.get("includeSelectors"):
        raise UnsupportedKustomizeFeature("labels with includeSelectors: true")
    for obj in objs:
        obj["metadata"].setdefault("labels", {}).update(spec["pairs"])
        if spec.get("includeTemplates") and obj["kind"] in _WORKLOAD_KINDS:
            template = obj["spec"]["template"].setdefault("metadata", {})
            template.setdefault("labels", {}).update(spec["pairs"])


def _image_name(image: str) -> str:
    name = image.split("@", 1)[0]
    head, sep, tail = name.rpartition(":")
    return head if sep and "/" not in tail else name


def _set_image(spec: Obj, objs: list[Obj]) -> None:
    for obj in objs:
        for container in containers(obj):
            if _image_name(container["image"]) != spec["name"]:
                continue
            image = container["image"]
            name = spec.get("newName", spec["name"])
            if "digest" in spec:
                container["image"] = f"{name}@{spec['digest']}"
            elif "newTag" in spec:
                container["image"] = f"{name}:{spec['newTag']}"
            else:
                container["image"] = name + image[len(_image_name(image)):]


def pod_spec(obj: Obj) -> Obj | None:
    """The pod spec of a workload (Pod, Deployment, ..., CronJob), else ``None``."""
    if obj["kind"] == "Pod":
        spec: Obj = obj["spec"]
        return spec
    if obj["kind"] == "CronJob":
        spec = obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        return spec
    if obj["kind"] in _WORKLOAD_KINDS:
        spec = obj["spec"]["template"]["spec"]
        return spec
    return None


def containers(obj: Obj) -> Iterator[Obj]:
    """Every container and init container of a workload."""
    spec = pod_spec(obj)
    if spec is not None:
        yield from spec.get("initContainers", [])
        yield from spec.get("containers", [])


def kubectl_kustomize(directory: Path | str) -> list[Obj] | None:
    """``kubectl kustomize directory`` parsed, or ``None`` where kubectl is not installed."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return None
    out = subprocess.run([kubectl, "kustomize", str(directory)], check=True, capture_output=True, text=True,
                         timeout=60).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


# --------------------------------------------------------------------------------------------
# RBAC
# --------------------------------------------------------------------------------------------


def rbac_rules(rendered: Iterable[Obj], service_account: tuple[str, str] = ("zkop-system", "zkop"),
               ) -> set[tuple[str, str, str]]:
    """Every ``(apiGroup, resource, verb)`` the ServiceAccount is granted in ``rendered``.

    Follows ClusterRoleBindings and RoleBindings whose subjects include the ServiceAccount
    ``(namespace, name)`` to the ClusterRoles/Roles they reference (a Role's grants are only
    valid in its namespace; this flattens them all the same). ``resourceNames`` restrictions
    are ignored. Subresources appear as ``"zookeeperconfigs/status"``. Raises
    :class:`ValueError` for a binding to a role that is not in ``rendered``, and for an
    aggregated ClusterRole.
    """
    objs = list(rendered)
    roles = {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
             for o in objs if o["kind"] in ("Role", "ClusterRole")}
    out: set[tuple[str, str, str]] = set()
    sa_namespace, sa_name = service_account
    for binding in objs:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        binding_ns = binding["metadata"].get("namespace", "")
        if not any(s.get("kind") == "ServiceAccount" and s.get("name") == sa_name
                   and s.get("namespace", binding_ns) == sa_namespace for s in binding.get("subjects", [])):
            continue
        ref = binding["roleRef"]
        role_ns = binding_ns if ref["kind"] == "Role" else ""
        role = roles.get((ref["kind"], role_ns, ref["name"]))
        if role is None:
            raise ValueError(f"{binding['kind']} {binding['metadata']['name']} refers to missing {ref}")
        if role.get("aggregationRule"):
            raise ValueError(f"aggregated ClusterRole {ref['name']} cannot be flattened")
        for rule in role.get("rules", []):
            for group in rule.get("apiGroups", []):
                for resource in rule.get("resources", []):
                    for verb in rule.get("verbs", []):
                        out.add((group, resource, verb))
    return out
