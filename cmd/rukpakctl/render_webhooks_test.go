package main

import (
	"encoding/base64"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/rukpak-dev/rukpak/provisioner/servingcert"
)

// Webhooks render with the objects the provisioner generates for them, and
// placeholders where certificates and CA bundles are issued at install.
func TestRenderWebhooks(t *testing.T) {
	out, err := render(t, shared(t, "registry-v1/marin3r-0.13.1"), "--install-namespace", "marin3r", "--watch-namespaces", "marin3r")
	if err != nil {
		t.Fatal(err)
	}
	ca := base64.StdEncoding.EncodeToString([]byte(servingcert.PlaceholderCA))
	var hooks, secrets int
	for _, d := range strings.Split(out, "---\n")[1:] {
		var obj struct {
			Kind     string
			Metadata struct{ Name string }
			Data     map[string]string
			Webhooks []struct {
				ClientConfig struct {
					CABundle string `json:"caBundle"`
					Service  struct{ Name, Namespace string }
				} `json:"clientConfig"`
				NamespaceSelector struct {
					MatchExpressions []struct {
						Key, Operator string
						Values        []string
					} `json:"matchExpressions"`
				} `json:"namespaceSelector"`
			}
		}
		if err := yaml.Unmarshal([]byte(d), &obj); err != nil {
			t.Fatal(err)
		}
		switch obj.Kind {
		case "Secret":
			secrets++
			if obj.Metadata.Name != "marin3r-controller-webhook-service-cert" || len(obj.Data) != 3 {
				t.Errorf("certificate Secret %s with data keys %v, want marin3r-controller-webhook-service-cert with tls.crt, tls.key, ca.crt", obj.Metadata.Name, obj.Data)
			}
		case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
			for _, w := range obj.Webhooks {
				hooks++
				if w.ClientConfig.CABundle != ca {
					t.Errorf("%s %s: caBundle %q, want the placeholder", obj.Kind, obj.Metadata.Name, w.ClientConfig.CABundle)
				}
				if s := w.ClientConfig.Service; s.Name != "marin3r-controller-webhook-service" || s.Namespace != "marin3r" {
					t.Errorf("%s %s: service %v", obj.Kind, obj.Metadata.Name, s)
				}
				if e := w.NamespaceSelector.MatchExpressions; len(e) != 1 || e[0].Operator != "In" || strings.Join(e[0].Values, ",") != "marin3r" {
					t.Errorf("%s %s: namespaceSelector %v, want the watched namespace", obj.Kind, obj.Metadata.Name, e)
				}
			}
		}
	}
	if hooks != 3 || secrets != 1 {
		t.Fatalf("rendered %d webhooks and %d Secrets, want 3 and 1", hooks, secrets)
	}
}

// --certificate-provider cert-manager renders cert-manager's Issuer and
// Certificate instead of the provisioner's certificate Secret.
func TestRenderWebhooksCertManager(t *testing.T) {
	out, err := render(t, shared(t, "registry-v1/marin3r-0.13.1"), "--certificate-provider", "cert-manager")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, d := range docs(t, out) {
		if k := strings.Fields(d)[0]; k == "Secret" || k == "Issuer" || k == "Certificate" {
			kinds = append(kinds, d)
		}
	}
	want := "Issuer marin3r-system/marin3r-controller-webhook-service-cert-selfsigned-issuer,Certificate marin3r-system/marin3r-controller-webhook-service-cert"
	if strings.Join(kinds, ",") != want {
		t.Fatalf("certificate objects %q, want %s", kinds, want)
	}
	if _, err := render(t, shared(t, "plain/combo-v0.0.2"), "--certificate-provider", "cert-manager"); err == nil || err.Error() != "--certificate-provider only applies to registry+v1 bundles" {
		t.Fatalf("--certificate-provider on a plain bundle: %v", err)
	}
}
