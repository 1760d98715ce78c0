package install

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/provisioner/release"
)

// configMapsChart renders a ConfigMap per name in .Values.configMaps, each
// holding .Values.value.
var configMapsChart = fstest.MapFS{
	"Chart.yaml":  {Data: []byte("apiVersion: v2\nname: configmaps\nversion: 0.1.0\n")},
	"values.yaml": {Data: []byte("configMaps: []\nvalue: v1\n")},
	"templates/configmaps.yaml": {Data: []byte(`{{- range .Values.configMaps }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ . }}
data:
  value: {{ $.Values.value | quote }}
{{- end }}
`)},
}

// TestIntegrationHelmOwnership: a helm-class release record, altered or
// stale, lists objects the release does not own (any more): neither an
// upgrade nor an uninstall of that release may patch or delete them, and
// drift correction is not handed an altered record's objects. The plain
// class's TestIntegrationReleaseRecordsDoNotGrantOwnership, for the class
// that installs with Helm's actions.
func TestIntegrationHelmOwnership(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	ctx := context.Background()
	const ns, apps = "rukpak-system", "apps"
	for _, n := range []string{ns, apps} {
		testenv.MustNotError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}), "creating namespace %s", n)
	}
	m, err := release.NewManager(env.Config, ns)
	testenv.MustNotError(t, err, "creating the release manager")
	in := &Installer{Releases: m, Client: env.Client, Reader: env.Client, Class: rukpakv1alpha1.ProvisionerClassHelm}

	// install installs (or upgrades) release name as the helm class does
	// for a BundleDeployment of that name.
	install := func(name, value string, configMaps ...string) error {
		t.Helper()
		values := fmt.Sprintf("configMaps: [%s]\nvalue: %s\n", strings.Join(configMaps, ", "), value)
		config := fmt.Sprintf(`{"installNamespace":%q,"values":%q}`, apps, values)
		bd := &rukpakv1alpha1.BundleDeployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name + "-uid")},
			Spec: rukpakv1alpha1.BundleDeploymentSpec{
				ProvisionerClassName: rukpakv1alpha1.ProvisionerClassHelm,
				Config:               &apiextensionsv1.JSON{Raw: []byte(config)},
			},
		}
		_, err := in.Install(ctx, bd, configMapsChart, nil, func(o *unstructured.Unstructured) {
			l := o.GetLabels()
			l[rukpakv1alpha1.LabelOwnerKind] = "BundleDeployment"
			l[rukpakv1alpha1.LabelOwnerName] = name
			o.SetLabels(l)
		})
		return err
	}
	mustInstall := func(name, value string, configMaps ...string) {
		t.Helper()
		testenv.MustNotError(t, install(name, value, configMaps...), "installing release %s", name)
	}
	// forge writes the next revision of release name, deployed, listing
	// ConfigMaps of apps, as anyone who may write Secrets in the
	// provisioner's namespace could: those named <name>-... with the
	// release's ownership metadata, as the provisioner records them. It
	// returns the revision.
	forge := func(name string, labels map[string]string, configMaps ...string) int {
		t.Helper()
		hist, err := m.History(name)
		testenv.MustNotError(t, err, "reading the history of %s", name)
		var manifest strings.Builder
		for _, cm := range configMaps {
			fmt.Fprintf(&manifest, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\n", cm, apps)
			if strings.HasPrefix(cm, name+"-") {
				fmt.Fprintf(&manifest, "  labels: {%q: BundleDeployment, %q: %s}\n  annotations: {meta.helm.sh/release-name: %s, meta.helm.sh/release-namespace: %s}\n",
					rukpakv1alpha1.LabelOwnerKind, rukpakv1alpha1.LabelOwnerName, name, name, apps)
			}
			manifest.WriteString("data:\n  value: forged\n")
		}
		rel := &helmrelease.Release{
			Name: name, Namespace: apps, Version: len(hist) + 1, Manifest: manifest.String(), Labels: labels, Config: map[string]any{},
			Chart: &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: "configmaps", Version: "0.1.0"}},
			Info:  &helmrelease.Info{Status: helmrelease.StatusDeployed, LastDeployed: helmtime.Now(), Description: "forged"},
		}
		testenv.MustNotError(t, m.ActionConfig(ctx, nil).Releases.Create(rel), "forging revision %d of %s", rel.Version, name)
		return rel.Version
	}
	// value is a ConfigMap's value and the release its annotations name.
	value := func(name string) string {
		t.Helper()
		cm := &corev1.ConfigMap{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: apps, Name: name}, cm); err != nil {
			if apierrors.IsNotFound(err) {
				return "<deleted>"
			}
			t.Fatal(err)
		}
		return cm.Data["value"] + "@" + cm.Annotations["meta.helm.sh/release-name"]
	}

	// An admin's own object, and one another release installed.
	testenv.MustNotError(t, env.Client.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "admins"}, Data: map[string]string{"value": "admin"},
	}), "creating the admin's ConfigMap")
	mustInstall("other", "other", "others")

	t.Run("an upgrade does not patch an object its record lists that another release owns", func(t *testing.T) {
		mustInstall("taker", "v1", "taker-own")
		rev := forge("taker", nil, "taker-own", "others")
		err := install("taker", "v2", "taker-own", "others")
		want := fmt.Sprintf(`upgrading release "taker": Upgrade "taker" failed: ConfigMap apps/others exists and is not managed by this release (apps/taker): `+
			"it is owned by release apps/other; delete them or remove them from the chart (revision %d failed; retried with the same chart and values after %s)", rev+1, DefaultRetryAfter)
		if err == nil || err.Error() != want {
			t.Fatalf("upgrade: got %v\nwant %s", err, want)
		}
		if got := value("others") + "," + value("taker-own"); got != "other@other,v1@taker" {
			t.Errorf("objects after the upgrade: %s", got)
		}
	})

	t.Run("a refusal names at most 10 objects", func(t *testing.T) {
		var many []string
		for i := range 12 {
			many = append(many, fmt.Sprintf("many-%02d", i))
		}
		mustInstall("many", "many", many...)
		mustInstall("greedy", "v1", "greedy-own")
		rev := forge("greedy", nil, append([]string{"greedy-own"}, many...)...)
		err := install("greedy", "v2", append([]string{"greedy-own"}, many...)...)
		var parts []string
		for _, cm := range many[:10] {
			parts = append(parts, fmt.Sprintf("ConfigMap apps/%s exists and is not managed by this release (apps/greedy): it is owned by release apps/many", cm))
		}
		want := fmt.Sprintf(`upgrading release "greedy": Upgrade "greedy" failed: %s; and 2 more; delete them or remove them from the chart (revision %d failed; retried with the same chart and values after %s)`,
			strings.Join(parts, "; "), rev+1, DefaultRetryAfter)
		if err == nil || err.Error() != want {
			t.Fatalf("upgrade: got %v\nwant %s", err, want)
		}
		for _, cm := range many {
			if got := value(cm); got != "many@many" {
				t.Errorf("%s: %s", cm, got)
			}
		}
	})

	t.Run("an upgrade does not take back an object another release installed since, nor an uninstall delete it", func(t *testing.T) {
		mustInstall("mover", "v1", "moved", "mover-own")
		testenv.MustNotError(t, env.Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "moved"}}), "deleting moved")
		mustInstall("thief", "thief", "moved")

		err := install("mover", "v2", "moved", "mover-own")
		want := `upgrading release "mover": Upgrade "mover" failed: ConfigMap apps/moved exists and is not managed by this release (apps/mover): ` +
			"it is owned by release apps/thief; delete them or remove them from the chart (revision 2 failed; retried with the same chart and values after " + DefaultRetryAfter.String() + ")"
		if err == nil || err.Error() != want {
			t.Fatalf("upgrade: got %v\nwant %s", err, want)
		}
		if got := value("moved") + "," + value("mover-own"); got != "thief@thief,v1@mover" {
			t.Errorf("objects after the upgrade: %s", got)
		}

		kept, err := in.Uninstall(ctx, "mover")
		testenv.MustNotError(t, err, "uninstalling mover")
		if got, want := strings.Join(kept, ","), "ConfigMap apps/moved (owned by release apps/thief)"; got != want {
			t.Errorf("kept %q\nwant %q", got, want)
		}
		if got := value("moved") + "," + value("mover-own"); got != "thief@thief,<deleted>" {
			t.Errorf("objects after the uninstall: %s", got)
		}
	})

	t.Run("an upgrade does not delete objects its record lists but it does not own", func(t *testing.T) {
		mustInstall("stale", "v1", "stale-own", "stale-dropped")
		forge("stale", nil, "stale-own", "stale-dropped", "admins", "others")
		mustInstall("stale", "v2", "stale-own")
		if got := value("admins") + "," + value("others") + "," + value("stale-own") + "," + value("stale-dropped"); got != "admin@,other@other,v2@stale,<deleted>" {
			t.Errorf("objects after the upgrade: %s", got)
		}
	})

	t.Run("uninstall deletes only objects that carry the release's ownership metadata", func(t *testing.T) {
		mustInstall("victim", "v1", "victims")
		forge("victim", nil, "victims", "admins", "others")
		kept, err := in.Uninstall(ctx, "victim")
		testenv.MustNotError(t, err, "uninstalling victim")
		want := "ConfigMap apps/admins (no ownership metadata of release apps/victim),ConfigMap apps/others (owned by release apps/other)"
		if got := strings.Join(kept, ","); got != want {
			t.Errorf("kept %q\nwant %q", got, want)
		}
		if got := value("admins") + "," + value("others") + "," + value("victims"); got != "admin@,other@other,<deleted>" {
			t.Errorf("objects after the uninstall: %s", got)
		}
		if hist, err := m.History("victim"); err == nil && len(hist) > 0 {
			t.Errorf("release records left after the uninstall: %d", len(hist))
		}
	})

	t.Run("drift correction is not handed the objects of an altered record", func(t *testing.T) {
		mustInstall("drift", "v1", "drift-own")
		hist, err := m.History("drift")
		testenv.MustNotError(t, err, "reading the history of drift")
		// The inputs' digest of the deployed revision: the altered record
		// is current, so Install reports its objects without an action.
		rev := forge("drift", hist[0].Labels, "drift-own", "admins")
		err = install("drift", "v1", "drift-own")
		want := fmt.Sprintf(`release "drift" revision %d lists ConfigMap apps/admins (no ownership metadata of release apps/drift), which the provisioner never records: the record was altered; refusing to restore its objects`, rev)
		if err == nil || err.Error() != want {
			t.Fatalf("install: got %v\nwant %s", err, want)
		}
		if got := value("admins") + "," + value("drift-own"); got != "admin@,v1@drift" {
			t.Errorf("objects: %s", got)
		}
	})
}
