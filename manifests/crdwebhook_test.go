package manifests_test

import (
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// TestCRDWebhookNeverBlocks: in every kustomization the check of hand
// edits of release-owned CRDs can never block the cluster's CRD updates.
// It fails open (Ignore), answers before the API server gives up on it,
// sees only spec updates of CRDs labelled as a BundleDeployment's, never
// the writes of any provisioner instance, and the ClusterRole the
// provisioners write for it is the one bound to the webhook.
func TestCRDWebhookNeverBlocks(t *testing.T) {
	const name = "vcustomresourcedefinitions.core.rukpak.io"
	for _, dir := range kustomizations {
		t.Run(dir, func(t *testing.T) {
			var hook *admissionregistrationv1.ValidatingWebhook
			var webhookDep *appsv1.Deployment
			var binding *rbacv1.ClusterRoleBinding
			var provisioners []*appsv1.Deployment
			for _, u := range render(t, dir) {
				switch {
				case u.GetKind() == "ValidatingWebhookConfiguration":
					cfg := convert[admissionregistrationv1.ValidatingWebhookConfiguration](t, u)
					for i := range cfg.Webhooks {
						if cfg.Webhooks[i].Name == name {
							hook = &cfg.Webhooks[i]
						}
					}
				case u.GetKind() == "Deployment" && u.GetName() == "rukpak-webhook":
					webhookDep = convert[appsv1.Deployment](t, u)
				case u.GetKind() == "Deployment" && strings.HasPrefix(u.GetName(), "rukpak-core"):
					provisioners = append(provisioners, convert[appsv1.Deployment](t, u))
				case u.GetKind() == "ClusterRoleBinding" && u.GetName() == "rukpak-webhook-crd-check":
					binding = convert[rbacv1.ClusterRoleBinding](t, u)
				}
			}
			if hook == nil && webhookDep == nil {
				t.Skipf("%s ships no webhook", dir)
			}
			if hook == nil || webhookDep == nil {
				t.Fatalf("webhook %s or Deployment rukpak-webhook missing", name)
			}
			if hook.FailurePolicy == nil || *hook.FailurePolicy != admissionregistrationv1.Ignore {
				t.Errorf("failurePolicy = %v, want Ignore: a webhook that is down must not block CRD updates", hook.FailurePolicy)
			}
			if hook.TimeoutSeconds == nil || *hook.TimeoutSeconds > 5 {
				t.Errorf("timeoutSeconds = %v, want at most 5", hook.TimeoutSeconds)
			}
			check := 4 * time.Second // the webhook's default
			for _, a := range webhookDep.Spec.Template.Spec.Containers[0].Args {
				if v, ok := strings.CutPrefix(a, "--crd-preflight-timeout="); ok {
					d, err := time.ParseDuration(v)
					if err != nil {
						t.Fatalf("--crd-preflight-timeout=%s: %v", v, err)
					}
					check = d
				}
			}
			if hook.TimeoutSeconds != nil && check >= time.Duration(*hook.TimeoutSeconds)*time.Second {
				t.Errorf("--crd-preflight-timeout=%s is not under timeoutSeconds %d: the API server would give up first", check, *hook.TimeoutSeconds)
			}
			if len(hook.Rules) != 1 || len(hook.Rules[0].Operations) != 1 || hook.Rules[0].Operations[0] != admissionregistrationv1.Update ||
				strings.Join(hook.Rules[0].Resources, ",") != "customresourcedefinitions" || strings.Join(hook.Rules[0].APIGroups, ",") != "apiextensions.k8s.io" {
				t.Errorf("rules = %+v, want UPDATE of apiextensions.k8s.io customresourcedefinitions only (no status subresource)", hook.Rules)
			}
			if hook.ObjectSelector == nil || hook.ObjectSelector.MatchLabels["core.rukpak.io/owner-kind"] != "BundleDeployment" || len(hook.ObjectSelector.MatchExpressions) > 0 {
				t.Errorf("objectSelector = %+v, want core.rukpak.io/owner-kind=BundleDeployment", hook.ObjectSelector)
			}
			conds := map[string]string{}
			for _, c := range hook.MatchConditions {
				conds[c.Name] = c.Expression
			}
			if conds["spec-change"] != "object.spec != oldObject.spec" {
				t.Errorf("matchConditions %v: want spec-change, object.spec != oldObject.spec", conds)
			}
			const prefix = "system:serviceaccount:rukpak-system:rukpak-provisioner"
			if conds["not-the-provisioner"] != "!request.userInfo.username.startsWith('"+prefix+"')" {
				t.Errorf("matchConditions %v: want not-the-provisioner on the prefix %s", conds, prefix)
			}
			if len(provisioners) == 0 && (binding == nil || binding.RoleRef.Name != "rukpak-webhook-crd-check") {
				// The webhook alone (cert-manager overlay): the provisioner's default.
				t.Errorf("ClusterRoleBinding rukpak-webhook-crd-check binds %+v, want ClusterRole rukpak-webhook-crd-check", binding)
			}
			for _, d := range provisioners {
				sa := "system:serviceaccount:" + d.Namespace + ":" + d.Spec.Template.Spec.ServiceAccountName
				if !strings.HasPrefix(sa, prefix) {
					t.Errorf("provisioner %s runs as %s, whose CRD writes would reach the webhook", d.Name, sa)
				}
				role := "rukpak-webhook-crd-check" // the provisioner's default
				for _, a := range d.Spec.Template.Spec.Containers[0].Args {
					if v, ok := strings.CutPrefix(a, "--crd-check-cluster-role="); ok {
						role = v
					}
				}
				if binding == nil || binding.RoleRef.Kind != "ClusterRole" || binding.RoleRef.Name != role {
					t.Errorf("provisioner %s writes ClusterRole %q, but ClusterRoleBinding rukpak-webhook-crd-check binds %+v", d.Name, role, binding)
				}
			}
			if binding != nil && (len(binding.Subjects) != 1 || binding.Subjects[0].Kind != "ServiceAccount" ||
				binding.Subjects[0].Name != webhookDep.Spec.Template.Spec.ServiceAccountName || binding.Subjects[0].Namespace != webhookDep.Namespace) {
				t.Errorf("ClusterRoleBinding rukpak-webhook-crd-check binds %+v, want the webhook's ServiceAccount only", binding.Subjects)
			}
		})
	}
}
