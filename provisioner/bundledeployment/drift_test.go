package bundledeployment

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

func obj(m map[string]any) *unstructured.Unstructured { return &unstructured.Unstructured{Object: m} }

func TestDrifted(t *testing.T) {
	want := obj(map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "d", "labels": map[string]any{"app": "x"}},
		"spec": map[string]any{
			"replicas":        int64(2),
			"paused":          false,
			"minReadySeconds": int64(0),
			"selector":        map[string]any{},
			"template": map[string]any{"spec": map[string]any{"containers": []any{
				map[string]any{"name": "c", "image": "img:1", "resources": map[string]any{"limits": map[string]any{"cpu": "1000m"}}},
			}}},
		},
	})
	live := func(mutate func(m map[string]any)) *unstructured.Unstructured {
		u := want.DeepCopy()
		// What the API server adds: defaults, status, other metadata.
		u.Object["status"] = map[string]any{"replicas": int64(2)}
		spec := u.Object["spec"].(map[string]any)
		spec["strategy"] = map[string]any{"type": "RollingUpdate"}
		c := spec["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
		c["imagePullPolicy"] = "IfNotPresent"
		c["resources"] = map[string]any{"limits": map[string]any{"cpu": "1"}}
		md := u.Object["metadata"].(map[string]any)
		md["resourceVersion"] = "42"
		md["labels"] = map[string]any{"app": "x", "added-by": "someone"}
		if mutate != nil {
			mutate(u.Object)
		}
		return u
	}
	tests := []struct {
		name   string
		mutate func(m map[string]any)
		want   bool
	}{
		{name: "only server defaults and normalised quantities", want: false},
		{name: "replicas float from JSON", mutate: func(m map[string]any) { m["spec"].(map[string]any)["replicas"] = float64(2) }, want: false},
		{name: "replicas changed", mutate: func(m map[string]any) { m["spec"].(map[string]any)["replicas"] = int64(3) }, want: true},
		{name: "image changed", mutate: func(m map[string]any) {
			m["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"] = "img:2"
		}, want: true},
		{name: "container added", mutate: func(m map[string]any) {
			ts := m["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
			ts["containers"] = append(ts["containers"].([]any), map[string]any{"name": "sidecar"})
		}, want: true},
		{name: "label removed", mutate: func(m map[string]any) { m["metadata"].(map[string]any)["labels"] = map[string]any{} }, want: true},
		{name: "spec removed", mutate: func(m map[string]any) { delete(m, "spec") }, want: true},
		{name: "a quantity below a milli rounded up by the API server", mutate: func(m map[string]any) {
			wantC := want.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
			wantC["resources"] = map[string]any{"requests": map[string]any{"cpu": "100n"}}
			c := m["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
			c["resources"] = map[string]any{"requests": map[string]any{"cpu": "1m"}}
		}, want: false},
		{name: "a quantity changed beyond its rounding", mutate: func(m map[string]any) {
			wantC := want.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
			wantC["resources"] = map[string]any{"requests": map[string]any{"cpu": "100n"}}
			c := m["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
			c["resources"] = map[string]any{"requests": map[string]any{"cpu": "2m"}}
		}, want: true},
		{name: "zero values the server dropped", mutate: func(m map[string]any) {
			delete(m["spec"].(map[string]any), "paused")
			delete(m["spec"].(map[string]any), "minReadySeconds")
			delete(m["spec"].(map[string]any), "selector")
		}, want: false},
	}
	orig := want.DeepCopy()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want = orig.DeepCopy()
			if got := drifted(want, live(tc.mutate)); got != tc.want {
				t.Errorf("drifted = %v, want %v", got, tc.want)
			}
		})
	}
}

