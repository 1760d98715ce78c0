package bundledeployment

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/liststream"
	"github.com/rukpak-dev/rukpak/provisioner/release"
)

var deploymentGVK = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}

// bulkTracker is a Tracker whose bulk reads go to a server answering
// every LIST with body, counting them.
func bulkTracker(t *testing.T, body string) (*Tracker, *atomic.Int32, *atomic.Value) {
	t.Helper()
	var lists atomic.Int32
	var query atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lists.Add(1)
		query.Store(r.URL.Path + "?" + r.URL.RawQuery)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	lc, err := liststream.New(&rest.Config{Host: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(deploymentGVK, meta.RESTScopeNamespace)
	return &Tracker{lists: lc, mapper: mapper, observed: map[string]map[objectKey]observation{}}, &lists, &query
}

func deploymentJSON(name, rv, image string) string {
	return fmt.Sprintf(`{"metadata":{"name":%q,"namespace":"ns","resourceVersion":%q,"generation":1,"labels":{%q:"BundleDeployment",%q:"bd"}},`+
		`"spec":{"replicas":1,"template":{"spec":{"containers":[{"name":"c","image":%q}]}}},`+
		`"status":{"observedGeneration":1,"replicas":1,"updatedReplicas":1,"readyReplicas":1,"availableReplicas":1,"conditions":[{"type":"Available","status":"True"}]}}`,
		name, rv, rukpakv1alpha1.LabelOwnerKind, rukpakv1alpha1.LabelOwnerName, image)
}

func wantDeployment(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"replicas": int64(1), "template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "img:1"}}}}},
	}}
	u.SetGroupVersionKind(deploymentGVK)
	u.SetNamespace("ns")
	u.SetName(name)
	return u
}

func TestJudgeKindRemembersVerdicts(t *testing.T) {
	body := `{"kind":"DeploymentList","metadata":{},"items":[` +
		deploymentJSON("a", "10", "img:1") + "," + deploymentJSON("b", "11", "img:edited") + `]}`
	tr, lists, query := bulkTracker(t, body)
	a, b := wantDeployment("a"), wantDeployment("b")
	if err := tr.judgeKind(context.Background(), "bd", deploymentGVK, map[objectKey]*unstructured.Unstructured{keyOf(a): a, keyOf(b): b}); err != nil {
		t.Fatal(err)
	}
	if n := lists.Load(); n != 1 {
		t.Errorf("%d LISTs, want 1", n)
	}
	q, _ := query.Load().(string)
	if !strings.HasPrefix(q, "/apis/apps/v1/namespaces/ns/deployments?") || !strings.Contains(q, "owner-name%3Dbd") {
		t.Errorf("listed %s, want the Deployments of namespace ns selected by owner bd", q)
	}
	va, vb := tr.observed["bd"][keyOf(a)], tr.observed["bd"][keyOf(b)]
	if va.resourceVersion != "10" || va.drifted || !va.health().Ready {
		t.Errorf("verdict on a %+v, want not drifted and ready at 10", va)
	}
	if vb.resourceVersion != "11" || !vb.drifted {
		t.Errorf("verdict on b %+v, want drifted at 11", vb)
	}
}

// Objects anyone labelled as bd's that are not its release's: the read
// stops after maxUnwanted of them, judging nothing; Observe reads the
// release's objects one by one then.
func TestJudgeKindStopsAfterUnwanted(t *testing.T) {
	items := make([]string, 0, 3*maxUnwanted)
	for i := range 3 * maxUnwanted {
		items = append(items, deploymentJSON(fmt.Sprintf("decoy-%d", i), "5", "img:1"))
	}
	items = append(items, deploymentJSON("a", "10", "img:1"))
	tr, _, _ := bulkTracker(t, `{"kind":"DeploymentList","metadata":{},"items":[`+strings.Join(items, ",")+`]}`)
	a, b := wantDeployment("a"), wantDeployment("b")
	if err := tr.judgeKind(context.Background(), "bd", deploymentGVK, map[objectKey]*unstructured.Unstructured{keyOf(a): a, keyOf(b): b}); err != nil {
		t.Fatal(err)
	}
	if got := len(tr.observed["bd"]); got != 0 {
		t.Errorf("%d verdicts after %d decoys, want none (stopped after %d)", got, 3*maxUnwanted, maxUnwanted)
	}
}

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

func crdJSON(name, uid string, generation int, scope string, labelled bool) string {
	labels := fmt.Sprintf(`{%q:"BundleDeployment",%q:"bd","app":"x"}`, rukpakv1alpha1.LabelOwnerKind, rukpakv1alpha1.LabelOwnerName)
	if !labelled {
		labels = fmt.Sprintf(`{%q:"BundleDeployment",%q:"bd"}`, rukpakv1alpha1.LabelOwnerKind, rukpakv1alpha1.LabelOwnerName)
	}
	return fmt.Sprintf(`{"metadata":{"name":%q,"uid":%q,"generation":%d,"resourceVersion":"20","labels":%s,"managedFields":[{"manager":"m"}]},`+
		`"spec":{"group":"example.com","scope":%q,"names":{"plural":%q}},`+
		`"status":{"conditions":[{"type":"NamesAccepted","status":"True"},{"type":"Established","status":"True"}]}}`,
		name, uid, generation, labels, scope, name)
}

