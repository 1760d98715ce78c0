//go:build tools

// Package tools pins prometheus-operator's admission webhook at the
// version the chart prometheus-operator-admission-webhook runs (its
// appVersion, 0.93.1), for the real-node suite's image
// rukpak.test/admission-webhook:v1 (internal/nodeimages.AdmissionWebhook):
// quay.io cannot be pulled here, the module proxy serves the source. Its
// own module, because its dependencies are not the project's. The
// replace directives of prometheus-operator's go.mod (its nested API and
// client modules, by path) do not apply here, so they are required at the
// same version.
package tools

import _ "github.com/prometheus-operator/prometheus-operator/cmd/admission-webhook"
