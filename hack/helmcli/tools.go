//go:build tools

// Package tools pins the helm CLI the suites use to read releases as an
// admin would (`helm list`, `helm history`, `helm get values`): its version is
// the helm.sh/helm/v3 of the project's go.mod, built by hack/testbin.sh helm.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
