package registry

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/rukpak-dev/rukpak/provisioner/plain"
)

// testCSV is a small but complete ClusterServiceVersion; tests mutate it.
func testCSV(modes ...string) map[string]interface{} {
	var installModes []interface{}
	for _, m := range installModeOrder {
		installModes = append(installModes, map[string]interface{}{"type": m, "supported": slices.Contains(modes, m)})
	}
	rule := func(res, verb string) []interface{} {
		return []interface{}{map[string]interface{}{"apiGroups": []interface{}{""}, "resources": []interface{}{res}, "verbs": []interface{}{verb}}}
	}
	return map[string]interface{}{
		"apiVersion": "operators.coreos.com/v1alpha1",
		"kind":       "ClusterServiceVersion",
		"metadata": map[string]interface{}{
			"name":        "op.v1.0.0",
			"annotations": map[string]interface{}{"csv": "from-csv", "shared": "from-csv"},
		},
		"spec": map[string]interface{}{
			"installModes": installModes,
			"customresourcedefinitions": map[string]interface{}{
				"owned": []interface{}{map[string]interface{}{"name": "foos.example.com", "version": "v1", "kind": "Foo"}},
			},
			"install": map[string]interface{}{
				"strategy": "deployment",
				"spec": map[string]interface{}{
					"deployments": []interface{}{map[string]interface{}{
						"name":  "op",
						"label": map[string]interface{}{"app": "op"},
						"spec": map[string]interface{}{
							"replicas": 1,
							"selector": map[string]interface{}{"matchLabels": map[string]interface{}{"app": "op"}},
							"template": map[string]interface{}{
								"metadata": map[string]interface{}{
									"labels":      map[string]interface{}{"app": "op"},
									"annotations": map[string]interface{}{"pod": "from-pod", "shared": "from-pod"},
								},
								"spec": map[string]interface{}{
									"serviceAccountName": "op-sa",
									"containers":         []interface{}{map[string]interface{}{"name": "op", "image": "example.com/op:v1"}},
								},
							},
						},
					}},
					"permissions":        []interface{}{map[string]interface{}{"serviceAccountName": "op-sa", "rules": rule("configmaps", "get")}},
					"clusterPermissions": []interface{}{map[string]interface{}{"serviceAccountName": "op-sa", "rules": rule("nodes", "list")}},
				},
			},
		},
	}
}

const testAnnotations = `annotations:
  operators.operatorframework.io.bundle.mediatype.v1: registry+v1
  operators.operatorframework.io.bundle.package.v1: op
  operators.operatorframework.io.bundle.channels.v1: stable
`

const testCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: foos.example.com
spec:
  group: example.com
  names: {kind: Foo, plural: foos}
  scope: Namespaced
  versions: [{name: v1, served: true, storage: true}]
