package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testregistry"
)

// gadget is a Gadget of the webhook test operator, created as v1.
func gadget(ns, name, labels string) string {
	return fmt.Sprintf("apiVersion: webhook.rukpak.test/v1\nkind: Gadget\nmetadata:\n  name: %s\n  namespace: %s\n  labels: {%s}\nspec: {size: 1}\n", name, ns, labels)
}

// registryBD applies a registry-class BundleDeployment of an image bundle.
func registryBD(t *testing.T, f *fixtures, name, ref, config string) {
	t.Helper()
	if config != "" {
		config = "\n  config: " + config
	}
	mustKubectl(t, fmt.Sprintf(`apiVersion: core.rukpak.io/v1alpha1
kind: BundleDeployment
metadata:
  name: %s
spec:
  provisionerClassName: core-rukpak-io-registry%s
  template:
    spec:
      source:
        %s
      provisionerClassName: core-rukpak-io-registry
`, name, config, f.imageSource(ref)), "apply", "-f", "-")
}

// deniedBy is the message of a Gadget the test operator's validating
// webhook denies, as kubectl prints it.
const deniedBy = `admission webhook "vgadgets.webhook.rukpak.test" denied the request: denied by the test webhook: no-gadgets-today`

// denied creates a Gadget the test operator's validating webhook denies
// and expects its message. The first calls may find the webhook's Service
// without ready endpoints yet (connection refused), a moment after the
// Deployment is available: those are retried.
func denied(t *testing.T, ns string) {
	t.Helper()
	eventually(t, time.Minute, "the operator's webhook denying a Gadget", func() error {
		_, stderr, err := kubectl(t, gadget(ns, "denied", `webhook.rukpak.test/deny: no-gadgets-today`), "create", "-f", "-")
		if err == nil {
			t.Fatalf("a Gadget the operator denies was created in %s", ns)
		}
		if !strings.Contains(stderr, deniedBy) {
			return fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr))
		}
		return nil
	})
}

