package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rukpak-dev/rukpak/internal/testcertmanager"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testregistry"
)

// plainBundle pushes a plain bundle of manifests to the suite's registry.
func (f *fixtures) plainBundle(t *testing.T, name string, manifests string) string {
	t.Helper()
	return f.reg.MustPush(t, f.reg.Ref(name+":v1"), testregistry.Image(t, testregistry.Layer(t, map[string]string{"manifests/objects.yaml": manifests})))
}

// applyBD creates or updates a plain BundleDeployment of an image bundle.
func applyBD(t *testing.T, f *fixtures, name, ref string) {
	t.Helper()
	mustKubectl(t, fmt.Sprintf(`apiVersion: core.rukpak.io/v1alpha1
kind: BundleDeployment
metadata:
  name: %s
spec:
  provisionerClassName: core-rukpak-io-plain
  template:
    spec:
      source:
        %s
      provisionerClassName: core-rukpak-io-plain
`, name, f.imageSource(ref)), "apply", "-f", "-")
}

// condition reads a BundleDeployment condition as "Status/Reason: Message".
func condition(t *testing.T, bd, typ string) string {
	t.Helper()
	return jsonpath(t, "bd/"+bd, fmt.Sprintf(`{.status.conditions[?(@.type=="%s")].status}/{.status.conditions[?(@.type=="%s")].reason}: {.status.conditions[?(@.type=="%s")].message}`, typ, typ, typ))
}

