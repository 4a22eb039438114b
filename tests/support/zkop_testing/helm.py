"""The real Helm for tests: built from the Go module proxy by ``hack/build-helm.sh``, and zkop's chart rendered by it.

:func:`helm_binary` builds (or reuses, from a version-keyed cache outside the repository) Helm at the release
pinned in ``hack/helm/go.mod``; :func:`helm` runs it with a private ``HELM_*`` home under a directory the caller
gives, so no test reads or writes ``~/.config/helm``; :func:`template` renders ``charts/zkop`` and
:func:`kustomize_overlay` renders ``manifests/default`` with components through the venv's real ``kubectl``.
:func:`comparable` drops the few fields only one of the two tools writes, so the two renderings compare equal.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from zkop_testing.builds import run_build_script
from zkop_testing.kubectl import venv_kubectl

__all__ = ["CHART", "HELM_ONLY_LABELS", "HelmError", "build_before_tests", "comparable", "helm", "helm_binary",
           "kustomize_overlay", "template"]

REPO = Path(__file__).resolve().parents[3]
CHART = REPO / "charts" / "zkop"
BUILD_SCRIPT = REPO / "hack" / "build-helm.sh"
#: The labels Helm's chart adds to every object's metadata and manifests/ does not (Helm's conventions).
HELM_ONLY_LABELS = frozenset({"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance",
                              "app.kubernetes.io/version"})
Obj = dict[str, Any]
_BUILD_ERROR: list[str] = []


class HelmError(RuntimeError):
    """Building or running Helm failed (its output is in the message)."""


@functools.cache
def helm_binary() -> Path:
    """The ``helm`` binary, built by ``hack/build-helm.sh`` if missing (about 6 minutes cold, instant cached).

    Raises:
        HelmError: the build failed.
    """
    # Built once per session: a failed build is not tried again by every test.
    return run_build_script(BUILD_SCRIPT, error=HelmError, failures=_BUILD_ERROR)


def build_before_tests(items: list[Any], module_names: tuple[str, ...]) -> None:
    """Build Helm before the first test runs if one of ``items`` (pytest items) lives in a module named in
    ``module_names``, so that no per-test timeout counts a cold build; a failed build fails those tests instead
    (:func:`helm_binary` raises again for each)."""
    if any(Path(str(item.fspath)).name in module_names for item in items):
        with contextlib.suppress(HelmError):
            helm_binary()


def helm(home: Path, *args: str, kubeconfig: Path | None = None, timeout: float = 180) -> str:
    """Run ``helm args`` with its cache, config and data under ``home``; its stdout.

    Raises:
        HelmError: helm exited non-zero (stderr in the message).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("HELM_") and k != "KUBECONFIG"}
    env.update(HELM_CACHE_HOME=str(home / "cache"), HELM_CONFIG_HOME=str(home / "config"),
               HELM_DATA_HOME=str(home / "data"))
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    done = subprocess.run([str(helm_binary()), *args], capture_output=True, text=True, env=env, timeout=timeout,
                          check=False)
    if done.returncode != 0:
        raise HelmError(f"helm {' '.join(args)} failed ({done.returncode}):\n{done.stderr.strip()}")
    return done.stdout


def template(home: Path, *values: str, release: str = "zkop", namespace: str = "zkop-system",
             chart: Path = CHART, set_json: Sequence[str] = ()) -> list[Obj]:
    """``helm template release chart --namespace namespace --set v ... --set-json j ...`` for each of ``values``
    and ``set_json`` (``key=<JSON>``), parsed."""
    sets = [arg for value in values for arg in ("--set", value)]
    sets += [arg for value in set_json for arg in ("--set-json", value)]
    out = helm(home, "template", release, str(chart), "--namespace", namespace, *sets)
    return [doc for doc in yaml.safe_load_all(out) if doc]


def kustomize_overlay(directory: Path, components: Sequence[str] = (), base: Path | None = None,
                      extra: Obj | None = None, files: dict[str, str] | None = None) -> list[Obj]:
    """The real ``kubectl kustomize`` of an overlay in ``directory`` over ``base`` (``manifests/default``) with
    ``manifests/components/<c>`` for each of ``components`` and the fields of ``extra`` (e.g. a
    ``configMapGenerator`` reading ``files``, written next to it), parsed."""
    base = base or REPO / "manifests" / "default"
    directory.mkdir(parents=True, exist_ok=True)
    paths = [os.path.relpath(base, directory),
             *(os.path.relpath(base.parent / "components" / c, directory) for c in components)]
    kustomization = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                     "resources": paths[:1], "components": paths[1:], **(extra or {})}
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(kustomization), encoding="utf-8")
    for name, text in (files or {}).items():
        (directory / name).write_text(text, encoding="utf-8")
    out = subprocess.run([venv_kubectl(), "kustomize", str(directory)], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def comparable(obj: Obj) -> Obj:
    """``obj`` without what only Helm writes: :data:`HELM_ONLY_LABELS` and the CRD's ``helm.sh/resource-policy``."""
    out = copy.deepcopy(obj)
    metadata = out.get("metadata", {})
    labels = {k: v for k, v in metadata.get("labels", {}).items() if k not in HELM_ONLY_LABELS}
    if labels:
        metadata["labels"] = labels
    else:
        metadata.pop("labels", None)
    annotations = {k: v for k, v in metadata.get("annotations", {}).items() if k != "helm.sh/resource-policy"}
    if annotations:
        metadata["annotations"] = annotations
    else:
        metadata.pop("annotations", None)
    return out
