// Package manifests_test checks properties of the shipped kustomizations
// that no API server validates: which ClusterRoles aggregate into
// Kubernetes' default roles, and what the NetworkPolicy overlay keeps the
// provisioner from reaching.
package manifests_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// kustomizations are every directory a user may apply. cert-manager's
// overlay is rendered but not applied (it needs cert-manager's CRDs).
var kustomizations = []string{
	"base",
	"overlays/cert-manager",
	"overlays/kind",
	"overlays/local",
	"overlays/networkpolicy",
	"overlays/pvc",
	"overlays/sharding",
}

func kubectl(t *testing.T) string {
	t.Helper()
	return testenv.Kubectl(t)
}

// render returns the objects of kubectl kustomize dir.
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	return renderPath(t, filepath.Join(testenv.RepoRoot(), "manifests", dir))
}

// renderCombined returns the objects of a kustomization of the given
// kustomizations and components (directories under manifests/), as a user
// would write one.
func renderCombined(t *testing.T, resources, components []string) []*unstructured.Unstructured {
	t.Helper()
	dir := t.TempDir()
	// kustomize refuses absolute paths of bases and components.
	rel := func(d string) string {
		r, err := filepath.Rel(dir, filepath.Join(testenv.RepoRoot(), "manifests", d))
		testenv.MustNotError(t, err, "relative path of %s", d)
		return r
	}
	var k strings.Builder
	k.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n")
	for _, r := range resources {
		k.WriteString("- " + rel(r) + "\n")
	}
	k.WriteString("components:\n")
	for _, c := range components {
		k.WriteString("- " + rel(c) + "\n")
	}
	testenv.MustNotError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k.String()), 0o644), "writing kustomization")
	return renderPath(t, dir)
}

