"""Shared by the kind suite's conftest and tests: paths, names and a small ``kubectl`` wrapper."""

from __future__ import annotations

import select
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["E2E_DIR", "IMAGE", "REPO", "ZKOP_NAMESPACE", "ZK_AUTH", "ZK_NAMESPACE", "Kubectl"]

REPO = Path(__file__).resolve().parents[2]
E2E_DIR = Path(__file__).resolve().parent
IMAGE = "ghcr.io/example/zkop:e2e"
ZKOP_NAMESPACE = "zkop-system"
ZK_NAMESPACE = "zookeeper"
#: The digest identity of tests/e2e/overlay's Secret and of examples/acl.yaml.
ZK_AUTH = ("digest", "ops:ops-password")


class Kubectl:
    """``kubectl`` against the kind cluster, raising with kubectl's stderr on failure."""

    def __init__(self, binary: str, kubeconfig: Path) -> None:
        self.binary = binary
        self.kubeconfig = kubeconfig

    def __call__(self, *args: str, input: str | None = None, timeout: float = 300, check: bool = True) -> str:
        """Run ``kubectl args...`` and return its stdout."""
        done = subprocess.run([self.binary, "--kubeconfig", str(self.kubeconfig), *args], input=input,
                              capture_output=True, text=True, timeout=timeout, check=False)
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
        return done.stdout

    @contextmanager
    def port_forward(self, namespace: str, target: str, remote_port: int) -> Iterator[int]:
        """``kubectl port-forward`` to a free local port; yields that port."""
        proc = subprocess.Popen(
            [self.binary, "--kubeconfig", str(self.kubeconfig), "-n", namespace, "port-forward",
             "--address", "127.0.0.1", target, f":{remote_port}"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        try:
            assert proc.stdout is not None
            deadline = time.monotonic() + 60
            while True:
                remaining = deadline - time.monotonic()
                ready, _, _ = select.select([proc.stdout], [], [], max(remaining, 0))
                line = proc.stdout.readline() if ready else ""
                if "Forwarding from 127.0.0.1:" in line:
                    port = int(line.split("127.0.0.1:", 1)[1].split()[0])
                    break
                if not ready or proc.poll() is not None or remaining <= 0:
                    raise AssertionError(f"kubectl port-forward {target} did not start: {line.strip()}")
            yield port
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
