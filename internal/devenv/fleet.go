package devenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// A fleet is a directory of registry+v1 bundles, one directory each
// (<package>-<version>/ holding manifests/ and metadata/), installed
// together, one BundleDeployment per bundle, as a cluster that runs many
// operators does. make fleet installs ../shared/testdata/fleet (sixty
// community operators) on make run's cluster; the fleet benchmark
// (test/bench) installs the same bundles.

// FleetBundle is one bundle of a fleet.
type FleetBundle struct {
	// Name is the BundleDeployment's name: the directory's name without
	// its version ("keycloak-operator-26.7.1" -> "keycloak-operator").
	Name string
	// Version is the version the directory's name ends with.
	Version string
	// Dir holds the bundle's manifests/ and metadata/.
	Dir string
}

var versionSuffix = regexp.MustCompile(`-(v?[0-9]+(\.[0-9]+)*)$`)

// maxBundleDeploymentName is the CRD's limit on a BundleDeployment's name.
const maxBundleDeploymentName = 45

// FleetBundles lists the bundles under dir, sorted by name. A directory
// without manifests/ is not a bundle and is skipped; two bundles of one
// package, or a name that is no BundleDeployment name, are errors.
func FleetBundles(dir string) ([]FleetBundle, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the fleet directory: %w", err)
	}
	var out []FleetBundle
	seen := map[string]string{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		bundleDir := filepath.Join(dir, e.Name())
		if fi, err := os.Stat(filepath.Join(bundleDir, "manifests")); err != nil || !fi.IsDir() {
			continue
		}
		b := FleetBundle{Name: e.Name(), Version: "latest", Dir: bundleDir}
		if m := versionSuffix.FindStringSubmatch(e.Name()); m != nil {
			b.Name, b.Version = strings.TrimSuffix(e.Name(), m[0]), m[1]
		}
		if errs := validation.IsDNS1123Label(b.Name); len(errs) > 0 || len(b.Name) > maxBundleDeploymentName {
			return nil, fmt.Errorf("bundle directory %s: %q is not a BundleDeployment name (a DNS label of at most %d characters)", e.Name(), b.Name, maxBundleDeploymentName)
		}
		if other, ok := seen[b.Name]; ok {
			return nil, fmt.Errorf("bundle directories %s and %s are one package: a fleet installs one version of each", other, e.Name())
		}
		seen[b.Name] = e.Name()
		out = append(out, b)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no bundle directory (<package>-<version>/manifests)", dir)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// FleetBundleDeployment is the BundleDeployment that installs b from src:
// plain class, its Bundle of the registry class, so the registry+v1 bundle
// is converted when it is unpacked, and installed in its default install
// mode and namespace.
func FleetBundleDeployment(b FleetBundle, src rukpakv1alpha1.BundleSource) *rukpakv1alpha1.BundleDeployment {
	return &rukpakv1alpha1.BundleDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: b.Name, Labels: map[string]string{FleetLabel: "true"}},
		Spec: rukpakv1alpha1.BundleDeploymentSpec{
			ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain,
			Template: rukpakv1alpha1.BundleTemplate{
				Metadata: rukpakv1alpha1.TemplateMetadata{Labels: map[string]string{"app": b.Name}},
				Spec:     rukpakv1alpha1.BundleSpec{ProvisionerClassName: rukpakv1alpha1.ProvisionerClassRegistry, Source: src},
			},
		},
	}
}

// FleetLabel marks the BundleDeployments InstallFleet creates.
const FleetLabel = "rukpak.dev/fleet"

// FleetOptions say where a fleet goes.
type FleetOptions struct {
	// Dir holds the bundles (FleetBundles).
	Dir string
	// Kubeconfig is the cluster's (make run: .run/kwok/kubeconfig).
	Kubeconfig string
	// RegistryAddr is a plain-HTTP registry on loopback the provisioner
	// can pull from (make run's example registry).
	RegistryAddr string
	// Timeout bounds the wait for every BundleDeployment to be Installed
	// and Healthy; 0 does not wait.
	Timeout time.Duration
	// Out receives progress lines.
	Out io.Writer
}

// InstallFleet pushes every bundle of o.Dir to o.RegistryAddr as an image
// (fleet/<name>:<version>), creates one BundleDeployment each, pinned to
// the image's digest, all at once (one that exists is left as it is), and
// waits until all are Installed and Healthy.
func InstallFleet(ctx context.Context, o FleetOptions) error {
	if o.Out == nil {
		o.Out = io.Discard
	}
	bundles, err := FleetBundles(o.Dir)
	if err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return fmt.Errorf("reading kubeconfig %s: %w", o.Kubeconfig, err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := rukpakv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, ">> pushing %d bundles to %s/fleet/\n", len(bundles), o.RegistryAddr)
	bds := make([]*rukpakv1alpha1.BundleDeployment, len(bundles))
	for i, b := range bundles {
		ref, err := pushBundle(ctx, fmt.Sprintf("%s/fleet/%s:%s", o.RegistryAddr, b.Name, b.Version), b.Dir)
		if err != nil {
			return err
		}
		bds[i] = FleetBundleDeployment(b, rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage, Image: &rukpakv1alpha1.ImageSource{Ref: ref}})
	}
	pcs, err := RuntimePriorityClasses(bundles)
	if err != nil {
		return err
	}
	if len(pcs) > 0 {
		fmt.Fprintf(o.Out, ">> creating PriorityClasses that operators create when they run: %s\n", strings.Join(pcs, ", "))
		if err := EnsurePriorityClasses(ctx, c, pcs); err != nil {
			return err
		}
	}
	fmt.Fprintf(o.Out, ">> creating %d BundleDeployments (label %s=true)\n", len(bds), FleetLabel)
	for _, bd := range bds {
		if err := c.Create(ctx, bd); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating BundleDeployment %s: %w", bd.Name, err)
		}
	}
	if o.Timeout <= 0 {
		return nil
	}
	return waitFleet(ctx, c, len(bds), o.Timeout, o.Out)
}

