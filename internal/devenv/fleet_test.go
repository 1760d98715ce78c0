package devenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
)

func TestFleetBundles(t *testing.T) {
	mk := func(t *testing.T, dirs ...string) string {
		t.Helper()
		root := t.TempDir()
		for _, d := range dirs {
			if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return root
	}
	root := mk(t, "keycloak-operator-26.7.1/manifests", "ack-kms-controller-1.4.1/manifests", "jaeger-v2.0.0/manifests",
		"noversion/manifests", "not-a-bundle-1.0.0/metadata")
	if err := os.WriteFile(filepath.Join(root, "README.md"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := FleetBundles(root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range got {
		names = append(names, b.Name+"@"+b.Version)
	}
	want := "ack-kms-controller@1.4.1 jaeger@v2.0.0 keycloak-operator@26.7.1 noversion@latest"
	if strings.Join(names, " ") != want {
		t.Errorf("bundles %v, want %s", names, want)
	}

	for _, tc := range []struct {
		name, wantErr string
		dirs          []string
	}{
		{"two versions of one package", "are one package", []string{"a-1.0.0/manifests", "a-2.0.0/manifests"}},
		{"not a DNS label", "not a BundleDeployment name", []string{"Upper_Case-1.0.0/manifests"}},
		{"too long", "not a BundleDeployment name", []string{strings.Repeat("a", 46) + "-1.0.0/manifests"}},
		{"no bundle", "holds no bundle", []string{"docs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FleetBundles(mk(t, tc.dirs...))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// The real fleet of the shared test data: sixty bundles, each a valid name.
func TestFleetBundlesOfTheSharedFleet(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "shared", "testdata", "fleet")
	if _, err := os.Stat(dir); err != nil {
		dir = "/work/shared/testdata/fleet"
	}
	if _, err := os.Stat(dir); err != nil {
		t.Skip("no shared fleet test data here")
	}
	got, err := FleetBundles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 60 {
		t.Errorf("%d bundles, want 60", len(got))
	}
}

func TestStatusOf(t *testing.T) {
	bd := func(name string, conds ...metav1.Condition) rukpakv1alpha1.BundleDeployment {
		return rukpakv1alpha1.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: rukpakv1alpha1.BundleDeploymentStatus{Conditions: conds}}
	}
	cond := func(typ string, s metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: "m"}
	}
	s := StatusOf([]rukpakv1alpha1.BundleDeployment{
		bd("done", cond(rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, "InstallationSucceeded"), cond(rukpakv1alpha1.TypeHealthy, metav1.ConditionTrue, "Healthy")),
		bd("unhealthy", cond(rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, "InstallationSucceeded"), cond(rukpakv1alpha1.TypeHealthy, metav1.ConditionFalse, "Unhealthy")),
		bd("failed", cond(rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, "InstallFailed")),
		bd("new"),
	})
	if s.Total != 4 || s.Installed != 2 || s.Healthy != 1 {
		t.Errorf("counts %+v", s)
	}
	want := []string{"failed: Installed=False InstallFailed: m", "new: no Installed condition yet", "unhealthy: Healthy=False Unhealthy: m"}
	if strings.Join(s.Waiting, "|") != strings.Join(want, "|") {
		t.Errorf("waiting %q, want %q", s.Waiting, want)
	}
}

func TestRuntimePriorityClasses(t *testing.T) {
	dir := t.TempDir()
	write := func(path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, path), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a-1.0.0/manifests/csv.yaml", "spec:\n  template:\n    spec:\n      priorityClassName: made-at-runtime\n      containers: []\n")
	write("b-1.0.0/manifests/csv.yaml", "spec:\n  priorityClassName: \"system-cluster-critical\"\n---\n  priorityClassName: shipped\n")
	write("b-1.0.0/manifests/pc.yaml", "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata:\n  name: shipped\nvalue: 10\n")
	bundles, err := FleetBundles(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := RuntimePriorityClasses(bundles)
	if err != nil || strings.Join(got, ",") != "made-at-runtime" {
		t.Fatalf("got %v, %v; want [made-at-runtime]", got, err)
	}
	// The shared fleet: kubevirt's hyperconverged operator creates its own.
	shared, err := FleetBundles(testenv.SharedTestdata("fleet"))
	if err != nil {
		t.Skipf("the shared fleet: %v", err)
	}
	if got, err = RuntimePriorityClasses(shared); err != nil || strings.Join(got, ",") != "kubevirt-cluster-critical" {
		t.Fatalf("shared fleet: %v, %v; want [kubevirt-cluster-critical]", got, err)
	}
}
