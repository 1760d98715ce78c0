package release

import (
	"context"
	"reflect"
	"strings"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// A plan against a real API server: what a new set of objects would
// create, change (field paths, with the server's defaulting applied) and
// delete, what it would be refused, and that planning writes nothing.
func TestIntegrationPlan(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	ctx := context.Background()
	ns, apps := testenv.Namespace(t, env, "rukpak-system"), testenv.Namespace(t, env, "apps")
	// in names an object of apps as the plan does.
	in := func(kind, name string) string { return kind + " " + apps + "/" + name }
	m, err := NewManager(env.Config, ns)
	if err != nil {
		t.Fatal(err)
	}
	cm := func(name, value string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": apps},
			"data":     map[string]any{"value": value},
		}}
	}
	svc := func(port int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Service",
			"metadata": map[string]any{"name": "web", "namespace": apps},
			"spec": map[string]any{
				"selector": map[string]any{"app": "web"},
				"ports":    []any{map[string]any{"name": "http", "port": port}},
			},
		}}
	}
	stamp := func(o *unstructured.Unstructured) { o.SetLabels(map[string]string{"owner": "plan"}) }

	// Before any install every object is a create.
	p, err := m.Plan(ctx, "plan", []*unstructured.Unstructured{cm("keep", "v1"), svc(80)}, stamp)
	if err != nil {
		t.Fatal(err)
	}
	want := &Plan{Create: []string{in("ConfigMap", "keep"), in("Service", "web")}}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("plan before install:\n got %+v\nwant %+v", p, want)
	}

	if _, err := m.Apply(ctx, "plan", []*unstructured.Unstructured{cm("keep", "v1"), cm("change", "v1"), cm("drop", "v1"), svc(80)}, stamp); err != nil {
		t.Fatal(err)
	}
	// Someone else's object under a name the new objects take.
	if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: apps}}); err != nil {
		t.Fatal(err)
	}
	before := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: apps, Name: "change"}, before); err != nil {
		t.Fatal(err)
	}

	next := []*unstructured.Unstructured{cm("keep", "v1"), cm("change", "v2"), cm("new", "v1"), cm("taken", "v1"), svc(8080)}
	p, err = m.Plan(ctx, "plan", next, stamp)
	if err != nil {
		t.Fatal(err)
	}
	want = &Plan{
		Revision: 1,
		Create:   []string{in("ConfigMap", "new")},
		Change: []ObjectChange{
			{Object: in("ConfigMap", "change"), Fields: []string{"data.value"}},
			// The API server defaults targetPort to port: the dry run
			// shows it changing along.
			{Object: in("Service", "web"), Fields: []string{"spec.ports[name=http].port", "spec.ports[name=http].targetPort"}},
		},
		Delete:    []string{in("ConfigMap", "drop")},
		Refused:   []string{in("ConfigMap", "taken") + ": it exists and is not managed by this release"},
		Unchanged: 1,
	}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("plan:\n got %+v\nwant %+v", p, want)
	}
	wantSummary := strings.ReplaceAll("1 to create, 2 to change, 1 to delete, 1 unchanged, 1 refused; create ConfigMap NS/new; change ConfigMap NS/change (data.value), Service NS/web (spec.ports[name=http].port, spec.ports[name=http].targetPort); delete ConfigMap NS/drop; refused ConfigMap NS/taken: it exists and is not managed by this release", "NS/", apps+"/")
	if got := p.Summary(10); got != wantSummary {
		t.Fatalf("summary:\n got %s\nwant %s", got, wantSummary)
	}

	// Nothing was written: the object, and the release history.
	after := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: apps, Name: "change"}, after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion || after.Data["value"] != "v1" {
		t.Fatalf("planning changed the object: resourceVersion %s -> %s, value %q", before.ResourceVersion, after.ResourceVersion, after.Data["value"])
	}
	hist, err := m.store.History("plan")
	if err != nil || len(hist) != 1 || hist[0].Info.Status != helmrelease.StatusDeployed {
		t.Fatalf("release history after planning: %d revisions, %v", len(hist), err)
	}

	// The same objects again: nothing to do.
	p, err = m.Plan(ctx, "plan", []*unstructured.Unstructured{cm("keep", "v1"), cm("change", "v1"), cm("drop", "v1"), svc(80)}, stamp)
	if err != nil {
		t.Fatal(err)
	}
	if want := (&Plan{Revision: 1, Unchanged: 4}); !reflect.DeepEqual(p, want) {
		t.Fatalf("plan of the installed objects:\n got %+v\nwant %+v", p, want)
	}
}
