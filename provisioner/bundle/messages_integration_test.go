package bundle_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/storage"
)

// TestIntegrationRukPakUnpackMessages: a source that cannot be fetched
// fails with RukPak v0.16's words (its e2e suite's for the missing
// ConfigMap), "source bundle content: " first; what this project adds comes
// after them. The missing ConfigMap, created later, still unpacks, and the
// Bundle says so as RukPak's did.
func TestIntegrationRukPakUnpackMessages(t *testing.T) {
	e := newEnv(t)
	const class = "messages"
	e.start(class, 0, &storage.LocalDirectory{RootDirectory: t.TempDir(), BaseURL: "https://content.test"}, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/plain.tar" {
			_, _ = w.Write([]byte("apiVersion: v1\nkind: ConfigMap\n"))
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)

	httpSource := func(path string) rukpakv1alpha1.BundleSource {
		return rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeHTTP, HTTP: &rukpakv1alpha1.HTTPSource{URL: srv.URL + path}}
	}
	cases := []struct {
		name string
		src  rukpakv1alpha1.BundleSource
		want string
	}{
		{"http-404", httpSource("/missing.tgz"),
			`source bundle content: GET ` + srv.URL + `/missing.tgz: unexpected status "404 Not Found"`},
		{"http-not-gzip", httpSource("/plain.tar"),
			`source bundle content: gzip: invalid header: the response body of GET ` + srv.URL + `/plain.tar is not a gzip-compressed tar archive`},
		{"configmap-missing", rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeConfigMaps,
			ConfigMaps: []rukpakv1alpha1.ConfigMapSource{{ConfigMap: rukpakv1alpha1.LocalObjectReference{Name: "non-exist"}}}},
			fmt.Sprintf("source bundle content: get configmap %[1]s/%[2]s: ConfigMap %[2]q not found", namespace, "non-exist")},
	}
	for _, tc := range cases {
		e.create(newBundle(tc.name, class, tc.src))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			waitFor(t, patience, "the unpack to fail", func() error {
				b := e.get(tc.name)
				c := conditions.Get(b.Status.Conditions, rukpakv1alpha1.TypeUnpacked)
				if b.Status.Phase != rukpakv1alpha1.PhaseFailing || c == nil || c.Status != metav1.ConditionFalse ||
					c.Reason != rukpakv1alpha1.ReasonUnpackFailed || c.Message != tc.want {
					return fmt.Errorf("phase %q, condition %+v\nwant message %q", b.Status.Phase, c, tc.want)
				}
				return nil
			})
		})
	}

	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "non-exist", Namespace: namespace},
		Immutable:  ptr.To(true),
		Data:       map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: default}\n"},
	}
	if err := e.c.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	waitFor(t, patience, "the Bundle to unpack once its ConfigMap exists", unpacked(e, "configmap-missing"))
	if c := conditions.Get(e.get("configmap-missing").Status.Conditions, rukpakv1alpha1.TypeUnpacked); c.Message != "Successfully unpacked the configMaps Bundle" {
		t.Errorf("Unpacked message %q, want RukPak's %q", c.Message, "Successfully unpacked the configMaps Bundle")
	}
}
