package devenv

import (
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"
)

// The local webhook configuration keeps everything of the shipped one but
// the client config: in particular the matchConditions that keep metadata
// updates off the webhook, so make run behaves as a cluster does.
func TestLocalWebhookConfiguration(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	data, err := LocalWebhookConfiguration(root, 9443)
	if err != nil {
		t.Fatal(err)
	}
	var vwc admissionv1.ValidatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(data, &vwc); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range vwc.Webhooks {
		names = append(names, w.Name)
	}
	for _, want := range []string{"vbundles.core.rukpak.io", "vbundledeployments.core.rukpak.io", "vcustomresourcedefinitions.core.rukpak.io", "vcatalogs.core.rukpak.io"} {
		if !slices.Contains(names, want) {
			t.Errorf("webhooks %v: %s missing", names, want)
		}
	}
	for _, w := range vwc.Webhooks {
		if w.ClientConfig.URL == nil || w.ClientConfig.Service != nil {
			t.Errorf("%s: client config %+v, want a URL only", w.Name, w.ClientConfig)
		}
		if w.Name == "vcustomresourcedefinitions.core.rukpak.io" {
			// Spec changes of owned CRDs, never the provisioner's writes.
			if len(w.MatchConditions) != 2 || w.MatchConditions[0].Expression != "object.spec != oldObject.spec" || w.ObjectSelector == nil {
				t.Errorf("%s: matchConditions %s, objectSelector %v: not the shipped ones", w.Name, fmt.Sprint(w.MatchConditions), w.ObjectSelector)
			}
			continue
		}
		// The shipped conditions are kept: creates and spec changes (and,
		// for BundleDeployments, steering annotations) reach the webhook.
		want := "request.operation != 'UPDATE' || object.spec != oldObject.spec"
		if len(w.MatchConditions) != 1 || !strings.HasPrefix(w.MatchConditions[0].Expression, want) {
			t.Errorf("%s: matchConditions %s, want one with %q", w.Name, fmt.Sprint(w.MatchConditions), want)
		}
	}
}

// The e2e suite's addresses are its own: distinct, bindable, and none of
// make run's, even while make run holds them.
func TestFreeAddresses(t *testing.T) {
	d := DefaultAddresses
	fixed := []string{d.WebhookProbe, d.Content, d.ProvisionerProbe, d.ProvisionerMetrics, fmt.Sprintf("127.0.0.1:%d", d.WebhookPort)}
	for _, addr := range fixed {
		// As make run in another terminal would; skipped when something
		// else holds the port already, which serves the test as well.
		if l, err := net.Listen("tcp", addr); err == nil {
			t.Cleanup(func() { _ = l.Close() })
		}
	}
	a, err := FreeAddresses()
	if err != nil {
		t.Fatal(err)
	}
	got := []string{a.WebhookProbe, a.Content, a.ProvisionerProbe, a.ProvisionerMetrics, fmt.Sprintf("127.0.0.1:%d", a.WebhookPort)}
	seen := map[string]bool{}
	for _, addr := range got {
		if seen[addr] || slices.Contains(fixed, addr) {
			t.Errorf("address %s given twice or one of make run's (%v)", addr, got)
		}
		seen[addr] = true
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("binding %s: %v", addr, err)
			continue
		}
		_ = l.Close()
	}
	if a.withDefaults() != a {
		t.Errorf("withDefaults changed a full set of addresses: %+v -> %+v", a, a.withDefaults())
	}
	if (Addresses{}).withDefaults() != DefaultAddresses {
		t.Errorf("empty addresses are not make run's: %+v", (Addresses{}).withDefaults())
	}
	if got := (Addresses{Content: "127.0.0.1:1"}).withDefaults(); got.Content != "127.0.0.1:1" || got.ProvisionerProbe != d.ProvisionerProbe {
		t.Errorf("a set field is kept and the others defaulted: %+v", got)
	}
}
