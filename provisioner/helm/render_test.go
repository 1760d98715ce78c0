package helm_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/rukpak-dev/rukpak/provisioner/helm"
)

func render(t *testing.T, chartName string, vals map[string]any, opts helm.RenderOptions) (string, error) {
	t.Helper()
	ch, err := helm.LoadChart(os.DirFS(filepath.Join(testdata, chartName)))
	if err != nil {
		t.Fatal(err)
	}
	if opts.ReleaseName == "" {
		opts.ReleaseName = "rel"
	}
	if opts.Namespace == "" {
		opts.Namespace = "apps"
	}
	r, err := helm.Render(t.Context(), ch, vals, opts)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if err := r.Write(&b); err != nil {
		t.Fatal(err)
	}
	return b.String(), nil
}

// outline is the comment lines (hook marks and sources) and kinds of a
// rendering, in order.
func outline(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "# hook: ") || strings.HasPrefix(l, "# Source: ") || strings.HasPrefix(l, "kind: ") {
			lines = append(lines, l)
		}
	}
	return lines
}

func TestRenderInstallOrder(t *testing.T) {
	tests := []struct {
		chart string
		vals  map[string]any
		want  []string
	}{{
		chart: "hello-world",
		want: []string{
			"# Source: hello-world/templates/serviceaccount.yaml", "kind: ServiceAccount",
			"# Source: hello-world/templates/service.yaml", "kind: Service",
			"# Source: hello-world/templates/deployment.yaml", "kind: Deployment",
		},
	}, {
		// Hooks of both events are applied at both; the Jobs run where
		// their annotations say.
		chart: "prometheus-operator-admission-webhook",
		want: func() []string {
			aux := func(event, file, kind string) []string {
				return []string{"# hook: " + event + ", weight 0, delete policy before-hook-creation,hook-succeeded", "# Source: prometheus-operator-admission-webhook/templates/hooks/" + file, "kind: " + kind}
			}
			var w []string
			for _, event := range []string{"pre-install", "post-install"} {
				w = slices.Concat(w,
					aux(event, "serviceaccount.yaml", "ServiceAccount"),
					aux(event, "clusterrole.yaml", "ClusterRole"),
					aux(event, "clusterrolebinding.yaml", "ClusterRoleBinding"),
					aux(event, "role.yaml", "Role"),
					aux(event, "rolebinding.yaml", "RoleBinding"))
				if event == "pre-install" {
					w = slices.Concat(w, aux(event, "job-createSecret.yaml", "Job"),
						[]string{
							"# Source: prometheus-operator-admission-webhook/templates/serviceaccount.yaml", "kind: ServiceAccount",
							"# Source: prometheus-operator-admission-webhook/templates/service.yaml", "kind: Service",
							"# Source: prometheus-operator-admission-webhook/templates/deployment.yaml", "kind: Deployment",
							"# Source: prometheus-operator-admission-webhook/templates/mutatingWebhookConfiguration.yaml", "kind: MutatingWebhookConfiguration",
							"# Source: prometheus-operator-admission-webhook/templates/validatingWebhookConfiguration.yaml", "kind: ValidatingWebhookConfiguration",
						})
				}
			}
			return append(w, aux("post-install", "job-patchWebhook.yaml", "Job")...)
		}(),
	}}
	for _, tt := range tests {
		t.Run(tt.chart, func(t *testing.T) {
			out, err := render(t, tt.chart, tt.vals, helm.RenderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := outline(out); !slices.Equal(got, tt.want) {
				t.Errorf("outline:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// TestRenderHookWeights: a hook weight orders the hooks of one event.
func TestRenderHookWeights(t *testing.T) {
	out, err := render(t, "prometheus-operator-admission-webhook", map[string]any{"networkPolicy": map[string]any{"enabled": true}}, helm.RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var hooks []string
	for _, l := range outline(out) {
		if strings.HasPrefix(l, "# hook: pre-install") {
			hooks = append(hooks, l)
		}
	}
	if len(hooks) == 0 || hooks[0] != "# hook: pre-install, weight -5, delete policy before-hook-creation,hook-succeeded" {
		t.Errorf("pre-install hooks %q: want the weight -5 NetworkPolicy first", hooks)
	}
}

func TestRenderValuesAndCapabilities(t *testing.T) {
	replicas := regexp.MustCompile(`(?m)^  replicas: (\d+)$`)
	out, err := render(t, "hello-world", map[string]any{"replicaCount": 3, "image": map[string]any{"tag": "1.27"}}, helm.RenderOptions{ReleaseName: "web", Namespace: "team-a"})
	if err != nil {
		t.Fatal(err)
	}
	if m := replicas.FindStringSubmatch(out); m == nil || m[1] != "3" {
		t.Errorf("replicas %v, want 3 from the values", m)
	}
	for _, want := range []string{`image: "nginx:1.27"`, "name: web-hello-world"} {
		if !strings.Contains(out, want) {
			t.Errorf("rendering lacks %q:\n%s", want, out)
		}
	}

	vpa := map[string]any{"verticalPodAutoscaler": map[string]any{"enabled": true}}
	for _, tc := range []struct {
		apis []string
		want bool
	}{{nil, false}, {[]string{"autoscaling.k8s.io/v1"}, true}} {
		out, err := render(t, "kube-state-metrics", vpa, helm.RenderOptions{APIVersions: tc.apis})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(out, "kind: VerticalPodAutoscaler"); got != tc.want {
			t.Errorf("API versions %v: VerticalPodAutoscaler rendered %v, want %v", tc.apis, got, tc.want)
		}
	}

	out, err = render(t, "prometheus-operator-crds", nil, helm.RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, "\nkind: CustomResourceDefinition\n"); n != 10 {
		t.Errorf("%d CRDs rendered, want 10", n)
	}
}

func TestRenderErrors(t *testing.T) {
	tests := []struct {
		name, chart string
		vals        map[string]any
		opts        helm.RenderOptions
		wantErr     string
	}{{
		name:    "kubeVersion of the chart",
		chart:   "prometheus-operator-crds",
		opts:    helm.RenderOptions{KubeVersion: &chartutil.KubeVersion{Version: "v1.15.0", Major: "1", Minor: "15"}},
		wantErr: `rendering chart "prometheus-operator-crds": chart requires kubeVersion: >=1.16.0-0 which is incompatible with Kubernetes v1.15.0`,
	}, {
		name:    "values.schema.json",
		chart:   "prometheus-operator-admission-webhook",
		vals:    map[string]any{"automountServiceAccountToken": "yes"},
		wantErr: "rendering chart \"prometheus-operator-admission-webhook\": values don't meet the specifications of the schema(s) in the following chart(s):\nprometheus-operator-admission-webhook:\n- at '/automountServiceAccountToken': got string, want boolean\n",
	}, {
		name:    "release name",
		chart:   "hello-world",
		opts:    helm.RenderOptions{ReleaseName: "Not_A_Name"},
		wantErr: `rendering chart "hello-world": release name "Not_A_Name": invalid release name, must match regex ^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$ and the length must not be longer than 53`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := render(t, tt.chart, tt.vals, tt.opts)
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("error:\n%v\nwant:\n%s", err, tt.wantErr)
			}
		})
	}
}
