package e2e

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testgit"
	"github.com/rukpak-dev/rukpak/internal/testregistry"
)

// fixtures are the real servers bundles come from: a TLS OCI registry and a
// git server over HTTP, both in this process. They listen on 127.0.0.1,
// unless E2E_FIXTURE_HOST names the address the cluster reaches this host
// by (make kind-e2e sets the kind network's gateway): then they listen
// there and Bundles name them by it.
type fixtures struct {
	reg     *testregistry.Registry
	gitURL  string // of the combo repository
	comboV2 string // image ref of the combo bundle
	etcd    string // image ref of the etcd registry+v1 bundle
	// operator is the image ref of a registry+v1 bundle whose operator
	// image is the local test image rukpak.test/ready:v1.
	operator string
}

// comboImage is the combo operator's image: published on quay.io, so it
// never runs offline.
const comboImage = `        image: quay.io/operator-framework/combo-operator:latest
        imagePullPolicy: IfNotPresent
        command:
        - /bin/combo
        - run
`

// runnableCombo swaps the combo operator's image for the local test image
// rukpak.test/ready:v1 (which serves /readyz on 8080), so the Deployment
// runs as real pods offline; everything else of the bundle is unchanged.
func runnableCombo(t *testing.T, deployment string) string {
	t.Helper()
	if !strings.Contains(deployment, comboImage) {
		t.Fatalf("combo's Deployment no longer names its image as expected:\n%s", deployment)
	}
	return strings.Replace(deployment, comboImage, `        image: rukpak.test/ready:v1
        imagePullPolicy: IfNotPresent
        readinessProbe:
          httpGet: {path: /readyz, port: 8080}
          periodSeconds: 2
`, 1)
}

func newFixtures(t *testing.T) *fixtures {
	root := testenv.RepoRoot()
	host := strings.TrimSpace(os.Getenv("E2E_FIXTURE_HOST"))
	var regOpts []testregistry.Option
	if host != "" {
		regOpts = append(regOpts, testregistry.WithHost(host))
	}
	reg := testregistry.New(t, regOpts...)
	f := &fixtures{reg: reg}
	f.etcd = reg.MustPush(t, reg.Ref("etcd-bundle:v0.9.4"), testregistry.Image(t, testregistry.LayerFromDir(t, filepath.Join(root, "test/testdata/bundles/registry-v1/etcd-0.9.4"), "")))
	f.operator = reg.MustPush(t, reg.Ref("ready-operator-bundle:v1.0.0"), testregistry.Image(t, testregistry.LayerFromDir(t, filepath.Join(root, "test/testdata/bundles/registry-v1/ready-operator-1.0.0"), "")))

	// A repository shaped like operator-framework/combo: tag v0.0.2 holds
	// the combo manifests, v0.0.3 the same with two replicas. The image
	// bundle combo:v0.0.2 holds the same files.
	gitRoot := testgit.NewRoot(t)
	repo := gitRoot.NewRepo("combo")
	files := map[string]string{}
	dir := filepath.Join(root, "test/testdata/bundles/plain/combo-v0.0.2/manifests")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files["manifests/"+e.Name()] = string(data)
	}
	if suite.realPods {
		files["manifests/06_deployment.yaml"] = runnableCombo(t, files["manifests/06_deployment.yaml"])
	}
	f.comboV2 = reg.MustPush(t, reg.Ref("combo:v0.0.2"), testregistry.Image(t, testregistry.Layer(t, files)))
	repo.WriteFiles(files)
	repo.Tag("v0.0.2", repo.Commit("combo v0.0.2"))
	files["manifests/06_deployment.yaml"] = strings.Replace(files["manifests/06_deployment.yaml"], "replicas: 1", "replicas: 2", 1)
	repo.WriteFiles(map[string]string{"manifests/06_deployment.yaml": files["manifests/06_deployment.yaml"]})
	repo.Tag("v0.0.3", repo.Commit("combo v0.0.3"))
	f.gitURL = gitRoot.ServeHTTP(testgit.HTTPOptions{Host: host}).RepoURL("combo")
	t.Logf("fixtures: registry %s, git %s", reg.Host, f.gitURL)
	return f
}

func (f *fixtures) imageSource(ref string) string {
	return fmt.Sprintf("type: image\n        image:\n          ref: %s\n          certificateData: |\n%s", ref, indent(string(f.reg.CAPEM), 12))
}

