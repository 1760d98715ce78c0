package provisioner_test

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// TestIntegrationRestartReads counts the reads a provisioner restart
// sends to re-verify installed BundleDeployments: objects of kinds without
// a status that nobody wrote since their release's records were are
// judged from the metadata cache (no GET each), and no release's history
// is read: its deployed record's labels say which objects it holds. What changed while it was
// down is still found and restored: an edited and a deleted ConfigMap.
// Counted with the API server's own request counts, not timed.
func TestIntegrationRestartReads(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	const bds, cms = 4, 10
	for b := range bds {
		files := map[string]string{}
		for i := range cms {
			files[fmt.Sprintf("manifests/cm-%02d.yaml", i)] = configMap(fmt.Sprintf("rr%d-%02d", b, i), "v")
		}
		name := fmt.Sprintf("rr%d", b)
		if err := h.c.Create(ctx, newBD(name, h.pushBundle(name, files))); err != nil {
			t.Fatal(err)
		}
	}
	for b := range bds {
		h.waitBD(fmt.Sprintf("rr%d", b), rukpakv1alpha1.TypeHealthy, metav1.ConditionTrue, rukpakv1alpha1.ReasonHealthy, "")
	}
	quietWrites(t, h)
	h.kill()

	// While it is down: one ConfigMap edited, one deleted.
	cm, err := h.getCM("rr1-03")
	testenv.MustNotError(t, err, "reading rr1-03")
	cm.Data["value"] = "edited"
	testenv.MustNotError(t, h.c.Update(ctx, cm), "editing rr1-03")
	testenv.MustNotError(t, h.c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "rr2-05"}}), "deleting rr2-05")

	before, err := testenv.ServerRequests(ctx, h.env.Config)
	testenv.MustNotError(t, err, "reading request counts")
	h.start()
	// Waited for by LISTs: the counts below are the provisioner's GETs.
	eventually(t, "the edited and the deleted ConfigMap restored", func() error {
		list := &corev1.ConfigMapList{}
		if err := h.c.List(ctx, list, client.InNamespace("default")); err != nil {
			return err
		}
		restored := 0
		for _, cm := range list.Items {
			if (cm.Name == "rr1-03" || cm.Name == "rr2-05") && cm.Data["value"] == "v" && cm.DeletionTimestamp.IsZero() {
				restored++
			}
		}
		if restored != 2 {
			return fmt.Errorf("%d of 2 restored", restored)
		}
		return nil
	})
	quietWrites(t, h)
	after, err := testenv.ServerRequests(ctx, h.env.Config)
	testenv.MustNotError(t, err, "reading request counts")
	got := after.Sub(before)
	t.Logf("requests of a restart with %d BundleDeployments of %d ConfigMaps: %s", bds, cms, got)
	cmGets, recordGets := got[testenv.RequestKey{Verb: "GET", Resource: "configmaps"}], got[testenv.RequestKey{Verb: "GET", Resource: "secrets"}]
	// The two changed ConfigMaps: read (or looked for) once to be
	// restored, once after.
	if cmGets > 4 {
		t.Errorf("%.0f ConfigMap GETs at restart, want at most 4 (the two changed ones; %d unchanged need none)", cmGets, bds*cms-2)
	}
	// None: each deployed record's labels say which objects it holds.
	if recordGets > 0 {
		t.Errorf("%.0f release record GETs at restart, want none (the records' labels say what each release holds)", recordGets)
	}
	if per := (cmGets + recordGets) / bds; per > 2 {
		t.Errorf("%.1f GETs per BundleDeployment at restart, want at most 2", per)
	}
	for b := range bds {
		h.waitBD(fmt.Sprintf("rr%d", b), rukpakv1alpha1.TypeHealthy, metav1.ConditionTrue, rukpakv1alpha1.ReasonHealthy, "")
	}
}

// restartDeployment is a Deployment of a restart-reads bundle.
func restartDeployment(name string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  namespace: default
spec:
  replicas: 1
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}
    spec:
      containers:
      - name: web
        image: registry.example/web:1
`, name)
}

// restartCRD is a CRD of a restart-reads bundle, labelled tier=operator.
func restartCRD(group string, i int) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadget%[2]ds.%[1]s
  labels: {tier: operator}
spec:
  group: %[1]s
  names: {kind: Gadget%[2]d, listKind: Gadget%[2]dList, plural: gadget%[2]ds, singular: gadget%[2]d}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`, group, i)
}

// rollOutDeployment writes a Deployment's status as its controller would
// once its pods are available (no controller runs against envtest).
func rollOutDeployment(t *testing.T, h *harness, name string) {
	t.Helper()
	writeDeploymentStatus(t, h, name, "rolling out", func(generation int64, now metav1.Time) appsv1.DeploymentStatus {
		return appsv1.DeploymentStatus{
			ObservedGeneration: generation,
			Replicas:           1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", LastUpdateTime: now, LastTransitionTime: now},
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", LastUpdateTime: now, LastTransitionTime: now},
			},
		}
	})
}

// writeDeploymentStatus writes the status of Deployment default/name
// (doing, for the wait's message) as status makes it for its generation.
func writeDeploymentStatus(t *testing.T, h *harness, name, doing string, status func(generation int64, now metav1.Time) appsv1.DeploymentStatus) {
	t.Helper()
	ctx := context.Background()
	eventually(t, doing+" Deployment "+name, func() error {
		dep := &appsv1.Deployment{}
		if err := h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, dep); err != nil {
			return err
		}
		dep.Status = status(dep.Generation, metav1.Now())
		return h.c.Status().Update(ctx, dep)
	})
}

