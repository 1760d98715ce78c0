package helm_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"helm.sh/helm/v3/pkg/chart"

	"github.com/rukpak-dev/rukpak/internal/heapwatch"
	"github.com/rukpak-dev/rukpak/provisioner/helm"
)

// schemaChart is a chart named "schemas" with schema as its
// values.schema.json and files added to it.
func schemaChart(t *testing.T, schema string, files map[string]string) *chart.Chart {
	t.Helper()
	fsys := fstest.MapFS{
		"Chart.yaml":         {Data: []byte("apiVersion: v2\nname: schemas\nversion: 0.1.0\n")},
		"values.yaml":        {Data: []byte("replicas: 1\n")},
		"values.schema.json": {Data: []byte(schema)},
		"templates/cm.yaml":  {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  replicas: {{ .Values.replicas | quote }}\n")},
	}
	for name, data := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(data)}
	}
	ch, err := helm.LoadChart(fsys)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func renderSchemaChart(t *testing.T, ch *chart.Chart, vals map[string]any) error {
	t.Helper()
	_, err := helm.Render(t.Context(), ch, vals, helm.RenderOptions{ReleaseName: "rel", Namespace: "apps"})
	return err
}

// TestSchemaRefsInsideTheChart: a schema's relative $refs resolve to files
// of its own chart (a subchart's to the subchart's), and values are
// validated as Helm validates them, with Helm's messages.
func TestSchemaRefsInsideTheChart(t *testing.T) {
	const schema = `{"$schema": "http://json-schema.org/draft-07/schema#", "properties": {"replicas": {"$ref": "schemas/replicas.json#/definitions/replicas"}}}`
	files := map[string]string{
		"schemas/replicas.json":         `{"definitions": {"replicas": {"type": "integer", "maximum": 5}}}`,
		"charts/sub/Chart.yaml":         "apiVersion: v2\nname: sub\nversion: 0.1.0\n",
		"charts/sub/values.yaml":        "port: 80\n",
		"charts/sub/values.schema.json": `{"properties": {"port": {"$ref": "defs/port.json"}}}`,
		"charts/sub/defs/port.json":     `{"type": "integer", "minimum": 1}`,
	}
	const head = "rendering chart \"schemas\": values don't meet the specifications of the schema(s) in the following chart(s):\n"
	for _, tc := range []struct {
		name    string
		vals    map[string]any
		wantErr string
	}{
		{name: "defaults"},
		{name: "valid", vals: map[string]any{"replicas": 3, "sub": map[string]any{"port": 8080}}},
		{name: "wrong type", vals: map[string]any{"replicas": "three"},
			wantErr: head + "schemas:\n- at '/replicas': got string, want integer\n"},
		{name: "over the maximum", vals: map[string]any{"replicas": 6},
			wantErr: head + "schemas:\n- at '/replicas': maximum: got 6, want 5\n"},
		{name: "subchart", vals: map[string]any{"sub": map[string]any{"port": 0}},
			wantErr: head + "sub:\n- at '/port': minimum: got 0, want 1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := renderSchemaChart(t, schemaChart(t, schema, files), tc.vals)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Fatalf("error:\n%v\nwant:\n%s", err, tc.wantErr)
			}
		})
	}
}

// TestSchemaRemoteRefNeverFetched: a $ref to an http(s) URL is refused by
// name; the server is never asked, neither by the child nor by Helm's
// action in this process, whose heap does not grow by what it serves.
func TestSchemaRemoteRefNeverFetched(t *testing.T) {
	big := []byte(`{"description": "` + strings.Repeat("x", 24<<20) + `"}`)
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = w.Write(big)
	}))
	defer srv.Close()
	for _, ref := range []string{srv.URL + "/schema.json", srv.URL + "/other.json#/definitions/x", "https://" + srv.Listener.Addr().String() + "/s.json", "urn:example:schema"} {
		t.Run(ref, func(t *testing.T) {
			ch := schemaChart(t, `{"properties": {"replicas": {"$ref": "`+ref+`"}}}`, nil)
			var err error
			peak, _, _ := heapwatch.Measure(func() { err = renderSchemaChart(t, ch, nil) })
			t.Logf("live heap growth %d MiB", peak>>20)
			if n := hits.Load(); n != 0 {
				t.Errorf("the server was asked %d times", n)
			}
			ref, _, _ := strings.Cut(ref, "#")
			want := `rendering chart "schemas": values.schema.json of chart "schemas": $ref "` + ref + `" refused: not a file of the chart (a schema may reference only files of its chart, without network or filesystem access)`
			if err == nil || err.Error() != want {
				t.Errorf("error:\n%v\nwant:\n%s", err, want)
			}
			if peak > 64<<20 {
				t.Errorf("live heap grew by %d MiB, want at most 64", peak>>20)
			}
		})
	}
}

// TestSchemaFileRefNeverRead: a file: $ref names a file of the chart,
// never of the machine: whether the machine has that file or not, the
// message is the same and holds none of its content.
func TestSchemaFileRefNeverRead(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret.json")
	if err := os.WriteFile(secret, []byte(`{"const": "s3cr3t-content"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	refs := map[string]string{
		"existing": "file://" + secret,
		"missing":  "file://" + filepath.Join(dir, "missing.json"),
		"relative": "../../.." + secret,
	}
	if _, err := os.Stat("/etc/hostname"); err == nil {
		refs["hostname"] = "file:///etc/hostname"
	}
	msgs := map[string]string{}
	for name, ref := range refs {
		t.Run(name, func(t *testing.T) {
			ch := schemaChart(t, `{"properties": {"replicas": {"$ref": "`+ref+`"}}}`, nil)
			err := renderSchemaChart(t, ch, map[string]any{"replicas": 2})
			if err == nil {
				t.Fatal("rendered, want the $ref refused")
			}
			msg := err.Error()
			if strings.Contains(msg, "s3cr3t") || strings.Contains(msg, "invalid character") {
				t.Errorf("the message shows the file's content: %s", msg)
			}
			file := strings.TrimPrefix(strings.TrimPrefix(ref, "file://"), "../../..")
			want := `rendering chart "schemas": values.schema.json of chart "schemas": $ref "file://` + file + `" refused: chart "schemas" has no file "` + file[1:] + `" (a schema may reference only files of its chart, without network or filesystem access)`
			if msg != want {
				t.Errorf("error:\n%s\nwant:\n%s", msg, want)
			}
			msgs[name] = strings.ReplaceAll(msg, file[1:], "FILE")
		})
	}
	if msgs["existing"] != msgs["missing"] {
		t.Errorf("a file that exists and one that does not are told apart:\n%s\n%s", msgs["existing"], msgs["missing"])
	}
}

// TestFrozenChartHasNoSchema: the chart Helm's actions run has no schema
// left to validate (the child validated the values), in no subchart.
func TestFrozenChartHasNoSchema(t *testing.T) {
	ch := schemaChart(t, `{"properties": {"replicas": {"type": "integer"}}}`, nil)
	frozen, err := helm.Freeze(t.Context(), ch, map[string]any{}, templateInput, helm.SandboxLimits{})
	if err != nil {
		t.Fatal(err)
	}
	var check func(c *chart.Chart)
	check = func(c *chart.Chart) {
		if c.Schema != nil {
			t.Errorf("frozen chart %q has a schema", c.Name())
		}
		for _, d := range c.Dependencies() {
			check(d)
		}
	}
	check(frozen)
	if ch.Schema == nil {
		t.Error("Freeze changed the chart it was given")
	}
}