`

func testBundle(t *testing.T, csv map[string]interface{}) fstest.MapFS {
	t.Helper()
	data, err := yaml.Marshal(csv)
	if err != nil {
		t.Fatal(err)
	}
	return fstest.MapFS{
		"metadata/annotations.yaml":               {Data: []byte(testAnnotations)},
		"manifests/op.clusterserviceversion.yaml": {Data: data},
		"manifests/foos.crd.yaml":                 {Data: []byte(testCRD)},
	}
}

// summary lists the objects of converted content as "Kind namespace/name".
func summary(t *testing.T, fsys fs.FS) []string {
	t.Helper()
	objs, err := plain.Objects(fsys)
	if err != nil {
		t.Fatalf("converted content: %v", err)
	}
	var out []string
	for _, o := range objs {
		out = append(out, fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName()))
	}
	return out
}

func find(t *testing.T, fsys fs.FS, kind, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	objs, err := plain.Objects(fsys)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == kind && o.GetNamespace() == namespace && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s/%s in %v", kind, namespace, name, summary(t, fsys))
	return nil
}

func TestInstallModeMatrix(t *testing.T) {
	const ns = "op-system"
	clusterPerms := []string{
		"ClusterRole /op.v1.0.0-op-sa-cluster",
		"ClusterRoleBinding /op.v1.0.0-op-sa-cluster",
	}
	head := []string{"Namespace /op-system", "CustomResourceDefinition /foos.example.com", "ServiceAccount op-system/op-sa"}
	build := func(rbac ...string) []string {
		out := slices.Clone(head)
		out = append(out, rbac...)
		out = append(out, clusterPerms...)
		return append(out, "Deployment op-system/op")
	}
	// What each install mode installs with the watch namespaces used below
	// (OwnNamespace: the install namespace).
	type result struct {
		want    []string
		targets string
	}
	results := map[string]result{
		InstallModeAllNamespaces: {
			want:    build("ClusterRole /op.v1.0.0-op-sa", "ClusterRoleBinding /op.v1.0.0-op-sa"),
			targets: "",
		},
		InstallModeOwnNamespace: {
			want:    build("Role op-system/op.v1.0.0-op-sa", "RoleBinding op-system/op.v1.0.0-op-sa"),
			targets: ns,
		},
		InstallModeSingleNamespace: {
			want: build("Role op-system/op.v1.0.0-op-sa", "RoleBinding op-system/op.v1.0.0-op-sa",
				"Role apps/op.v1.0.0-op-sa", "RoleBinding apps/op.v1.0.0-op-sa"),
			targets: "apps",
		},
		InstallModeMultiNamespace: {
			want: build("Role op-system/op.v1.0.0-op-sa", "RoleBinding op-system/op.v1.0.0-op-sa",
				"Role b/op.v1.0.0-op-sa", "RoleBinding b/op.v1.0.0-op-sa",
				"Role a/op.v1.0.0-op-sa", "RoleBinding a/op.v1.0.0-op-sa"),
			targets: "b,a",
		},
	}
	// defaultMode is the mode used when no watch namespaces are configured;
	// empty when there is none.
	defaultMode := func(supported []string) string {
		for _, m := range []string{InstallModeAllNamespaces, InstallModeOwnNamespace} {
			if slices.Contains(supported, m) {
				return m
			}
		}
		return ""
	}
	requests := []struct {
		name string
		opts Options
		mode func(supported []string) string // the mode the request resolves to
	}{
		{name: "default", opts: Options{}, mode: defaultMode},
		{name: "default-empty-list", opts: Options{WatchNamespaces: []string{}}, mode: defaultMode},
		{name: "explicit-all", opts: Options{WatchNamespaces: []string{""}}, mode: func([]string) string { return InstallModeAllNamespaces }},
		{name: "own", opts: Options{WatchNamespaces: []string{ns}}, mode: func([]string) string { return InstallModeOwnNamespace }},
		{name: "single", opts: Options{WatchNamespaces: []string{"apps"}}, mode: func([]string) string { return InstallModeSingleNamespace }},
		{name: "multi", opts: Options{WatchNamespaces: []string{"b", "a"}}, mode: func([]string) string { return InstallModeMultiNamespace }},
	}
	supportedSets := [][]string{
		{InstallModeAllNamespaces},
		{InstallModeOwnNamespace},
		{InstallModeSingleNamespace},
		{InstallModeMultiNamespace},
		{InstallModeOwnNamespace, InstallModeSingleNamespace},
		{InstallModeSingleNamespace, InstallModeMultiNamespace},
		installModeOrder,
	}
	for _, supported := range supportedSets {
		for _, req := range requests {
			t.Run(strings.Join(supported, "+")+"/"+req.name, func(t *testing.T) {
				out, err := Convert(testBundle(t, testCSV(supported...)), req.opts)
				mode := req.mode(supported)
				if !slices.Contains(supported, mode) {
					if err == nil {
						t.Fatalf("Convert succeeded, want an error (mode %q unsupported)", mode)
					}
					wantMsg := "does not support install mode " + mode
					if mode == "" {
						wantMsg = "supports neither AllNamespaces nor OwnNamespace, so it has no default install mode"
					}
					if !strings.Contains(err.Error(), wantMsg) ||
						!strings.Contains(err.Error(), "supported install modes: "+strings.Join(supported, ", ")) {
						t.Fatalf("error %q should say %q and name supported modes %v", err, wantMsg, supported)
					}
					return
				}
				if err != nil {
					t.Fatalf("Convert: %v", err)
				}
				res := results[mode]
				if got := summary(t, out); !slices.Equal(got, res.want) {
					t.Fatalf("objects:\n got %q\nwant %q", got, res.want)
				}
				dep := find(t, out, "Deployment", ns, "op")
				ann, _, _ := unstructured.NestedStringMap(dep.Object, "spec", "template", "metadata", "annotations")
				want := map[string]string{"csv": "from-csv", "pod": "from-pod", "shared": "from-pod", AnnotationTargetNamespaces: res.targets, AnnotationOperatorNamespace: ns}
				if fmt.Sprint(ann) != fmt.Sprint(want) {
					t.Fatalf("pod annotations = %v, want %v", ann, want)
				}
			})
		}
	}
}

func TestAllNamespacesGrantsNamespaceReads(t *testing.T) {
	out, err := Convert(testBundle(t, testCSV(InstallModeAllNamespaces)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	role := find(t, out, "ClusterRole", "", "op.v1.0.0-op-sa")
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	if len(rules) != 2 || fmt.Sprint(rules[1]) != "map[apiGroups:[] resources:[namespaces] verbs:[get list watch]]" {
		t.Fatalf("rules = %v", rules)
	}
	binding := find(t, out, "ClusterRoleBinding", "", "op.v1.0.0-op-sa")
	subjects, _, _ := unstructured.NestedSlice(binding.Object, "subjects")
	if fmt.Sprint(subjects) != "[map[kind:ServiceAccount name:op-sa namespace:op-system]]" {
		t.Fatalf("subjects = %v", subjects)
	}
	ns := find(t, out, "Namespace", "", "op-system")
	if ns.GetAnnotations()[AnnotationCreatedNamespace] != "true" {
		t.Fatalf("namespace annotations = %v", ns.GetAnnotations())
	}
	dep := find(t, out, "Deployment", "op-system", "op")
	if dep.GetLabels()["app"] != "op" {
		t.Fatalf("deployment labels = %v", dep.GetLabels())
	}
	if r, _, _ := unstructured.NestedInt64(dep.Object, "spec", "replicas"); r != 1 {
		t.Fatalf("replicas = %d, want 1", r)
	}
}

func TestInstallNamespace(t *testing.T) {
	tests := []struct {
		name      string
		suggested string
		opts      Options
		wantNS    string
		wantNSObj bool
	}{
		{name: "package default", wantNS: "op-system", wantNSObj: true},
		{name: "suggested by the CSV", suggested: "suggested", wantNS: "suggested", wantNSObj: true},
		{name: "option wins", suggested: "suggested", opts: Options{InstallNamespace: "chosen"}, wantNS: "chosen", wantNSObj: true},
		{name: "system namespace is not emitted", opts: Options{InstallNamespace: "default"}, wantNS: "default"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			csv := testCSV(InstallModeAllNamespaces)
			if tc.suggested != "" {
				csv["metadata"].(map[string]interface{})["annotations"].(map[string]interface{})[AnnotationSuggestedNS] = tc.suggested
			}
			out, err := Convert(testBundle(t, csv), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			find(t, out, "Deployment", tc.wantNS, "op")
			got := summary(t, out)
			if has := slices.Contains(got, "Namespace /"+tc.wantNS); has != tc.wantNSObj {
				t.Fatalf("Namespace object emitted = %v, want %v (%v)", has, tc.wantNSObj, got)
			}
		})
	}
}

func TestServiceAccounts(t *testing.T) {
	csv := testCSV(InstallModeAllNamespaces)
	install := csv["spec"].(map[string]interface{})["install"].(map[string]interface{})["spec"].(map[string]interface{})
	install["permissions"] = append(install["permissions"].([]interface{}),
		map[string]interface{}{"serviceAccountName": "default", "rules": []interface{}{}},
		map[string]interface{}{"serviceAccountName": "shipped", "rules": []interface{}{}},
		map[string]interface{}{"serviceAccountName": "extra", "rules": []interface{}{}},
	)
	fsys := testBundle(t, csv)
	fsys["manifests/sa.yaml"] = &fstest.MapFile{Data: []byte("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: shipped, namespace: elsewhere}\n")}
	out, err := Convert(fsys, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var sas []string
	for _, s := range summary(t, out) {
		if strings.HasPrefix(s, "ServiceAccount ") {
			sas = append(sas, s)
		}
	}
	// Generated ones sorted, then the bundle's own, moved to the install namespace.
	want := []string{"ServiceAccount op-system/extra", "ServiceAccount op-system/op-sa", "ServiceAccount op-system/shipped"}
	if !slices.Equal(sas, want) {
		t.Fatalf("service accounts = %q, want %q", sas, want)
	}
}

func TestValidationFailures(t *testing.T) {
	withSpec := func(key string, value interface{}) map[string]interface{} {
		csv := testCSV(InstallModeAllNamespaces)
		csv["spec"].(map[string]interface{})[key] = value
		return csv
	}
	tests := []struct {
		name   string
		mutate func(fstest.MapFS)
		csv    map[string]interface{}
		opts   Options
		want   string
	}{
		{
			name:   "no annotations file",
			mutate: func(f fstest.MapFS) { delete(f, "metadata/annotations.yaml") },
			want:   "read bundle annotations: open metadata/annotations.yaml: file does not exist",
		},
		{
			name: "no package",
			mutate: func(f fstest.MapFS) {
				f["metadata/annotations.yaml"] = &fstest.MapFile{Data: []byte("annotations:\n  operators.operatorframework.io.bundle.channels.v1: stable\n")}
			},
			want: `metadata/annotations.yaml: no package name: annotation "operators.operatorframework.io.bundle.package.v1" must be set`,
		},
		{
			name: "no channels",
			mutate: func(f fstest.MapFS) {
				f["metadata/annotations.yaml"] = &fstest.MapFile{Data: []byte("annotations:\n  operators.operatorframework.io.bundle.package.v1: op\n  operators.operatorframework.io.bundle.channels.v1: ' , '\n")}
			},
			want: `metadata/annotations.yaml: no channels: annotation "operators.operatorframework.io.bundle.channels.v1" must list at least one channel`,
		},
		{
			name: "wrong media type",
			mutate: func(f fstest.MapFS) {
				f["metadata/annotations.yaml"] = &fstest.MapFile{Data: []byte(strings.Replace(testAnnotations, "registry+v1", "plain+v0", 1))}
			},
			want: `metadata/annotations.yaml: media type "plain+v0" (operators.operatorframework.io.bundle.mediatype.v1) is not "registry+v1"`,
		},
		{
			name:   "malformed annotations",
			mutate: func(f fstest.MapFS) { f["metadata/annotations.yaml"] = &fstest.MapFile{Data: []byte("annotations: [")} },
			want:   "decode metadata/annotations.yaml: ",
		},
		{
			name:   "no CSV",
			mutate: func(f fstest.MapFS) { delete(f, "manifests/op.clusterserviceversion.yaml") },
			want:   "found 0 ClusterServiceVersions in manifests: registry+v1 bundles must contain exactly one",
		},
		{
			name: "two CSVs",
			mutate: func(f fstest.MapFS) {
				f["manifests/other.clusterserviceversion.yaml"] = f["manifests/op.clusterserviceversion.yaml"]
			},
			want: "found 2 ClusterServiceVersions in manifests (manifests/op.clusterserviceversion.yaml, manifests/other.clusterserviceversion.yaml): registry+v1 bundles must contain exactly one",
		},
		{
			name:   "owned CRD missing",
			mutate: func(f fstest.MapFS) { delete(f, "manifests/foos.crd.yaml") },
			want:   `ClusterServiceVersion "op.v1.0.0": owned CustomResourceDefinitions missing from the bundle: foos.example.com`,
		},
		{
			name: "unsupported kind",
			mutate: func(f fstest.MapFS) {
				f["manifests/dep.yaml"] = &fstest.MapFile{Data: []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: extra}\n")}
			},
			want: `manifests/dep.yaml: object Deployment "extra" is of a kind registry+v1 bundles cannot contain; supported kinds are ClusterServiceVersion, CustomResourceDefinition, ClusterRole, ClusterRoleBinding, ConfigMap, ConsoleCLIDownload, ConsoleLink, ConsolePlugin, ConsoleQuickStart, ConsoleYAMLSample, NetworkPolicy, PodDisruptionBudget, PodMonitor, PriorityClass, PrometheusRule, Role, RoleBinding, Secret, Service, ServiceAccount, ServiceMonitor, VerticalPodAutoscaler`,
		},
		{
			name:   "malformed manifest",
			mutate: func(f fstest.MapFS) { f["manifests/bad.yaml"] = &fstest.MapFile{Data: []byte("kind: [")} },
			want:   "decode manifests/bad.yaml: document 0: ",
		},
		{
			name: "subdirectory",
			mutate: func(f fstest.MapFS) {
				f["manifests/crds/foos.yaml"] = f["manifests/foos.crd.yaml"]
				delete(f, "manifests/foos.crd.yaml")
			},
			want: `subdirectories are not allowed within the "manifests" directory of the bundle image filesystem: found "manifests/crds"`,
		},
		{
			name: "duplicate object",
			mutate: func(f fstest.MapFS) {
				f["manifests/cm.yaml"] = &fstest.MapFile{Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")}
			},
			want: `the bundle contains ConfigMap "c" more than once`,
		},
		{
			name: "install strategy",
			csv:  withSpec("install", map[string]interface{}{"strategy": "helm"}),
			want: `ClusterServiceVersion "op.v1.0.0": spec.install.strategy "helm" is not supported: only "deployment" is`,
		},
		{
			name: "permission without service account",
			csv: withSpec("install", map[string]interface{}{"strategy": "deployment", "spec": map[string]interface{}{
				"clusterPermissions": []interface{}{map[string]interface{}{"rules": []interface{}{}}},
			}}),
			want: `ClusterServiceVersion "op.v1.0.0": spec.install.spec.clusterPermissions[0] has no serviceAccountName`,
		},
		{
			name: "CSV field of the wrong type",
			csv:  withSpec("installModes", "all"),
			want: `manifests/op.clusterserviceversion.yaml: decode ClusterServiceVersion "op.v1.0.0": `,
		},
		{
			name: "invalid install namespace",
			opts: Options{InstallNamespace: "Not_Valid"},
			want: `install namespace "Not_Valid" is not a valid namespace name: `,
		},
		{
			name: "watch namespace twice",
			opts: Options{WatchNamespaces: []string{"a", "a"}},
			want: `watch namespace "a" is listed more than once`,
		},
		{
			name: "unsupported requested mode names the supported ones",
			opts: Options{WatchNamespaces: []string{"a", "b"}},
			want: `ClusterServiceVersion "op.v1.0.0" does not support install mode MultiNamespace (install namespace "op-system", watch namespaces ["a" "b"]); supported install modes: AllNamespaces`,
		},
		{
			name: `explicit all namespaces [""] without AllNamespaces`,
			csv:  testCSV(InstallModeOwnNamespace, InstallModeSingleNamespace),
			opts: Options{WatchNamespaces: []string{""}},
			want: `ClusterServiceVersion "op.v1.0.0" does not support install mode AllNamespaces, which watchNamespaces [""] selects (supported install modes: OwnNamespace, SingleNamespace)`,
		},
		{
			name: "no default mode without AllNamespaces or OwnNamespace",
			csv:  testCSV(InstallModeSingleNamespace),
			want: `ClusterServiceVersion "op.v1.0.0" supports neither AllNamespaces nor OwnNamespace, so it has no default install mode (supported install modes: SingleNamespace): set spec.config.watchNamespaces to the namespaces the operator should watch`,
		},
		{
			name: "no supported install mode",
			csv:  testCSV(),
			want: `ClusterServiceVersion "op.v1.0.0" supports no install mode`,
		},
		{
			name: "empty watch namespace among others",
			opts: Options{WatchNamespaces: []string{"", "a"}},
			want: `watch namespace "" is not a valid namespace name: `,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			csv := tc.csv
			if csv == nil {
				csv = testCSV(InstallModeAllNamespaces)
			}
			fsys := testBundle(t, csv)
			if tc.mutate != nil {
				tc.mutate(fsys)
			}
			_, err := Convert(fsys, tc.opts)
			if err == nil {
				t.Fatalf("Convert succeeded, want error %q", tc.want)
			}
			// Messages ending in ": " are followed by a parser's own words.
			if strings.HasSuffix(tc.want, ": ") {
				if !strings.HasPrefix(err.Error(), tc.want) {
					t.Fatalf("got error %q, want prefix %q", err, tc.want)
				}
				return
			}
			if err.Error() != tc.want {
				t.Fatalf("got error\n %q\nwant\n %q", err, tc.want)
			}
		})
	}
}

func TestConvertIsDeterministic(t *testing.T) {
	csv := testCSV(installModeOrder...)
	install := csv["spec"].(map[string]interface{})["install"].(map[string]interface{})["spec"].(map[string]interface{})
	for _, sa := range []string{"z", "m", "a", "q"} {
		install["permissions"] = append(install["permissions"].([]interface{}),
			map[string]interface{}{"serviceAccountName": sa, "rules": []interface{}{}})
	}
	fsys := testBundle(t, csv)
	opts := Options{WatchNamespaces: []string{"a", "b", "c"}}
	first, err := Convert(fsys, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		again, err := Convert(fsys, opts)
		if err != nil {
			t.Fatal(err)
		}
		a, b := fstestCopy(t, first), fstestCopy(t, again)
		if len(a) != len(b) {
			t.Fatalf("run %d: %d files, first run had %d", i, len(b), len(a))
		}
		for name, f := range a {
			if g, ok := b[name]; !ok || !bytes.Equal(g.Data, f.Data) {
				t.Fatalf("run %d: %s differs", i, name)
			}
		}
	}
}

func TestOptionsFromConfig(t *testing.T) {
	tests := []struct {
		config  string
		want    Options
		wantErr string
	}{
		{config: ``, want: Options{}},
		{config: `null`, want: Options{}},
		{config: `{}`, want: Options{}},
		{config: `{"installNamespace":"ns","watchNamespaces":["a","b"]}`, want: Options{InstallNamespace: "ns", WatchNamespaces: []string{"a", "b"}}},
		{config: `{"watchNamespace":["a"]}`, wantErr: `invalid spec.config: json: unknown field "watchNamespace"`},
		{config: `{"watchNamespaces":"a"}`, wantErr: `invalid spec.config: json: cannot unmarshal string into Go struct field Options.watchNamespaces of type []string`},
		{config: `{} {}`, wantErr: `invalid spec.config: unexpected data after the JSON object`},
	}
	for _, tc := range tests {
		t.Run(tc.config, func(t *testing.T) {
			got, err := OptionsFromConfig([]byte(tc.config))
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("got error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.InstallNamespace != tc.want.InstallNamespace || !slices.Equal(got.WatchNamespaces, tc.want.WatchNamespaces) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestTruncateName(t *testing.T) {
	long := strings.Repeat("a", 60) + "-bbbbbbbbbb"
	multi := strings.Repeat("a", 53) + "é" + strings.Repeat("b", 20)
	tests := []struct{ in, want string }{
		{"short", "short"},
		{strings.Repeat("x", 63), strings.Repeat("x", 63)},
		{long, strings.Repeat("a", 54) + "-" + fmt.Sprintf("%x", sha256.Sum256([]byte(long)))[:8]},
		// Cut before a character the limit would halve.
		{multi, strings.Repeat("a", 53) + "-" + fmt.Sprintf("%x", sha256.Sum256([]byte(multi)))[:8]},
	}
	for _, tc := range tests {
		got := truncateName(tc.in)
		if got != tc.want || len(got) > maxNameLength {
			t.Errorf("truncateName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if truncateName(long) == truncateName(long+"c") {
		t.Error("distinct long names truncated to the same name")
	}
}

func TestDependencies(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		want    []string
		wantErr string
	}{
		{name: "no file"},
		{
			name: "all types",
			file: `dependencies:
