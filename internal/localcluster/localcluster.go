// Package localcluster runs a whole local Kubernetes control plane with no
// containers: kwokctl's binary runtime starts etcd, kube-apiserver,
// kube-controller-manager (so garbage collection and namespace lifecycle
// work), kube-scheduler and a kwok controller whose fake node runs every
// scheduled pod, so Deployments become Available.
//
// The binaries are the ones hack/testbin.sh builds from the Go module proxy;
// nothing is downloaded.
package localcluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The cluster is sized for a fleet of operators, and calls no mutating
// admission webhook (see Create). kube-apiserver's default
// Service range (10.0.0.0/24) holds 254 Services, which a few hundred
// operators' metrics and webhook Services exceed ("range is full"), and
// kwokctl's node template allows 110 pods.
const (
	// ServiceCIDR is the Service IP range: 65,534 addresses.
	ServiceCIDR = "10.96.0.0/16"
	// NodePods is the fake node's pod capacity (and allocatable).
	NodePods = 20000
	// NodeEphemeralStorage is the fake node's ephemeral storage: kwokctl's
	// node has none, so a pod that requests some (one of the fleet's
	// operators does) was never scheduled.
	NodeEphemeralStorage = "1Ti"
)

// Cluster is a running local cluster.
type Cluster struct {
	// Name is the kwokctl cluster name.
	Name string
	// Kubeconfig is the path of an admin kubeconfig for the cluster.
	Kubeconfig string

	assets  string
	workdir string
}

// Create starts a cluster named name from the binaries in assets, keeping
// its state under workdir (which is created). Any leftover cluster of the
// same name in workdir is deleted first.
func Create(ctx context.Context, assets, workdir, name string) (*Cluster, error) {
	if err := os.MkdirAll(workdir, 0o755); err != nil {
		return nil, err
	}
	c := &Cluster{Name: name, Kubeconfig: filepath.Join(workdir, "kubeconfig"), assets: assets, workdir: workdir}
	_ = c.Delete()
	bin := func(n string) string { return filepath.Join(assets, n) }
	if _, err := c.kwokctl(ctx, "create", "cluster",
		"--name", name,
		"--runtime", "binary",
		"--etcd-binary", bin("etcd"),
		"--kube-apiserver-binary", bin("kube-apiserver"),
		"--kube-controller-manager-binary", bin("kube-controller-manager"),
		"--kube-scheduler-binary", bin("kube-scheduler"),
		"--kwok-controller-binary", bin("kwok"),
		"--kubeconfig", c.Kubeconfig,
		"--extra-args", "kube-apiserver=service-cluster-ip-range="+ServiceCIDR,
		// No webhook server runs on a kwok node, so an operator's
		// mutating webhook on pods with failurePolicy Fail (one of the
		// fleet's has one) would refuse every pod of the cluster. rukpak's
		// own webhook is a validating one, which stays on.
		"--extra-args", "kube-apiserver=disable-admission-plugins=MutatingAdmissionWebhook",
		// One of each, so nothing to elect: an elected controller manager
		// or scheduler exits when a busy machine keeps it from renewing
		// its lease in time (namespaces then never finish terminating).
		"--extra-args", "kube-controller-manager=leader-elect=false",
		"--extra-args", "kube-scheduler=leader-elect=false",
		// Minutes on a busy machine; the context bounds it too.
		"--wait", "10m",
	); err != nil {
		_ = c.Delete()
		return nil, fmt.Errorf("creating local cluster: %w", err)
	}
	if _, err := c.kwokctl(ctx, "scale", "node", "--name", name, "--replicas", "1",
		"--param", fmt.Sprintf(".allocatable.pods = %d", NodePods),
		"--param", fmt.Sprintf(".allocatable[%q] = %q", "ephemeral-storage", NodeEphemeralStorage)); err != nil {
		_ = c.Delete()
		return nil, fmt.Errorf("adding a node to the local cluster: %w", err)
	}
	// The one node is the cluster's control-plane node too, as on a
	// single-node cluster: operators that must run there (kubevirt's
	// virt-operator requires the label) are scheduled. No taint: every
	// pod may run on it.
	kubectl := exec.CommandContext(ctx, filepath.Join(assets, "kubectl"), "--kubeconfig", c.Kubeconfig,
		"label", "node", "--all", "--overwrite", "node-role.kubernetes.io/control-plane=")
	if out, err := kubectl.CombinedOutput(); err != nil {
		_ = c.Delete()
		return nil, fmt.Errorf("labelling the local cluster's node: %w: %s", err, out)
	}
	return c, nil
}

// Delete stops every process of the cluster and removes its state.
func (c *Cluster) Delete() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.kwokctl(ctx, "delete", "cluster", "--name", c.Name)
	return err
}

// Logs returns the last lines of a component's log (e.g. kube-apiserver).
func (c *Cluster) Logs(component string) string {
	out, _ := c.kwokctl(context.Background(), "logs", component, "--name", c.Name)
	lines := strings.Split(out, "\n")
	if len(lines) > 50 {
		lines = lines[len(lines)-50:]
	}
	return strings.Join(lines, "\n")
}

func (c *Cluster) kwokctl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.assets, "kwokctl"), args...)
	cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+c.workdir)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kwokctl %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}
