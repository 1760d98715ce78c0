package provisioner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/provisioner/helm/install"
)

// waitInstalledSettled waits until bd's Installed condition is True, or
// False with reason, and returns it: a test that expects a refusal fails
// at once, not at a timeout, when the install went through.
func (h *harness) waitInstalledSettled(name, reason string) *metav1.Condition {
	h.t.Helper()
	var c *metav1.Condition
	eventually(h.t, fmt.Sprintf("bundle deployment %s Installed True or False/%s", name, reason), func() error {
		c = conditions.Get(h.bd(name).Status.Conditions, rukpakv1alpha1.TypeInstalled)
		if c == nil || (c.Status != metav1.ConditionTrue && c.Reason != reason) {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
	return c
}

// A helm-class BundleDeployment's values sources (spec.config.valuesFrom).
func TestIntegrationHelmValuesFrom(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()

	// A missing source and one without the opt-in label fail with the
	// same message, so a BundleDeployment's author cannot tell whether a
	// Secret of the provisioner's namespace exists. Each BundleDeployment
	// is new, so its message is the provisioner's answer to that state.
	t.Run("missing and not labelled: one message", func(t *testing.T) {
		h.createNamespace("hvm")
		config := `{"installNamespace":"hvm","valuesFrom":[{"kind":"Secret","name":"hvm-values"}]}`
		want := "spec.config.valuesFrom[0]: Secret rukpak-system/hvm-values does not exist, is not labelled core.rukpak.io/helm-values=true, or may not be read by the provisioner"
		h.createHelmBD("hvm-missing", h.pushChartDir("charts/hvm", revisionsChart), config)
		missing := h.waitInstalledSettled("hvm-missing", rukpakv1alpha1.ReasonInstallFailed)
		if err := h.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "hvm-values"},
			StringData: map[string]string{"values.yaml": "message: unlabelled\n"}}); err != nil {
			t.Fatal(err)
		}
		h.createHelmBD("hvm-unlabelled", h.pushChartDir("charts/hvm", revisionsChart), config)
		unlabelled := h.waitInstalledSettled("hvm-unlabelled", rukpakv1alpha1.ReasonInstallFailed)
		for _, c := range []*metav1.Condition{missing, unlabelled} {
			if c.Status != metav1.ConditionFalse || withoutRetry(c.Message) != want {
				t.Errorf("Installed %s/%s %q, want False/%s %q", c.Status, c.Reason, c.Message, rukpakv1alpha1.ReasonInstallFailed, want)
			}
		}
	})

	// Another team's labelled values Secret, named by a BundleDeployment
	// that installs as a ServiceAccount which may not read it, is not
	// read: the same message, nothing rendered from it; granted get on it,
	// the ServiceAccount reads it.
	t.Run("read as the service account", func(t *testing.T) {
		const password = "team-b-db-password-0f1e2d"
		h.tenantInstaller()
		h.createDocs(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: hvf, namespace: tenant}
rules:
- {apiGroups: [""], resources: [configmaps], verbs: [get, list, watch, create, update, patch, delete]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: hvf, namespace: tenant}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: hvf}
subjects: [{kind: ServiceAccount, name: installer, namespace: tenant}]`)
		if err := h.c.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "team-b-values", Labels: map[string]string{install.LabelValuesSource: "true"}},
			StringData: map[string]string{"values.yaml": "message: " + password + "\n"},
		}); err != nil {
			t.Fatal(err)
		}
		config := func(optional bool) string {
			return fmt.Sprintf(`{"installNamespace":"tenant","valuesFrom":[{"kind":"Secret","name":"team-b-values","optional":%t}]}`, optional)
		}
		bd := &rukpakv1alpha1.BundleDeployment{
			ObjectMeta: metav1.ObjectMeta{Name: "hvf"},
			Spec: rukpakv1alpha1.BundleDeploymentSpec{
				ProvisionerClassName: rukpakv1alpha1.ProvisionerClassHelm,
				ServiceAccount:       &rukpakv1alpha1.ServiceAccountReference{Namespace: "tenant", Name: "installer"},
				Config:               &apiextensionsv1.JSON{Raw: []byte(config(false))},
				Template: rukpakv1alpha1.BundleTemplate{Spec: rukpakv1alpha1.BundleSpec{
					ProvisionerClassName: rukpakv1alpha1.ProvisionerClassHelm,
					Source:               h.pushChartDir("charts/hvf", revisionsChart),
				}},
			},
		}
		if err := h.c.Create(ctx, bd); err != nil {
			t.Fatal(err)
		}
		// The chart is rendered for the permission check, as the
		// ServiceAccount: the values are read there.
		const prefix = "Checking what service account tenant/installer may do failed; nothing was applied: "
		leaked := func() {
			t.Helper()
			var cms corev1.ConfigMapList
			if err := h.c.List(ctx, &cms, client.InNamespace("tenant")); err != nil {
				t.Fatal(err)
			}
			for _, cm := range cms.Items {
				if body, _ := json.Marshal(cm); strings.Contains(string(body), password) {
					t.Errorf("ConfigMap tenant/%s holds the Secret's value: %v", cm.Name, cm.Data)
				}
			}
			if got := h.releaseSecrets("hvf"); len(got) != 0 {
				t.Errorf("release records %v, want none", got)
			}
			if body, _ := json.Marshal(h.bd("hvf").Status); strings.Contains(string(body), password) {
				t.Errorf("status holds the Secret's value: %s", body)
			}
		}
		c := h.waitInstalledSettled("hvf", rukpakv1alpha1.ReasonInsufficientPermissions)
		if want := prefix + "spec.config.valuesFrom[0]: Secret rukpak-system/team-b-values does not exist, is not labelled core.rukpak.io/helm-values=true, or may not be read by service account tenant/installer"; c.Status != metav1.ConditionFalse || c.Message != want {
			t.Errorf("Installed %s/%s %q, want False/%s %q", c.Status, c.Reason, c.Message, rukpakv1alpha1.ReasonInsufficientPermissions, want)
		}
		leaked()
		if t.Failed() {
			t.FailNow()
		}

		// optional: a refused read is an error too, not a silent
		// install without the values.
		h.setConfig("hvf", config(true))
		h.waitBDExact("hvf", rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonInsufficientPermissions,
			prefix+"spec.config.valuesFrom[0]: optional Secret rukpak-system/team-b-values may not be read by service account tenant/installer "+
				"(an optional source is skipped when it does not exist or is not labelled core.rukpak.io/helm-values=true, never when reading it is refused)")
		leaked()

		h.createDocs(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: hvf-values, namespace: rukpak-system}
rules:
- {apiGroups: [""], resources: [secrets], resourceNames: [team-b-values], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: hvf-values, namespace: rukpak-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: hvf-values}
subjects: [{kind: ServiceAccount, name: installer, namespace: tenant}]`)
		h.updateBD("hvf", func(bd *rukpakv1alpha1.BundleDeployment) {
			metav1.SetMetaDataAnnotation(&bd.ObjectMeta, rukpakv1alpha1.AnnotationReconcileRequestedAt, "granted")
		})
		h.waitBD("hvf", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
		if got := h.configMapData("tenant", "hvf-state")["message"]; got != password {
			t.Errorf("message %q, want the Secret's value", got)
		}
	})
}
