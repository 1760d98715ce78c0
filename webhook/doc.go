// Package webhook is the admission webhook for core.rukpak.io: it keeps a
// Bundle's spec immutable and rejects Bundle and BundleDeployment sources that
// the CRD schema cannot rule out (paths leaving their root, mutable
// ConfigMaps).
package webhook
