package testregistry

import (
	"bytes"
	"net/http"
	"path/filepath"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	helmregistry "helm.sh/helm/v3/pkg/registry"
)

// PushChart pushes a chart archive (as `helm package` writes it) to
// repository/<chart name>:<chart version> with Helm's own registry client,
// exactly as `helm push <chart>.tgz oci://<host>/<repository>` does, with
// a provenance layer when prov is set. It returns the reference pushed.
func (r *Registry) PushChart(tb testing.TB, repository string, chartTgz, prov []byte) string {
	tb.Helper()
	opts := []helmregistry.ClientOption{
		helmregistry.ClientOptHTTPClient(&http.Client{Transport: r.Transport()}),
		// Never the credentials of whoever runs the test.
		helmregistry.ClientOptCredentialsFile(filepath.Join(tb.TempDir(), "config.json")),
	}
	if r.Username != "" {
		opts = append(opts, helmregistry.ClientOptBasicAuth(r.Username, r.Password))
	}
	c, err := helmregistry.NewClient(opts...)
	if err != nil {
		tb.Fatal(err)
	}
	ch, err := loader.LoadArchive(bytes.NewReader(chartTgz))
	if err != nil {
		tb.Fatal(err)
	}
	meta := ch.Metadata
	ref := r.Ref(repository + "/" + meta.Name + ":" + meta.Version)
	var pushOpts []helmregistry.PushOption
	if prov != nil {
		pushOpts = append(pushOpts, helmregistry.PushOptProvData(prov))
	}
	if _, err := c.Push(chartTgz, ref, pushOpts...); err != nil {
		tb.Fatalf("helm push %s: %v", ref, err)
	}
	return ref
}
