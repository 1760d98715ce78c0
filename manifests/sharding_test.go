package manifests_test

import (
	"flag"
	"io"
	"net/url"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/rukpak-dev/rukpak/provisioner/shard"
)

// provisionerFlags are the flags of cmd/provisioner this test reads, with
// their defaults.
type provisionerFlags struct {
	selector, leaseID, contentURL, certSecret, knownShards string
}

func parseProvisionerFlags(t *testing.T, args []string) provisionerFlags {
	t.Helper()
	var f provisionerFlags
	fs := flag.NewFlagSet("provisioner", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.selector, "watch-label-selector", "", "")
	fs.StringVar(&f.leaseID, "leader-election-id", "provisioner.core.rukpak.io", "")
	fs.StringVar(&f.contentURL, "content-url", "https://rukpak-core.rukpak-system.svc", "")
	fs.StringVar(&f.certSecret, "content-cert-secret", "", "")
	fs.StringVar(&f.knownShards, "known-shards", "", "")
	var known []string
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if fs.Lookup(name) != nil {
			known = append(known, a)
		}
	}
	if err := fs.Parse(known); err != nil {
		t.Fatalf("parsing %v: %v", known, err)
	}
	return f
}

// TestShardingOverlay: the overlay runs a main instance and two shards
// whose selectors split every labelling of an object between exactly one
// of them, each with its own Lease, content Service (selecting only its own
// pods, named by its content URL), certificate Secret and ServiceAccount;
// an API server accepts it.
func TestShardingOverlay(t *testing.T) {
	objs := render(t, "overlays/sharding")
	var deployments []*appsv1.Deployment
	services := map[string]*corev1.Service{}
	accounts := map[string]bool{}
	for _, u := range objs {
		switch u.GetKind() {
		case "Deployment":
			d := convert[appsv1.Deployment](t, u)
			if slices.Equal(d.Spec.Template.Spec.Containers[0].Command, []string{"/provisioner"}) {
				deployments = append(deployments, d)
			}
		case "Service":
			services[u.GetName()] = convert[corev1.Service](t, u)
		case "ServiceAccount":
			accounts[u.GetName()] = true
		}
	}
	if len(deployments) != 3 {
		t.Fatalf("%d provisioner Deployments, want the main instance and two shards", len(deployments))
	}

	var shards []*shard.Shard
	var mainShard *shard.Shard
	var known []string
	seen := map[string]map[string]string{"lease": {}, "url": {}, "secret": {}}
	distinct := func(kind, value, owner string) {
		if other, ok := seen[kind][value]; ok {
			t.Errorf("%s and %s share the %s %q", other, owner, kind, value)
		}
		seen[kind][value] = owner
	}
	for _, d := range deployments {
		f := parseProvisionerFlags(t, d.Spec.Template.Spec.Containers[0].Args)
		sh, err := shard.Parse(f.selector)
		if err != nil || sh == nil {
			t.Fatalf("%s: --watch-label-selector %q: %v (every instance needs one)", d.Name, f.selector, err)
		}
		if !slices.Equal(sh.Keys(), []string{shard.Label}) {
			t.Errorf("%s selects on %v, want %s only (Bundles take their BundleDeployment's values of these keys)", d.Name, sh.Keys(), shard.Label)
		}
		shards = append(shards, sh)
		if f.knownShards != "" {
			if mainShard != nil {
				t.Errorf("%s: more than one instance has --known-shards", d.Name)
			}
			mainShard, known = sh, strings.Split(f.knownShards, ",")
		}
		distinct("lease", f.leaseID, d.Name)
		distinct("url", f.contentURL, d.Name)
		distinct("secret", f.certSecret, d.Name)
		if f.certSecret == "" {
			t.Errorf("%s has no --content-cert-secret", d.Name)
		}
		if !accounts[d.Spec.Template.Spec.ServiceAccountName] {
			t.Errorf("%s runs as ServiceAccount %q, not in the overlay", d.Name, d.Spec.Template.Spec.ServiceAccountName)
		}

		// The content URL's host is the Service that selects this
		// instance's pods, and no other instance's.
		u, err := url.Parse(f.contentURL)
		if err != nil {
			t.Fatalf("%s: --content-url %q: %v", d.Name, f.contentURL, err)
		}
		name, rest, _ := strings.Cut(u.Hostname(), ".")
		svc, ok := services[name]
		if !ok || rest != "rukpak-system.svc" {
			t.Errorf("%s: --content-url host %q is not a Service of rukpak-system in the overlay", d.Name, u.Hostname())
			continue
		}
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		for _, other := range deployments {
			if sel.Matches(labels.Set(other.Spec.Template.Labels)) != (other == d) {
				t.Errorf("Service %s (selector %v) and the pods of %s (labels %v): selects them %v", svc.Name, svc.Spec.Selector, other.Name, other.Spec.Template.Labels, other != d)
			}
		}
	}

	for _, l := range []map[string]string{nil, {"app": "x"}, {shard.Label: "shard1"}, {shard.Label: "shard2"}} {
		owners := 0
		for _, sh := range shards {
			if sh.Owns(l) {
				owners++
			}
		}
		if owners != 1 {
			t.Errorf("an object labelled %v is reconciled by %d instances, want 1", l, owners)
		}
	}

	// The main instance knows exactly the shards the others serve: an
	// object labelled for one is another instance's, one labelled for
	// anything else is nobody's and reported by the main instance.
	if mainShard == nil {
		t.Fatal("no instance has --known-shards: objects of unknown shards are reported by nobody")
	}
	unserved, err := mainShard.Unserved(known)
	if err != nil {
		t.Fatalf("--known-shards=%s: %v", strings.Join(known, ","), err)
	}
	for _, l := range []map[string]string{{shard.Label: "shard1"}, {shard.Label: "shard2"}, {shard.Label: "shard3"}, {shard.Label: ""}, nil} {
		owners := 0
		for _, sh := range shards {
			if sh.Owns(l) {
				owners++
			}
		}
		if unserved.Matches(labels.Set(l)) != (owners == 0) {
			t.Errorf("an object labelled %v: %d instances reconcile it, reported as unknown: %v", l, owners, unserved.Matches(labels.Set(l)))
		}
	}
	for _, v := range known {
		if !slices.ContainsFunc(shards, func(sh *shard.Shard) bool { return sh != mainShard && sh.Owns(map[string]string{shard.Label: v}) }) {
			t.Errorf("--known-shards lists %q, which no shard instance serves", v)
		}
	}

	t.Run("accepted by an API server", func(t *testing.T) {
		out := serverDryRun(t, "overlays/sharding")
		for _, s := range []string{"shard1", "shard2"} {
			if !strings.Contains(out, "deployment.apps/rukpak-core-"+s+" serverside-applied (server dry run)") {
				t.Errorf("the %s Deployment was not applied:\n%s", s, out)
			}
		}
	})
}
