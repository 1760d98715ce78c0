package install

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// Config is a helm-class BundleDeployment's spec.config.
type Config struct {
	// InstallNamespace is the release's namespace: .Release.Namespace, and
	// where objects that name no namespace go. Required, and never the
	// provisioner's own namespace.
	InstallNamespace string `json:"installNamespace"`
	// Values is a YAML document of values, as RukPak v0.16 took them;
	// merged over ValuesFrom.
	Values string `json:"values,omitempty"`
	// ValuesFrom are ConfigMaps and Secrets of the provisioner's namespace
	// holding values documents, merged in order (later ones win).
	ValuesFrom []ValuesSource `json:"valuesFrom,omitempty"`
	// Timeout bounds each hook's run and Helm's wait for it (a Go
	// duration, at most maxTimeout); empty means the provisioner's.
	Timeout string `json:"timeout,omitempty"`

	timeout time.Duration
}

// ValuesSource is one ConfigMap or Secret key holding a values document.
type ValuesSource struct {
	// Kind is ConfigMap or Secret.
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Key defaults to values.yaml.
	Key string `json:"key,omitempty"`
	// Optional sources may be missing (not their key: a key missing from
	// an existing source is an error either way).
	Optional bool `json:"optional,omitempty"`
}

// LabelValuesSource marks a ConfigMap or Secret of the provisioner's
// namespace as one BundleDeployments may read values from. That namespace
// holds the provisioner's own credentials (registry and git secrets, the
// content server's keys): without the opt-in, anyone allowed to create a
// BundleDeployment could render them into an object they can read.
const LabelValuesSource = "core.rukpak.io/helm-values"

// Bounds on what values sources may cost one install.
const (
	maxValuesSources = 16
	// maxValuesBytes bounds all values documents of one BundleDeployment
	// together, spec.config.values included.
	maxValuesBytes = 1 << 20
	// maxTimeout bounds spec.config.timeout: a worker of the class waits
	// that long for a hook at most.
	maxTimeout       = 30 * time.Minute
	defaultValuesKey = "values.yaml"
)