// workload is a namespace and a Deployment of the ready test image.
func workload(ns, name, env string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[2]s
  namespace: %[1]s
spec:
  replicas: 1
  selector:
    matchLabels: {app: %[2]s}
  template:
    metadata:
      labels: {app: %[2]s}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
      - name: main
        image: %[3]s
        imagePullPolicy: IfNotPresent
        env: [%[4]s]
        readinessProbe:
          httpGet: {path: /readyz, port: 8080}
          periodSeconds: 1
`, ns, name, "rukpak.test/ready:v1", env)
}

// podUIDs lists the UIDs of the pods matching selector in ns.
func podUIDs(t *testing.T, ns, selector string) string {
	t.Helper()
	return jsonpath(t, "pods -n "+ns+" -l "+selector, "{.items[*].metadata.uid}")
}

// restartProvisioner kills the provisioner mid-work: the process in the
// local environment, else its pod (and, on the real node, the kubelet).
func restartProvisioner(t *testing.T) {
	t.Helper()
	if suite.local != nil {
		suite.local.Provisioner.Kill()
		if err := suite.local.StartProvisioner(t.Context()); err != nil {
			t.Fatal(err)
		}
		return
	}
	mustKubectl(t, "", "-n", "rukpak-system", "delete", "pod", "-l", "app.kubernetes.io/name=rukpak-core", "--wait=false")
	if suite.node != nil {
		if err := suite.node.restartKubelet(t.Context()); err != nil {
			t.Fatalf("restarting the kubelet: %v", err)
		}
	}
}

// TestRealPodsWorkloads covers what only real containers show of the
// workloads rukpak installs: they run or crash, pods are killed, a
// Deployment is deleted, a pivot fails. Each case has its own
// BundleDeployment and namespace; they run side by side.
func TestRealPodsWorkloads(t *testing.T) {
	if !suite.realPods {
		t.Skip("workloads do not run on this cluster's nodes (kwok): make test-e2e-node, or E2E_REAL_PODS=1 with the test images loaded")
	}
	shared(t)
	f := newFixtures(t)

	t.Run("a crash-looping workload is installed but not Healthy, naming it", func(t *testing.T) {
		t.Parallel()
		ref := f.plainBundle(t, "crashloop", strings.Replace(workload("crashloop", "crasher", `{name: EXIT_CODE, value: "3"}`), "rukpak.test/ready:v1", "rukpak.test/crashloop:v1", 1))
		applyBD(t, f, "crashloop", ref)
		waitFor(t, "bd/crashloop", "condition=Installed", 2*time.Minute)
		eventually(t, 90*time.Second, "the container to crash twice", func() error {
			got := jsonpath(t, "pods -n crashloop -l app=crasher", "{.items[*].status.containerStatuses[*].restartCount}/{.items[*].status.containerStatuses[*].lastState.terminated.exitCode}")
			var restarts, code int
			if _, err := fmt.Sscanf(got, "%d/%d", &restarts, &code); err != nil || restarts < 2 || code != 3 {
				return fmt.Errorf("restarts/exit code %q", got)
			}
			return nil
		})
		// Unhealthy workloads are looked at again every 30 s: the crash
		// shows in the condition by then.
		var got string
		eventually(t, 90*time.Second, "Healthy=False naming the Deployment and why its pod fails", func() error {
			got = condition(t, "crashloop", "Healthy")
			for _, want := range []string{"False/Unhealthy: ", "Deployment crashloop/crasher", "container main exited with code 3"} {
				if !strings.Contains(got, want) {
					return fmt.Errorf("Healthy = %q lacks %q", got, want)
				}
			}
			return nil
		})
		t.Logf("Healthy = %s", got)
		mustKubectl(t, "", "delete", "bd", "crashloop", "--timeout=2m")
	})

	t.Run("Healthy flips when a pod is killed and comes back when its replacement is ready", func(t *testing.T) {
		t.Parallel()
		applyBD(t, f, "flip", f.plainBundle(t, "flip", workload("flip", "flip", `{name: READY_AFTER, value: "6s"}`)))
		waitFor(t, "bd/flip", "condition=Healthy", 2*time.Minute)
		mustKubectl(t, "", "-n", "flip", "delete", "pod", "-l", "app=flip", "--wait=false")
		waitFor(t, "bd/flip", "condition=Healthy=False", time.Minute)
		t.Logf("after the kill: %s", condition(t, "flip", "Healthy"))
		waitFor(t, "bd/flip", "condition=Healthy", time.Minute)
		mustKubectl(t, "", "delete", "bd", "flip", "--timeout=2m")
	})

	t.Run("drift: a deleted Deployment comes back and runs", func(t *testing.T) {
		t.Parallel()
		applyBD(t, f, "drift", f.plainBundle(t, "drift", workload("drift", "drift", "")))
		waitFor(t, "bd/drift", "condition=Healthy", 2*time.Minute)
		uid := jsonpath(t, "deployment/drift -n drift", "{.metadata.uid}")
		mustKubectl(t, "", "-n", "drift", "delete", "deployment", "drift", "--wait=true")
		eventually(t, time.Minute, "the Deployment to be recreated", func() error {
			got, _, err := kubectl(t, "", "get", "deployment", "drift", "-n", "drift", "-o", "jsonpath={.metadata.uid}")
			if err != nil {
				return err
			}
			if got == uid {
				return fmt.Errorf("still the deleted Deployment's uid %s", uid)
			}
			return nil
		})
		waitFor(t, "deployment/drift", "condition=Available", time.Minute, "-n", "drift")
		waitFor(t, "bd/drift", "condition=Healthy", time.Minute)
		mustKubectl(t, "", "delete", "bd", "drift", "--timeout=2m")
	})

	t.Run("a failed pivot keeps the old workload running", func(t *testing.T) {
		t.Parallel()
		applyBD(t, f, "pivot", f.plainBundle(t, "pivot", workload("pivot", "pivot", "")))
		waitFor(t, "bd/pivot", "condition=Healthy", 2*time.Minute)
		var pods string
		eventually(t, time.Minute, "one running pod", func() error {
			if pods = podUIDs(t, "pivot", "app=pivot"); len(strings.Fields(pods)) != 1 {
				return fmt.Errorf("pods %q", pods)
			}
			return nil
		})
		// The new bundle's Deployment is invalid: the API server rejects it.
		bad := strings.Replace(workload("pivot", "pivot", ""), "replicas: 1", "replicas: -1", 1)
		applyBD(t, f, "pivot", f.reg.MustPush(t, f.reg.Ref("pivot:v2"), testregistry.Image(t, testregistry.Layer(t, map[string]string{"manifests/objects.yaml": bad}))))
		waitFor(t, "bd/pivot", "condition=Installed=False", 2*time.Minute)
		t.Logf("Installed = %s", condition(t, "pivot", "Installed"))
		if got := podUIDs(t, "pivot", "app=pivot"); got != pods {
			t.Errorf("pods changed during the failed pivot: %q, were %q", got, pods)
		}
		waitFor(t, "deployment/pivot", "condition=Available", time.Minute, "-n", "pivot")
		mustKubectl(t, "", "delete", "bd", "pivot", "--timeout=2m")
	})
}

// TestRealPods covers what only real containers show of rukpak's own
// installation: several provisioner replicas, certificate rotation, the
// overlays and an in-place upgrade of rukpak. It disturbs the
// installation, so it runs alone.
func TestRealPods(t *testing.T) {
	if !suite.realPods {
		t.Skip("rukpak's pods do not run on this cluster's nodes (kwok): make test-e2e-node, or E2E_REAL_PODS=1 with the test images loaded")
	}
	disturbs(t)
	f := newFixtures(t)
	var importedV2 func(*testing.T)
	if suite.node != nil {
		importedV2 = importV2(t)
	}

	t.Run("two provisioner replicas: one leader, content from either", func(t *testing.T) {
		mustKubectl(t, "", "-n", "rukpak-system", "scale", "deployment/rukpak-core", "--replicas=2")
		defer mustKubectl(t, "", "-n", "rukpak-system", "scale", "deployment/rukpak-core", "--replicas=1")
		mustKubectl(t, "", "-n", "rukpak-system", "rollout", "status", "deployment/rukpak-core", "--timeout=100s")
		holder := jsonpath(t, "lease/provisioner.core.rukpak.io -n rukpak-system", "{.spec.holderIdentity}")
		if holder == "" {
			t.Fatal("no provisioner holds the leader lease")
		}
		t.Logf("leader: %s", holder)
		applyBD(t, f, "replicated", f.plainBundle(t, "replicated", workload("replicated", "replicated", "")))
		waitFor(t, "bd/replicated", "condition=Healthy", 2*time.Minute)
		url := jsonpath(t, "bundle/"+jsonpath(t, "bd/replicated", "{.status.activeBundle}"), "{.status.contentURL}")
		mustKubectl(t, "", "create", "serviceaccount", "replica-reader", "-n", "default")
		mustKubectl(t, "", "create", "clusterrolebinding", "replica-reader", "--clusterrole=bundle-reader", "--serviceaccount=default:replica-reader")
		token := strings.TrimSpace(mustKubectl(t, "", "create", "token", "replica-reader", "-n", "default", "--audience=content.core.rukpak.io"))
		// Every download opens a new connection, so the Service spreads them
		// over both replicas; each must have the content.
		eventually(t, 2*time.Minute, "20 downloads in a row through the Service", func() error {
			for i := range 20 {
				client := contentClient(t)
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				req.Header.Set("Authorization", "Bearer "+token)
				resp, err := client.Do(req)
				if err != nil {
					return err
				}
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return fmt.Errorf("download %d: %s", i, resp.Status)
				}
			}
			return nil
		})
		mustKubectl(t, "", "delete", "bd", "replicated", "--timeout=2m")
	})

	t.Run("webhook certificate rotation while Bundles are patched", func(t *testing.T) {
		p := newImmutablePatcher(t, f, "rotation")
		p.throughout(t, func() {
			old := jsonpath(t, "secret/rukpak-webhook-certs -n rukpak-system", `{.data.tls\.crt}`)
			// Dropping the serving certificate is what expiry looks like to
			// the rotator: it issues a new one from the same CA.
			mustKubectl(t, "", "-n", "rukpak-system", "patch", "secret", "rukpak-webhook-certs", "--type=json",
				"-p", `[{"op":"remove","path":"/data/tls.crt"},{"op":"remove","path":"/data/tls.key"}]`)
			eventually(t, time.Minute, "a new serving certificate", func() error {
				cur := jsonpath(t, "secret/rukpak-webhook-certs -n rukpak-system", `{.data.tls\.crt}`)
				if cur == "" || cur == old {
					return fmt.Errorf("not reissued yet")
				}
				return nil
			})
			// The webhook picks the new files up while the patches go on:
			// on the real node, until it serves the new certificate (the
			// test reaches its Service there); elsewhere, for a while.
			if suite.node == nil {
				time.Sleep(10 * time.Second)
				return
			}
			eventually(t, time.Minute, "the webhook serving the new certificate", func() error {
				served, err := tryServedLeaf(t, "rukpak-webhook-service.rukpak-system.svc:443")
				if err != nil {
					return err
				}
				if served != secretLeaf(t, "secret/rukpak-webhook-certs -n rukpak-system", "tls.crt") {
					return fmt.Errorf("the webhook serves a certificate other than Secret rukpak-webhook-certs'")
				}
				return nil
			})
		})
		mustKubectl(t, "", "delete", "bundle", "rotation")
	})

	t.Run("the cert-manager overlay: cert-manager's certificate and CA, renewed while Bundles are patched, then back to the base", func(t *testing.T) {
		if suite.node == nil {
			t.Skip("needs the real-node suite: it switches rukpak's own installation between overlays")
		}
		testcertmanager.Start(t, testenv.Kubectl(t), suite.kubeconfig)
		const (
			ns      = "rukpak-system"
			secret  = "secret/rukpak-webhook-certificate -n " + ns
			webhook = "rukpak-webhook-service.rukpak-system.svc:443"
		)
		// Back to the base: the webhook manages its certificate again. At
		// the end of the case, and also when it fails on the way, so the
		// later cases start from the base as installed.
		restored := false
		toBase := func(t *testing.T) {
			t.Helper()
			restored = true
			mustKubectl(t, "", "apply", "--server-side", "-k", filepath.Join(testenv.RepoRoot(), "manifests", "base"))
			mustKubectl(t, "", "-n", ns, "rollout", "status", "deployment/rukpak-webhook", "--timeout=100s")
			mustWebhookAnswer(t)
			mustKubectl(t, "", "-n", ns, "delete", "certificates.cert-manager.io,issuers.cert-manager.io", "--all")
			mustKubectl(t, "", "-n", ns, "delete", "secret", "rukpak-webhook-certificate", "rukpak-webhook-ca", "--ignore-not-found")
		}
		// Registered after cert-manager's own cleanup, so it runs first.
		t.Cleanup(func() {
			if !restored {
				t.Log("the case stopped early: putting the base back for the later cases")
				toBase(t)
			}
			_, _, _ = kubectl(t, "", "delete", "bundle", "cert-manager-rotation", "--ignore-not-found")
		})
		mustKubectl(t, "", "apply", "--server-side", "-k", filepath.Join(testenv.RepoRoot(), "manifests", "overlays", "cert-manager"))
		waitFor(t, "certificate/rukpak-webhook-certificate", "condition=Ready", 2*time.Minute, "-n", ns)
		mustKubectl(t, "", "-n", ns, "rollout", "status", "deployment/rukpak-webhook", "--timeout=100s")
		mustWebhookAnswer(t)
		if got := jsonpath(t, "deployment/rukpak-webhook -n "+ns, "{.spec.template.spec.containers[0].args}"); !strings.Contains(got, "--cert-mode=cert-manager") {
			t.Fatalf("webhook args %s: the overlay did not apply", got)
		}
		ca := jsonpath(t, secret, `{.data.ca\.crt}`)
		if subjects(ca) == "[]" || secretLeaf(t, secret, "ca.crt") != secretLeaf(t, "secret/rukpak-webhook-ca -n "+ns, "tls.crt") {
			t.Fatalf("the serving certificate's ca.crt is not the webhook's CA")
		}
		// cert-manager merges its CA into the bundle (its CAInjectorMerging,
		// GA in 1.21): the self-managed CA of the base stays trusted until
		// it expires.
		eventually(t, time.Minute, "cert-manager's CA injected into the webhook configuration", func() error {
			got := jsonpath(t, "validatingwebhookconfiguration/rukpak-validating-webhook-configuration", "{.webhooks[0].clientConfig.caBundle}")
			if !strings.Contains(subjects(got), strings.Trim(subjects(ca), "[]")) {
				return fmt.Errorf("caBundle %s does not hold the CA of Secret rukpak-webhook-certificate, %s", subjects(got), subjects(ca))
			}
			return nil
		})
		servesSecret := func() error {
			served, err := tryServedLeaf(t, webhook)
			if err != nil {
				return err
			}
			if served != secretLeaf(t, secret, "tls.crt") {
				return fmt.Errorf("the webhook serves a certificate other than Secret rukpak-webhook-certificate's")
			}
			return nil
		}
		eventually(t, time.Minute, "the webhook pod serving cert-manager's certificate", servesSecret)

		p := newImmutablePatcher(t, f, "cert-manager-rotation")
		p.throughout(t, func() {
			old := jsonpath(t, secret, `{.data.tls\.crt}`)
			// What cmctl renew does: ask cert-manager to issue now.
			mustKubectl(t, "", "-n", ns, "patch", "certificate", "rukpak-webhook-certificate", "--subresource=status", "--type=json", "-p",
				fmt.Sprintf(`[{"op":"add","path":"/status/conditions/-","value":{"type":"Issuing","status":"True","reason":"ManuallyTriggered","message":"renewal requested by the e2e suite","lastTransitionTime":%q}}]`, time.Now().UTC().Format(time.RFC3339)))
			eventually(t, time.Minute, "a renewed serving certificate", func() error {
				if cur := jsonpath(t, secret, `{.data.tls\.crt}`); cur == old {
					return fmt.Errorf("not renewed yet")
				}
				return nil
			})
			// The kubelet refreshes the pod's Secret volume within about a
			// minute; the webhook reloads the files when they change.
			eventually(t, 3*time.Minute, "the webhook pod serving the renewed certificate", servesSecret)
		})
		if got := jsonpath(t, secret, `{.data.ca\.crt}`); got != ca {
			t.Errorf("the renewal changed the CA: the serving certificate alone should be new")
		}

		toBase(t)
		eventually(t, 2*time.Minute, "the base webhook admitting again", p.patch)
		mustKubectl(t, "", "delete", "bundle", "cert-manager-rotation")
	})

	t.Run("the overlays run: networkpolicy, pvc, kind, then back to the base", func(t *testing.T) {
		if suite.node == nil {
			t.Skip("needs the real-node suite: it switches rukpak's own installation between overlays")
		}
		root := testenv.RepoRoot()
		apply := func(overlay string) {
			t.Helper()
			mustKubectl(t, "", "apply", "--server-side", "-k", filepath.Join(root, overlay))
			mustKubectl(t, "", "-n", "rukpak-system", "rollout", "status", "deployment/rukpak-core", "--timeout=100s")
		}
		download := func(bd string) {
			t.Helper()
			url := jsonpath(t, "bundle/"+jsonpath(t, "bd/"+bd, "{.status.activeBundle}"), "{.status.contentURL}")
			token := strings.TrimSpace(mustKubectl(t, "", "create", "token", "overlay-reader", "-n", "default", "--audience=content.core.rukpak.io"))
			eventually(t, time.Minute, "a download of "+url, func() error {
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				req.Header.Set("Authorization", "Bearer "+token)
				resp, err := contentClient(t).Do(req)
				if err != nil {
					return err
				}
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return fmt.Errorf("%s", resp.Status)
				}
				return nil
			})
			t.Logf("downloaded %s", url)
		}
		mustKubectl(t, "", "create", "serviceaccount", "overlay-reader", "-n", "default")
		mustKubectl(t, "", "create", "clusterrolebinding", "overlay-reader", "--clusterrole=bundle-reader", "--serviceaccount=default:overlay-reader")

		// networkpolicy: the provisioner still fetches and installs (the
		// bridge CNI does not enforce NetworkPolicy; the policy's effect
		// is for a CNI that does).
		apply("manifests/overlays/networkpolicy")
		mustKubectl(t, "", "-n", "rukpak-system", "get", "networkpolicy", "rukpak-core-egress")
		applyBD(t, f, "overlays", f.plainBundle(t, "overlays", workload("overlays", "overlays", "")))
		waitFor(t, "bd/overlays", "condition=Healthy", 2*time.Minute)

		// pvc: stored content survives the pod. The node has no storage
		// class, so the admin provides a volume, owned by the pod's fsGroup.
		pvDir := filepath.Join(suite.node.dir, "pv-bundles")
		if err := os.MkdirAll(pvDir, 0o770); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(pvDir, 65532, 65532); err != nil {
			t.Fatal(err)
		}
		mustKubectl(t, fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata:
  name: rukpak-bundles-e2e
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Delete
  hostPath: {path: %s, type: Directory}
`, pvDir), "apply", "-f", "-")
		apply("manifests/overlays/pvc")
		waitFor(t, "pvc/rukpak-bundles", "jsonpath={.status.phase}=Bound", time.Minute, "-n", "rukpak-system")
		applyBD(t, f, "overlays", f.reg.MustPush(t, f.reg.Ref("overlays:v2"), testregistry.Image(t, testregistry.Layer(t, map[string]string{"manifests/objects.yaml": workload("overlays", "overlays", `{name: MESSAGE, value: v2}`)}))))
		eventually(t, 2*time.Minute, "the pivot to v2", func() error {
			if got := jsonpath(t, "deployment/overlays -n overlays", "{.spec.template.spec.containers[0].env[0].value}"); got != "v2" {
				return fmt.Errorf("MESSAGE %q", got)
			}
			return nil
		})
		waitFor(t, "bd/overlays", "condition=Healthy", 2*time.Minute)
		pulls := f.reg.BlobPulls()
		mustKubectl(t, "", "-n", "rukpak-system", "delete", "pod", "-l", "app.kubernetes.io/name=rukpak-core", "--wait=true")
		mustKubectl(t, "", "-n", "rukpak-system", "rollout", "status", "deployment/rukpak-core", "--timeout=100s")
		download("overlays")
		if got := f.reg.BlobPulls(); got != pulls {
			t.Errorf("the restarted provisioner pulled %d blobs again: content on the claim should have survived", got-pulls)
		}

		// kind: the content URL is the node port on localhost.
		apply("manifests/overlays/kind")
		applyBD(t, f, "overlays", f.reg.MustPush(t, f.reg.Ref("overlays:v3"), testregistry.Image(t, testregistry.Layer(t, map[string]string{"manifests/objects.yaml": workload("overlays", "overlays", `{name: MESSAGE, value: v3}`)}))))
		eventually(t, 2*time.Minute, "a content URL on localhost:30443", func() error {
			// The active bundle changes under us during the pivot.
			url, _, err := kubectl(t, "", "get", "bundle", jsonpath(t, "bd/overlays", "{.status.activeBundle}"), "-o", "jsonpath={.status.contentURL}")
			if err != nil {
				return err
			}
			if !strings.HasPrefix(url, "https://localhost:30443/") {
				return fmt.Errorf("content URL %q", url)
			}
			return nil
		})
		// The old Bundle's URL moves to localhost too, when the overlay
		// restarts the provisioner: wait for the pivot itself, or the
		// download below may name a Bundle the pivot is deleting.
		eventually(t, 2*time.Minute, "the pivot to v3", func() error {
			if got := jsonpath(t, "deployment/overlays -n overlays", "{.spec.template.spec.containers[0].env[0].value}"); got != "v3" {
				return fmt.Errorf("MESSAGE %q", got)
			}
			return nil
		})
		waitFor(t, "bd/overlays", "condition=Healthy", 2*time.Minute)
		download("overlays")

		// Back to the base, as installed.
		apply("manifests/base")
		mustKubectl(t, "", "delete", "bd", "overlays", "--timeout=2m")
		mustKubectl(t, "", "-n", "rukpak-system", "delete", "pvc", "rukpak-bundles", "--wait=false")
		mustKubectl(t, "", "-n", "rukpak-system", "delete", "networkpolicy", "rukpak-core-egress")
		mustKubectl(t, "", "-n", "rukpak-system", "delete", "service", "rukpak-core-nodeport")
	})

	t.Run("rukpak upgraded in place leaves installed workloads alone", func(t *testing.T) {
		if suite.node == nil {
			t.Skip("needs the real-node suite, which imports the second image into the node")
		}
		applyBD(t, f, "upgrade", f.plainBundle(t, "upgrade", workload("upgrade", "upgrade", "")))
		waitFor(t, "bd/upgrade", "condition=Healthy", 2*time.Minute)
		pods := podUIDs(t, "upgrade", "app=upgrade")
		gen := jsonpath(t, "deployment/upgrade -n upgrade", "{.metadata.generation}")
		active := jsonpath(t, "bd/upgrade", "{.status.activeBundle}")
		installedAt := jsonpath(t, "bd/upgrade", `{.status.conditions[?(@.type=="Installed")].lastTransitionTime}`)

		importedV2(t)
		// As the README says: a kustomization of the admin's own names the
		// image; applied server-side like the install, so nothing conflicts.
		overlay := t.TempDir()
		base, err := filepath.Rel(overlay, filepath.Join(testenv.RepoRoot(), "manifests", "base"))
		if err != nil {
			t.Fatal(err)
		}
		kustomization := fmt.Sprintf("resources:\n- %s\nimages:\n- name: rukpak:devel\n  newName: rukpak\n  newTag: v2\n", base)
		if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
			t.Fatal(err)
		}
		mustKubectl(t, "", "apply", "--server-side", "-k", overlay)
		mustKubectl(t, "", "-n", "rukpak-system", "rollout", "status", "deployment/rukpak-core", "--timeout=100s")
		mustKubectl(t, "", "-n", "rukpak-system", "rollout", "status", "deployment/rukpak-webhook", "--timeout=100s")
		mustWebhookAnswer(t)
		// Whatever the new provisioner would change, it changes in its
		// first reconcile of the BundleDeployment, which its metrics show
		// (the leader's only: a series per object it reconciled).
		eventually(t, 2*time.Minute, "the rukpak:v2 provisioner to reconcile bd/upgrade", func() error {
			pods, _, err := kubectl(t, "", "get", "pods", "-n", "rukpak-system", "-l", "app.kubernetes.io/name=rukpak-core", "-o",
				`jsonpath={range .items[*]}{.metadata.name} {.spec.containers[0].image} {.metadata.deletionTimestamp}{"\n"}{end}`)
			if err != nil {
				return err
			}
			var pod string
			for _, line := range strings.Split(strings.TrimSpace(pods), "\n") {
				// Not being deleted (no third field), of the v2 image.
				if f := strings.Fields(line); len(f) == 2 && strings.HasSuffix(f[1], ":v2") {
					pod = f[0]
				}
			}
			if pod == "" {
				return fmt.Errorf("no running rukpak:v2 provisioner pod: %q", pods)
			}
			text, err := scrapePod(t, pod)
			if err != nil {
				return fmt.Errorf("scraping %s: %w", pod, err)
			}
			if got := series(text, `rukpak_condition{kind="BundleDeployment",name="upgrade",status="True",type="Healthy"}`); got != "1" {
				return fmt.Errorf("pod %s: Healthy=True series of bd/upgrade %q", pod, got)
			}
			return nil
		})
		waitFor(t, "bd/upgrade", "condition=Healthy", time.Minute)
		if got := podUIDs(t, "upgrade", "app=upgrade"); got != pods {
			t.Errorf("the workload's pods were replaced: %q, were %q", got, pods)
		}
		if got := jsonpath(t, "deployment/upgrade -n upgrade", "{.metadata.generation}"); got != gen {
			t.Errorf("the workload's Deployment was changed: generation %s, was %s", got, gen)
		}
		if got := jsonpath(t, "bd/upgrade", "{.status.activeBundle}"); got != active {
			t.Errorf("active bundle %s, was %s", got, active)
		}
		if got := jsonpath(t, "bd/upgrade", `{.status.conditions[?(@.type=="Installed")].lastTransitionTime}`); got != installedAt {
			t.Errorf("Installed changed at %s (was %s): reinstalled", got, installedAt)
		}
		// The immutability webhook of v2 answers.
		_, stderr, err := kubectl(t, "", "patch", "bundle", active, "--type=merge", "-p", `{"spec":{"provisionerClassName":"core-rukpak-io-registry"}}`)
		if err == nil || !strings.Contains(stderr, "bundle.spec is immutable") {
			t.Errorf("patch after the upgrade: %q (err %v)", stderr, err)
		}
		mustKubectl(t, "", "delete", "bd", "upgrade", "--timeout=2m")
	})
}

