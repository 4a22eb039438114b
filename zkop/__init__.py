"""zkop: a Kubernetes operator that puts ZooKeeper under GitOps."""

from importlib.metadata import PackageNotFoundError, version

try:
    # The one place a release's version is written is pyproject.toml; the image tag and the
    # manifests' newTag follow it (docs/release.md, tests/image/test_release_versions.py).
    __version__ = version("zkop")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0.0.0+unknown"
