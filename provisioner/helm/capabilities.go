package helm

import (
	"fmt"
	"path"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/yaml"
)

// Capabilities are the capabilities Helm's install action renders with:
// the cluster's (as action.Configuration builds them from discovery), plus
// the group versions and kinds of crds, which the action creates before it
// asks discovery (pass none for an upgrade, which leaves crds/ alone). Set
// them as the action configuration's Capabilities and give them to Freeze,
// so both render for the same cluster.
func Capabilities(dc discovery.CachedDiscoveryInterface, crds []chart.CRD) (*chartutil.Capabilities, error) {
	dc.Invalidate()
	v, err := dc.ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("getting the server version: %w", err)
	}
	apis, err := action.GetVersionSet(dc)
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		// An orphaned API service only warns in Helm.
		return nil, fmt.Errorf("getting the API versions: %w", err)
	}
	return withCRDs(&chartutil.Capabilities{
		APIVersions: apis,
		KubeVersion: chartutil.KubeVersion{Version: v.GitVersion, Major: v.Major, Minor: v.Minor},
		HelmVersion: chartutil.DefaultCapabilities.HelmVersion,
	}, crds)
}

// withCRDs adds what crds add to caps.
func withCRDs(caps *chartutil.Capabilities, crds []chart.CRD) (*chartutil.Capabilities, error) {
	for _, crd := range crds {
		added, err := crdVersions(crd)
		if err != nil {
			return nil, err
		}
		for _, a := range added {
			if !caps.APIVersions.Has(a) {
				caps.APIVersions = append(caps.APIVersions, a)
			}
		}
	}
	return caps, nil
}

// crdVersions are the "group/version" and "group/version/Kind" entries
// discovery lists once the CRDs of one crds/ file are served.
func crdVersions(crd chart.CRD) ([]string, error) {
	var out []string
	for _, doc := range releaseutil.SplitManifests(string(crd.File.Data)) {
		var o struct {
			Kind string `json:"kind"`
			Spec struct {
				Group string `json:"group"`
				Names struct {
					Kind string `json:"kind"`
				} `json:"names"`
				Versions []struct {
					Name   string `json:"name"`
					Served bool   `json:"served"`
				} `json:"versions"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			return nil, fmt.Errorf("parsing %s: %w", crd.Filename, err)
		}
		if o.Kind != "CustomResourceDefinition" {
			continue
		}
		for _, v := range o.Spec.Versions {
			if v.Served {
				gv := path.Join(o.Spec.Group, v.Name)
				out = append(out, gv, path.Join(gv, o.Spec.Names.Kind))
			}
		}
	}
	return out, nil
}
