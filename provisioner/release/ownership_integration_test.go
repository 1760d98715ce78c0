package release

import (
	"context"
	"fmt"
	"strings"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rukpak-dev/rukpak/internal/testenv"
)

func configMap(ns, name, value string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"data":     map[string]any{"value": value},
	}}
}

// forge writes a deployed release record for name listing objs, as anyone
// who can write Secrets in the release namespace could (and as a bundle
// could, before objects without a namespace stopped landing there).
func forge(t *testing.T, m *Manager, name string, version int, objs ...*unstructured.Unstructured) {
	t.Helper()
	manifest, err := Manifest(objs, nil)
	if err != nil {
		t.Fatal(err)
	}
	rel := &helmrelease.Release{
		Name: name, Namespace: m.namespace, Version: version, Chart: emptyChart(name), Manifest: manifest,
		Config: map[string]any{}, Info: &helmrelease.Info{Status: helmrelease.StatusDeployed},
	}
	if err := m.store.Create(rel); err != nil {
		t.Fatal(err)
	}
}

// A release record, forged or stale, lists objects the release does not own
// (any more): neither an upgrade nor an uninstall of that release may take
// them over or delete them.
func TestIntegrationReleaseRecordsDoNotGrantOwnership(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	ctx := context.Background()
	ns, apps := testenv.Namespace(t, env, "rukpak-system"), testenv.Namespace(t, env, "apps")
	m, err := NewManager(env.Config, ns)
	if err != nil {
		t.Fatal(err)
	}
	// An admin's own object, and one another release installed.
	admins := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "admins"}, Data: map[string]string{"value": "admin"}}
	if err := env.Client.Create(ctx, admins); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Apply(ctx, "other", []*unstructured.Unstructured{configMap(apps, "others", "other")}, nil); err != nil {
		t.Fatal(err)
	}
	value := func(name string) string {
		t.Helper()
		cm := &corev1.ConfigMap{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: apps, Name: name}, cm); err != nil {
			if apierrors.IsNotFound(err) {
				return "<deleted>"
			}
			t.Fatal(err)
		}
		return cm.Data["value"]
	}

	t.Run("an upgrade does not take over an object another release owns", func(t *testing.T) {
		forge(t, m, "rollback", 1, configMap(apps, "others", "rollback"))
		_, err := m.Apply(ctx, "rollback", []*unstructured.Unstructured{configMap(apps, "others", "rollback")}, nil)
		want := fmt.Sprintf("ConfigMap %[1]s/others exists and is not managed by this release (%[2]s/rollback): it is owned by release %[2]s/other; delete it or remove it from the bundle", apps, ns)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("apply: got %v, want an error containing %q", err, want)
		}
		if got := value("others"); got != "other" {
			t.Errorf("the other release's object was changed: %q", got)
		}
	})

	t.Run("an upgrade does not delete objects its record lists but it does not own", func(t *testing.T) {
		forge(t, m, "stale", 1, configMap(apps, "admins", "x"), configMap(apps, "others", "x"))
		if _, err := m.Apply(ctx, "stale", []*unstructured.Unstructured{configMap(apps, "stale-own", "x")}, nil); err != nil {
			t.Fatal(err)
		}
		if got := value("admins") + "," + value("others"); got != "admin,other" {
			t.Errorf("objects after the upgrade: %s", got)
		}
	})

	t.Run("uninstall deletes only objects that carry the release's ownership metadata", func(t *testing.T) {
		forge(t, m, "victim", 1, configMap(apps, "admins", "x"), configMap(apps, "others", "x"))
		if _, err := m.Apply(ctx, "victim", []*unstructured.Unstructured{
			configMap(apps, "victims", "x"), configMap(apps, "admins", "x"), configMap(apps, "others", "x"),
		}, nil); err == nil {
			t.Fatal("the upgrade took over objects it does not own")
		}
		// Revision 2 failed; revision 1 (forged) and the record of the
		// failed one are what Uninstall reads. Install the release's own
		// object in a third revision.
		if _, err := m.Apply(ctx, "victim", []*unstructured.Unstructured{configMap(apps, "victims", "x")}, nil); err != nil {
			t.Fatal(err)
		}
		kept, err := m.Uninstall(ctx, "victim")
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("ConfigMap %[1]s/admins (no ownership metadata of release %[2]s/victim),"+
			"ConfigMap %[1]s/others (owned by release %[2]s/other)", apps, ns)
		if got := strings.Join(kept, ","); got != want {
			t.Errorf("kept %q\nwant %q", got, want)
		}
		if got := value("admins") + "," + value("others") + "," + value("victims"); got != "admin,other,<deleted>" {
			t.Errorf("objects after the uninstall: %s", got)
		}
		if _, err := m.store.History("victim"); err == nil {
			t.Errorf("release records left after the uninstall")
		}
	})

	t.Run("objects are never installed into the release namespace", func(t *testing.T) {
		for _, tc := range []struct {
			obj  *unstructured.Unstructured
			want string
		}{
			{configMap("", "no-namespace", "x"), "ConfigMap no-namespace has no namespace: set metadata.namespace in the bundle, or an install namespace for objects without one (spec.config.installNamespace)"},
			{configMap(ns, "sh.helm.release.v1.other.v9", "x"), fmt.Sprintf(`ConfigMap %[1]s/sh.helm.release.v1.other.v9 is in the provisioner's namespace %[1]q, which holds release records and credentials: bundles may not install objects there`, ns)},
		} {
			_, err := m.Apply(ctx, "placed", []*unstructured.Unstructured{tc.obj}, nil)
			if err == nil || err.Error() != tc.want {
				t.Errorf("apply: got %v\nwant %s", err, tc.want)
			}
		}
		list := &corev1.ConfigMapList{}
		if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, cm := range list.Items {
			if cm.Name != "kube-root-ca.crt" {
				t.Errorf("installed into the release namespace: %s", cm.Name)
			}
		}
	})
}