// pushBundle pushes dir as a one-layer image under ref and returns the
// digest reference.
func pushBundle(ctx context.Context, ref, dir string) (string, error) {
	if err := pushDir(ctx, ref, dir); err != nil {
		return "", err
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return "", err
	}
	desc, err := remote.Head(r, remote.WithContext(ctx))
	if err != nil {
		return "", fmt.Errorf("reading the digest of %s: %w", ref, err)
	}
	return r.Context().Digest(desc.Digest.String()).String(), nil
}

// FleetStatus counts a fleet's BundleDeployments by condition.
type FleetStatus struct {
	Total, Installed, Healthy int
	// Waiting names those not yet Installed and Healthy, with the reason
	// and message of the condition that is not True.
	Waiting []string
}

// StatusOf counts bds.
func StatusOf(bds []rukpakv1alpha1.BundleDeployment) FleetStatus {
	s := FleetStatus{Total: len(bds)}
	for i := range bds {
		var why string
		for _, typ := range []string{rukpakv1alpha1.TypeInstalled, rukpakv1alpha1.TypeHealthy} {
			c := meta.FindStatusCondition(bds[i].Status.Conditions, typ)
			switch {
			case c != nil && c.Status == metav1.ConditionTrue:
				if typ == rukpakv1alpha1.TypeInstalled {
					s.Installed++
				} else {
					s.Healthy++
				}
			case why != "":
			case c == nil:
				why = "no " + typ + " condition yet"
			default:
				why = fmt.Sprintf("%s=%s %s: %s", typ, c.Status, c.Reason, c.Message)
			}
		}
		if why != "" {
			s.Waiting = append(s.Waiting, bds[i].Name+": "+why)
		}
	}
	slices.Sort(s.Waiting)
	return s
}

// waitFleet polls the fleet's BundleDeployments every 2 s, printing a line
// when the counts change, until all n are Installed and Healthy.
func waitFleet(ctx context.Context, c client.Client, n int, timeout time.Duration, out io.Writer) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := ""
	for {
		var l rukpakv1alpha1.BundleDeploymentList
		if err := c.List(ctx, &l, client.MatchingLabels{FleetLabel: "true"}); err != nil {
			return fmt.Errorf("listing the fleet's BundleDeployments: %w", err)
		}
		s := StatusOf(l.Items)
		line := fmt.Sprintf("%d BundleDeployments: %d Installed, %d Healthy", s.Total, s.Installed, s.Healthy)
		if line != last {
			fmt.Fprintf(out, "   %5.0f s  %s\n", time.Since(start).Seconds(), line)
			last = line
		}
		if s.Total >= n && len(s.Waiting) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			shown := s.Waiting[:min(len(s.Waiting), 10)]
			return fmt.Errorf("after %s, %d of %d not yet Installed and Healthy (kubectl get bds -l %s=true):\n  %s",
				timeout, len(s.Waiting), s.Total, FleetLabel, strings.Join(shown, "\n  "))
		case <-time.After(2 * time.Second):
		}
	}
}

var (
	// priorityClassRef finds the priority classes pod templates name.
	priorityClassRef = regexp.MustCompile(`(?m)^\s*priorityClassName:\s*["']?([a-z0-9][a-z0-9.-]*)["']?\s*$`)
	// metadataName finds top-level objects' names in a YAML file.
	metadataName = regexp.MustCompile(`(?m)^  name:\s*(\S+)`)
)

// RuntimePriorityClasses lists the PriorityClasses that bundles' pod
// templates name but no bundle of the fleet carries, besides the built-in
// system-* ones: an operator creates them when it runs (kubevirt's
// hyperconverged operator creates kubevirt-cluster-critical), and on a
// kwok node no operator runs, so without them the pods that name them are
// refused ("no PriorityClass with name ... was found").
func RuntimePriorityClasses(bundles []FleetBundle) ([]string, error) {
	named, carried := map[string]bool{}, map[string]bool{}
	for _, b := range bundles {
		files, err := filepath.Glob(filepath.Join(b.Dir, "manifests", "*"))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			data, err := readBounded(f, maxCatalogExample)
			if err != nil {
				return nil, err
			}
			for _, m := range priorityClassRef.FindAllSubmatch(data, -1) {
				named[string(m[1])] = true
			}
			if bytes.Contains(data, []byte("kind: PriorityClass")) {
				for _, m := range metadataName.FindAllSubmatch(data, -1) {
					carried[string(m[1])] = true
				}
			}
		}
	}
	var out []string
	for n := range named {
		if !carried[n] && !strings.HasPrefix(n, "system-") {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

// EnsurePriorityClasses creates the named PriorityClasses (a value below
// the system ones) unless they exist.
func EnsurePriorityClasses(ctx context.Context, c client.Client, names []string) error {
	for _, n := range names {
		pc := &schedulingv1.PriorityClass{
			ObjectMeta:  metav1.ObjectMeta{Name: n, Labels: map[string]string{FleetLabel: "true"}},
			Value:       1_000_000,
			Description: "Created for a fleet on a kwok node, where the operator that creates it at run time does not run.",
		}
		if err := c.Create(ctx, pc); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating PriorityClass %s: %w", n, err)
		}
	}
	return nil
}
