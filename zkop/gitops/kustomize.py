"""Building a kustomization the way Flux's kustomize-controller does, with the user's own kustomize.

A directory with a kustomization file is built as it says; one without gets a generated
kustomization listing every manifest below it, a sub-directory with its own kustomization file
standing for its built output (fluxcd/kustomize-controller ``generator.go``, fluxcd/pkg
``kustomize/kustomize_generator.go``); ``LoadRestrictionsNone``, no plugins. :func:`build` runs
``kustomize build`` or ``kubectl kustomize``, found on ``PATH`` or beside the running interpreter.
"""

from __future__ import annotations

import shutil
import subprocess
import sysconfig
from pathlib import Path

__all__ = ["KUSTOMIZATION_FILES", "KustomizeError", "build", "find_tool", "is_kustomization_dir", "kustomize_command"]

#: kustomize's ``konfig.RecognizedKustomizationFileNames()``, in its order of preference.
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")

#: Seconds one build may take before it is abandoned (a remote base that never answers).
BUILD_TIMEOUT_SECONDS = 120.0


class KustomizeError(Exception):
    """A kustomization cannot be built: no kustomize/kubectl to build it with, or the build failed."""


def is_kustomization_dir(directory: Path) -> bool:
    """True if ``directory`` holds one of :data:`KUSTOMIZATION_FILES` (kustomize then builds it)."""
    return any((directory / name).is_file() for name in KUSTOMIZATION_FILES)


def find_tool(tool: str) -> str | None:
    """``tool`` on ``PATH``, else beside the running interpreter (a virtualenv's ``bin/``); ``None`` if absent."""
    found = shutil.which(tool)
    if found is not None:
        return found
    return shutil.which(tool, path=sysconfig.get_path("scripts"))


def kustomize_command(directory: Path) -> list[str]:
    """The command that builds ``directory``: ``kustomize build`` if installed, else ``kubectl kustomize``.

    Raises:
        KustomizeError: neither ``kustomize`` nor ``kubectl`` is on ``PATH`` or beside the interpreter.
    """
    options = ["--load-restrictor", "LoadRestrictionsNone", str(directory)]
    kustomize = find_tool("kustomize")
    if kustomize is not None:
        return [kustomize, "build", *options]
    kubectl = find_tool("kubectl")
    if kubectl is not None:
        return [kubectl, "kustomize", *options]
    raise KustomizeError(
        f"{directory} holds a kustomization file, which Flux builds with kustomize; building it needs "
        "`kustomize` or `kubectl` on PATH (install one), or pass the built output instead: "
        f"`kubectl kustomize {directory} | zkop validate -f -`")


def build(directory: Path) -> str:
    """Build the kustomization in ``directory`` and return the YAML stream kustomize prints.

    Raises:
        KustomizeError: no tool to build with (see :func:`kustomize_command`), the build failed (the
            message carries kustomize's own error, e.g. a listed file that does not exist), or it took
            longer than :data:`BUILD_TIMEOUT_SECONDS`.
    """
    command = kustomize_command(directory)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_SECONDS,
                              check=False)
    except subprocess.TimeoutExpired:
        raise KustomizeError(f"{directory}: kustomize build took longer than {BUILD_TIMEOUT_SECONDS:g}s") from None
    except OSError as err:
        raise KustomizeError(f"{directory}: cannot run {command[0]}: {err}") from err
    if done.returncode != 0:
        detail = " ".join(done.stderr.split()) or f"exit status {done.returncode}"
        raise KustomizeError(f"{directory}: kustomize build failed: {detail}")
    return done.stdout
