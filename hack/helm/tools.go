//go:build tools

// Package tools pins Helm, which hack/build-helm.sh builds for zkop's chart tests (its cmd/helm is a main package).
package tools

import _ "helm.sh/helm/v4/cmd/helm"
