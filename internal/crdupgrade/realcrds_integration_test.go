package crdupgrade

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// prometheusObjects are custom resources valid under prometheus-operator
// 0.47.0's CRDs; the names say which the 0.93.1 CRDs break.
const prometheusObjects = `
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: sm-ok, namespace: default}
spec:
  selector: {matchLabels: {app: web}}
  endpoints:
  - port: web
    interval: 30s
    scheme: https
    relabelings: [{action: replace, sourceLabels: [__meta_x], targetLabel: x}]
---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: sm-bad-scheme, namespace: default}
spec:
  selector: {}
  endpoints: [{port: web, scheme: ftp}]
---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: sm-bad-interval, namespace: default}
spec:
  selector: {}
  endpoints: [{port: web, interval: 30 seconds}]
---
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata: {name: rules-ok, namespace: default}
spec:
  groups:
  - name: node
    rules: [{alert: NodeDown, expr: up == 0, for: 5m}]
---
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata: {name: rules-bad-duplicate-groups, namespace: default}
spec:
  groups:
  - {name: node, rules: [{record: a, expr: "1"}]}
  - {name: node, rules: [{record: b, expr: "2"}]}
---
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata: {name: rules-bad-empty-name, namespace: default}
spec:
  groups:
  - {name: "", rules: [{record: a, expr: "1"}]}
---
apiVersion: monitoring.coreos.com/v1
kind: Prometheus
metadata: {name: prom-ok, namespace: default}
spec: {replicas: 1, logLevel: info, portName: web}
---
apiVersion: monitoring.coreos.com/v1
kind: Prometheus
metadata: {name: prom-bad-loglevel, namespace: default}
spec: {replicas: 1, logLevel: verbose}
---
apiVersion: monitoring.coreos.com/v1alpha1
kind: AlertmanagerConfig
metadata: {name: amc-ok, namespace: default}
spec:
  route: {receiver: team}
  receivers: [{name: team}]
---
apiVersion: monitoring.coreos.com/v1alpha1
kind: AlertmanagerConfig
metadata: {name: amc-bad-victorops, namespace: default}
spec:
  route: {receiver: ops}
  receivers:
  - name: ops
    victoropsConfigs: [{apiKey: {name: victorops, key: key}}]
`

