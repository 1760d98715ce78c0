package release

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// Rendered is what an installer that renders its content (the helm class)
// would apply on its next install, computed without applying anything, so
// the checks the plain class runs on its objects (identity permissions,
// CRD upgrade safety, the pivot preview) run on a chart's too.
type Rendered struct {
	// Objects are the release's objects, stamped and placed as installed.
	Objects []*unstructured.Unstructured
	// Hooks run around the install, upgrade or uninstall and are not part
	// of the release; CRDs (crds/) are created first when missing and never
	// updated, so they are set only for a first install.
	Hooks, CRDs []*unstructured.Unstructured
	// Namespace is the release's namespace, which the Objects' ownership
	// annotations name (the install namespace).
	Namespace string
	// Upgrade is true when a revision is deployed: the install is an
	// upgrade, running the pre-upgrade and post-upgrade hooks.
	Upgrade bool
	// Current is true when the release already holds Objects from the
	// same inputs: the next install changes nothing.
	Current bool
}

// All is every object the install creates or changes: CRDs, Objects and
// Hooks.
func (r *Rendered) All() []*unstructured.Unstructured {
	all := make([]*unstructured.Unstructured, 0, len(r.CRDs)+len(r.Objects)+len(r.Hooks))
	all = append(all, r.CRDs...)
	all = append(all, r.Objects...)
	return append(all, r.Hooks...)
}