// TestIntegrationRestartReadsWorkloads counts the reads a restart sends
// to re-verify BundleDeployments that install kinds whose status or spec
// must be read (Deployments, CRDs): their objects are read with one
// streamed LIST per BundleDeployment and kind, not one GET each, so the
// GETs do not grow with the number of installed objects. What changed
// while the provisioner was down is still found and corrected: an edited
// and a deleted Deployment, and an edited CRD.
func TestIntegrationRestartReadsWorkloads(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	const bds, deps, crds = 4, 3, 2
	for b := range bds {
		files := map[string]string{"manifests/cm.yaml": configMap(fmt.Sprintf("rw%d-config", b), "v")}
		for i := range deps {
			files[fmt.Sprintf("manifests/dep-%d.yaml", i)] = restartDeployment(fmt.Sprintf("rw%d-d%d", b, i))
		}
		for i := range crds {
			files[fmt.Sprintf("manifests/crd-%d.yaml", i)] = restartCRD(fmt.Sprintf("rw%d.example.com", b), i)
		}
		name := fmt.Sprintf("rw%d", b)
		if err := h.c.Create(ctx, newBD(name, h.pushBundle(name, files))); err != nil {
			t.Fatal(err)
		}
	}
	for b := range bds {
		h.waitBD(fmt.Sprintf("rw%d", b), rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
		for i := range deps {
			rollOutDeployment(t, h, fmt.Sprintf("rw%d-d%d", b, i))
		}
	}
	for b := range bds {
		h.waitBD(fmt.Sprintf("rw%d", b), rukpakv1alpha1.TypeHealthy, metav1.ConditionTrue, rukpakv1alpha1.ReasonHealthy, "")
	}
	quietWrites(t, h)
	h.kill()

	// While it is down: a Deployment's image edited, another Deployment
	// deleted, a CRD's label edited.
	dep := &appsv1.Deployment{}
	testenv.MustNotError(t, h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "rw1-d1"}, dep), "reading rw1-d1")
	dep.Spec.Template.Spec.Containers[0].Image = "registry.example/web:edited"
	testenv.MustNotError(t, h.c.Update(ctx, dep), "editing rw1-d1")
	testenv.MustNotError(t, h.c.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "rw2-d2"}}), "deleting rw2-d2")
	crd := &apiextensionsv1.CustomResourceDefinition{}
	testenv.MustNotError(t, h.c.Get(ctx, client.ObjectKey{Name: "gadget0s.rw3.example.com"}, crd), "reading a CRD")
	crd.Labels["tier"] = "edited"
	testenv.MustNotError(t, h.c.Update(ctx, crd), "editing a CRD")

	before, err := testenv.ServerRequests(ctx, h.env.Config)
	testenv.MustNotError(t, err, "reading request counts")
	h.start()
	// Waited for by LISTs: the counts below are the provisioner's GETs.
	eventually(t, "the edited and deleted objects restored", func() error {
		deps := &appsv1.DeploymentList{}
		if err := h.c.List(ctx, deps, client.InNamespace("default")); err != nil {
			return err
		}
		restored := 0
		for _, d := range deps.Items {
			if (d.Name == "rw1-d1" || d.Name == "rw2-d2") && d.Spec.Template.Spec.Containers[0].Image == "registry.example/web:1" && d.DeletionTimestamp.IsZero() {
				restored++
			}
		}
		crds := &apiextensionsv1.CustomResourceDefinitionList{}
		if err := h.c.List(ctx, crds); err != nil {
			return err
		}
		for _, c := range crds.Items {
			if c.Name == "gadget0s.rw3.example.com" && c.Labels["tier"] == "operator" {
				restored++
			}
		}
		if restored != 3 {
			return fmt.Errorf("%d of 3 restored", restored)
		}
		return nil
	})
	quietWrites(t, h)
	after, err := testenv.ServerRequests(ctx, h.env.Config)
	testenv.MustNotError(t, err, "reading request counts")
	got := after.Sub(before)
	t.Logf("requests of a restart with %d BundleDeployments of %d Deployments and %d CRDs: %s", bds, deps, crds, got)
	depGets := got[testenv.RequestKey{Verb: "GET", Resource: "deployments"}]
	crdGets := got[testenv.RequestKey{Verb: "GET", Resource: "customresourcedefinitions"}]
	// The two changed Deployments: looked for or read back after their
	// restore, a couple of times each.
	if depGets > 6 {
		t.Errorf("%.0f Deployment GETs at restart, want at most 6 (the two changed ones; %d unchanged need none)", depGets, bds*deps-2)
	}
	if crdGets > 3 {
		t.Errorf("%.0f CRD GETs at restart, want at most 3 (the changed one; %d unchanged need none)", crdGets, bds*crds-1)
	}
	// One LIST per BundleDeployment and kind (CRDs: one more for the
	// upgrade preflight), and again when a restore brings one back,
	// besides the watches' own (six of each kind before this change, with
	// one manager of three classes): a bound that does not grow with the
	// objects either.
	const watches = 6
	if lists := got[testenv.RequestKey{Verb: "LIST", Resource: "deployments"}]; lists > 2*bds+watches {
		t.Errorf("%.0f LISTs of Deployments at restart, want at most %d", lists, 2*bds+watches)
	}
	if lists := got[testenv.RequestKey{Verb: "LIST", Resource: "customresourcedefinitions"}]; lists > 3*bds+watches {
		t.Errorf("%.0f LISTs of CRDs at restart, want at most %d", lists, 3*bds+watches)
	}
	rollOutDeployment(t, h, "rw1-d1")
	rollOutDeployment(t, h, "rw2-d2")
	for b := range bds {
		h.waitBD(fmt.Sprintf("rw%d", b), rukpakv1alpha1.TypeHealthy, metav1.ConditionTrue, rukpakv1alpha1.ReasonHealthy, "")
	}
}
