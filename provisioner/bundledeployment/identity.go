package bundledeployment

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/provisioner/identity"
)

// Identity makes BundleDeployments install as a ServiceAccount
// (spec.serviceAccount, or the policy's default) instead of as the
// provisioner.
type Identity struct {
	Policy  identity.Policy
	Clients *identity.Clients
	Checker *identity.Checker
}

// ImpersonatingInstaller is an Installer that can install as another
// identity: As returns one whose objects are applied and deleted as sa,
// with c (sa's client) or, for installers that act through other clients
// (Helm's), with sa impersonated.
type ImpersonatingInstaller interface {
	As(sa identity.ServiceAccount, c client.Client) Installer
}

// As installs with c; release records stay the provisioner's.
func (i ObjectInstaller) As(_ identity.ServiceAccount, c client.Client) Installer {
	return ObjectInstaller{i.Manager.As(c)}
}

// maxPermissionsMessage bounds the rules the Installed condition lists
// (conditions allow 32 KiB): a bundle of many kinds in many namespaces
// lists the rest in events.
const maxPermissionsMessage = 16 << 10

// installAs returns the installer bd's objects are installed with and the
// client drift correction applies with. ok is false when nothing may be
// applied now: the policy refuses bd, or the identity lacks permissions
// for objs (the Installed condition lists exactly which rules); res says
// when to look again.
func (r *Reconciler) installAs(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, b *rukpakv1alpha1.Bundle, objs []*unstructured.Unstructured) (inst Installer, as client.Client, res ctrl.Result, ok bool, err error) {
	if r.Identity == nil {
		return r.installer(), r.Client, res, true, nil
	}
	sa, named, err := r.Identity.Policy.For(bd)
	if err != nil {
		// Nothing to retry until the spec changes.
		r.set(bd, rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonServiceAccountRequired, err.Error())
		return nil, nil, res, false, nil
	}
	if !named {
		return r.installer(), r.Client, res, true, nil
	}
	imp, can := r.installer().(ImpersonatingInstaller)
	if !can {
		msg := fmt.Sprintf("The %s provisioner cannot install as service account %s yet: remove spec.serviceAccount to install as the provisioner", r.Class, sa)
		r.set(bd, rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonInstallFailed, msg)
		return nil, nil, res, false, nil
	}
	as, err = r.Identity.Clients.For(sa)
	if err != nil {
		return nil, nil, res, false, err
	}
	missing, err := r.Identity.Checker.Missing(ctx, sa, as, objs)
	if err != nil {
		msg := fmt.Sprintf("Checking what service account %s may do failed; nothing was applied: %v", sa, err)
		r.set(bd, rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonInsufficientPermissions, msg)
		return nil, nil, res, false, fmt.Errorf("checking the permissions of service account %s: %w", sa, err)
	}
	if len(missing) > 0 {
		msg := fmt.Sprintf("Service account %s may not install bundle %q, so nothing was applied. Grant it these rules (checked again every %s, or at once with the %s annotation):%s",
			sa, b.Name, healthRecheck, rukpakv1alpha1.AnnotationReconcileRequestedAt, identity.Format(missing, maxPermissionsMessage))
		if c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypeInstalled); c == nil || c.Message != msg {
			r.permissionEvents(bd, sa, missing)
		}
		r.set(bd, rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonInsufficientPermissions, msg)
		// RBAC changes come with no event for this BundleDeployment.
		return nil, nil, ctrl.Result{RequeueAfter: healthRecheck}, false, nil
	}
	return imp.As(sa, as), as, res, true, nil
}

// permissionEvents records the missing rules, one event per namespace
// (related to it, so the events are not merged into one series) within the
// event note's limit.
func (r *Reconciler) permissionEvents(bd *rukpakv1alpha1.BundleDeployment, sa identity.ServiceAccount, missing []identity.Rule) {
	var order []string
	byNS := map[string][]identity.Rule{}
	for _, m := range missing {
		if _, ok := byNS[m.Namespace]; !ok {
			order = append(order, m.Namespace)
		}
		byNS[m.Namespace] = append(byNS[m.Namespace], m)
	}
	for _, ns := range order {
		note := fmt.Sprintf("Service account %s lacks:%s", sa, identity.Format(byNS[ns], maxNote-64))
		if ns == "" {
			r.event(bd, "Warning", rukpakv1alpha1.ReasonInsufficientPermissions, note)
			continue
		}
		related := &corev1.ObjectReference{APIVersion: "v1", Kind: "Namespace", Name: ns}
		r.eventRelated(bd, related, "Warning", rukpakv1alpha1.ReasonInsufficientPermissions, note)
	}
}

// recordInstalled writes into bd's status the identity its release was
// just installed with, which the uninstall will use (as installAs chose it
// for the same bd), and the config it was installed with, which a later
// change of in Manual mode waits for approval against.
func (r *Reconciler) recordInstalled(bd *rukpakv1alpha1.BundleDeployment) {
	bd.Status.InstalledConfig = ConfigHash(bd.Spec.Config)
	if r.Identity == nil {
		return
	}
	rec := &rukpakv1alpha1.InstalledIdentity{}
	if sa, named, err := r.Identity.Policy.For(bd); err == nil && named {
		rec.ServiceAccount = &rukpakv1alpha1.ServiceAccountReference{Namespace: sa.Namespace, Name: sa.Name}
	}
	bd.Status.InstalledAs = rec
}

// uninstaller is the installer bd's release is uninstalled with: the
// identity it was last installed with (status.installedAs), so an edit of
// spec.serviceAccount made after the last install, or a ServiceAccount
// deleted since, cannot turn the uninstall into the provisioner's (a
// cluster-admin's) act. Without a record (nothing installed, or installed
// before identities were recorded) it is the spec's identity, or the
// provisioner's when it names none (also when the policy requires one:
// whatever is installed then, the provisioner installed before the policy
// was set).
func (r *Reconciler) uninstaller(bd *rukpakv1alpha1.BundleDeployment) (Installer, error) {
	if r.Identity == nil {
		return r.installer(), nil
	}
	var sa identity.ServiceAccount
	var named bool
	if rec := bd.Status.InstalledAs; rec != nil {
		if rec.ServiceAccount != nil {
			sa, named = identity.ServiceAccount{Namespace: rec.ServiceAccount.Namespace, Name: rec.ServiceAccount.Name}, true
		}
	} else {
		var err error
		if sa, named, err = r.Identity.Policy.For(bd); err != nil {
			named = false
		}
	}
	if !named {
		return r.installer(), nil
	}
	imp, can := r.installer().(ImpersonatingInstaller)
	if !can {
		return r.installer(), nil
	}
	as, err := r.Identity.Clients.For(sa)
	if err != nil {
		return nil, err
	}
	return imp.As(sa, as), nil
}