// ParseConfig reads and checks a helm-class BundleDeployment's spec.config;
// unknown keys are refused, so a misspelt one is not silently ignored.
func ParseConfig(bd *rukpakv1alpha1.BundleDeployment, provisionerNamespace string) (*Config, error) {
	cfg := &Config{}
	if bd.Spec.Config != nil && len(bd.Spec.Config.Raw) > 0 {
		dec := json.NewDecoder(bytes.NewReader(bd.Spec.Config.Raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(cfg); err != nil {
			return nil, fmt.Errorf("invalid spec.config: %w", err)
		}
	}
	switch ns := cfg.InstallNamespace; {
	case ns == "":
		return nil, fmt.Errorf("spec.config.installNamespace is required for helm charts: it is the release's namespace (.Release.Namespace), where objects without a namespace go")
	case len(validation.IsDNS1123Label(ns)) > 0:
		return nil, fmt.Errorf("spec.config.installNamespace %q is not a valid namespace name: %s", ns, strings.Join(validation.IsDNS1123Label(ns), "; "))
	case ns == provisionerNamespace:
		return nil, fmt.Errorf("spec.config.installNamespace %q is the provisioner's namespace, which holds release records and credentials: charts may not install objects there", ns)
	}
	if cfg.Timeout != "" {
		d, err := time.ParseDuration(cfg.Timeout)
		if err != nil || d <= 0 || d > maxTimeout {
			return nil, fmt.Errorf("spec.config.timeout %q is not a duration between 0 and %s (e.g. 90s, 10m)", cfg.Timeout, maxTimeout)
		}
		cfg.timeout = d
	}
	if len(cfg.ValuesFrom) > maxValuesSources {
		return nil, fmt.Errorf("spec.config.valuesFrom has %d sources, more than the maximum %d", len(cfg.ValuesFrom), maxValuesSources)
	}
	for i, s := range cfg.ValuesFrom {
		field := fmt.Sprintf("spec.config.valuesFrom[%d]", i)
		if s.Kind != "ConfigMap" && s.Kind != "Secret" {
			return nil, fmt.Errorf("%s.kind %q is not ConfigMap or Secret", field, s.Kind)
		}
		if errs := validation.IsDNS1123Subdomain(s.Name); len(errs) > 0 {
			return nil, fmt.Errorf("%s.name %q is not a valid name: %s", field, s.Name, strings.Join(errs, "; "))
		}
		if s.Key != "" {
			if errs := validation.IsConfigMapKey(s.Key); len(errs) > 0 {
				return nil, fmt.Errorf("%s.key %q is not a valid key: %s", field, s.Key, strings.Join(errs, "; "))
			}
		}
	}
	return cfg, nil
}

// references reports whether cfg reads values from the kind's object name.
func (cfg *Config) references(kind, name string) bool {
	for _, s := range cfg.ValuesFrom {
		if s.Kind == kind && s.Name == name {
			return true
		}
	}
	return false
}

// MergedValues merges cfg's values documents: ValuesFrom in order, then Values,
// each over the ones before. Sources are read with r from namespace.
func (cfg *Config) MergedValues(ctx context.Context, r client.Reader, namespace string) (map[string]any, error) {
	budget := maxValuesBytes
	merged := map[string]any{}
	for i, s := range cfg.ValuesFrom {
		field := fmt.Sprintf("spec.config.valuesFrom[%d]", i)
		doc, found, err := readSource(ctx, r, namespace, s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		if !found {
			continue
		}
		if budget -= len(doc); budget < 0 {
			return nil, fmt.Errorf("%s: the values documents are larger than the maximum %d bytes together", field, maxValuesBytes)
		}
		vals, err := chartutil.ReadValues(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: %s %s/%s key %q is not a YAML map of values: %w", field, s.Kind, namespace, s.Name, key(s), err)
		}
		mergeValues(merged, vals)
	}
	if cfg.Values != "" {
		if budget -= len(cfg.Values); budget < 0 {
			return nil, fmt.Errorf("spec.config.values: the values documents are larger than the maximum %d bytes together", maxValuesBytes)
		}
		vals, err := chartutil.ReadValues([]byte(cfg.Values))
		if err != nil {
			return nil, fmt.Errorf("spec.config.values is not a YAML map of values: %w", err)
		}
		mergeValues(merged, vals)
	}
	return merged, nil
}

func key(s ValuesSource) string {
	if s.Key == "" {
		return defaultValuesKey
	}
	return s.Key
}

// readSource reads one values document; found is false for a missing
// optional source.
func readSource(ctx context.Context, r client.Reader, namespace string, s ValuesSource) (doc []byte, found bool, err error) {
	var (
		obj  client.Object
		data func() ([]byte, bool)
	)
	switch s.Kind {
	case "ConfigMap":
		cm := &corev1.ConfigMap{}
		obj = cm
		data = func() ([]byte, bool) {
			if v, ok := cm.Data[key(s)]; ok {
				return []byte(v), true
			}
			v, ok := cm.BinaryData[key(s)]
			return v, ok
		}
	default:
		sec := &corev1.Secret{}
		obj = sec
		data = func() ([]byte, bool) {
			v, ok := sec.Data[key(s)]
			return v, ok
		}
	}
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: s.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			if s.Optional {
				return nil, false, nil
			}
			return nil, false, fmt.Errorf("%s %s/%s not found", s.Kind, namespace, s.Name)
		}
		return nil, false, fmt.Errorf("reading %s %s/%s: %w", s.Kind, namespace, s.Name, err)
	}
	if obj.GetLabels()[LabelValuesSource] != "true" {
		return nil, false, fmt.Errorf("%s %s/%s is not labelled %s=true: only ConfigMaps and Secrets so labelled may hold values", s.Kind, namespace, s.Name, LabelValuesSource)
	}
	doc, ok := data()
	if !ok {
		return nil, false, fmt.Errorf("%s %s/%s has no key %q", s.Kind, namespace, s.Name, key(s))
	}
	return doc, true, nil
}

// mergeValues merges src into dst: maps merge key by key, anything else in
// src replaces what dst has.
func mergeValues(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeValues(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}