// importV2 builds version 2 of rukpak's image (the same binaries, another
// build date) and imports it into the node, in the background while the
// first cases run; the returned function waits for it and fails t if it
// failed. For the in-place upgrade case.
func importV2(t *testing.T) func(*testing.T) {
	t.Helper()
	v2 := filepath.Join(t.TempDir(), "rukpak-v2.tar")
	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		cmd := exec.CommandContext(ctx, "go", "run", "./hack/image", "--bin-dir", filepath.Dir(os.Getenv("RUKPAK_IMAGE_TAR")), "--image", "rukpak:v2", "--tarball", v2)
		cmd.Dir = testenv.RepoRoot()
		cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=1700000000")
		if out, err := cmd.CombinedOutput(); err != nil {
			done <- fmt.Errorf("building rukpak:v2: %w\n%s", err, out)
			return
		}
		done <- suite.node.cluster.Containerd.ImportImage(ctx, v2)
	}()
	wait := sync.OnceValue(func() error { return <-done })
	// Before t.TempDir's own cleanup removes the tarball.
	t.Cleanup(func() { _ = wait() })
	return func(t *testing.T) {
		t.Helper()
		if err := wait(); err != nil {
			t.Fatal(err)
		}
	}
}

// immutablePatcher patches one Bundle's spec and expects the webhook's exact
// denial.
type immutablePatcher struct {
	t      *testing.T
	bundle string
}

