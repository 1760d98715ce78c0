package release

import (
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/releaseutil"
	"sigs.k8s.io/yaml"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestManifestOrdersByKindAndStamps(t *testing.T) {
	mk := func(kind, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind(kind)
		u.SetName(name)
		return u
	}
	objs := []*unstructured.Unstructured{
		mk("Widget", "w"), mk("Deployment", "d"), mk("CustomResourceDefinition", "c"), mk("Namespace", "n"), mk("ConfigMap", "cm"),
	}
	got, err := Manifest(objs, func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"stamped": "yes"}) })
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := decodeManifest(got)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range decoded {
		kinds = append(kinds, o.GetKind())
		if o.GetLabels()["stamped"] != "yes" {
			t.Errorf("%s %s was not stamped:\n%s", o.GetKind(), o.GetName(), got)
		}
	}
	// Helm's install order: namespaces first, CRDs before workloads, unknown kinds
	// (custom resources) last.
	want := "Namespace,ConfigMap,CustomResourceDefinition,Deployment,Widget"
	if strings.Join(kinds, ",") != want {
		t.Errorf("install order %v, want %s", kinds, want)
	}
	if objs[0].GetLabels() != nil {
		t.Errorf("Manifest modified its input")
	}
	// A literal template expression stays literal: content never runs
	// through Go templates.
	cm := mk("ConfigMap", "tmpl")
	cm.Object["data"] = map[string]any{"x": "{{ .Values.secret }}"}
	got, err = Manifest([]*unstructured.Unstructured{cm}, nil)
	if err != nil || !strings.Contains(got, "{{ .Values.secret }}") {
		t.Errorf("template text not kept literally: %v\n%s", err, got)
	}
}

// What Manifest writes reads back as the same objects, whatever the values
// look like: strings YAML would take for other types, long and multi-line
// strings, numbers, nulls and nesting.
func TestManifestRoundTrips(t *testing.T) {
	values := map[string]any{
		"yes": "yes", "on": "on", "true": "true", "null": "null", "tilde": "~", "empty": "",
		"int": "1", "octal": "0755", "float": "1.5", "exp": "1e3", "hex": "0x1F", "sexagesimal": "1:20",
		"colon": "a: b", "dash": "- x", "hash": "# not a comment", "quote": `"quoted" and 'single'`,
		"multiline": "line one\nline two\n", "trailing space": "x ", "tab": "a\tb",
		"long": strings.Repeat("word ", 40), "unicode": "héllo ✓", "braces": "{{ .x }}", "doc": "---\nkind: Secret",
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "tricky", "namespace": "ns", "labels": map[string]any{"a": "1"}},
		"data":     values,
		"spec": map[string]any{
			"replicas": int64(3), "big": int64(1) << 53, "ratio": 0.25, "enabled": false, "none": nil,
			"list": []any{"a", int64(2), map[string]any{"k": "v"}, []any{}}, "emptyMap": map[string]any{},
		},
	}}
	other := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "ns"}}}
	manifest, err := Manifest([]*unstructured.Unstructured{obj, other}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeManifest(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("decoded %d objects, want 2:\n%s", len(got), manifest)
	}
	if !equality.Semantic.DeepEqual(got[0].Object, other.Object) || !equality.Semantic.DeepEqual(got[1].Object, obj.Object) {
		t.Fatalf("round trip changed the objects:\n got %v\nwant %v\nmanifest:\n%s", got[1].Object, obj.Object, manifest)
	}
}

// Helm reads the manifest as it reads any: split into documents, each
// decoded as YAML (JSON is YAML), so helm get manifest, helm's uninstall
// and kubectl read what the provisioner records.
func TestManifestReadsAsHelmManifest(t *testing.T) {
	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "cm", "namespace": "ns"},
		"data":     map[string]any{"html": "<b>&</b>", "doc": "a\n---\nb", "line": "x: y"},
	}}
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "ns"}}}
	manifest, err := Manifest([]*unstructured.Unstructured{cm, ns}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(manifest, `\u003c`) {
		t.Errorf("HTML characters escaped:\n%s", manifest)
	}
	docs := releaseutil.SplitManifests(manifest)
	if len(docs) != 2 {
		t.Fatalf("helm splits the manifest into %d documents, want 2:\n%s", len(docs), manifest)
	}
	// In the order helm reads them (BySplitManifestsOrder is a sort, not a
	// function).
	keys := slices.Collect(maps.Keys(docs))
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	var got []string
	for _, key := range keys {
		var head releaseutil.SimpleHead
		if err := yaml.Unmarshal([]byte(docs[key]), &head); err != nil {
			t.Fatalf("helm's YAML reading of %q: %v", docs[key], err)
		}
		got = append(got, head.Kind+"/"+head.Metadata.Name)
	}
	if want := []string{"Namespace/ns", "ConfigMap/cm"}; !slices.Equal(got, want) {
		t.Errorf("helm reads %v, want %v", got, want)
	}
	var data struct{ Data map[string]string }
	if err := yaml.Unmarshal([]byte(docs[keys[1]]), &data); err != nil || !maps.Equal(data.Data, map[string]string{"html": "<b>&</b>", "doc": "a\n---\nb", "line": "x: y"}) {
		t.Errorf("helm's YAML reading of the ConfigMap: %v %v", data.Data, err)
	}
}

