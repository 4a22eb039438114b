//go:build tools

// Package tools pins Flux's source-controller that hack/control-plane/build.sh --flux builds (its module root is
// a main package).
package tools

import _ "github.com/fluxcd/source-controller"