// newImmutablePatcher creates Bundle name and checks a patch is denied.
func newImmutablePatcher(t *testing.T, f *fixtures, name string) *immutablePatcher {
	t.Helper()
	mustKubectl(t, fmt.Sprintf(`apiVersion: core.rukpak.io/v1alpha1
kind: Bundle
metadata:
  name: %s
spec:
  source:
    %s
  provisionerClassName: core-rukpak-io-plain
`, name, strings.ReplaceAll(f.imageSource(f.comboV2), "\n    ", "\n")), "apply", "-f", "-")
	p := &immutablePatcher{t: t, bundle: name}
	if err := p.patch(); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *immutablePatcher) patch() error {
	const want = `Error from server (bundle.spec is immutable): admission webhook "vbundles.core.rukpak.io" denied the request: bundle.spec is immutable`
	_, stderr, err := kubectl(p.t, "", "patch", "bundle", p.bundle, "--type=merge", "-p", `{"spec":{"provisionerClassName":"core-rukpak-io-registry"}}`)
	if err == nil {
		return errors.New("kubectl patch of bundle.spec succeeded")
	}
	if strings.TrimSpace(stderr) != want {
		return fmt.Errorf("kubectl patch: %q: %w", strings.TrimSpace(stderr), err)
	}
	return nil
}