func renderPath(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	cmd := exec.Command(kubectl(t), "kustomize", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.String())
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return objs
		} else if err != nil {
			t.Fatalf("decoding %s: %v", dir, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

func convert[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		t.Fatalf("converting %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}

// TestAggregatedRolesAreReadOnly: a ClusterRole labelled to aggregate into
// Kubernetes' default roles (admin, edit, view, bound to namespace admins
// everywhere) grants reading only, and never Secrets or content. The
// admin-equivalent verbs live in rukpak-installer, which aggregates nowhere.
func TestAggregatedRolesAreReadOnly(t *testing.T) {
	readOnly := []string{"get", "list", "watch"}
	for _, dir := range kustomizations {
		t.Run(dir, func(t *testing.T) {
			for _, u := range render(t, dir) {
				if u.GetKind() != "ClusterRole" {
					continue
				}
				cr := convert[rbacv1.ClusterRole](t, u)
				aggregated := false
				for k := range cr.Labels {
					if strings.HasPrefix(k, "rbac.authorization.k8s.io/aggregate-to-") {
						aggregated = true
					}
				}
				if cr.AggregationRule != nil {
					t.Errorf("ClusterRole %s has an aggregation rule: it would collect whatever others label", cr.Name)
				}
				if !aggregated {
					continue
				}
				for _, r := range cr.Rules {
					for _, v := range r.Verbs {
						if !slices.Contains(readOnly, v) {
							t.Errorf("ClusterRole %s aggregates verb %q into a default role", cr.Name, v)
						}
					}
					if len(r.NonResourceURLs) > 0 {
						t.Errorf("ClusterRole %s aggregates non-resource URLs %v (content downloads) into a default role", cr.Name, r.NonResourceURLs)
					}
					for _, res := range r.Resources {
						if res == "*" || res == "secrets" {
							t.Errorf("ClusterRole %s aggregates resource %q into a default role", cr.Name, res)
						}
					}
					if slices.Contains(r.APIGroups, "*") {
						t.Errorf("ClusterRole %s aggregates every API group into a default role", cr.Name)
					}
				}
			}
		})
	}
}

// TestRoles pins the roles people are bound to: what each grants, and
// where it aggregates.
func TestRoles(t *testing.T) {
	roles := map[string]*rbacv1.ClusterRole{}
	for _, u := range render(t, "base") {
		if u.GetKind() == "ClusterRole" {
			roles[u.GetName()] = convert[rbacv1.ClusterRole](t, u)
		}
	}
	cases := []struct {
		name   string
		labels map[string]string
		rules  []rbacv1.PolicyRule
	}{
		{"rukpak-installer", nil, []rbacv1.PolicyRule{
			{APIGroups: []string{"core.rukpak.io"}, Resources: []string{"bundledeployments", "bundles", "catalogs"},
				Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}},
			{APIGroups: []string{"core.rukpak.io"}, Resources: []string{"bundledeployments"},
				Verbs: []string{"skip-crd-upgrade-preflight", "shard"}},
			{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, ResourceNames: []string{"rukpak-provisioner"},
				Verbs: []string{"impersonate"}},
			{APIGroups: []string{"core.rukpak.io"}, Resources: []string{"bundledeployments/status", "bundles/status", "catalogs/status"},
				Verbs: []string{"get", "update", "patch"}},
		}},
		// Approving is a duty of its own: nothing else grants the verb.
		{"rukpak-approver", nil, []rbacv1.PolicyRule{
			{APIGroups: []string{"core.rukpak.io"}, Resources: []string{"bundledeployments"},
				Verbs: []string{"get", "list", "watch", "approve"}},
		}},
		{"rukpak-viewer", map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true"}, []rbacv1.PolicyRule{
			{APIGroups: []string{"core.rukpak.io"}, Resources: []string{"bundledeployments", "bundles", "catalogs", "bundledeployments/status", "bundles/status", "catalogs/status"},
				Verbs: []string{"get", "list", "watch"}},
		}},
		{"bundle-reader", nil, []rbacv1.PolicyRule{{NonResourceURLs: []string{"/bundles/*"}, Verbs: []string{"get"}}}},
		{"catalog-reader", nil, []rbacv1.PolicyRule{{NonResourceURLs: []string{"/catalogs/*"}, Verbs: []string{"get"}}}},
		{"bundle-uploader", nil, []rbacv1.PolicyRule{{APIGroups: []string{"core.rukpak.io"}, Resources: []string{"bundles/upload"}, Verbs: []string{"create"}}}},
		{"rukpak-metrics-reader", nil, []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cr, ok := roles[tc.name]
			if !ok {
				t.Fatalf("ClusterRole %s not in manifests/base", tc.name)
			}
			if !labels.Equals(cr.Labels, tc.labels) {
				t.Errorf("labels = %v, want %v", cr.Labels, tc.labels)
			}
			if !equalRules(cr.Rules, tc.rules) {
				t.Errorf("rules = %+v\nwant %+v", cr.Rules, tc.rules)
			}
		})
	}
}

func equalRules(a, b []rbacv1.PolicyRule) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !slices.Equal(a[i].APIGroups, b[i].APIGroups) || !slices.Equal(a[i].Resources, b[i].Resources) ||
			!slices.Equal(a[i].Verbs, b[i].Verbs) || !slices.Equal(a[i].NonResourceURLs, b[i].NonResourceURLs) ||
			!slices.Equal(a[i].ResourceNames, b[i].ResourceNames) {
			return false
		}
	}
	return true
}