// TestManifestsAreValid dry-runs rukpak's manifests against this API
// server: the base and the overlays an admin applies.
func TestManifestsAreValid(t *testing.T) {
	shared(t)
	root := testenv.RepoRoot()
	// cert-manager's overlay needs cert-manager's CRDs; it is rendered
	// (kubectl kustomize) by manifests/manifests_test.go. Validity is
	// the question, not who else wrote the installed objects' fields
	// (TestRegistryWebhooks restores the provisioner's args with
	// kubectl patch): the dry run takes them over.
	for _, dir := range []string{"manifests/base", "manifests/overlays/local", "manifests/overlays/pvc", "manifests/overlays/kind", "manifests/overlays/networkpolicy"} {
		mustKubectl(t, "", "apply", "--dry-run=server", "--server-side", "--force-conflicts", "-k", filepath.Join(root, dir))
	}
}

// TestStory follows the seeds: a git Bundle that cannot be changed, then
// BundleDeployments from images and git, a pivot, content downloads, and
// cleanup.
func TestStory(t *testing.T) {
	shared(t)
	f := newFixtures(t)

	t.Run("a git bundle unpacks and its spec is immutable", func(t *testing.T) {
		mustKubectl(t, fmt.Sprintf(`apiVersion: core.rukpak.io/v1alpha1
kind: Bundle
metadata:
  name: combo-tag-ref
spec:
  source:
    type: git
    git:
      ref:
        tag: v0.0.2
      repository: %s
  provisionerClassName: core-rukpak-io-plain
`, f.gitURL), "apply", "-f", "-")
		waitFor(t, "bundle/combo-tag-ref", "condition=Unpacked", 2*time.Minute)
		if phase := jsonpath(t, "bundle/combo-tag-ref", "{.status.phase}"); phase != "Unpacked" {
			t.Errorf("phase = %q", phase)
		}
		if commit := jsonpath(t, "bundle/combo-tag-ref", "{.status.resolvedSource.git.ref.commit}"); len(commit) != 40 {
			t.Errorf("resolvedSource is not pinned to a commit: %q", commit)
		}

		_, stderr, err := kubectl(t, "", "patch", "bundle", "combo-tag-ref", "--type=merge", "-p", `{"spec":{"source":{"git":{"ref":{"tag":"v0.0.3"}}}}}`)
		const want = `Error from server (bundle.spec is immutable): admission webhook "vbundles.core.rukpak.io" denied the request: bundle.spec is immutable`
		if err == nil || strings.TrimSpace(stderr) != want {
			t.Errorf("kubectl patch:\n got: %q (err %v)\nwant: %q", strings.TrimSpace(stderr), err, want)
		}
		// Metadata stays editable.
		mustKubectl(t, "", "label", "bundle", "combo-tag-ref", "team=e2e")
	})

	t.Run("kubectl explain documents the API", func(t *testing.T) {
		out := mustKubectl(t, "", "explain", "bundle.spec.source.git.ref")
		for _, field := range []string{"branch", "tag", "commit", "exactly one"} {
			if !strings.Contains(out, field) {
				t.Errorf("kubectl explain bundle.spec.source.git.ref does not mention %q:\n%s", field, out)
			}
		}
		out = mustKubectl(t, "", "explain", "bd.spec")
		for _, field := range []string{"provisionerClassName", "template", "config"} {
			if !strings.Contains(out, field) {
				t.Errorf("kubectl explain bd.spec does not mention %q:\n%s", field, out)
			}
		}
	})

	t.Run("printer columns", func(t *testing.T) {
		out := mustKubectl(t, "", "get", "bundles", "-o", "wide")
		for _, col := range []string{"NAME", "TYPE", "PHASE", "AGE", "PROVISIONER", "RESOLVED SOURCE"} {
			if !strings.Contains(out, col) {
				t.Errorf("kubectl get bundles -o wide has no %s column:\n%s", col, out)
			}
		}
	})

	// From here on the combo and ready-operator bundles, which
	// TestServiceAccountInstalls installs too: uninstalled, their CRDs
	// gone, before its turn, also when a case fails.
	takeTurns(t, "combo", "ready-operator")
	t.Cleanup(func() {
		_, _, _ = kubectl(t, "", "delete", "bd", "combo", "ready-operator", "--ignore-not-found", "--timeout=2m")
		_, _, _ = kubectl(t, "", "wait", "--for=delete", "crd/combinations.combo.io", "crd/widgets.ready.rukpak.test", "--timeout=2m")
	})

	t.Run("a plain bundle deployment from an image installs and becomes healthy", func(t *testing.T) {
		mustKubectl(t, fmt.Sprintf(`apiVersion: core.rukpak.io/v1alpha1
kind: BundleDeployment
metadata:
  name: combo
spec:
  provisionerClassName: core-rukpak-io-plain
  template:
    metadata:
      labels:
        app: combo
    spec:
      source:
        %s
      provisionerClassName: core-rukpak-io-plain
`, f.imageSource(f.comboV2)), "apply", "-f", "-")
		waitFor(t, "bd/combo", "condition=Installed", 2*time.Minute)
		waitFor(t, "bd/combo", "condition=Healthy", 2*time.Minute)
		waitFor(t, "deployment/combo-operator", "condition=Available", time.Minute, "-n", "combo")
		labels := jsonpath(t, "deployment/combo-operator -n combo", "{.metadata.labels}")
		if !strings.Contains(labels, `"core.rukpak.io/owner-name":"combo"`) {
			t.Errorf("owner labels missing: %s", labels)
		}
		out := mustKubectl(t, "", "get", "bds")
		for _, col := range []string{"ACTIVE BUNDLE", "INSTALL STATE", "InstallationSucceeded"} {
			if !strings.Contains(out, col) {
				t.Errorf("kubectl get bds lacks %q:\n%s", col, out)
			}
		}
	})

	t.Run("the bundle content can be downloaded with a bundle-reader token", func(t *testing.T) {
		active := jsonpath(t, "bd/combo", "{.status.activeBundle}")
		url := jsonpath(t, "bundle/"+active, "{.status.contentURL}")
		client := contentClient(t)
		mustKubectl(t, "", "create", "serviceaccount", "e2e-reader", "-n", "default")
		mustKubectl(t, "", "create", "clusterrolebinding", "e2e-reader", "--clusterrole=bundle-reader", "--serviceaccount=default:e2e-reader")
		// The content server accepts only tokens of its own audience: an
		// API server token is refused.
		apiToken := strings.TrimSpace(mustKubectl(t, "", "create", "token", "e2e-reader", "-n", "default"))
		token := strings.TrimSpace(mustKubectl(t, "", "create", "token", "e2e-reader", "-n", "default", "--audience=content.core.rukpak.io"))
		get := func(token string) (*http.Response, error) {
			req, _ := http.NewRequest(http.MethodGet, url, nil)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			return client.Do(req)
		}
		resp, err := get("")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("without a token: %s", resp.Status)
		}
		resp, err = get(apiToken)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("with a token of the API server's audience: %s", resp.Status)
		}
		eventually(t, time.Minute, "an authorised download", func() error {
			resp, err := get(token)
			if err != nil {
				return err
			}
			defer func() { _ = resp.Body.Close() }()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("status %s", resp.Status)
			}
			names, err := tarNames(resp.Body)
			if err != nil {
				return err
			}
			if !contains(names, "manifests/06_deployment.yaml") {
				return fmt.Errorf("tarball lacks manifests/06_deployment.yaml: %v", names)
			}
			t.Logf("downloaded %s: %v", url, names)
			return nil
		})
	})

	t.Run("a registry+v1 bundle installs through the plain class", func(t *testing.T) {
		if suite.realPods {
			t.Skip("etcd-operator's images are pinned by digest on quay.io and never run offline; the ready-operator bundle covers registry+v1 on real pods")
		}
		mustKubectl(t, fmt.Sprintf(`apiVersion: core.rukpak.io/v1alpha1
kind: BundleDeployment
metadata:
  name: etcd
spec:
  provisionerClassName: core-rukpak-io-plain
  template:
    spec:
      source:
        %s
      provisionerClassName: core-rukpak-io-registry
`, f.imageSource(f.etcd)), "apply", "-f", "-")
		waitFor(t, "bd/etcd", "condition=Installed", 2*time.Minute)
		waitFor(t, "bd/etcd", "condition=Healthy", 2*time.Minute)
		waitFor(t, "deployment/etcd-operator", "condition=Available", time.Minute, "-n", "etcd-system")
		mustKubectl(t, "", "get", "crd", "etcdclusters.etcd.database.coreos.com")
		mustKubectl(t, "", "get", "serviceaccount", "etcd-operator", "-n", "etcd-system")
	})

	t.Run("a registry+v1 operator runs and its namespace reaches it", func(t *testing.T) {
		mustKubectl(t, fmt.Sprintf(`apiVersion: core.rukpak.io/v1alpha1
kind: BundleDeployment
metadata:
  name: ready-operator
spec:
  provisionerClassName: core-rukpak-io-plain
  template:
    spec:
      source:
        %s
      provisionerClassName: core-rukpak-io-registry
`, f.imageSource(f.operator)), "apply", "-f", "-")
		waitFor(t, "bd/ready-operator", "condition=Installed", 2*time.Minute)
		waitFor(t, "bd/ready-operator", "condition=Healthy", 2*time.Minute)
		waitFor(t, "deployment/ready-operator", "condition=Available", time.Minute, "-n", "ready-operator-system")
		mustKubectl(t, "", "get", "crd", "widgets.ready.rukpak.test")
		if suite.realPods {
			// The downward API resolved OLM's annotation in a real container.
			pod := strings.Fields(jsonpath(t, "pods -n ready-operator-system -l app=ready-operator", "{.items[*].metadata.name}"))
			if len(pod) == 0 {
				t.Fatal("no ready-operator pod")
			}
			env := mustKubectl(t, "", "get", "pod", pod[0], "-n", "ready-operator-system", "-o", "jsonpath={.metadata.annotations.olm\\.operatorNamespace}")
			if env != "ready-operator-system" {
				t.Errorf("olm.operatorNamespace = %q", env)
			}
		}
	})

	t.Run("changing the template pivots to a new bundle", func(t *testing.T) {
		old := jsonpath(t, "bd/combo", "{.status.activeBundle}")
		mustKubectl(t, "", "patch", "bd", "combo", "--type=merge", "-p",
			fmt.Sprintf(`{"spec":{"template":{"spec":{"source":{"type":"git","image":null,"git":{"repository":%q,"ref":{"tag":"v0.0.3"}}}}}}}`, f.gitURL))
		eventually(t, 2*time.Minute, "the pivot", func() error {
			active := jsonpath(t, "bd/combo", "{.status.activeBundle}")
			if active == old {
				return fmt.Errorf("still on %s", active)
			}
			if r := jsonpath(t, "deployment/combo-operator -n combo", "{.spec.replicas}"); r != "2" {
				return fmt.Errorf("replicas %s", r)
			}
			if _, _, err := kubectl(t, "", "get", "bundle", old); err == nil {
				return fmt.Errorf("old bundle %s still exists", old)
			}
			return nil
		})
		waitFor(t, "bd/combo", "condition=Healthy", 2*time.Minute)
	})

	t.Run("deleting a bundle deployment removes what it installed", func(t *testing.T) {
		active := jsonpath(t, "bd/combo", "{.status.activeBundle}")
		mustKubectl(t, "", "delete", "bd", "combo", "--timeout=2m")
		eventually(t, 2*time.Minute, "combo objects gone", func() error {
			for _, args := range [][]string{
				{"get", "bundle", active},
				{"get", "namespace", "combo"},
				{"get", "crd", "combinations.combo.io"},
				{"get", "clusterrole", "combo-operator"},
			} {
				if out, _, err := kubectl(t, "", append(args, "-o", "yaml")...); err == nil {
					return fmt.Errorf("%s still exists:\n%s", strings.Join(args[1:], " "), out)
				}
			}
			return nil
		})
	})
}