// TestRegistryWebhooks installs registry+v1 operators whose CSVs declare
// webhooks on real pods: the API server calls them with the certificate the
// provisioner issued, the certificate rotates while objects keep being
// admitted, and uninstalling leaves no webhook configuration, Service or
// Secret.
func TestRegistryWebhooks(t *testing.T) {
	if !suite.realPods {
		t.Skip("webhooks are served by real pods only: make test-e2e-node, or E2E_REAL_PODS=1 with the test images loaded")
	}
	// It restarts the provisioner with short-lived webhook certificates.
	disturbs(t)
	f := newFixtures(t)
	root := testenv.RepoRoot()
	push := func(dir string) string {
		return f.reg.MustPush(t, f.reg.Ref(dir+":v1"), testregistry.Image(t, testregistry.LayerFromDir(t, filepath.Join(root, "test/testdata/bundles/registry-v1", dir), "")))
	}
	all, own := push("webhook-operator-1.0.0"), push("webhook-operator-own-1.0.0")

	// Certificates valid 2 minutes, renewed 90 s before expiry: a renewal
	// every 30 s, three times the node's kubelet's syncFrequency (10 s),
	// so the pod serves each certificate before the next renewal drops
	// the CA before it from the CA bundle (which trusts the current and
	// previous CA).
	const deployment = "deployment/rukpak-core"
	args := jsonpath(t, deployment+" -n rukpak-system", "{.spec.template.spec.containers[0].args}")
	mustKubectl(t, "", "-n", "rukpak-system", "patch", deployment, "--type=json", "-p",
		`[{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--webhook-cert-validity=2m"},`+
			`{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--webhook-cert-renew-before=90s"}]`)
	t.Cleanup(func() {
		mustKubectl(t, "", "-n", "rukpak-system", "patch", deployment, "--type=json", "-p",
			`[{"op":"replace","path":"/spec/template/spec/containers/0/args","value":`+args+`}]`)
		mustKubectl(t, "", "-n", "rukpak-system", "rollout", "status", deployment, "--timeout=120s")
	})
	mustKubectl(t, "", "-n", "rukpak-system", "rollout", "status", deployment, "--timeout=120s")

	// nothingLeft checks an uninstall removed the webhook objects.
	// (The CRD goes once its Gadgets are deleted, a moment later.)
	nothingLeft := func(t *testing.T, ns string) {
		t.Helper()
		eventually(t, time.Minute, "nothing left of the uninstalled operator", func() error {
			for _, res := range []string{
				"validatingwebhookconfiguration/vgadgets.webhook.rukpak.test",
				"mutatingwebhookconfiguration/mgadgets.webhook.rukpak.test",
				"service/webhook-operator-service -n " + ns,
				"secret/webhook-operator-service-cert -n " + ns,
				"crd/gadgets.webhook.rukpak.test",
			} {
				if out := mustKubectl(t, "", append([]string{"get", "--ignore-not-found"}, strings.Fields(res)...)...); out != "" {
					return fmt.Errorf("%s left after the uninstall:\n%s", res, out)
				}
			}
			return nil
		})
	}

	t.Run("AllNamespaces: validating, mutating and conversion webhooks, rotated", func(t *testing.T) {
		const ns = "webhook-operator-system"
		registryBD(t, f, "webhook-operator", all, "")
		t.Cleanup(func() {
			_, _, _ = kubectl(t, "", "delete", "bd", "webhook-operator", "--ignore-not-found", "--timeout=2m")
		})
		waitFor(t, "bd/webhook-operator", "condition=Installed", 2*time.Minute)
		waitFor(t, "bd/webhook-operator", "condition=Healthy", 2*time.Minute)

		denied(t, "default")
		mustKubectl(t, gadget("default", "kept", ""), "create", "-f", "-")
		if got := jsonpath(t, "gadget/kept -n default", `{.metadata.labels.webhook\.rukpak\.test/mutated}`); got != "true" {
			t.Fatalf("the mutating webhook's label is %q, want true", got)
		}
		// Stored as v1, read as v2 through the conversion webhook.
		if got := jsonpath(t, "gadgets.v2.webhook.rukpak.test/kept -n default", `{.apiVersion} {.metadata.annotations.webhook\.rukpak\.test/converted-from}`); got != "webhook.rukpak.test/v2 webhook.rukpak.test/v1" {
			t.Fatalf("v1 Gadget read as v2: %q, want converted from v1 by the webhook", got)
		}

		// Rotation: keep creating Gadgets until the certificate was renewed
		// and the pod serves the new one; the API server admits every one.
		const secret = "secret/webhook-operator-service-cert -n " + ns
		first := secretLeaf(t, secret, "tls.crt")
		var failures []string
		n := 0
		// Polled without slowing down: every create is a probe of the
		// rotation.
		poll(t, 5*time.Minute, 250*time.Millisecond, "the renewed certificate served", func() error {
			n++
			if _, stderr, err := kubectl(t, gadget("default", fmt.Sprintf("rotation-%d", n), ""), "create", "-f", "-"); err != nil {
				failures = append(failures, strings.TrimSpace(stderr))
			}
			cur := secretLeaf(t, secret, "tls.crt")
			if cur == first {
				return fmt.Errorf("certificate not renewed yet")
			}
			if bundle := jsonpath(t, "validatingwebhookconfiguration/vgadgets.webhook.rukpak.test", "{.webhooks[0].clientConfig.caBundle}"); bundle != jsonpath(t, secret, `{.data.ca\.crt}`) {
				return fmt.Errorf("the webhook configuration's caBundle %s is not the Secret's %s", subjects(bundle), subjects(jsonpath(t, secret, `{.data.ca\.crt}`)))
			}
			if suite.node != nil && servedLeaf(t, "webhook-operator-service."+ns+".svc:443") != cur {
				return fmt.Errorf("the pod does not serve the renewed certificate yet")
			}
			return nil
		})
		if len(failures) > 0 {
			t.Fatalf("%d of %d Gadgets refused during the rotation:\n%s", len(failures), n, strings.Join(failures[:min(len(failures), 5)], "\n"))
		}
		t.Logf("%d Gadgets admitted across the rotation", n)

		mustKubectl(t, "", "delete", "bd", "webhook-operator", "--timeout=2m")
		nothingLeft(t, ns)
	})

	t.Run("OwnNamespace: the admission webhooks see the install namespace only", func(t *testing.T) {
		const ns = "webhook-own"
		registryBD(t, f, "webhook-operator-own", own, `{installNamespace: `+ns+`, watchNamespaces: [`+ns+`]}`)
		t.Cleanup(func() {
			_, _, _ = kubectl(t, "", "delete", "bd", "webhook-operator-own", "--ignore-not-found", "--timeout=2m")
		})
		waitFor(t, "bd/webhook-operator-own", "condition=Installed", 2*time.Minute)
		waitFor(t, "bd/webhook-operator-own", "condition=Healthy", 2*time.Minute)

		denied(t, ns)
		mustKubectl(t, gadget(ns, "kept", ""), "create", "-f", "-")
		if got := jsonpath(t, "gadget/kept -n "+ns, `{.metadata.labels.webhook\.rukpak\.test/mutated}`); got != "true" {
			t.Fatalf("the mutating webhook's label is %q, want true", got)
		}
		// Another namespace is not the operator's: neither webhook is called.
		mustKubectl(t, gadget("default", "elsewhere", `webhook.rukpak.test/deny: no-gadgets-today`), "create", "-f", "-")
		if got := jsonpath(t, "gadget/elsewhere -n default", `{.metadata.labels.webhook\.rukpak\.test/mutated}`); got != "" {
			t.Fatalf("a Gadget outside the watched namespace was mutated (%q)", got)
		}

		mustKubectl(t, "", "delete", "bd", "webhook-operator-own", "--timeout=2m")
		nothingLeft(t, ns)
	})
}
