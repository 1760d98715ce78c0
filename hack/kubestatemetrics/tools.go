//go:build tools

// Package tools pins kube-state-metrics at the version the chart
// kube-state-metrics runs (its appVersion, 2.20.0), for the real-node
// suite's image rukpak.test/kube-state-metrics:v1
// (internal/nodeimages.KubeStateMetrics): registry.k8s.io cannot be
// pulled here, the module proxy serves the source. Its own module,
// because its dependencies are not the project's.
package tools

import _ "k8s.io/kube-state-metrics/v2"
