# syntax=docker/dockerfile:1
# zkop's image. Releases are built by .github/workflows/release.yaml (linux/amd64 and
# linux/arm64, published as ghcr.io/<owner>/zkop:<version>); by hand:
#   docker build --build-arg VERSION=$(python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])') -t zkop:dev .
# Without a Docker engine, hack/image-smoke.sh builds it with buildah (FROM a local stand-in for
# the base, passed as --build-arg PYTHON_IMAGE=...) and runs it as the Deployment does.
# The base is pinned by tag; pin it by digest too (python:...@sha256:...) in
# your registry mirror if you need byte-for-byte rebuilds.
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

# --- build: zkop's wheel and wheels of every pinned dependency -------------------------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY pyproject.toml README.md LICENSE constraints.txt ./
COPY zkop ./zkop
RUN pip wheel --wheel-dir /wheels -c constraints.txt .

# --- runtime: the wheels installed, no build tools, a non-root user --------------------------
FROM ${PYTHON_IMAGE}
# VERSION's default is pyproject.toml's version (tests/image/test_release_versions.py checks it).
ARG VERSION=0.2.0
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="zkop" \
      org.opencontainers.image.description="Kubernetes operator that puts ZooKeeper under GitOps" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="https://github.com/example/zkop" \
      org.opencontainers.image.url="https://github.com/example/zkop" \
      org.opencontainers.image.documentation="https://github.com/example/zkop/blob/main/docs/operations.md" \
      org.opencontainers.image.vendor="example" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
COPY constraints.txt /tmp/constraints.txt
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links=/wheels -c /tmp/constraints.txt zkop \
    && rm /tmp/constraints.txt \
    && zkop --version
# 65532: the conventional "nonroot" uid/gid (distroless); the Deployment runs as it too.
USER 65532:65532
WORKDIR /tmp
# /metrics: 8443 HTTPS in the install (--metrics-secure; the self-signed certificate is made
# with the base image's openssl, which ca-certificates depends on), 8080 plain HTTP otherwise;
# /healthz and /readyz: 8081.
EXPOSE 8443 8080 8081
ENTRYPOINT ["zkop"]
CMD ["run"]