- type: olm.package
  value: {packageName: etcd, version: ">=0.9.0"}
- type: olm.gvk
  value: {group: example.com, version: v1, kind: Foo}
- type: olm.gvk
  value: {version: v1, kind: Pod}
- type: olm.label
  value: {label: "beta"}
`,
			want: []string{"olm.package etcd (>=0.9.0)", "olm.gvk example.com/v1 Foo", "olm.gvk v1 Pod", `olm.label {"label":"beta"}`},
		},
		{name: "package without name", file: "dependencies:\n- type: olm.package\n  value: {version: '1'}\n", wantErr: "decode metadata/dependencies.yaml: dependencies[0]: olm.package value has no packageName"},
		{name: "no type", file: "dependencies:\n- value: {}\n", wantErr: "decode metadata/dependencies.yaml: dependencies[0]: dependency has no type"},
		{name: "malformed", file: "dependencies: {", wantErr: "decode metadata/dependencies.yaml: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			if tc.file != "" {
				fsys[DependenciesFile] = &fstest.MapFile{Data: []byte(tc.file)}
			}
			got, err := Dependencies(fsys)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestIsRegistryContent(t *testing.T) {
	if IsRegistryContent(fstest.MapFS{"manifests/a.yaml": {Data: []byte("x")}}) {
		t.Fatal("plain content reported as registry content")
	}
	out, err := Convert(testBundle(t, testCSV(InstallModeAllNamespaces)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !IsRegistryContent(out) {
		t.Fatal("converted content not reported as registry content")
	}
}

func TestMalformedDeployment(t *testing.T) {
	csv := testCSV(InstallModeAllNamespaces)
	install := csv["spec"].(map[string]interface{})["install"].(map[string]interface{})["spec"].(map[string]interface{})
	dep := install["deployments"].([]interface{})[0].(map[string]interface{})
	dep["spec"].(map[string]interface{})["template"].(map[string]interface{})["metadata"] = map[string]interface{}{"annotations": "oops"}
	_, err := Convert(testBundle(t, csv), Options{})
	want := `deployment "op": spec.template.metadata.annotations: .template.metadata.annotations accessor error: oops is of the type string, expected map[string]interface{}`
	if err == nil || err.Error() != want {
		t.Fatalf("got error %v, want %q", err, want)
	}
}
