#!/usr/bin/env bash
# Set zkop's release version: hack/set-version.sh 0.2.0
#
# The version is written once, in pyproject.toml ([project] version); zkop.__version__ reads it
# from the installed package's metadata. This script carries it to the two places that cannot
# read it: the Dockerfile's VERSION default (the image label), the kustomize newTag in
# manifests/default/kustomization.yaml (the image the install uses) and the Helm chart's version and
# appVersion (charts/zkop/Chart.yaml). The release workflow tags
# the image with the same version and refuses a git tag that differs (docs/release.md).
# tests/image/test_release_versions.py fails when the places disagree.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:-}
semver='^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$'
if ! [[ $version =~ $semver ]]; then
  echo "usage: hack/set-version.sh MAJOR.MINOR.PATCH[-PRERELEASE]  (semantic version, no leading v)" >&2
  exit 2
fi
sed -i -E "0,/^version = \"[^\"]*\"/s//version = \"$version\"/" pyproject.toml
sed -i -E "s/^ARG VERSION=.*/ARG VERSION=$version/" Dockerfile
sed -i -E "s/^(    newTag: )\"[^\"]*\"/\1\"$version\"/" manifests/default/kustomization.yaml
sed -i -E "s/^version: .*/version: $version/; s/^appVersion: .*/appVersion: \"$version\"/" charts/zkop/Chart.yaml
if [ -x .venv/bin/pip ]; then
  # zkop.__version__ comes from the installed metadata: refresh the editable install.
  .venv/bin/pip install -q --no-deps -e . >/dev/null
fi
echo "version $version: pyproject.toml, Dockerfile, manifests/default/kustomization.yaml, charts/zkop/Chart.yaml"
echo "next: move CHANGELOG.md's Unreleased entries under [$version] - $(date -u +%Y-%m-%d) (docs/release.md)"