// A release recorded as YAML by an earlier version holds the same objects
// as today's JSON rendering of them: unchanged, so upgrading the
// provisioner writes no new revision of every release.
func TestUnchangedAcrossManifestFormats(t *testing.T) {
	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "cm", "namespace": "ns"},
		"data":     map[string]any{"k": "v", "n": "1"},
	}}
	legacy := "---\napiVersion: v1\ndata:\n  k: v\n  \"n\": \"1\"\nkind: ConfigMap\nmetadata:\n  name: cm\n  namespace: ns\n"
	manifest, err := Manifest([]*unstructured.Unstructured{cm}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if jsonManifest(legacy) || !jsonManifest(manifest) {
		t.Fatalf("formats misread: legacy %v, current %v", jsonManifest(legacy), jsonManifest(manifest))
	}
	same, _, err := unchanged(legacy, manifest, []*unstructured.Unstructured{cm})
	if err != nil || len(same) != 1 {
		t.Fatalf("the YAML record of the same object: unchanged = %v, %v; want it unchanged", same, err)
	}
	changed := cm.DeepCopy()
	changed.Object["data"] = map[string]any{"k": "w"}
	manifest, err = Manifest([]*unstructured.Unstructured{changed}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if same, _, err := unchanged(legacy, manifest, []*unstructured.Unstructured{changed}); err != nil || same != nil {
		t.Fatalf("a changed object: unchanged = %v, %v; want nil", same, err)
	}
}

// DecodeManifest also reads chart files, whose YAML may start the way
// Manifest's JSON does: each reads as Helm reads it.
func TestDecodeManifestReadsYAMLThatStartsLikeJSON(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []string // kind/name of each object
	}{
		{"flow style", "---\n{apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n", []string{"ConfigMap/a"}},
		{"a YAML document after a JSON one", "---\n{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"}}\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: b\n", []string{"ConfigMap/a", "Secret/b"}},
		{"a comment after a separator", "---\n{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"}}\n--- # next\n{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"b\"}}\n", []string{"ConfigMap/a", "Secret/b"}},
		{"a trailing comment", "---\n{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"}}\n---\n# the end\n", []string{"ConfigMap/a"}},
		{"Manifest's own", "---\n{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"}}\n---\n{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"b\"}}\n", []string{"ConfigMap/a", "Secret/b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := DecodeManifest(tc.text)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range objs {
				got = append(got, o.GetKind()+"/"+o.GetName())
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("read %v, want %v", got, tc.want)
			}
		})
	}
}

// The apply bodies an install sends are the manifest's own documents: each
// reads as its object, the manifest is what Manifest writes, and a body
// cannot be grown into the document after it.
func TestRenderBodiesAreTheManifestsDocuments(t *testing.T) {
	mk := func(kind, name string, data map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": kind, "metadata": map[string]any{"name": name}}}
		if data != nil {
			u.Object["data"] = data
		}
		return u
	}
	objs := []*unstructured.Unstructured{
		mk("Deployment", "d", nil),
		mk("ConfigMap", "html", map[string]any{"x": "<b> & </b>", "n": int64(7)}),
		mk("Namespace", "n", nil),
		mk("ConfigMap", "empty", map[string]any{}),
	}
	manifest, sent, err := render(objs, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Manifest(objs, nil)
	if err != nil || manifest != want {
		t.Fatalf("render's manifest differs from Manifest's (%v):\n%s\n%s", err, manifest, want)
	}
	if len(sent) != len(objs) {
		t.Fatalf("%d bodies for %d objects", len(sent), len(objs))
	}
	for _, o := range objs {
		body := sent[o]
		if !strings.Contains(manifest, docSeparator+string(body)+"\n") {
			t.Errorf("%s %s: body is not a document of the manifest: %s", o.GetKind(), o.GetName(), body)
		}
		if cap(body) != len(body) {
			t.Errorf("%s %s: body has room to grow into the next document", o.GetKind(), o.GetName())
		}
		got := &unstructured.Unstructured{}
		if err := got.UnmarshalJSON(body); err != nil {
			t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
		}
		if !equality.Semantic.DeepEqual(got.Object, o.Object) {
			t.Errorf("%s %s: body reads as %v, want %v", o.GetKind(), o.GetName(), got.Object, o.Object)
		}
	}
	if _, none, _ := render(objs, nil, false); none != nil {
		t.Errorf("bodies made when not asked for")
	}
}
