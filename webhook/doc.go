// Package webhook is the admission webhook for core.rukpak.io: it keeps a
// Bundle's spec immutable and rejects Bundle and BundleDeployment sources that
// the CRD schema cannot rule out (paths leaving their root, mutable
// ConfigMaps, Secrets and ConfigMaps the requesting user may not get, asked
// of the API server with a SubjectAccessReview), and writes to
// BundleDeployments by users who may not act as the identity they install
// as, or who lack the verb a steering annotation takes (serviceaccount.go).
// A third webhook refuses a hand edit of a release-owned CRD that breaks
// its stored objects, with the provisioner's CRD upgrade check (crd.go).
//
// The shipped configuration (manifests/base/webhook) sends only creates,
// spec changes and changes of the steering annotations and shard label here
// (matchConditions): other metadata and status updates never depend on the
// webhook being up.
package webhook
