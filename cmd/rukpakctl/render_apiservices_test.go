package main

import (
	"encoding/base64"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/rukpak-dev/rukpak/provisioner/servingcert"
)

// Owned API services render as APIServices in front of the operator's
// Service, with the placeholder CA bundle issued at install.
func TestRenderAPIServices(t *testing.T) {
	out, err := render(t, "../../test/testdata/bundles/registry-v1/apiservice-operator-1.0.0", "--install-namespace", "apis")
	if err != nil {
		t.Fatal(err)
	}
	ca := base64.StdEncoding.EncodeToString([]byte(servingcert.PlaceholderCA))
	var got []string
	for _, d := range strings.Split(out, "---\n")[1:] {
		var obj struct {
			Kind     string
			Metadata struct{ Name string }
			Spec     struct {
				Group, Version string
				CABundle       string `json:"caBundle"`
				Service        struct {
					Name, Namespace string
					Port            int
				}
			}
		}
		if err := yaml.Unmarshal([]byte(d), &obj); err != nil {
			t.Fatal(err)
		}
		if obj.Kind != "APIService" {
			continue
		}
		if obj.Spec.CABundle != ca {
			t.Errorf("APIService %s: caBundle %q, want the placeholder", obj.Metadata.Name, obj.Spec.CABundle)
		}
		s := obj.Spec.Service
		got = append(got, strings.Join([]string{obj.Metadata.Name, obj.Spec.Group, obj.Spec.Version, s.Namespace, s.Name}, " "))
		if s.Port != 9443 {
			t.Errorf("APIService %s: service port %d, want 9443", obj.Metadata.Name, s.Port)
		}
	}
	want := "v1alpha1.apiservice.rukpak.test apiservice.rukpak.test v1alpha1 apis apiservice-operator-service\n" +
		"v1beta1.apiservice.rukpak.test apiservice.rukpak.test v1beta1 apis apiservice-operator-service"
	if strings.Join(got, "\n") != want {
		t.Fatalf("APIServices:\n%s\nwant\n%s", strings.Join(got, "\n"), want)
	}
}
