// Command rukpak-dev is `make run`: a local cluster with the CRDs, the
// provisioners and the webhook, plus a registry and a git server holding
// example bundles, until Ctrl-C.
//
// `rukpak-dev fleet DIR` (make fleet) installs a directory of registry+v1
// bundles on that running cluster, one BundleDeployment each, all at once.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rukpak-dev/rukpak/internal/devenv"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "fleet" {
		os.Exit(fleet(os.Args[2:]))
	}
	var o devenv.Options
	var registryAddr, gitAddr, catalogDir string
	flag.StringVar(&o.Assets, "assets", "", "Directory of the control-plane binaries (hack/testbin.sh prints it).")
	flag.StringVar(&o.BinDir, "bin-dir", "bin", "Directory of the provisioner and webhook binaries.")
	flag.StringVar(&o.StateDir, "state-dir", ".run", "Directory for the cluster's state, kubeconfig and logs.")
	flag.StringVar(&o.RepoRoot, "repo-root", ".", "This checkout.")
	flag.StringVar(&o.Name, "name", "rukpak", "Name of the local cluster.")
	flag.StringVar(&registryAddr, "registry-address", "127.0.0.1:5001", "Address of the example image registry.")
	flag.StringVar(&gitAddr, "git-address", "127.0.0.1:5002", "Address of the example git server.")
	flag.StringVar(&catalogDir, "catalog-example", "", "Catalog directory (catalog.yaml, bundles/<version>/) whose bundles and catalog the example registry serves (default: ../shared/testdata/catalogs/kube-green beside --repo-root, when it exists).")
	d := devenv.DefaultAddresses
	flag.IntVar(&o.Addresses.WebhookPort, "webhook-port", d.WebhookPort, "Port of the webhook on localhost.")
	flag.StringVar(&o.Addresses.WebhookProbe, "webhook-probe-address", d.WebhookProbe, "Address of the webhook's health probes.")
	flag.StringVar(&o.Addresses.Content, "content-address", d.Content, "Address of the provisioner's content server.")
	flag.StringVar(&o.Addresses.ProvisionerProbe, "provisioner-probe-address", d.ProvisionerProbe, "Address of the provisioner's health probes.")
	flag.StringVar(&o.Addresses.ProvisionerMetrics, "provisioner-metrics-address", d.ProvisionerMetrics, "Address of the provisioner's metrics.")
	flag.Parse()
	if flag.NArg() > 0 || o.Assets == "" {
		fmt.Fprintln(os.Stderr, "usage: rukpak-dev --assets DIR [flags] (see -help); make run passes them")
		os.Exit(2)
	}
	o.Out = os.Stdout
	if err := run(o, registryAddr, gitAddr, catalogDir); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(o devenv.Options, registryAddr, gitAddr, catalogDir string) error {
	for _, p := range []*string{&o.StateDir, &o.BinDir, &o.RepoRoot, &o.Assets} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	ex, err := devenv.ServeExamples(ctx, o.RepoRoot, o.StateDir, registryAddr, gitAddr)
	if err != nil {
		return err
	}
	defer ex.Close()
	catalogLine := "catalog:  none (no catalog example directory: --catalog-example)"
	explicit := catalogDir != ""
	if !explicit {
		catalogDir = filepath.Join(filepath.Dir(o.RepoRoot), "shared", "testdata", "catalogs", "kube-green")
	}
	if _, err := os.Stat(filepath.Join(catalogDir, "catalog.yaml")); err == nil || explicit {
		fmt.Printf(">> pushing the catalog example (%s) to the example registry\n", catalogDir)
		if err := ex.ServeCatalog(ctx, catalogDir, devenv.KubeGreenDeprecations); err != nil {
			return fmt.Errorf("serving the catalog example: %w", err)
		}
		catalogLine = fmt.Sprintf("catalog:  %s/%s (FBC of kube-green, its bundles beside it; %s adds a deprecation)",
			registryAddr, devenv.CatalogExampleImage, devenv.CatalogExampleDeprecatedImage)
	}
	env, err := devenv.Up(ctx, o)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("\n>> stopping everything")
		env.Down()
	}()

	fmt.Printf(`
The local cluster is ready. In another terminal:

  export KUBECONFIG=%s
  kubectl get bundles,bundledeployments

Example bundles (see README.md, "Try it"):
  images:   %s/combo:v0.0.2 (plain+v0), %s/etcd-bundle:v0.9.4 (registry+v1)
  git:      http://%s/combo (tags v0.0.2, v0.0.3),
            http://%s/charts (Helm chart hello-world/, branch main)
  %s
Logs:       %s/logs/
Press Ctrl-C to stop everything.
`, env.Kubeconfig, registryAddr, registryAddr, gitAddr, gitAddr, catalogLine, o.StateDir)
	<-ctx.Done()
	return nil
}

// fleet is `rukpak-dev fleet DIR`.
func fleet(args []string) int {
	fs := flag.NewFlagSet("fleet", flag.ExitOnError)
	var o devenv.FleetOptions
	stateDir := fs.String("state-dir", ".run", "make run's state directory (its kubeconfig is kwok/kubeconfig there).")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "Kubeconfig of the cluster (default: the one in --state-dir).")
	fs.StringVar(&o.RegistryAddr, "registry-address", "127.0.0.1:5001", "make run's example registry, which the bundles are pushed to.")
	fs.DurationVar(&o.Timeout, "timeout", 20*time.Minute, "How long to wait for every BundleDeployment to be Installed and Healthy (0: do not wait).")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: rukpak-dev fleet [flags] DIR\n\nInstalls every registry+v1 bundle directory (<package>-<version>/manifests, metadata) of DIR on the cluster of a running make run, one BundleDeployment each, all at once, and waits until all are Installed and Healthy.")
		fs.PrintDefaults()
	}
	_ = fs.Parse(args)
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	o.Dir, o.Out = fs.Arg(0), os.Stdout
	if o.Kubeconfig == "" {
		o.Kubeconfig = filepath.Join(*stateDir, "kwok", "kubeconfig")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	if err := devenv.InstallFleet(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		return 1
	}
	fmt.Printf(">> done in %s: kubectl get bds -l %s=true\n", time.Since(start).Round(time.Second), devenv.FleetLabel)
	return 0
}
