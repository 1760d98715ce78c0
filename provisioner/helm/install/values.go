package install

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rukpak-dev/rukpak/api/helmvalues"
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
	// holding values documents, merged in order (later ones win). The
	// field's name and tag are helmvalues' (the webhook reviews what it
	// decodes there), so both decode the same sources.
	ValuesFrom []helmvalues.Source `json:"valuesFrom,omitempty"`
	// Timeout bounds each hook's run and Helm's wait for it (a Go
	// duration, at most maxTimeout); empty means the provisioner's.
	Timeout string `json:"timeout,omitempty"`

	timeout time.Duration
}

// LabelValuesSource marks a ConfigMap or Secret of the provisioner's
// namespace as one BundleDeployments may read values from. That namespace
// holds the provisioner's own credentials (registry and git secrets, the
// content server's keys): without the opt-in, anyone allowed to create a
// BundleDeployment could render them into an object they can read.
const LabelValuesSource = "core.rukpak.io/helm-values"

// Bounds on what values sources may cost one install.
const (
	// maxValuesBytes bounds all values documents of one BundleDeployment
	// together, spec.config.values included.
	maxValuesBytes = 1 << 20
	// maxTimeout bounds spec.config.timeout: a worker of the class waits
	// that long for a hook at most.
	maxTimeout = 30 * time.Minute
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
	if errs := helmvalues.Validate(cfg.ValuesFrom); len(errs) > 0 {
		return nil, errs.ToAggregate()
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
// each over the ones before. Sources are read from namespace with r, which
// acts as who ("service account NS/NAME", "the provisioner"), named in
// messages.
//
// A source that does not exist, is not labelled LabelValuesSource=true, or
// may not be read by who fails with one message for all three: which one
// it is would tell a BundleDeployment's author whether a Secret or
// ConfigMap of the provisioner's namespace exists. An optional source is
// skipped when it does not exist or is not labelled (both alike, for the
// same reason), but not when reading it is refused: that is a missing
// permission, which silently installing the chart without its values
// would hide, and a refusal (decided by the authorizer on the name alone)
// tells nothing about existence.
func (cfg *Config) MergedValues(ctx context.Context, r client.Reader, namespace, who string) (map[string]any, error) {
	budget := maxValuesBytes
	merged := map[string]any{}
	for i, s := range cfg.ValuesFrom {
		field := fmt.Sprintf("spec.config.valuesFrom[%d]", i)
		doc, state, err := readSource(ctx, r, namespace, who, s)
		switch {
		case err != nil:
			return nil, fmt.Errorf("%s: %w", field, err)
		case state == refused && s.Optional:
			return nil, fmt.Errorf("%s: optional %s %s/%s may not be read by %s (an optional source is skipped when it does not exist or is not labelled %s=true, never when reading it is refused)",
				field, s.Kind, namespace, s.Name, who, LabelValuesSource)
		case state != usable && s.Optional:
			continue
		case state != usable:
			return nil, fmt.Errorf("%s: %s %s/%s does not exist, is not labelled %s=true, or may not be read by %s",
				field, s.Kind, namespace, s.Name, LabelValuesSource, who)
		}
		if budget -= len(doc); budget < 0 {
			return nil, fmt.Errorf("%s: the values documents are larger than the maximum %d bytes together", field, maxValuesBytes)
		}
		vals, err := chartutil.ReadValues(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: %s %s/%s key %q is not a YAML map of values: %w", field, s.Kind, namespace, s.Name, s.DataKey(), err)
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

// sourceState is what reading a values source found.
type sourceState int

const (
	usable sourceState = iota
	// unusable: it does not exist or is not labelled.
	unusable
	// refused: the reader may not read it.
	refused
)

// readSource reads one values document. The object is read unstructured:
// a ServiceAccount's client (As) knows no typed core objects.
func readSource(ctx context.Context, r client.Reader, namespace, who string, s helmvalues.Source) ([]byte, sourceState, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(s.Kind))
	err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: s.Name}, u)
	switch {
	case apierrors.IsNotFound(err):
		return nil, unusable, nil
	case apierrors.IsForbidden(err):
		return nil, refused, nil
	case err != nil:
		return nil, 0, fmt.Errorf("reading %s %s/%s as %s: %w", s.Kind, namespace, s.Name, who, err)
	case u.GetLabels()[LabelValuesSource] != "true":
		return nil, unusable, nil
	}
	k := s.DataKey()
	if s.Kind == helmvalues.KindConfigMap {
		if v, ok, _ := unstructured.NestedString(u.Object, "data", k); ok {
			return []byte(v), usable, nil
		}
	}
	// A Secret's data and a ConfigMap's binaryData are base64 in JSON.
	member := "data"
	if s.Kind == helmvalues.KindConfigMap {
		member = "binaryData"
	}
	v, ok, _ := unstructured.NestedString(u.Object, member, k)
	if !ok {
		return nil, 0, fmt.Errorf("%s %s/%s has no key %q", s.Kind, namespace, s.Name, k)
	}
	doc, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return nil, 0, fmt.Errorf("%s %s/%s key %q is not base64: %w", s.Kind, namespace, s.Name, k, err)
	}
	return doc, usable, nil
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
