package main

import (
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
)

// resolveFlagsFromBD are the resolve flags --from-bundledeployment fills
// from the BundleDeployment: giving one as well is an error, so the output
// is always what the provisioner would resolve.
var resolveFlagsFromBD = []string{"package", "version", "channel", "policy", "installed-version", "installed-bundle"}

// rukpakClient is a client of the cluster the content options name, for
// the project's kinds.
func rukpakClient(co contentOptions) (client.Client, error) {
	cfg, err := (diffOptions{kubeconfig: co.kubeconfig, config: co.config}).restConfig()
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := rukpakv1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return c, nil
}

// fromBundleDeployment takes the request from the catalog source of
// BundleDeployment name and the installed bundle from its status, as the
// provisioner does; without sources, the Catalogs it would use: those its
// selector matches that are serving.
func (o *catalogOptions) fromBundleDeployment(ctx context.Context, name string, sources []string) (resolveFlags, []string, error) {
	c, err := rukpakClient(o.source.content)
	if err != nil {
		return resolveFlags{}, nil, err
	}
	bd := &rukpakv1alpha1.BundleDeployment{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, bd); err != nil {
		return resolveFlags{}, nil, fmt.Errorf("reading BundleDeployment %q: %w", name, err)
	}
	src := bd.Spec.Template.Spec.Source.Catalog
	if bd.Spec.Template.Spec.Source.Type != rukpakv1alpha1.SourceTypeCatalog || src == nil {
		return resolveFlags{}, nil, fmt.Errorf("BundleDeployment %q has a source of type %q, not catalog", name, bd.Spec.Template.Spec.Source.Type)
	}
	f := resolveFlags{pkg: src.PackageName, versionRange: src.Version, channels: src.Channels, policy: string(src.UpgradeConstraintPolicy)}
	if f.policy == "" {
		f.policy = string(rukpakv1alpha1.UpgradeConstraintPolicyCatalogProvided)
	}
	if st := bd.Status.Catalog; st != nil && st.Installed != nil && st.Installed.Package == src.PackageName && bd.Status.ActiveBundle != "" {
		f.installedBundle, f.installedVersion, f.installedImage = st.Installed.Name, st.Installed.Version, st.Installed.Image
	}
	if len(sources) > 0 {
		return f, sources, nil
	}
	sel := labels.Everything()
	if src.Selector != nil {
		if sel, err = metav1.LabelSelectorAsSelector(src.Selector); err != nil {
			return resolveFlags{}, nil, fmt.Errorf("BundleDeployment %q: selector: %w", name, err)
		}
	}
	list := &rukpakv1alpha1.CatalogList{}
	if err := c.List(ctx, list, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return resolveFlags{}, nil, fmt.Errorf("listing Catalogs: %w", err)
	}
	for _, cat := range list.Items {
		if conditions.Is(cat.Status.Conditions, rukpakv1alpha1.TypeServing, metav1.ConditionTrue) {
			sources = append(sources, clusterCatalogPrefix+cat.Name)
		}
	}
	if len(sources) == 0 {
		return resolveFlags{}, nil, fmt.Errorf("BundleDeployment %q: no serving Catalog matches selector %q", name, sel.String())
	}
	slices.Sort(sources)
	return f, sources, nil
}
