//go:build tools

// Package tools pins Flux's kustomize-controller that hack/control-plane/build.sh --flux builds (its module root is
// a main package).
package tools

import _ "github.com/fluxcd/kustomize-controller"
