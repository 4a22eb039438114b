//go:build tools

// Package tools pins Stakater Reloader that hack/build-reloader.sh builds (its module root is a main package).
package tools

import _ "github.com/stakater/Reloader"