// throughout patches the Bundle without pause while during runs (a
// certificate rotation), and fails t for every patch the webhook did not
// deny as immutable, then checks one more patch.
func (p *immutablePatcher) throughout(t *testing.T, during func()) {
	t.Helper()
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	patches := 0
	wg.Go(func() {
		for ctx.Err() == nil {
			err := p.patch()
			mu.Lock()
			patches++
			if err != nil {
				failures = append(failures, err.Error())
			}
			mu.Unlock()
		}
	})
	func() {
		defer func() {
			stop()
			wg.Wait()
		}()
		during()
	}()
	t.Logf("%d patches during the rotation, %d not denied as immutable", patches, len(failures))
	if len(failures) > 0 {
		t.Errorf("patches not answered by the webhook during rotation:\n%s", strings.Join(failures[:min(len(failures), 5)], "\n"))
	}
	if err := p.patch(); err != nil {
		t.Errorf("after the rotation: %v", err)
	}
}

// servedLeaf returns the leaf certificate a TLS server on the real node
// presents, PEM encoded, and fails t if it cannot be read.
func servedLeaf(t *testing.T, addr string) string {
	t.Helper()
	leaf, err := tryServedLeaf(t, addr)
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

// tryServedLeaf is servedLeaf for a server that may not answer yet.
func tryServedLeaf(t *testing.T, addr string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	raw, err := nodeDial(t)(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("dialing %s: %w", addr, err)
	}
	// Which certificate is served is the question, not whether to trust it.
	conn := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec
	defer func() { _ = conn.Close() }()
	if err := conn.HandshakeContext(ctx); err != nil {
		return "", fmt.Errorf("TLS handshake with %s: %w", addr, err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: conn.ConnectionState().PeerCertificates[0].Raw})), nil
}

