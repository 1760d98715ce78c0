package bundledeployment

import (
	"errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// PendingError is an Installer's answer when what a reconcile asked of it
// goes on in the background (a chart rendered in the slow lane, hooks
// waited for): nothing failed, the Installed condition says what it waits
// for, and the Installer reconciles the BundleDeployment again when it is
// done (its SetupWatches), so no worker waits for it meanwhile.
type PendingError struct {
	// Message says what is waited for.
	Message string
}

func (e *PendingError) Error() string { return e.Message }

// pending returns err's PendingError, if it is one.
func pending(err error) (*PendingError, bool) {
	var p *PendingError
	ok := errors.As(err, &p)
	return p, ok
}

// pendingRecheck is how often a BundleDeployment whose install is pending
// is looked at even without the Installer's event: the message says what
// is waited for now.
const pendingRecheck = healthRecheck

// setPending shows what bd's pending install waits for.
func (r *Reconciler) setPending(bd *rukpakv1alpha1.BundleDeployment, p *PendingError) {
	r.set(bd, rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonInstallPending, p.Message)
}
