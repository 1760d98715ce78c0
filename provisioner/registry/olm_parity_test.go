package registry

import (
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The tests below pin, on real community bundles, where conversion matches
// OLM's registry+v1 install (issue #13, item 5).

// Operators read the install namespace from the pod annotation
// olm.operatorNamespace through the downward API; OLM sets it.
func TestCorpusOperatorNamespaceAnnotation(t *testing.T) {
	out, err := Convert(corpusBundle(t, "prometheus-0.47.0"), Options{InstallNamespace: "monitoring", WatchNamespaces: []string{"apps"}})
	if err != nil {
		t.Fatal(err)
	}
	dep := find(t, out, "Deployment", "monitoring", "prometheus-operator")
	ann, _, err := unstructured.NestedStringMap(dep.Object, "spec", "template", "metadata", "annotations")
	if err != nil {
		t.Fatal(err)
	}
	if got := ann[AnnotationOperatorNamespace]; got != "monitoring" {
		t.Fatalf("pod template annotation %s = %q, want %q", AnnotationOperatorNamespace, got, "monitoring")
	}
	if got := ann[AnnotationTargetNamespaces]; got != "apps" {
		t.Fatalf("pod template annotation %s = %q, want %q", AnnotationTargetNamespaces, got, "apps")
	}
}

// OLM (v0 and v1) sets revisionHistoryLimit: 1 on every operator Deployment.
func TestCorpusRevisionHistoryLimit(t *testing.T) {
	out, err := Convert(corpusBundle(t, "konveyor-operator-0.3.1"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	dep := find(t, out, "Deployment", "konveyor-tackle", "tackle-operator")
	got, found, err := unstructured.NestedInt64(dep.Object, "spec", "revisionHistoryLimit")
	if err != nil || !found || got != 1 {
		t.Fatalf("spec.revisionHistoryLimit = %d (found %v, err %v), want 1", got, found, err)
	}
}

// patchedCorpusBundle is a real bundle read into memory with one exact
// substitution in the file at path (the shared test data stays untouched).
func patchedCorpusBundle(t *testing.T, name, path, old, new string) fs.FS {
	t.Helper()
	mem := fstestCopy(t, corpusBundle(t, name))
	f, ok := mem[path]
	if !ok {
		t.Fatalf("%s has no %s", name, path)
	}
	if n := strings.Count(string(f.Data), old); n != 1 {
		t.Fatalf("%s/%s holds %q %d times, want once", name, path, old, n)
	}
	f.Data = []byte(strings.Replace(string(f.Data), old, new, 1))
	return mem
}

// Watching several namespaces that include the install namespace needs
// OwnNamespace as well as MultiNamespace; OLM refuses it otherwise.
// konveyor-operator 0.3.1 supports OwnNamespace, SingleNamespace and
// MultiNamespace; with OwnNamespace turned off it is the shape OLM refuses.
func TestCorpusMultiNamespaceWithInstallNamespaceNeedsOwnNamespace(t *testing.T) {
	const csvPath = "manifests/konveyor-operator.clusterserviceversion.yaml"
	opts := Options{WatchNamespaces: []string{"team-a", "konveyor-tackle"}}

	// As shipped (OwnNamespace supported) it installs.
	out, err := Convert(corpusBundle(t, "konveyor-operator-0.3.1"), opts)
	if err != nil {
		t.Fatalf("Convert: %v", err)
	}
	find(t, out, "Deployment", "konveyor-tackle", "tackle-operator")

	src := patchedCorpusBundle(t, "konveyor-operator-0.3.1", csvPath,
		"- supported: true\n    type: OwnNamespace\n", "- supported: false\n    type: OwnNamespace\n")
	_, err = Convert(src, opts)
	want := `ClusterServiceVersion "konveyor-operator.v0.3.1" does not support install mode OwnNamespace, which watch namespaces ["team-a" "konveyor-tackle"] need because they include the install namespace "konveyor-tackle": OwnNamespace InstallModeType not supported, cannot configure to watch own namespace (supported install modes: SingleNamespace, MultiNamespace)`
	if err == nil || err.Error() != want {
		t.Fatalf("got error %v\nwant %s", err, want)
	}
	// Without the install namespace the same CSV installs in MultiNamespace.
	if _, err := Convert(src, Options{WatchNamespaces: []string{"team-a", "team-b"}}); err != nil {
		t.Fatalf("Convert without the install namespace: %v", err)
	}
}

// A typo in an install mode type drops that mode; the message names the
// unknown type so the author sees the cause. prometheus-0.47.0 supports
// OwnNamespace and SingleNamespace; with the OwnNamespace entry misspelt (a
// typo found in a real catalog) no default mode remains.
func TestCorpusUnknownInstallModeTypeIsNamed(t *testing.T) {
	src := patchedCorpusBundle(t, "prometheus-0.47.0", "manifests/prometheusoperator.0.47.0.clusterserviceversion.yaml",
		"type: OwnNamespace\n", "type: OwnNamespacejl\n")
	_, err := Convert(src, Options{})
	want := `ClusterServiceVersion "prometheusoperator.0.47.0" supports neither AllNamespaces nor OwnNamespace, so it has no default install mode (supported install modes: SingleNamespace; spec.installModes lists unknown types, ignored: "OwnNamespacejl"): set spec.config.watchNamespaces to the namespaces the operator should watch`
	if err == nil || err.Error() != want {
		t.Fatalf("got error %v\nwant %s", err, want)
	}
	_, err = Convert(src, Options{WatchNamespaces: []string{"prometheus-system"}})
	want = `ClusterServiceVersion "prometheusoperator.0.47.0" does not support install mode OwnNamespace (install namespace "prometheus-system", watch namespaces ["prometheus-system"]); supported install modes: SingleNamespace; spec.installModes lists unknown types, ignored: "OwnNamespacejl"`
	if err == nil || err.Error() != want {
		t.Fatalf("got error %v\nwant %s", err, want)
	}
}

// In SingleNamespace and MultiNamespace modes the CSV's permissions become a
// Role and RoleBinding in the install namespace too (as OLM v0 grants them),
// where the operator takes its leader-election lock, then in each watched
// namespace.
func TestCorpusPermissionsInInstallNamespace(t *testing.T) {
	const role = "prometheusoperator.0.47.0-prometheus-operator"
	out, err := Convert(corpusBundle(t, "prometheus-0.47.0"), Options{InstallNamespace: "monitoring", WatchNamespaces: []string{"apps"}})
	if err != nil {
		t.Fatal(err)
	}
	var rbac []string
	for _, s := range summary(t, out) {
		if (strings.HasPrefix(s, "Role ") || strings.HasPrefix(s, "RoleBinding ")) && strings.HasSuffix(s, "/"+role) {
			rbac = append(rbac, s)
		}
	}
	want := []string{"Role monitoring/" + role, "RoleBinding monitoring/" + role, "Role apps/" + role, "RoleBinding apps/" + role}
	if !slices.Equal(rbac, want) {
		t.Fatalf("namespaced RBAC:\n got %q\nwant %q", rbac, want)
	}
	inInstall := find(t, out, "Role", "monitoring", role)
	inWatched := find(t, out, "Role", "apps", role)
	if !reflect.DeepEqual(inInstall.Object["rules"], inWatched.Object["rules"]) {
		t.Fatal("the install namespace's Role has other rules than the watched namespace's")
	}
	binding := find(t, out, "RoleBinding", "monitoring", role)
	subjects, _, _ := unstructured.NestedSlice(binding.Object, "subjects")
	wantSubjects := []interface{}{map[string]interface{}{"kind": "ServiceAccount", "name": "prometheus-operator", "namespace": "monitoring"}}
	if !reflect.DeepEqual(subjects, wantSubjects) {
		t.Fatalf("RoleBinding subjects = %v, want %v", subjects, wantSubjects)
	}

	// MultiNamespace including the install namespace: one Role there, not two.
	out, err = Convert(corpusBundle(t, "konveyor-operator-0.3.1"), Options{WatchNamespaces: []string{"team-a", "konveyor-tackle"}})
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, s := range summary(t, out) {
		if strings.HasPrefix(s, "Role ") && strings.HasSuffix(s, "-tackle-operator") {
			roles = append(roles, s)
		}
	}
	want = []string{"Role konveyor-tackle/konveyor-operator.v0.3.1-tackle-operator", "Role team-a/konveyor-operator.v0.3.1-tackle-operator"}
	if !slices.Equal(roles, want) {
		t.Fatalf("Roles:\n got %q\nwant %q", roles, want)
	}
}

// A bundle with a NetworkPolicy is accepted (operator-registry supports the
// kind) and the policy is installed in the install namespace. The bundle is
// l5-operator-0.0.2 read into memory with a NetworkPolicy added.
func TestCorpusNetworkPolicyAccepted(t *testing.T) {
	mem := fstestCopy(t, corpusBundle(t, "l5-operator-0.0.2"))
	mem["manifests/l5-operator-allow-metrics_networking.k8s.io_v1_networkpolicy.yaml"] = &fstest.MapFile{Data: []byte(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: l5-operator-allow-metrics
spec:
  podSelector:
    matchLabels:
      control-plane: controller-manager
  policyTypes:
  - Ingress
  ingress:
  - ports:
    - port: 8443
      protocol: TCP
`), Mode: 0o644}
	out, err := Convert(mem, Options{})
	if err != nil {
		t.Fatalf("Convert: %v", err)
	}
	np := find(t, out, "NetworkPolicy", "l5-operator-system", "l5-operator-allow-metrics")
	if got, _, _ := unstructured.NestedStringSlice(np.Object, "spec", "policyTypes"); !slices.Equal(got, []string{"Ingress"}) {
		t.Fatalf("spec.policyTypes = %q, want [Ingress]", got)
	}
	// It sits among the bundle's other objects, before the Deployments.
	got := summary(t, out)
	if i, j := slices.Index(got, "NetworkPolicy l5-operator-system/l5-operator-allow-metrics"), slices.Index(got, "Deployment l5-operator-system/l5-operator-controller-manager"); i < 0 || j < 0 || i > j {
		t.Fatalf("NetworkPolicy at %d, Deployment at %d in %q", i, j, got)
	}
}