// TestNetworkPolicyOverlay: the overlay's policy selects the provisioner's
// pods, denies link-local and metadata addresses, allows the rest and DNS,
// and leaves ingress alone; an API server accepts the whole overlay.
func TestNetworkPolicyOverlay(t *testing.T) {
	objs := render(t, "overlays/networkpolicy")
	var np *networkingv1.NetworkPolicy
	var provisioner *appsv1.Deployment
	for _, u := range objs {
		switch {
		case u.GetKind() == "NetworkPolicy":
			np = convert[networkingv1.NetworkPolicy](t, u)
		case u.GetKind() == "Deployment" && u.GetName() == "rukpak-core":
			provisioner = convert[appsv1.Deployment](t, u)
		}
	}
	if np == nil || provisioner == nil {
		t.Fatalf("overlay lacks the NetworkPolicy (%v) or the provisioner Deployment (%v)", np != nil, provisioner != nil)
	}
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(provisioner.Spec.Template.Labels)) {
		t.Fatalf("podSelector %v does not select the provisioner's pods %v", np.Spec.PodSelector, provisioner.Spec.Template.Labels)
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}) {
		t.Errorf("policyTypes = %v, want Egress only (ingress to the content server stays open)", np.Spec.PolicyTypes)
	}
	var blocks []networkingv1.IPBlock
	dns := false
	for _, r := range np.Spec.Egress {
		for _, p := range r.To {
			if p.IPBlock != nil {
				blocks = append(blocks, *p.IPBlock)
			}
		}
		if len(r.To) == 0 && len(r.Ports) == 2 && r.Ports[0].Port.IntValue() == 53 && r.Ports[1].Port.IntValue() == 53 {
			dns = true
		}
	}
	want := []networkingv1.IPBlock{
		{CIDR: "0.0.0.0/0", Except: []string{"169.254.0.0/16", "100.100.100.200/32"}},
		{CIDR: "::/0", Except: []string{"fe80::/10", "fd00:ec2::254/128"}},
	}
	if len(blocks) != len(want) {
		t.Fatalf("ipBlocks = %+v, want %+v", blocks, want)
	}
	for i := range want {
		if blocks[i].CIDR != want[i].CIDR || !slices.Equal(blocks[i].Except, want[i].Except) {
			t.Errorf("ipBlock %d = %+v, want %+v", i, blocks[i], want[i])
		}
	}
	if !dns {
		t.Error("no egress rule allows DNS (port 53) to any address")
	}

	t.Run("accepted by an API server", func(t *testing.T) {
		out := serverDryRun(t, "overlays/networkpolicy")
		if !strings.Contains(out, "networkpolicy.networking.k8s.io/rukpak-core-egress serverside-applied (server dry run)") {
			t.Fatalf("the NetworkPolicy was not applied:\n%s", out)
		}
	})
}

// TestNetworkPolicyCoversShards: with the sharding overlay and the
// networkpolicy component, the pods of every provisioner Deployment (the
// main instance and each shard, which fetch Bundle sources alike) are
// selected by a NetworkPolicy denying metadata addresses.
func TestNetworkPolicyCoversShards(t *testing.T) {
	objs := renderCombined(t, []string{"overlays/sharding"}, []string{"components/networkpolicy"})
	var policies []*networkingv1.NetworkPolicy
	var provisioners []*appsv1.Deployment
	for _, u := range objs {
		switch u.GetKind() {
		case "NetworkPolicy":
			policies = append(policies, convert[networkingv1.NetworkPolicy](t, u))
		case "Deployment":
			d := convert[appsv1.Deployment](t, u)
			if slices.Equal(d.Spec.Template.Spec.Containers[0].Command, []string{"/provisioner"}) {
				provisioners = append(provisioners, d)
			}
		}
	}
	if len(provisioners) != 3 || len(policies) == 0 {
		t.Fatalf("%d provisioner Deployments and %d NetworkPolicies, want 3 and at least 1", len(provisioners), len(policies))
	}
	for _, d := range provisioners {
		var by []string
		for _, np := range policies {
			sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
			testenv.MustNotError(t, err, "podSelector of %s", np.Name)
			if np.Namespace == d.Namespace && !sel.Empty() && sel.Matches(labels.Set(d.Spec.Template.Labels)) &&
				slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
				by = append(by, np.Name)
			}
		}
		if len(by) == 0 {
			t.Errorf("the pods of %s (labels %v) are selected by no egress NetworkPolicy", d.Name, d.Spec.Template.Labels)
		}
	}
}

// serverDryRun applies the kustomization dir with a server-side dry run
// against a fresh API server (namespace rukpak-system created) and returns
// kubectl's output.
func serverDryRun(t *testing.T, dir string) string {
	t.Helper()
	env := testenv.Start(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "rukpak-system"}}
	testenv.MustNotError(t, env.Client.Create(context.Background(), ns), "creating namespace")
	user, err := env.Env.ControlPlane.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	testenv.MustNotError(t, err, "adding user")
	kubeconfig, err := user.KubeConfig()
	testenv.MustNotError(t, err, "building kubeconfig")
	path := filepath.Join(t.TempDir(), "kubeconfig")
	testenv.MustNotError(t, os.WriteFile(path, kubeconfig, 0o600), "writing kubeconfig")
	cmd := exec.Command(kubectl(t), "--kubeconfig", path, "apply", "--dry-run=server", "--server-side",
		"-k", filepath.Join(testenv.RepoRoot(), "manifests", dir))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("server-side dry run of %s: %v\n%s", dir, err, out)
	}
	return string(out)
}

