package release

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// The three shapes of real bundles that server-side apply refused and a
// create (OLM's way) accepts: a v1 CRD still carrying v1beta1's
// spec.version (openebs 3.0.0), a Deployment volume with defaultMode and
// secretName beside its name instead of under secret
// (multicluster-operators-subscription 0.4.1), and a custom resource with a
// field its CRD does not declare.
const (
	undeclaredCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: cstorbackups.cstor.openebs.io}
spec:
  group: cstor.openebs.io
  version: v1
  names: {kind: CStorBackup, listKind: CStorBackupList, plural: cstorbackups, singular: cstorbackup}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              backupName: {type: string}
`
	undeclaredDeployment = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: operator, namespace: apps}
spec:
  selector: {matchLabels: {app: operator}}
  template:
    metadata: {labels: {app: operator}}
    spec:
      containers: [{name: operator, image: example.com/operator:v1}]
      volumes:
      - name: klusterlet-config
        defaultMode: 420
        secretName: application-manager-hub-kubeconfig
`
	undeclaredCR = `
apiVersion: cstor.openebs.io/v1
kind: CStorBackup
metadata: {name: backup, namespace: apps}
spec: {backupName: nightly, snapName: s1}
`
)

func parseObject(t *testing.T, s string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(s), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestIntegrationUndeclaredFieldsAreDropped(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	ctx := context.Background()
	ns, apps := testenv.Namespace(t, env, "rukpak-system"), testenv.Namespace(t, env, "apps")
	cfg, requests := testenv.RecordWrites(env.Config)
	m, err := NewManager(cfg, ns)
	if err != nil {
		t.Fatal(err)
	}
	// The CRD is the one cluster-scoped object: uninstalled, and gone,
	// before another run of this test on the shared API server (-count).
	t.Cleanup(func() {
		if _, err := m.Uninstall(ctx, "undeclared"); err != nil {
			t.Errorf("uninstalling: %v", err)
			return
		}
		crd := parseObject(t, undeclaredCRD)
		start := time.Now()
		deadline := start.Add(testenv.WaitTimeout)
		for err := env.Client.Get(ctx, client.ObjectKeyFromObject(crd), crd); !apierrors.IsNotFound(err); err = env.Client.Get(ctx, client.ObjectKeyFromObject(crd), crd) {
			if time.Now().After(deadline) {
				t.Errorf("the CRD is still there %s after the uninstall: %v", testenv.WaitTimeout, err)
				return
			}
			testenv.Poll(start)
		}
	})
	bundle := func() []*unstructured.Unstructured {
		objs := []*unstructured.Unstructured{parseObject(t, undeclaredCRD), parseObject(t, undeclaredDeployment), parseObject(t, undeclaredCR)}
		objs[1].SetNamespace(apps)
		objs[2].SetNamespace(apps)
		return objs
	}
	live := func(o *unstructured.Unstructured) *unstructured.Unstructured {
		t.Helper()
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(o.GroupVersionKind())
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), u); err != nil {
			t.Fatal(err)
		}
		return u
	}

	res, err := m.Apply(ctx, "undeclared", bundle(), nil)
	if err != nil {
		t.Fatalf("install: %v", err)
	}
	want := []DroppedFields{
		{Object: "CStorBackup " + apps + "/backup", Fields: []string{"spec.snapName"},
			Ref: corev1.ObjectReference{APIVersion: "cstor.openebs.io/v1", Kind: "CStorBackup", Namespace: apps, Name: "backup"}},
		{Object: "CustomResourceDefinition cstorbackups.cstor.openebs.io", Fields: []string{"spec.version"},
			Ref: corev1.ObjectReference{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition", Name: "cstorbackups.cstor.openebs.io"}},
		{Object: "Deployment " + apps + "/operator", Fields: []string{"spec.template.spec.volumes[0].defaultMode", "spec.template.spec.volumes[0].secretName"},
			Ref: corev1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: apps, Name: "operator"}},
	}
	if !res.Changed || !reflect.DeepEqual(res.Dropped, want) {
		t.Fatalf("changed %v, dropped %+v\nwant %+v", res.Changed, res.Dropped, want)
	}
	annotations := map[string]string{
		"CStorBackup":              `["spec.snapName"]`,
		"CustomResourceDefinition": `["spec.version"]`,
		"Deployment":               `["spec.template.spec.volumes[0].defaultMode","spec.template.spec.volumes[0].secretName"]`,
	}
	for _, o := range res.Objects {
		got := live(o)
		if a := got.GetAnnotations()[AnnotationDroppedFields]; a != annotations[o.GetKind()] {
			t.Errorf("%s: annotation %s %q, want %q", o.GetKind(), AnnotationDroppedFields, a, annotations[o.GetKind()])
		}
		// Server-side apply's ownership is intact: the provisioner's apply is
		// the only writer, no create or update took fields over (the API
		// server writes a CRD's status).
		var managers []string
		for _, mf := range got.GetManagedFields() {
			if mf.Subresource == "status" {
				continue
			}
			managers = append(managers, mf.Manager+"/"+string(mf.Operation))
		}
		if !reflect.DeepEqual(managers, []string{FieldManager + "/Apply"}) {
			t.Errorf("%s: field managers %v, want only %s's apply", o.GetKind(), managers, FieldManager)
		}
		if v := o.GetAnnotations()[AnnotationDroppedFields]; v != annotations[o.GetKind()] {
			t.Errorf("%s: the returned object records %q, want %q", o.GetKind(), v, annotations[o.GetKind()])
		}
	}
	if _, ok := live(res.Objects[2]).Object["spec"].(map[string]any)["snapName"]; ok {
		t.Errorf("the custom resource kept its undeclared field")
	}
	requests.Take()

	t.Run("the same bundle again writes nothing", func(t *testing.T) {
		again, err := m.Apply(ctx, "undeclared", bundle(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if again.Changed || len(again.Dropped) != 0 || again.Release.Version != res.Release.Version {
			t.Errorf("changed %v, dropped %v, revision %d (was %d)", again.Changed, again.Dropped, again.Release.Version, res.Release.Version)
		}
		if sent := requests.Take(); len(sent) != 0 {
			t.Errorf("requests other than reads: %v", sent)
		}
		// What drift correction compares with and applies: the objects as
		// applied, not as the bundle has them.
		for i, o := range again.Objects {
			if !reflect.DeepEqual(o.Object, res.Objects[i].Object) {
				t.Errorf("%s differs from what the install applied:\n%v\n%v", o.GetKind(), o.Object, res.Objects[i].Object)
			}
		}
	})

	t.Run("a fixed bundle drops the record", func(t *testing.T) {
		objs := bundle()
		delete(objs[0].Object["spec"].(map[string]any), "version")
		fixed, err := m.Apply(ctx, "undeclared", objs, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !fixed.Changed || len(fixed.Dropped) != 2 || fixed.Dropped[0].Object != "CStorBackup "+apps+"/backup" || fixed.Dropped[1].Object != "Deployment "+apps+"/operator" {
			t.Errorf("changed %v, dropped %+v", fixed.Changed, fixed.Dropped)
		}
		if a, ok := live(objs[0]).GetAnnotations()[AnnotationDroppedFields]; ok {
			t.Errorf("the CRD still records dropped fields: %q", a)
		}
	})

	t.Run("an object with too many undeclared fields fails with a bounded message", func(t *testing.T) {
		wide := configMap(apps, "wide", "x")
		names := make([]string, 0, maxDropped+1)
		for i := range maxDropped + 1 {
			wide.Object[fmt.Sprintf("x%d", i)] = "undeclared"
			names = append(names, fmt.Sprintf("x%d", i))
		}
		slices.Sort(names)
		_, err := m.Apply(ctx, "wide", []*unstructured.Unstructured{wide}, nil)
		want := fmt.Sprintf("(more than 1000 fields the schema does not declare: %s and 991 more)", strings.Join(names[:10], ", "))
		if err == nil || !strings.HasPrefix(err.Error(), `installing release "wide": applying ConfigMap `+apps+`/wide: `) || !strings.HasSuffix(err.Error(), want) {
			t.Fatalf("error %v\nwant one ending %s", err, want)
		}
	})
}
