//go:build tools

// Package tools pins the etcd server hack/control-plane.sh builds (its module root is a main package).
package tools

import _ "go.etcd.io/etcd/server/v3"
