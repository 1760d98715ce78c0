// Package webhook is the admission webhook for core.rukpak.io: it keeps a
// Bundle's spec immutable and rejects Bundle and BundleDeployment sources that
// the CRD schema cannot rule out (paths leaving their root, mutable
// ConfigMaps, Secrets and ConfigMaps the requesting user may not get, asked
// of the API server with a SubjectAccessReview).
//
// The shipped configuration (manifests/base/webhook) sends only creates and
// spec changes here (matchConditions): metadata and status updates never
// depend on the webhook being up.
package webhook
