package registry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/rukpak-dev/rukpak/provisioner/plain"
)

// Options choose where and how a registry+v1 bundle is installed.
type Options struct {
	// InstallNamespace is where the operator runs. Empty means the CSV's
	// operatorframework.io/suggested-namespace annotation, else
	// "<package>-system".
	InstallNamespace string `json:"installNamespace,omitempty"`
	// WatchNamespaces are the namespaces the operator serves. Empty (not
	// configured) means AllNamespaces when the CSV supports it, else
	// OwnNamespace (only the install namespace) when the CSV supports that.
	// [""] is OLM's explicit spelling of all namespaces and always means
	// AllNamespaces.
	WatchNamespaces []string `json:"watchNamespaces,omitempty"`
	// CertificateProvider issues the serving certificates of the CSV's
	// webhooks: "rukpak" (the default) is the provisioner itself;
	// "cert-manager" installs a self-signed cert-manager Issuer and a
	// Certificate, and has cert-manager's cainjector inject the CA.
	CertificateProvider string `json:"certificateProvider,omitempty"`
	// Limits bound decoding the bundle's YAML (manifests and metadata);
	// unset fields take plain.DefaultLimits. Not part of spec.config.
	Limits plain.Limits `json:"-"`
}

// OptionsFromConfig decodes a BundleDeployment's spec.config. Unknown fields
// are an error naming them, so a typo never silently installs in a different
// mode. An empty or null config gives the zero Options.
func OptionsFromConfig(config []byte) (Options, error) {
	var opts Options
	trimmed := bytes.TrimSpace(config)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return opts, nil
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&opts); err != nil {
		return Options{}, fmt.Errorf("invalid spec.config: %w", err)
	}
	if dec.More() {
		return Options{}, fmt.Errorf("invalid spec.config: unexpected data after the JSON object")
	}
	return opts, nil
}

// Install modes of a ClusterServiceVersion.
const (
	InstallModeOwnNamespace    = "OwnNamespace"
	InstallModeSingleNamespace = "SingleNamespace"
	InstallModeMultiNamespace  = "MultiNamespace"
	InstallModeAllNamespaces   = "AllNamespaces"
)

// installModeOrder is the order modes are listed in messages.
var installModeOrder = []string{InstallModeOwnNamespace, InstallModeSingleNamespace, InstallModeMultiNamespace, InstallModeAllNamespaces}

// target is the resolved install namespace and watched namespaces; an empty
// watch list means all namespaces.
type target struct {
	mode             string
	installNamespace string
	watchNamespaces  []string
	certProvider     string
}

func (t target) allNamespaces() bool { return t.mode == InstallModeAllNamespaces }

// resolveTarget picks the install mode the options ask for and checks that
// the CSV supports it. With no watch namespaces configured the mode is
// AllNamespaces if supported, else OwnNamespace if supported; [""] asks for
// AllNamespaces explicitly.
func resolveTarget(b *bundle, opts Options) (target, error) {
	t := target{installNamespace: opts.InstallNamespace}
	if t.installNamespace == "" {
		t.installNamespace = b.csv.Metadata.Annotations[AnnotationSuggestedNS]
	}
	if t.installNamespace == "" {
		t.installNamespace = b.pkg + "-system"
	}
	if errs := validation.IsDNS1123Label(t.installNamespace); len(errs) > 0 {
		return target{}, fmt.Errorf("install namespace %q is not a valid namespace name: %s", t.installNamespace, strings.Join(errs, "; "))
	}

	supported := supportedModes(b.csv)
	list := "none"
	if len(supported) > 0 {
		list = strings.Join(supported, ", ")
	}
	// A typo in a type (e.g. "OwnNamespacejl") silently drops that mode:
	// name such types in every install-mode message so the author sees why.
	if unknown := unknownModes(b.csv); len(unknown) > 0 {
		list += fmt.Sprintf("; spec.installModes lists unknown types, ignored: %s", strings.Join(unknown, ", "))
	}

	watch := opts.WatchNamespaces
	if len(watch) == 0 {
		// Not configured: the widest mode the CSV supports of AllNamespaces
		// and OwnNamespace.
		switch {
		case slices.Contains(supported, InstallModeAllNamespaces):
			t.mode = InstallModeAllNamespaces
		case slices.Contains(supported, InstallModeOwnNamespace):
			t.mode = InstallModeOwnNamespace
			t.watchNamespaces = []string{t.installNamespace}
		case len(supported) == 0:
			return target{}, fmt.Errorf("ClusterServiceVersion %q supports no install mode", b.csv.Metadata.Name)
		default:
			return target{}, fmt.Errorf("ClusterServiceVersion %q supports neither AllNamespaces nor OwnNamespace, so it has no default install mode (supported install modes: %s): set spec.config.watchNamespaces to the namespaces the operator should watch",
				b.csv.Metadata.Name, list)
		}
		return t, nil
	}
	if len(watch) == 1 && watch[0] == "" {
		// [""] is OLM's explicit spelling of "all namespaces".
		if !slices.Contains(supported, InstallModeAllNamespaces) {
			return target{}, fmt.Errorf("ClusterServiceVersion %q does not support install mode AllNamespaces, which watchNamespaces [\"\"] selects (supported install modes: %s)",
				b.csv.Metadata.Name, list)
		}
		t.mode = InstallModeAllNamespaces
		return t, nil
	}

	for i, ns := range watch {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return target{}, fmt.Errorf("watch namespace %q is not a valid namespace name: %s", ns, strings.Join(errs, "; "))
		}
		if slices.Contains(watch[:i], ns) {
			return target{}, fmt.Errorf("watch namespace %q is listed more than once", ns)
		}
	}
	switch {
	case len(watch) == 1 && watch[0] == t.installNamespace:
		t.mode = InstallModeOwnNamespace
	case len(watch) == 1:
		t.mode = InstallModeSingleNamespace
	default:
		t.mode = InstallModeMultiNamespace
	}
	t.watchNamespaces = slices.Clone(watch)
	if !slices.Contains(supported, t.mode) {
		return target{}, fmt.Errorf("ClusterServiceVersion %q does not support install mode %s (install namespace %q, watch namespaces %q); supported install modes: %s",
			b.csv.Metadata.Name, t.mode, t.installNamespace, watch, list)
	}
	// Watching the install namespace among others needs OwnNamespace too;
	// OLM refuses it with this message (InstallModeSet.Supports).
	if t.mode == InstallModeMultiNamespace && slices.Contains(watch, t.installNamespace) && !slices.Contains(supported, InstallModeOwnNamespace) {
		return target{}, fmt.Errorf("ClusterServiceVersion %q does not support install mode OwnNamespace, which watch namespaces %q need because they include the install namespace %q: OwnNamespace InstallModeType not supported, cannot configure to watch own namespace (supported install modes: %s)",
			b.csv.Metadata.Name, watch, t.installNamespace, list)
	}
	return t, nil
}

func supportedModes(csv *clusterServiceVersion) []string {
	var out []string
	for _, m := range installModeOrder {
		for _, im := range csv.Spec.InstallModes {
			if im.Type == m && im.Supported && !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	return out
}

// unknownModes lists, quoted and in the CSV's order, the install mode types
// that are not one of the four OLM knows.
func unknownModes(csv *clusterServiceVersion) []string {
	var out []string
	for _, im := range csv.Spec.InstallModes {
		if q := strconv.Quote(im.Type); !slices.Contains(installModeOrder, im.Type) && !slices.Contains(out, q) {
			out = append(out, q)
		}
	}
	return out
}
