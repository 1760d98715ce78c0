// Package helmvalues is the valuesFrom member of a helm-class
// BundleDeployment's spec.config: the ConfigMaps and Secrets of the
// provisioners' namespace its chart values are read from. The webhook
// reviews these references for the user who writes them and the helm
// provisioner reads them; both decode and check them here, so both see
// the same references.
package helmvalues

import (
	"bytes"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Kinds a source may be.
const (
	KindConfigMap = "ConfigMap"
	KindSecret    = "Secret"
)

const (
	// MaxSources bounds the sources of one BundleDeployment.
	MaxSources = 16
	// DefaultKey is the key read when a source names none.
	DefaultKey = "values.yaml"
)

// Source is one ConfigMap or Secret key holding a values document.
type Source struct {
	// Kind is ConfigMap or Secret.
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Key defaults to values.yaml.
	Key string `json:"key,omitempty"`
	// Optional sources that are missing or not labelled
	// core.rukpak.io/helm-values=true are skipped (both alike: the outcome
	// tells nothing about which); one that the identity reading it may not
	// read is an error all the same.
	Optional bool `json:"optional,omitempty"`
}

// DataKey is the key s reads.
func (s Source) DataKey() string {
	if s.Key == "" {
		return DefaultKey
	}
	return s.Key
}

// Path is spec.config.valuesFrom, where field errors point.
var (
	configPath = field.NewPath("spec", "config")
	Path       = configPath.Child("valuesFrom")
)

// config is the part of spec.config this package reads. The helm
// provisioner decodes the whole spec.config into a struct whose valuesFrom
// field has this same name and tag, with encoding/json too, so the same
// keys match (encoding/json matches them case-insensitively, the last of
// duplicates wins): what the webhook reviews is what the provisioner reads.
type config struct {
	ValuesFrom []Source `json:"valuesFrom,omitempty"`
}

// FromConfig returns the valuesFrom sources of spec.config (raw JSON,
// empty for none), checked with Validate. Other members are not looked at:
// they are the provisioner's to check.
func FromConfig(raw []byte) ([]Source, field.ErrorList) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	var c config
	if err := json.Unmarshal(raw, &c); err != nil {
		// The value is omitted: it may be large, and the message says
		// what is wrong.
		return nil, field.ErrorList{{Type: field.ErrorTypeInvalid, Field: configPath.String(), BadValue: field.OmitValueType{},
			Detail: fmt.Sprintf("valuesFrom must be a list of {kind, name, key, optional}: %v", err)}}
	}
	if errs := Validate(c.ValuesFrom); len(errs) > 0 {
		return nil, errs
	}
	return c.ValuesFrom, nil
}

// Validate returns the problems of sources, at Path.
func Validate(sources []Source) field.ErrorList {
	if len(sources) > MaxSources {
		return field.ErrorList{field.TooMany(Path, len(sources), MaxSources)}
	}
	var errs field.ErrorList
	for i, s := range sources {
		p := Path.Index(i)
		if s.Kind != KindConfigMap && s.Kind != KindSecret {
			errs = append(errs, field.NotSupported(p.Child("kind"), short(s.Kind), []string{KindConfigMap, KindSecret}))
		}
		switch {
		case s.Name == "":
			errs = append(errs, field.Required(p.Child("name"), "the ConfigMap's or Secret's name"))
		case len(s.Name) > validation.DNS1123SubdomainMaxLength:
			errs = append(errs, field.TooLong(p.Child("name"), "", validation.DNS1123SubdomainMaxLength))
		default:
			for _, msg := range validation.IsDNS1123Subdomain(s.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), s.Name, msg))
			}
		}
		if s.Key != "" {
			if len(s.Key) > validation.DNS1123SubdomainMaxLength {
				errs = append(errs, field.TooLong(p.Child("key"), "", validation.DNS1123SubdomainMaxLength))
				continue
			}
			for _, msg := range validation.IsConfigMapKey(s.Key) {
				errs = append(errs, field.Invalid(p.Child("key"), s.Key, msg))
			}
		}
	}
	return errs
}

// short bounds a value echoed in a message.
func short(s string) string {
	const maxEcho = 64
	if len(s) > maxEcho {
		return s[:maxEcho] + "..."
	}
	return s
}
