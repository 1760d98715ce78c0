package devenv

import (
	"fmt"
	"path/filepath"
	"runtime"
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
	if len(vwc.Webhooks) != 2 {
		t.Fatalf("%d webhooks, want 2", len(vwc.Webhooks))
	}
	for _, w := range vwc.Webhooks {
		if w.ClientConfig.URL == nil || w.ClientConfig.Service != nil {
			t.Errorf("%s: client config %+v, want a URL only", w.Name, w.ClientConfig)
		}
		want := "request.operation != 'UPDATE' || object.spec != oldObject.spec"
		if len(w.MatchConditions) != 1 || w.MatchConditions[0].Expression != want {
			t.Errorf("%s: matchConditions %s, want one with %q", w.Name, fmt.Sprint(w.MatchConditions), want)
		}
	}
}