// The CRDs of prometheus-operator 0.47.0 (a registry+v1 bundle) upgraded
// to those of 0.93.1 (the prometheus-operator-crds chart): which checks
// pass, which existing objects break, and that the API server agrees
// object by object once the new CRDs are installed.
func TestIntegrationPrometheusOperatorCRDs(t *testing.T) {
	old, new := oldPrometheusCRDs(t), newPrometheusCRDs(t)
	env := testenv.Pooled(t)
	ctx := context.Background()
	c := env.Client
	for _, name := range sortedKeys(old) {
		crd := old[name].DeepCopy()
		if err := c.Create(ctx, crd); err != nil {
			t.Fatalf("creating CRD %s: %v", name, err)
		}
		waitEstablished(t, c, name)
	}
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(prometheusObjects, "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, u); err != nil {
			t.Fatalf("creating %s %s under the 0.47.0 CRDs: %v", u.GetKind(), u.GetName(), err)
		}
		objs = append(objs, u)
	}

	lister, err := NewRESTLister(env.Config, nil)
	if err != nil {
		t.Fatal(err)
	}
	var newObjs []*unstructured.Unstructured
	for _, name := range sortedKeys(new) {
		u := &unstructured.Unstructured{}
		u.Object, err = runtimeToUnstructured(new[name])
		if err != nil {
			t.Fatal(err)
		}
		newObjs = append(newObjs, u)
	}
	p := &Preflight{CRDs: c, Objects: lister, Options: Options{PageSize: 2}}
	reports, err := p.Run(ctx, newObjs)
	if err != nil {
		t.Fatal(err)
	}

	// Every change found, and how it was judged.
	got := map[string]string{}
	var broken []string
	for _, r := range reports {
		passed := map[Check]int{}
		var failed []string
		for _, f := range r.Findings {
			if !f.Fails {
				passed[f.Check]++
				continue
			}
			failed = append(failed, f.String())
			for _, o := range f.Objects {
				broken = append(broken, r.Kind+" "+o.Name)
			}
		}
		got[r.CRD] = fmt.Sprintf("passed %v; failed %q", passed, failed)
	}
	want := map[string]string{
		"alertmanagerconfigs.monitoring.coreos.com": `passed map[BoundsChanged:62 DefaultChanged:72 EnumNarrowed:1 UnknownChange:105]; failed ["RequiredFieldAdded in v1alpha1 spec.receivers[*].victoropsConfigs[*].routingKey: required field added; 1 existing object affected: default/amc-bad-victorops (spec.receivers[0].victoropsConfigs[0].routingKey: Required value)"]`,
		"alertmanagers.monitoring.coreos.com":       `passed map[DefaultChanged:30 EnumNarrowed:2 UnknownChange:131]; failed []`,
		"podmonitors.monitoring.coreos.com":         `passed map[BoundsChanged:4 DefaultChanged:10 EnumNarrowed:3 UnknownChange:14]; failed []`,
		"probes.monitoring.coreos.com":              `passed map[BoundsChanged:3 DefaultChanged:11 EnumNarrowed:3 UnknownChange:13]; failed []`,
		"prometheuses.monitoring.coreos.com":        `passed map[BoundsChanged:8 DefaultChanged:69 EnumNarrowed:6 UnknownChange:201]; failed ["EnumNarrowed in v1 spec.logLevel: enum added: \"\", \"debug\", \"info\", \"warn\", \"error\"; 1 existing object affected: default/prom-bad-loglevel (spec.logLevel: Unsupported value: \"verbose\": supported values: \"\", \"debug\", \"info\", \"warn\", \"error\")"]`,
		"prometheusrules.monitoring.coreos.com":     `passed map[UnknownChange:3]; failed ["BoundsChanged in v1 spec.groups[*].name: minLength added: 1; 1 existing object affected: default/rules-bad-empty-name (spec.groups[0].name: Invalid value: \"\": spec.groups[0].name in body should be at least 1 chars long)" "UnknownChange in v1 spec.groups: x-kubernetes-list-map-keys, x-kubernetes-list-type changed; 1 existing object affected: default/rules-bad-duplicate-groups (spec.groups[1]: Duplicate value: {\"name\":\"node\"})"]`,
		"servicemonitors.monitoring.coreos.com":     `passed map[BoundsChanged:4 DefaultChanged:10 EnumNarrowed:2 UnknownChange:13]; failed ["EnumNarrowed in v1 spec.endpoints[*].scheme: enum added: \"http\", \"https\", \"HTTP\", \"HTTPS\"; 1 existing object affected: default/sm-bad-scheme (spec.endpoints[0].scheme: Unsupported value: \"ftp\": supported values: \"http\", \"https\", \"HTTP\", \"HTTPS\")" "UnknownChange in v1 spec.endpoints[*].interval: pattern changed; 1 existing object affected: default/sm-bad-interval (spec.endpoints[0].interval: Invalid value: \"30 seconds\": spec.endpoints[0].interval in body should match '^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$')"]`,
		"thanosrulers.monitoring.coreos.com":        `passed map[DefaultChanged:40 EnumNarrowed:2 UnknownChange:138]; failed []`,
	}
	for _, name := range sortedKeys(got) {
		t.Logf("%s: %s", name, got[name])
		if got[name] != want[name] {
			t.Errorf("%s:\n got %s\nwant %s", name, got[name], want[name])
		}
	}

	// Install the new CRDs: the API server refuses to create again exactly
	// the objects the preflight named (server-side dry run, under a new
	// name), and accepts the others.
	for _, name := range sortedKeys(new) {
		live := &apiextensionsv1.CustomResourceDefinition{}
		err := c.Get(ctx, client.ObjectKey{Name: name}, live)
		next := new[name].DeepCopy()
		if err == nil {
			next.ResourceVersion = live.ResourceVersion
			err = c.Update(ctx, next)
		} else {
			err = c.Create(ctx, next)
		}
		if err != nil {
			t.Fatalf("installing the 0.93.1 CRD %s: %v", name, err)
		}
		waitEstablished(t, c, name)
	}
	var refused []string
	for _, o := range objs {
		again := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": o.GetAPIVersion(), "kind": o.GetKind(),
			"metadata": map[string]any{"name": o.GetName() + "-again", "namespace": o.GetNamespace()},
			"spec":     o.Object["spec"],
		}}
		// The client's REST mapper learns the new CRDs' versions from
		// discovery, which can lag on a loaded machine.
		for start := time.Now(); ; testenv.Poll(start) {
			err := c.Create(ctx, again, client.DryRunAll)
			if err != nil && strings.Contains(err.Error(), "no matches for kind") {
				if time.Since(start) > testenv.WaitTimeout {
					t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
				}
				continue
			}
			if err != nil {
				refused = append(refused, o.GetKind()+" "+o.GetName())
			}
			break
		}
	}
	slices.Sort(refused)
	slices.Sort(broken)
	if !slices.Equal(refused, broken) {
		t.Errorf("the API server refuses %q, the preflight named %q", refused, broken)
	}
}

func waitEstablished(t *testing.T, c client.Client, name string) {
	t.Helper()
	// Each poll reads the whole CRD (up to a MiB here): Poll backs off.
	for start := time.Now(); ; testenv.Poll(start) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		err := c.Get(context.Background(), client.ObjectKey{Name: name}, crd)
		if err != nil {
			t.Fatalf("CRD %s: %v", name, err)
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return
			}
		}
		if time.Since(start) > testenv.WaitTimeout {
			t.Fatalf("CRD %s not established after %s: conditions %v", name, testenv.WaitTimeout, crd.Status.Conditions)
		}
	}
}
