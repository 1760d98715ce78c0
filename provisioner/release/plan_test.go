package release

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func decodeYAML(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestChangedFields(t *testing.T) {
	const deployment = `
metadata:
  name: op
  resourceVersion: "1"
  generation: 1
  labels: {app: op}
spec:
  replicas: 1
  template:
    spec:
      containers:
      - name: manager
        image: op:v1
        args: [--a]
      - name: proxy
        image: proxy:v1
status:
  readyReplicas: 1
`
	for _, tc := range []struct {
		name  string
		edit  func(string) string
		limit int
		want  []string
		more  int
	}{
		{name: "same", edit: func(s string) string { return s }, want: nil},
		{
			name: "server-written and status fields are no change",
			edit: func(s string) string {
				s = strings.Replace(s, `resourceVersion: "1"`, `resourceVersion: "2"`, 1)
				s = strings.Replace(s, "generation: 1", "generation: 2\n  managedFields: []", 1)
				return strings.Replace(s, "readyReplicas: 1", "readyReplicas: 0", 1)
			},
			want: nil,
		},
		{
			name: "scalar",
			edit: func(s string) string { return strings.Replace(s, "replicas: 1", "replicas: 2", 1) },
			want: []string{"spec.replicas"},
		},
		{
			name: "named list items by name",
			edit: func(s string) string { return strings.Replace(s, "image: op:v1", "image: op:v2", 1) },
			want: []string{"spec.template.spec.containers[name=manager].image"},
		},
		{
			name: "added and removed keys",
			edit: func(s string) string {
				s = strings.Replace(s, "labels: {app: op}", "labels: {app: op, tier: x}", 1)
				return strings.Replace(s, "  replicas: 1\n", "", 1)
			},
			want: []string{"metadata.labels.tier", "spec.replicas"},
		},
		{
			name: "unnamed list changing length is one change",
			edit: func(s string) string { return strings.Replace(s, "args: [--a]", "args: [--a, --b]", 1) },
			want: []string{"spec.template.spec.containers[name=manager].args"},
		},
		{
			name: "unnamed list item by index",
			edit: func(s string) string { return strings.Replace(s, "args: [--a]", "args: [--z]", 1) },
			want: []string{"spec.template.spec.containers[name=manager].args[0]"},
		},
		{
			name: "named item added",
			edit: func(s string) string {
				return strings.Replace(s, "      - name: proxy\n", "      - name: sidecar\n        image: s:v1\n      - name: proxy\n", 1)
			},
			want: []string{"spec.template.spec.containers[name=sidecar]"},
		},
		{
			name: "named items reordered",
			edit: func(s string) string {
				return strings.Replace(s, "      - name: manager\n        image: op:v1\n        args: [--a]\n      - name: proxy\n        image: proxy:v1\n",
					"      - name: proxy\n        image: proxy:v1\n      - name: manager\n        image: op:v1\n        args: [--a]\n", 1)
			},
			want: []string{"spec.template.spec.containers (order)"},
		},
		{
			name: "type change",
			edit: func(s string) string { return strings.Replace(s, "replicas: 1", "replicas: {a: 1}", 1) },
			want: []string{"spec.replicas"},
		},
		{
			name: "bounded",
			edit: func(s string) string {
				s = strings.Replace(s, "replicas: 1", "replicas: 2", 1)
				s = strings.Replace(s, "image: op:v1", "image: op:v2", 1)
				return strings.Replace(s, "image: proxy:v1", "image: proxy:v2", 1)
			},
			limit: 2,
			want:  []string{"spec.replicas", "spec.template.spec.containers[name=manager].image"},
			more:  1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limit := tc.limit
			if limit == 0 {
				limit = 10
			}
			got, more := ChangedFields(decodeYAML(t, deployment), decodeYAML(t, tc.edit(deployment)), limit)
			if !slices.Equal(got, tc.want) || more != tc.more {
				t.Fatalf("got %q (+%d), want %q (+%d)", got, more, tc.want, tc.more)
			}
		})
	}
}

// A hostile object costs bounded work and says it was not compared whole.
func TestChangedFieldsBounded(t *testing.T) {
	wide := map[string]any{}
	for i := range diffSteps + 10 {
		wide[fmt.Sprintf("k%07d", i)] = i
	}
	other := map[string]any{}
	for k, v := range wide {
		other[k] = v
	}
	got, more := ChangedFields(map[string]any{"data": wide}, map[string]any{"data": other}, 5)
	if want := []string{"(comparison stopped: the object is too large to compare)"}; !slices.Equal(got, want) || more != 0 {
		t.Fatalf("got %q (+%d), want %q", got, more, want)
	}
}

func TestPlanSummary(t *testing.T) {
	p := &Plan{
		Revision:  3,
		Create:    []string{"ConfigMap a/x", "ConfigMap a/y", "ConfigMap a/z"},
		Change:    []ObjectChange{{Object: "Deployment a/op", Fields: []string{"spec.replicas", "spec.template.spec.containers[name=manager].image"}, More: 4}},
		Delete:    []string{"Service a/old"},
		Unchanged: 7,
	}
	want := "3 to create, 1 to change, 1 to delete, 7 unchanged; create ConfigMap a/x, ConfigMap a/y and 1 more; change Deployment a/op (spec.replicas, spec.template.spec.containers[name=manager].image and 4 more); delete Service a/old"
	if got := p.Summary(2); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	p = &Plan{Refused: []string{"ConfigMap a/x: it exists and is not managed by this release"}}
	want = "0 to create, 0 to change, 0 to delete, 0 unchanged, 1 refused; refused ConfigMap a/x: it exists and is not managed by this release"
	if got := p.Summary(2); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
