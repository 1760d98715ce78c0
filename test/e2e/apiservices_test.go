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

// TestRegistryAPIServices installs a registry+v1 operator whose CSV owns
// two API services on real pods: the aggregator reaches its API server
// through the Service with the certificate the provisioner issued
// (Available, so Healthy), requests to the aggregated API are proxied to
// it, and uninstalling leaves no APIService, Service, Secret or binding.
func TestRegistryAPIServices(t *testing.T) {
	if !suite.realPods {
		t.Skip("aggregated API servers run in real pods only: make test-e2e-node, or E2E_REAL_PODS=1 with the test images loaded")
	}
	shared(t)
	f := newFixtures(t)
	const dir, name, ns = "apiservice-operator-1.0.0", "apiservice-operator", "apiservice-operator-system"
	ref := f.reg.MustPush(t, f.reg.Ref(dir+":v1"), testregistry.Image(t, testregistry.LayerFromDir(t, filepath.Join(testenv.RepoRoot(), "test/testdata/bundles/registry-v1", dir), "")))
	registryBD(t, f, name, ref, "")
	t.Cleanup(func() {
		_, _, _ = kubectl(t, "", "delete", "bd", name, "--ignore-not-found", "--timeout=2m")
	})
	waitFor(t, "bd/"+name, "condition=Installed", 2*time.Minute)
	for _, v := range []string{"v1alpha1", "v1beta1"} {
		waitFor(t, "apiservice/"+v+".apiservice.rukpak.test", "condition=Available", 2*time.Minute)
	}
	waitFor(t, "bd/"+name, "condition=Healthy", 2*time.Minute)

	for _, v := range []string{"v1alpha1", "v1beta1"} {
		got := mustKubectl(t, "", "get", "--raw", "/apis/apiservice.rukpak.test/"+v)
		if !strings.Contains(got, `"groupVersion":"apiservice.rukpak.test/`+v+`"`) || !strings.Contains(got, `"name":"widgets"`) {
			t.Fatalf("discovery of apiservice.rukpak.test/%s through the aggregator: %s", v, got)
		}
		got = mustKubectl(t, "", "get", "--raw", "/apis/apiservice.rukpak.test/"+v+"/namespaces/default/widgets")
		if !strings.Contains(got, `"kind":"WidgetList"`) {
			t.Fatalf("widgets of apiservice.rukpak.test/%s through the aggregator: %s", v, got)
		}
	}

	mustKubectl(t, "", "delete", "bd", name, "--timeout=2m")
	eventually(t, time.Minute, "nothing left of the uninstalled operator", func() error {
		for _, res := range []string{
			"apiservice/v1alpha1.apiservice.rukpak.test",
			"apiservice/v1beta1.apiservice.rukpak.test",
			"validatingwebhookconfiguration/vwidgets.apiservice.rukpak.test",
			"service/apiservice-operator-service -n " + ns,
			"secret/apiservice-operator-service-cert -n " + ns,
			"clusterrolebinding/apiservice-operator-service-system:auth-delegator",
			"rolebinding/apiservice-operator-service-auth-reader -n kube-system",
		} {
			if out := mustKubectl(t, "", append([]string{"get", "--ignore-not-found"}, strings.Fields(res)...)...); out != "" {
				return fmt.Errorf("%s left after the uninstall:\n%s", res, out)
			}
		}
		return nil
	})
}