// TestProvisionerKilledMidInstall kills the provisioner (the process, or
// the pod and, on the real node, the kubelet) while it applies a bundle of
// 300 ConfigMaps: the next one completes the install. It disturbs rukpak's
// installation, so it runs alone.
func TestProvisionerKilledMidInstall(t *testing.T) {
	disturbs(t)
	f := newFixtures(t)
	var docs []string
	for i := range 300 {
		docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: many-%03d\n  namespace: default\ndata:\n  i: %q\n", i, fmt.Sprint(i)))
	}
	applyBD(t, f, "many", f.plainBundle(t, "many", strings.Join(docs, "---\n")))
	// Polled without slowing down: the kill must come while the install
	// is under way.
	poll(t, 2*time.Minute, 250*time.Millisecond, "the install to start", func() error {
		_, _, err := kubectl(t, "", "get", "configmap", "many-000", "-n", "default")
		return err
	})
	// The process, or the pod (and the node's kubelet on the real node).
	restartProvisioner(t)
	waitFor(t, "bd/many", "condition=Installed", 3*time.Minute)
	mustKubectl(t, "", "get", "configmap", "many-299", "-n", "default")
	mustKubectl(t, "", "delete", "bd", "many", "--timeout=2m")
	eventually(t, time.Minute, "the ConfigMaps to be uninstalled", func() error {
		if _, _, err := kubectl(t, "", "get", "configmap", "many-000", "-n", "default"); err == nil {
			return fmt.Errorf("many-000 still exists")
		}
		return nil
	})
}

func tarNames(r io.Reader) ([]string, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		names = append(names, h.Name)
	}
	sort.Strings(names)
	return names, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