// secretLeaf returns the first certificate of a Secret's key, PEM encoded.
func secretLeaf(t *testing.T, resource, key string) string {
	t.Helper()
	data, err := base64.StdEncoding.DecodeString(jsonpath(t, resource, "{.data."+strings.ReplaceAll(key, ".", `\.`)+"}"))
	if err != nil {
		t.Fatalf("%s %s: %v", resource, key, err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s %s holds no PEM certificate", resource, key)
	}
	return string(pem.EncodeToMemory(block))
}

// subjects names the certificates of base64 PEM data, for messages.
func subjects(b64 string) string {
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return fmt.Sprintf("(not base64: %v)", err)
	}
	var names []string
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			names = append(names, "(unparseable)")
			continue
		}
		names = append(names, fmt.Sprintf("%q (serial %s)", c.Subject.String(), c.SerialNumber))
	}
	return "[" + strings.Join(names, ", ") + "]"
}

// mustWebhookAnswer waits until the API server reaches the webhook through
// its Service after a rollout: the rollout completes when the new pod is
// Ready, and the API server can still hold a connection to the old one (a
// create then fails with "context deadline exceeded").
func mustWebhookAnswer(t *testing.T) {
	t.Helper()
	if err := waitWebhookAnswers(context.Background(), suite.kubeconfig); err != nil {
		t.Fatal(err)
	}
}
