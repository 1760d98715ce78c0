package registry

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/rukpak-dev/rukpak/provisioner/plain"
)

// Bundle annotations, from metadata/annotations.yaml.
const (
	AnnotationsFile     = "metadata/annotations.yaml"
	AnnotationMediaType = "operators.operatorframework.io.bundle.mediatype.v1"
	AnnotationPackage   = "operators.operatorframework.io.bundle.package.v1"
	AnnotationChannels  = "operators.operatorframework.io.bundle.channels.v1"
	MediaType           = "registry+v1"
	// AnnotationSuggestedNS on the CSV names the default install namespace.
	AnnotationSuggestedNS = "operatorframework.io/suggested-namespace"
)

const (
	kindCSV = "ClusterServiceVersion"
	kindCRD = "CustomResourceDefinition"
)

// supportedKinds are the optional objects a registry+v1 bundle may carry
// besides its CSV and CRDs, mapped to whether the kind is namespaced.
//
// Source: operator-framework/operator-registry pkg/lib/bundle/
// supported_resources.go (supportedResources, behind IsSupported), which
// OLM v0 and v1 use: NetworkPolicy was added by operator-registry#1675
// (v1.55.0), PodMonitor by operator-registry#1795; ConsolePlugin is in the
// same list. We keep the same kinds; VerticalPodAutoscaler stays namespaced
// here (operator-registry marks it cluster-scoped, but the API is namespaced).
var supportedKinds = map[string]bool{
	"ClusterRole":           false,
	"ClusterRoleBinding":    false,
	"ConfigMap":             true,
	"ConsoleCLIDownload":    false,
	"ConsoleLink":           false,
	"ConsolePlugin":         false,
	"ConsoleQuickStart":     false,
	"ConsoleYAMLSample":     false,
	"NetworkPolicy":         true,
	"PodDisruptionBudget":   true,
	"PodMonitor":            true,
	"PriorityClass":         false,
	"PrometheusRule":        true,
	"Role":                  true,
	"RoleBinding":           true,
	"Secret":                true,
	"Service":               true,
	"ServiceAccount":        true,
	"ServiceMonitor":        true,
	"VerticalPodAutoscaler": true,
}

// bundle is a validated registry+v1 bundle.
type bundle struct {
	pkg      string
	csv      *clusterServiceVersion
	crds     []*unstructured.Unstructured
	others   []*unstructured.Unstructured
	channels []string
}

type annotationsFile struct {
	Annotations map[string]string `json:"annotations"`
}

// load reads and validates the registry+v1 bundle at the root of fsys,
// decoding its YAML within limits.
func load(fsys fs.FS, limits plain.Limits) (*bundle, error) {
	b := &bundle{}
	if err := b.readAnnotations(fsys, limits); err != nil {
		return nil, err
	}
	files, err := limits.Files(fsys)
	if err != nil {
		return nil, err
	}
	var csvs []*unstructured.Unstructured
	var csvFiles []string
	for _, f := range files {
		for _, obj := range f.Objects {
			kind := obj.GetKind()
			switch kind {
			case kindCSV:
				csvs = append(csvs, obj)
				csvFiles = append(csvFiles, f.Path)
			case kindCRD:
				b.crds = append(b.crds, obj)
			default:
				if _, ok := supportedKinds[kind]; !ok {
					return nil, fmt.Errorf("%s: object %s %q is of a kind registry+v1 bundles cannot contain; supported kinds are ClusterServiceVersion, CustomResourceDefinition, %s",
						f.Path, kind, obj.GetName(), strings.Join(sortedKinds(), ", "))
				}
				b.others = append(b.others, obj)
			}
		}
	}
	if len(csvs) != 1 {
		if len(csvs) == 0 {
			return nil, errors.New("found 0 ClusterServiceVersions in manifests: registry+v1 bundles must contain exactly one")
		}
		return nil, fmt.Errorf("found %d ClusterServiceVersions in manifests (%s): registry+v1 bundles must contain exactly one",
			len(csvs), strings.Join(csvFiles, ", "))
	}
	if b.csv, err = decodeCSV(csvs[0]); err != nil {
		return nil, fmt.Errorf("%s: %w", csvFiles[0], err)
	}
	if err := b.validateCSV(); err != nil {
		return nil, fmt.Errorf("ClusterServiceVersion %q: %w", b.csv.Metadata.Name, err)
	}
	return b, nil
}

func (b *bundle) readAnnotations(fsys fs.FS, limits plain.Limits) error {
	var af annotationsFile
	err := limits.UnmarshalFile(fsys, AnnotationsFile, &af)
	if errors.Is(err, fs.ErrNotExist) {
		// Same message whatever the filesystem (os says "no such file").
		err = &fs.PathError{Op: "open", Path: AnnotationsFile, Err: fs.ErrNotExist}
	}
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		return fmt.Errorf("read bundle annotations: %w", err)
	}
	if err != nil {
		return err
	}
	a := af.Annotations
	if mt, ok := a[AnnotationMediaType]; ok && mt != MediaType {
		return fmt.Errorf("%s: media type %q (%s) is not %q", AnnotationsFile, mt, AnnotationMediaType, MediaType)
	}
	b.pkg = strings.TrimSpace(a[AnnotationPackage])
	if b.pkg == "" {
		return fmt.Errorf("%s: no package name: annotation %q must be set", AnnotationsFile, AnnotationPackage)
	}
	for _, c := range strings.Split(a[AnnotationChannels], ",") {
		if c = strings.TrimSpace(c); c != "" {
			b.channels = append(b.channels, c)
		}
	}
	if len(b.channels) == 0 {
		return fmt.Errorf("%s: no channels: annotation %q must list at least one channel", AnnotationsFile, AnnotationChannels)
	}
	return nil
}

// validateCSV rejects what conversion cannot install faithfully, rather than
// installing an operator with pieces silently missing.
func (b *bundle) validateCSV() error {
	spec := b.csv.Spec
	if s := spec.Install.Strategy; s != "deployment" {
		return fmt.Errorf("spec.install.strategy %q is not supported: only \"deployment\" is", s)
	}
	for i, d := range spec.Install.Spec.Deployments {
		if d.Name == "" {
			return fmt.Errorf("spec.install.spec.deployments[%d] has no name", i)
		}
	}
	for _, field := range []struct {
		name  string
		perms []permission
	}{{"permissions", spec.Install.Spec.Permissions}, {"clusterPermissions", spec.Install.Spec.ClusterPermissions}} {
		for i, p := range field.perms {
			if p.ServiceAccountName == "" {
				return fmt.Errorf("spec.install.spec.%s[%d] has no serviceAccountName", field.name, i)
			}
		}
	}
	have := make(map[string]bool, len(b.crds))
	for _, crd := range b.crds {
		have[crd.GetName()] = true
	}
	var missing []string
	for _, owned := range spec.CustomResourceDefinitions.Owned {
		if !have[owned.Name] && !slices.Contains(missing, owned.Name) {
			missing = append(missing, owned.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("owned CustomResourceDefinitions missing from the bundle: %s", strings.Join(missing, ", "))
	}
	if err := b.validateWebhooks(); err != nil {
		return err
	}
	return b.validateAPIServices()
}

func sortedKinds() []string {
	return slices.Sorted(maps.Keys(supportedKinds))
}