// TestWebhookLeastPrivilege: in every kustomization the webhook may read
// and write only its own certificate Secret (by name: no list or watch of
// the namespace's Secrets, which hold release records and credentials; no
// create, the Secret is shipped), runs with a memory limit, and is told the
// provisioner's ServiceAccount, whose impersonation installing without a
// ServiceAccount takes.
// TestWebhookReviewRights: in every kustomization that ships the webhook,
// its ClusterRole lets it create the TokenReviews and SubjectAccessReviews
// that its /metrics authentication and its admission checks send (an
// overlay that replaces the rules once dropped TokenReviews, leaving the
// metrics endpoint refusing every scraper).
func TestWebhookReviewRights(t *testing.T) {
	needed := []rbacv1.PolicyRule{
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	}
	for _, dir := range kustomizations {
		t.Run(dir, func(t *testing.T) {
			var role *rbacv1.ClusterRole
			for _, u := range render(t, dir) {
				if u.GetKind() == "ClusterRole" && u.GetName() == "rukpak-webhook" {
					role = convert[rbacv1.ClusterRole](t, u)
				}
			}
			if role == nil {
				t.Skipf("%s ships no webhook ClusterRole", dir)
			}
			for _, n := range needed {
				if !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
					return slices.Equal(r.APIGroups, n.APIGroups) && slices.Equal(r.Resources, n.Resources) && slices.Contains(r.Verbs, "create")
				}) {
					t.Errorf("ClusterRole rukpak-webhook cannot create %s.%s", n.Resources[0], n.APIGroups[0])
				}
			}
		})
	}
}

func TestWebhookLeastPrivilege(t *testing.T) {
	for _, dir := range kustomizations {
		t.Run(dir, func(t *testing.T) {
			var role *rbacv1.Role
			var dep *appsv1.Deployment
			secret, provisionerSAs := false, map[string]bool{}
			for _, u := range render(t, dir) {
				switch {
				case u.GetKind() == "Role" && u.GetName() == "rukpak-webhook":
					role = convert[rbacv1.Role](t, u)
				case u.GetKind() == "Deployment" && u.GetName() == "rukpak-webhook":
					dep = convert[appsv1.Deployment](t, u)
				case u.GetKind() == "Secret" && u.GetName() == "rukpak-webhook-certs" && u.GetNamespace() == "rukpak-system":
					secret = true
				case u.GetKind() == "Deployment" && strings.HasPrefix(u.GetName(), "rukpak-core"):
					d := convert[appsv1.Deployment](t, u)
					provisionerSAs[d.Namespace+"/"+d.Spec.Template.Spec.ServiceAccountName] = true
				}
			}
			if role == nil && dep == nil {
				t.Skipf("%s ships no webhook", dir)
			}
			if role == nil || dep == nil {
				t.Fatalf("Role or Deployment rukpak-webhook missing")
			}
			if !secret {
				t.Errorf("the certificate Secret rukpak-system/rukpak-webhook-certs is not shipped (the webhook may not create it)")
			}
			want := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"rukpak-webhook-certs"},
				Verbs: []string{"get", "list", "watch", "update", "patch"}}
			var secretRules []rbacv1.PolicyRule
			for _, r := range role.Rules {
				if slices.Contains(r.Resources, "secrets") || slices.Contains(r.Resources, "*") {
					secretRules = append(secretRules, r)
				}
			}
			if !equalRules(secretRules, []rbacv1.PolicyRule{want}) {
				t.Errorf("the webhook's rules on Secrets = %+v, want only %+v", secretRules, want)
			}
			ctr := dep.Spec.Template.Spec.Containers[0]
			if ctr.Resources.Limits.Memory().IsZero() {
				t.Errorf("the webhook container has no memory limit")
			}
			var sa string
			for _, a := range ctr.Args {
				if v, ok := strings.CutPrefix(a, "--provisioner-service-account="); ok {
					sa = v
				}
			}
			if len(provisionerSAs) > 0 && !provisionerSAs[sa] {
				t.Errorf("--provisioner-service-account=%q names no provisioner's ServiceAccount (%v)", sa, provisionerSAs)
			}
		})
	}
}