func wantCRD(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"group": "example.com", "scope": "Namespaced", "names": map[string]any{"plural": name}},
	}}
	u.SetGroupVersionKind(crdGVK)
	u.SetName(name)
	u.SetLabels(map[string]string{"app": "x"})
	return u
}

// A live object that still has the UID and generation its release's
// apply left it at holds what was applied in all but its metadata and
// status: only those are read and compared. The live CRDs here all differ
// from what was applied in their spec (scope), which only the generation
// could hide; a CRD changed since (its generation moved), created again
// by someone else (another UID) or relabelled is judged drifted.
func TestJudgeKindTrustsWhatWasApplied(t *testing.T) {
	body := `{"kind":"CustomResourceDefinitionList","metadata":{},"items":[` + strings.Join([]string{
		crdJSON("same", "u-same", 2, "Cluster", true),
		crdJSON("moved", "u-moved", 3, "Cluster", true),
		crdJSON("recreated", "u-other", 2, "Cluster", true),
		crdJSON("relabelled", "u-relabelled", 2, "Cluster", false),
		crdJSON("unrecorded", "u-unrecorded", 2, "Cluster", true),
	}, ",") + `]}`
	tr, _, _ := bulkTracker(t, body)
	tr.mapper.(*meta.DefaultRESTMapper).Add(crdGVK, meta.RESTScopeRoot)
	wanted := map[objectKey]*unstructured.Unstructured{}
	for _, name := range []string{"same", "moved", "recreated", "relabelled", "unrecorded"} {
		w := wantCRD(name)
		wanted[keyOf(w)] = w
		if name != "unrecorded" {
			uid := "u-" + name
			if name == "recreated" {
				uid = "u-recreated"
			}
			tr.restored("bd", w, release.Applied{ResourceVersion: "10", UID: types.UID(uid), Generation: 2})
		}
	}
	if err := tr.judgeKind(context.Background(), "bd", crdGVK, wanted); err != nil {
		t.Fatal(err)
	}
	for name, drifted := range map[string]bool{"same": false, "moved": true, "recreated": true, "relabelled": true, "unrecorded": true} {
		v, ok := tr.observed["bd"][keyOf(wantCRD(name))]
		if !ok || v.resourceVersion != "20" || v.drifted != drifted || !v.health().Ready {
			t.Errorf("verdict on %s: %+v (found %v), want drifted=%v and ready at 20", name, v, ok, drifted)
		}
	}

	// The preflight's question, for a bundle's CRDs: the one the release
	// applied just so is the live one without reading its spec; another
	// (a new bundle's) is compared with the live spec, which differs.
	same, err := tr.sameAsLive(context.Background(), "bd", []*unstructured.Unstructured{wantCRD("same"), wantCRD("moved")})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := same["same"]; !ok || len(same) != 1 {
		t.Errorf("same as live: %v, want only the CRD applied as it is", same)
	}
	// A bundle's CRD given the install namespace is the same one.
	placed := wantCRD("same")
	placed.SetNamespace("operators")
	if same, err = tr.sameAsLive(context.Background(), "bd", []*unstructured.Unstructured{placed}); err != nil || len(same) != 1 {
		t.Errorf("a CRD given a namespace: same as live %v (%v), want it found the same", same, err)
	}
	if placed.GetNamespace() != "operators" {
		t.Errorf("the bundle's CRD was changed: namespace %q", placed.GetNamespace())
	}
	changed := wantCRD("same")
	changed.Object["spec"].(map[string]any)["group"] = "other.example.com"
	if same, err = tr.sameAsLive(context.Background(), "bd", []*unstructured.Unstructured{changed}); err != nil || len(same) != 0 {
		t.Errorf("a CRD other than the one applied: same as live %v (%v), want compared whole and not the same", same, err)
	}
}

// Only kinds whose generation the API server sets and moves with every
// change of their fields are trusted by it: a Service keeps whatever
// generation it was created with, and a custom resource's stored fields
// change with its CRD's schema.
func TestAppliedSpecOnlyWhereGenerationFollows(t *testing.T) {
	tr := &Tracker{}
	at := release.Applied{ResourceVersion: "1", UID: "u", Generation: 5}
	for _, tc := range []struct {
		gvk     schema.GroupVersionKind
		tracked bool
	}{
		{schema.GroupVersionKind{Version: "v1", Kind: "Service"}, false},
		{schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, false},
		{schema.GroupVersionKind{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"}, false},
		{deploymentGVK, true},
		{crdGVK, true},
	} {
		o := &unstructured.Unstructured{}
		o.SetGroupVersionKind(tc.gvk)
		o.SetName("x")
		tr.restored("bd", o, at)
		if _, ok := tr.specs["bd"][keyOf(o)]; ok != tc.tracked {
			t.Errorf("%s: recorded %v, want %v", tc.gvk.Kind, ok, tc.tracked)
		}
	}
}
