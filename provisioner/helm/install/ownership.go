package install

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"helm.sh/helm/v3/pkg/kube"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/resource"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/release"
)

// Which objects a helm-class action may patch and delete.
//
// Helm trusts the release record: an upgrade patches every object the
// previous revision lists (it checks ownership only of objects new to the
// release) and deletes those the new one drops, and an uninstall deletes
// every object the record lists. A record lists what the release once
// applied, not what it owns now: an object deleted since and installed by
// another release, or a record altered to list objects of someone else's
// choosing, would hand those over. So, as the plain class does
// (release.Manager's DeleteIfOwned), ownership is checked on the live
// object: it is the release's only if it carries Helm's ownership
// annotations naming the release and the owner label naming its
// BundleDeployment (the post-renderer stamps both on everything it
// installs). An upgrade that would patch an object that is not the
// release's is refused, naming them; objects an upgrade drops or an
// uninstall removes that are not the release's are left alone and
// reported.

// owner is a release whose objects an action may patch and delete.
type owner struct {
	name string
	// namespaces are the release's (its records'; an upgrade's new one):
	// Helm's release-namespace annotation must name one of them.
	namespaces []string

	mu sync.Mutex
	// kept are the objects left alone, described with why.
	kept []string
}

// notOwned says why live is not o's release's, or "" if it is.
func (o *owner) notOwned(live metav1.Object) string {
	ns, name := release.Owner(live)
	l := live.GetLabels()
	labelled := l[rukpakv1alpha1.LabelOwnerKind] == "BundleDeployment" && l[rukpakv1alpha1.LabelOwnerName] == o.name
	switch {
	case name == o.name && slices.Contains(o.namespaces, ns) && labelled:
		return ""
	case name != "" && (name != o.name || !slices.Contains(o.namespaces, ns)):
		return fmt.Sprintf("owned by release %s/%s", ns, name)
	case l[rukpakv1alpha1.LabelOwnerName] != "" && l[rukpakv1alpha1.LabelOwnerName] != o.name:
		return "owned by bundle deployment " + l[rukpakv1alpha1.LabelOwnerName]
	}
	return fmt.Sprintf("no ownership metadata of release %s/%s", o.namespaces[0], o.name)
}

func (o *owner) keep(info *resource.Info, why string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.kept = append(o.kept, fmt.Sprintf("%s (%s)", describeInfo(info), why))
}

// leftAlone returns the objects left alone so far, sorted.
func (o *owner) leftAlone() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := slices.Clone(o.kept)
	sort.Strings(out)
	return out
}

func describeInfo(info *resource.Info) string {
	kind := info.Mapping.GroupVersionKind.Kind
	if info.Namespace != "" {
		return fmt.Sprintf("%s %s/%s", kind, info.Namespace, info.Name)
	}
	return fmt.Sprintf("%s %s", kind, info.Name)
}

// live reads info's object from the API server; nil if it does not exist.
// info itself is left as it is: it is what the action applies.
func live(info *resource.Info) (metav1.Object, error) {
	obj, err := resource.NewHelper(info.Client, info.Mapping).Get(info.Namespace, info.Name)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading %s: %w", describeInfo(info), err)
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", describeInfo(info), err)
	}
	return m, nil
}

// shownObjects bounds the objects a refusal names, as the plain class's
// messages do.
const shownObjects = 10

// checkUpdates refuses an upgrade that would patch objects of target that
// the previous revision (original) lists but that are not the release's
// now. Objects new to the release Helm checks itself (its own rule:
// Helm's annotations naming the release).
func (o *owner) checkUpdates(original, target kube.ResourceList) error {
	var refused []string
	for _, info := range target.Intersect(original) {
		m, err := live(info)
		if err != nil {
			return err
		}
		if m == nil {
			continue
		}
		if why := o.notOwned(m); why != "" {
			refused = append(refused, fmt.Sprintf("%s exists and is not managed by this release (%s/%s): it is %s", describeInfo(info), o.namespaces[0], o.name, why))
		}
	}
	if len(refused) == 0 {
		return nil
	}
	sort.Strings(refused)
	msg := strings.Join(refused[:min(len(refused), shownObjects)], "; ")
	if len(refused) > shownObjects {
		msg += fmt.Sprintf("; and %d more", len(refused)-shownObjects)
	}
	return errors.New(msg + "; delete them or remove them from the chart")
}

// deleteAttempts bounds the retries of a delete whose object was replaced
// between the ownership check and the delete.
const deleteAttempts = 3

// deleteIfOwned deletes info's object if the live one is the release's
// and not kept by helm.sh/resource-policy, conditional on the checked
// object's UID (one re-created by someone else in between is not
// deleted); otherwise it leaves it and notes why. deleted is false when
// the object was left alone.
func (o *owner) deleteIfOwned(info *resource.Info, policy metav1.DeletionPropagation) (deleted bool, err error) {
	for range deleteAttempts {
		m, err := live(info)
		switch {
		case err != nil:
			return false, err
		case m == nil:
			return true, nil
		case !m.GetDeletionTimestamp().IsZero():
			return true, nil
		case m.GetAnnotations()[annotationResourcePolicy] == "keep":
			return false, nil
		}
		if why := o.notOwned(m); why != "" {
			o.keep(info, why)
			return false, nil
		}
		uid := m.GetUID()
		_, err = resource.NewHelper(info.Client, info.Mapping).DeleteWithOptions(info.Namespace, info.Name,
			&metav1.DeleteOptions{PropagationPolicy: &policy, Preconditions: &metav1.Preconditions{UID: &uid}})
		switch {
		case err == nil || apierrors.IsNotFound(err):
			return true, nil
		case !apierrors.IsConflict(err):
			return false, fmt.Errorf("deleting %s: %w", describeInfo(info), err)
		}
	}
	return false, fmt.Errorf("deleting %s: it kept being replaced between the ownership check and the delete", describeInfo(info))
}

// deleteConcurrency bounds the deletes in flight, as Helm's own (which
// deletes every object of a release at once) does not.
const deleteConcurrency = 16

// deleteOwned deletes the objects of resources that are the release's.
func (o *owner) deleteOwned(resources kube.ResourceList, policy metav1.DeletionPropagation) (*kube.Result, []error) {
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		res  = &kube.Result{}
		errs []error
		sem  = make(chan struct{}, deleteConcurrency)
	)
	for _, info := range resources {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			deleted, err := o.deleteIfOwned(info, policy)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs = append(errs, err)
			case deleted:
				res.Deleted = append(res.Deleted, info)
			}
		})
	}
	wg.Wait()
	return res, errs
}