// What the API server stored (with its defaults) must not look drifted
// from the bundle's YAML, and a real edit must.
func TestDriftedAgainstTypedObjects(t *testing.T) {
	decode := func(y string) *unstructured.Unstructured {
		t.Helper()
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
			t.Fatal(err)
		}
		return u
	}
	deployment := decode(`
apiVersion: apps/v1
kind: Deployment
metadata: {name: op, namespace: ns, labels: {app: op}}
spec:
  replicas: 2
  selector: {matchLabels: {app: op}}
  template:
    metadata: {labels: {app: op}}
    spec:
      automountServiceAccountToken: false
      containers:
      - name: op
        image: op:1
        ports: [{containerPort: 8080}]
        resources: {limits: {cpu: 1000m, memory: 64Mi}}
        readinessProbe: {httpGet: {path: /healthz, port: 8080}}
`)
	service := decode(`
apiVersion: v1
kind: Service
metadata: {name: op, namespace: ns}
spec:
  selector: {app: op}
  ports: [{port: 443, targetPort: https}]
`)
	live := func(o runtime.Object, gvk schema.GroupVersionKind) *unstructured.Unstructured {
		t.Helper()
		u := &unstructured.Unstructured{}
		if err := fromTyped(o, gvk, u); err != nil {
			t.Fatal(err)
		}
		return u
	}
	liveDeployment := func(edit func(*appsv1.Deployment)) *unstructured.Unstructured {
		d := &appsv1.Deployment{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(deployment.Object, d); err != nil {
			t.Fatal(err)
		}
		// What the API server adds.
		d.ResourceVersion, d.UID, d.Generation = "7", "u-1", 1
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType}
		d.Spec.RevisionHistoryLimit = ptr(int32(10))
		d.Spec.ProgressDeadlineSeconds = ptr(int32(600))
		c := &d.Spec.Template.Spec.Containers[0]
		c.ImagePullPolicy = corev1.PullIfNotPresent
		c.TerminationMessagePath = "/dev/termination-log"
		c.Ports[0].Protocol = corev1.ProtocolTCP
		c.Resources.Limits[corev1.ResourceCPU] = resource.MustParse("1")
		c.ReadinessProbe.HTTPGet.Scheme = corev1.URISchemeHTTP
		c.ReadinessProbe.PeriodSeconds, c.ReadinessProbe.TimeoutSeconds = 10, 1
		d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
		d.Status = appsv1.DeploymentStatus{Replicas: 2, ReadyReplicas: 2}
		if edit != nil {
			edit(d)
		}
		return live(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))
	}
	svc := &corev1.Service{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(service.Object, svc); err != nil {
		t.Fatal(err)
	}
	svc.Spec.Type, svc.Spec.ClusterIP = corev1.ServiceTypeClusterIP, "10.0.0.1"
	svc.Spec.Ports[0].Protocol = corev1.ProtocolTCP

	for _, tc := range []struct {
		name       string
		want, live *unstructured.Unstructured
		drifted    bool
	}{
		{"deployment as stored", deployment, liveDeployment(nil), false},
		{"deployment scaled", deployment, liveDeployment(func(d *appsv1.Deployment) { d.Spec.Replicas = ptr(int32(5)) }), true},
		{"deployment token mounted", deployment, liveDeployment(func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.AutomountServiceAccountToken = ptr(true)
		}), true},
		{"deployment limit raised", deployment, liveDeployment(func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("1Gi")
		}), true},
		{"service as stored", service, live(svc, corev1.SchemeGroupVersion.WithKind("Service")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := drifted(tc.want, tc.live); got != tc.drifted {
				t.Errorf("drifted = %v, want %v\nlive: %v", got, tc.drifted, tc.live.Object)
			}
		})
	}
}

// fromTyped fills into with typed object o of kind gvk, as the API server
// would send it.
func fromTyped(o runtime.Object, gvk schema.GroupVersionKind, into *unstructured.Unstructured) error {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return err
	}
	into.SetUnstructuredContent(content)
	into.SetGroupVersionKind(gvk)
	return nil
}
