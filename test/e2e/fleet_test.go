package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rukpak-dev/rukpak/internal/devenv"
	"github.com/rukpak-dev/rukpak/internal/localcluster"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testnet"
)

// fleetServices is more Services than kube-apiserver's default range
// (10.0.0.0/24, 254 addresses) holds: a few hundred operators' metrics and
// webhook Services.
const fleetServices = 400

// The local cluster (make run's, and this suite's) holds a fleet of
// operators: every one of several hundred Services gets a cluster IP from
// the fleet-sized range, and the node takes localcluster.NodePods pods.
func TestLocalClusterHoldsAFleet(t *testing.T) {
	shared(t)
	if suite.local == nil {
		t.Skip("sizes the suite's own local cluster; this cluster is someone else's")
	}
	ctx := context.Background()
	cfg, err := clientcmd.BuildConfigFromFlags("", suite.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = -1, 0
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("nodes: %v (%d)", err, len(nodes.Items))
	}
	for _, n := range nodes.Items {
		if _, ok := n.Labels["node-role.kubernetes.io/control-plane"]; !ok {
			t.Errorf("node %s is not labelled as a control-plane node: %v", n.Name, n.Labels)
		}
		for name, l := range map[string]corev1.ResourceList{"capacity": n.Status.Capacity, "allocatable": n.Status.Allocatable} {
			if got := l[corev1.ResourcePods]; got.Value() < localcluster.NodePods {
				t.Errorf("node %s: pods %s %s, want at least %d", n.Name, name, got.String(), localcluster.NodePods)
			}
			if got, want := l[corev1.ResourceEphemeralStorage], resource.MustParse(localcluster.NodeEphemeralStorage); got.Cmp(want) < 0 {
				t.Errorf("node %s: ephemeral-storage %s %s, want %s", n.Name, name, got.String(), want.String())
			}
		}
	}

	ns := "fleet-services"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	want := netip.MustParsePrefix(localcluster.ServiceCIDR)
	errs := make(chan error, fleetServices)
	sem := make(chan struct{}, 32)
	for i := range fleetServices {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			svc := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%03d", i), Namespace: ns},
				Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "none"},
					Ports: []corev1.ServicePort{{Port: 8443, TargetPort: intstr.FromInt32(8443)}}},
			}
			got, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
			if err == nil {
				if ip, perr := netip.ParseAddr(got.Spec.ClusterIP); perr != nil || !want.Contains(ip) {
					err = fmt.Errorf("service %s has cluster IP %q, not in %s", svc.Name, got.Spec.ClusterIP, want)
				}
			}
			errs <- err
		}()
	}
	for range fleetServices {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// fleetSample is two small operators of the shared fleet test data.
var fleetSample = []string{"deployment-validation-operator-0.7.12", "application-services-metering-operator-0.6.1"}

// make fleet's path (rukpak-dev fleet DIR is devenv.InstallFleet): bundles
// pushed to make run's kind of registry (plain HTTP on loopback, here on a
// free port), one BundleDeployment each, waited for until all are
// Installed and Healthy.
func TestFleetInstall(t *testing.T) {
	if suite.local == nil {
		t.Skip("needs the local environment, whose provisioner reaches the example registry on this host's loopback")
	}
	shared(t)
	src := testenv.SharedTestdata("fleet")
	if _, err := os.Stat(src); err != nil {
		src = "/work/shared/testdata/fleet"
	}
	dir := t.TempDir()
	for _, b := range fleetSample {
		if err := os.CopyFS(filepath.Join(dir, b), os.DirFS(filepath.Join(src, b))); err != nil {
			t.Skipf("the shared fleet test data: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), patient(5*time.Minute))
	defer cancel()
	regAddr := testnet.FreeAddr(t)
	ex, err := devenv.ServeExamples(ctx, testenv.RepoRoot(), t.TempDir(), regAddr, testnet.FreeAddr(t))
	if err != nil {
		t.Fatalf("serving the examples: %v", err)
	}
	defer ex.Close()
	t.Cleanup(func() {
		_, _, _ = kubectl(t, "", "delete", "bd", "-l", devenv.FleetLabel+"=true", "--wait", "--timeout=5m")
	})
	var out strings.Builder
	if err := devenv.InstallFleet(ctx, devenv.FleetOptions{Dir: dir, Kubeconfig: suite.kubeconfig, RegistryAddr: regAddr, Timeout: patient(5 * time.Minute), Out: &out}); err != nil {
		t.Fatalf("installing the fleet: %v\n%s", err, out.String())
	}
	for _, name := range []string{"deployment-validation-operator", "application-services-metering-operator"} {
		if got := jsonpath(t, "bd/"+name, `{.status.conditions[?(@.type=="Healthy")].status}`); got != "True" {
			t.Errorf("bd/%s Healthy=%q, want True", name, got)
		}
	}
	if !strings.Contains(out.String(), "2 BundleDeployments: 2 Installed, 2 Healthy") {
		t.Errorf("progress lacks the final count:\n%s", out.String())
	}
	// A second run leaves what exists as it is.
	if err := devenv.InstallFleet(ctx, devenv.FleetOptions{Dir: dir, Kubeconfig: suite.kubeconfig, RegistryAddr: regAddr, Timeout: patient(time.Minute)}); err != nil {
		t.Fatalf("installing the fleet again: %v", err)
	}
}
