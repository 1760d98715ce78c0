package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testregistry"
)

// ---------------------------------------------------------------- helm

// helmRuns is how many times each side of a helm comparison runs; the
// sides alternate, so load from other work on the machine falls on both.
const helmRuns = 3

// helmBD is a helm-class BundleDeployment installing into namespace.
func helmBD(name, namespace string, src rukpakv1alpha1.BundleSource) *rukpakv1alpha1.BundleDeployment {
	bd := newBD(name, rukpakv1alpha1.ProvisionerClassHelm, src)
	bd.Spec.ProvisionerClassName = rukpakv1alpha1.ProvisionerClassHelm
	bd.Spec.Config = &apiextensionsv1.JSON{Raw: fmt.Appendf(nil, `{"installNamespace":%q}`, namespace)}
	return bd
}

func (c *cluster) namespaces(t *testing.T, names ...string) {
	t.Helper()
	for _, ns := range names {
		if err := c.c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
}

// benchHelm compares the helm class with the helm CLI on kube-state-metrics
// (a chart of the shared test data: RBAC, a Service, a Deployment), and a
// generated chart of 1,000 ConfigMaps with the same ConfigMaps as a plain
// bundle. The BundleDeployments' figures include pulling, loading and
// storing the bundle image (the Unpacked time says how much); the CLI
// reads the chart from disk.
func (c *cluster) benchHelm(t *testing.T, r *report) {
	helm := c.helm(t)
	ksm := testenv.SharedTestdata("helm", "kube-state-metrics")
	if _, err := os.Stat(ksm); err != nil {
		r.add("helm", "kube-state-metrics: helm class vs helm install", "skipped", "", "", err.Error())
		return
	}
	ksmSrc := c.imageSource(t, "charts/kube-state-metrics:8.4.0", testregistry.LayerFromDir(t, ksm, ""))
	var bds, unpacks, clis []time.Duration
	for k := range helmRuns {
		nsBD, nsCLI := fmt.Sprintf("bench-ksm-bd-%d", k), fmt.Sprintf("bench-ksm-cli-%d", k)
		c.namespaces(t, nsBD, nsCLI)
		total, unpacked := c.timeToInstalled(t, helmBD(fmt.Sprintf("ksm-bd-%d", k), nsBD, ksmSrc), 5*time.Minute)
		bds, unpacks = append(bds, total), append(unpacks, unpacked)
		clis = append(clis, c.runTimed(t, helm, "install", fmt.Sprintf("ksm-cli-%d", k), ksm, "--namespace", nsCLI, "--kubeconfig", c.kubeconfig))
	}
	bd, cli := median(bds), median(clis)
	r.add("helm", "kube-state-metrics: helm-class BundleDeployment create -> Installed=True", secs(bd), "helm install "+secs(cli), ratio(bd.Seconds(), cli.Seconds()),
		fmt.Sprintf("median of %d (%s; helm install %s); target ≤ 1× helm install; Bundle Unpacked (pull + load + store) seen at %s (median)", helmRuns, spread(bds), spread(clis), secs(median(unpacks))))

	// 1,000 ConfigMaps: a chart of 1,000 templates through the helm class,
	// the same ConfigMaps as a plain bundle through the plain class.
	var plains, charts []time.Duration
	for k := range helmRuns {
		nsPlain, nsHelm := fmt.Sprintf("bench-cm-plain-%d", k), fmt.Sprintf("bench-cm-helm-%d", k)
		c.namespaces(t, nsPlain, nsHelm)
		plain := map[string]string{}
		chart := map[string]string{"Chart.yaml": "apiVersion: v2\nname: bench-configmaps\nversion: 0.1.0\n"}
		for i := range bigObjects {
			n := fmt.Sprintf("cm-%04d", i)
			plain["manifests/"+n+".yaml"] = cmYAML(nsPlain, n, i)
			chart["templates/"+n+".yaml"] = cmYAML(nsHelm, n, i)
		}
		src := c.imageSource(t, fmt.Sprintf("bench-cm-plain:v%d", k), testregistry.Layer(t, plain))
		total, _ := c.timeToInstalled(t, newBD(fmt.Sprintf("cm-plain-%d", k), rukpakv1alpha1.ProvisionerClassPlain, src), 10*time.Minute)
		plains = append(plains, total)
		src = c.imageSource(t, fmt.Sprintf("bench-cm-chart:v%d", k), testregistry.Layer(t, chart))
		total, _ = c.timeToInstalled(t, helmBD(fmt.Sprintf("cm-helm-%d", k), nsHelm, src), 10*time.Minute)
		charts = append(charts, total)
		if n, m := c.countCMs(t, nsPlain), c.countCMs(t, nsHelm); n != bigObjects || m != bigObjects {
			t.Fatalf("installed %d ConfigMaps through the plain class, %d through the helm class", n, m)
		}
	}
	plain, chart := median(plains), median(charts)
	r.add("helm", "1,000 ConfigMaps: helm-class BundleDeployment (a chart of 1,000 templates) create -> Installed=True", secs(chart), "plain class "+secs(plain), ratio(chart.Seconds(), plain.Seconds()),
		fmt.Sprintf("median of %d (%s; plain class %s)", helmRuns, spread(charts), spread(plains)))

	// The CLI's releases go too, so the next phase starts clean.
	for k := range helmRuns {
		c.runTimed(t, helm, "uninstall", fmt.Sprintf("ksm-cli-%d", k), "--namespace", fmt.Sprintf("bench-ksm-cli-%d", k), "--kubeconfig", c.kubeconfig)
	}
}
