// Package devenv brings up everything a newcomer (make run) or the local
// end-to-end suite needs: a local cluster, the manifests a local cluster
// needs, and the provisioner and webhook binaries as host processes,
// configured as manifests/ configures them in a cluster.
package devenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"

	"github.com/rukpak-dev/rukpak/internal/localcluster"
)

// Options say where things are.
type Options struct {
	// RepoRoot is this checkout (manifests/ is read from it).
	RepoRoot string
	// Assets holds the control-plane binaries (hack/testbin.sh).
	Assets string
	// BinDir holds the provisioner and webhook binaries (make build).
	BinDir string
	// StateDir holds the cluster state, kubeconfig, logs and storage.
	StateDir string
	// Name of the local cluster.
	Name string
	// Out receives progress lines.
	Out io.Writer
	// Addresses the processes listen on; empty fields take those of
	// DefaultAddresses.
	Addresses Addresses
}

// Addresses are the local addresses the webhook and the provisioner listen
// on. make run uses DefaultAddresses; a test suite takes FreeAddresses, so
// that it runs beside make run (or another checkout's tests).
type Addresses struct {
	// WebhookPort is the webhook's port on localhost, which the webhook
	// configuration the API server calls names.
	WebhookPort int
	// WebhookProbe serves the webhook's /readyz and /healthz.
	WebhookProbe string
	// Content serves the provisioner's bundle content (HTTPS).
	Content string
	// ProvisionerProbe serves the provisioner's /readyz and /healthz.
	ProvisionerProbe string
	// ProvisionerMetrics serves the provisioner's Prometheus metrics,
	// over HTTPS (a self-signed certificate) to a bearer token allowed to
	// get /metrics, e.g. `kubectl create token` of a ServiceAccount bound
	// to rukpak-metrics-reader (which the local overlay installs).
	ProvisionerMetrics string
}

// DefaultAddresses are make run's fixed addresses.
var DefaultAddresses = Addresses{
	WebhookPort:        9443,
	WebhookProbe:       "127.0.0.1:8091",
	Content:            "127.0.0.1:8443",
	ProvisionerProbe:   "127.0.0.1:8081",
	ProvisionerMetrics: "127.0.0.1:8082",
}

// withDefaults fills the empty fields of a from DefaultAddresses.
func (a Addresses) withDefaults() Addresses {
	d := DefaultAddresses
	if a.WebhookPort == 0 {
		a.WebhookPort = d.WebhookPort
	}
	for _, f := range []struct {
		v *string
		d string
	}{
		{&a.WebhookProbe, d.WebhookProbe}, {&a.Content, d.Content},
		{&a.ProvisionerProbe, d.ProvisionerProbe}, {&a.ProvisionerMetrics, d.ProvisionerMetrics},
	} {
		if *f.v == "" {
			*f.v = f.d
		}
	}
	return a
}

// FreeAddresses picks loopback ports that are free now: the kernel's choice
// of an ephemeral port for each, all held until every one is picked, so
// none is picked twice. Another process can still take one before the
// webhook or provisioner binds it; then that process exits and Up fails,
// pointing at its log.
func FreeAddresses() (Addresses, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	pick := func() (string, error) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", fmt.Errorf("picking a free port: %w", err)
		}
		ls = append(ls, l)
		return l.Addr().String(), nil
	}
	addrs := make([]string, 5)
	for i := range addrs {
		a, err := pick()
		if err != nil {
			return Addresses{}, err
		}
		addrs[i] = a
	}
	port := ls[0].Addr().(*net.TCPAddr).Port
	return Addresses{WebhookPort: port, WebhookProbe: addrs[1], Content: addrs[2], ProvisionerProbe: addrs[3], ProvisionerMetrics: addrs[4]}, nil
}

// Env is a running local environment.
type Env struct {
	Options
	Cluster     *localcluster.Cluster
	Kubeconfig  string
	ContentCA   string
	Provisioner *Process
	Webhook     *Process
}

// Up starts the cluster and the binaries and waits until they are ready.
func Up(ctx context.Context, o Options) (*Env, error) {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Name == "" {
		o.Name = "rukpak"
	}
	o.Addresses = o.Addresses.withDefaults()
	if err := os.MkdirAll(o.StateDir, 0o755); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Out, ">> starting local cluster %q (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok)\n", o.Name)
	c, err := localcluster.Create(ctx, o.Assets, filepath.Join(o.StateDir, "kwok"), o.Name)
	if err != nil {
		return nil, err
	}
	e := &Env{Options: o, Cluster: c, Kubeconfig: c.Kubeconfig, ContentCA: filepath.Join(o.StateDir, "content-ca.pem")}
	if err := e.up(ctx); err != nil {
		e.Down()
		return nil, err
	}
	return e, nil
}

func (e *Env) up(ctx context.Context) error {
	fmt.Fprintln(e.Out, ">> installing CRDs, namespace, RBAC and the webhook configuration")
	if _, err := e.Kubectl(ctx, nil, "apply", "--server-side", "-k", filepath.Join(e.RepoRoot, "manifests", "overlays", "local")); err != nil {
		return err
	}
	a := e.Addresses
	vwc, err := LocalWebhookConfiguration(e.RepoRoot, a.WebhookPort)
	if err != nil {
		return err
	}
	if _, err := e.Kubectl(ctx, vwc, "apply", "--server-side", "-f", "-"); err != nil {
		return err
	}

	logs := filepath.Join(e.StateDir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return err
	}
	env := []string{"KUBECONFIG=" + e.Kubeconfig}
	e.Webhook = &Process{
		Name: "webhook", Path: filepath.Join(e.BinDir, "webhook"), Env: env,
		LogPath: filepath.Join(logs, "webhook.log"),
		Args: []string{
			"--namespace=rukpak-system",
			"--bundle-namespace=rukpak-system",
			fmt.Sprintf("--port=%d", a.WebhookPort),
			"--cert-dir=" + filepath.Join(e.StateDir, "webhook-certs"),
			"--cert-mode=self",
			"--extra-dns-names=localhost",
			"--health-probe-bind-address=" + a.WebhookProbe,
			"--metrics-bind-address=0",
		},
	}
	e.Provisioner = &Process{
		Name: "provisioner", Path: filepath.Join(e.BinDir, "provisioner"), Env: env,
		LogPath: filepath.Join(logs, "provisioner.log"),
		Args: []string{
			"--namespace=rukpak-system",
			"--storage-dir=" + filepath.Join(e.StateDir, "bundles"),
			"--unpack-dir=" + filepath.Join(e.StateDir, "unpack"),
			"--content-bind-address=" + a.Content,
			"--content-url=https://" + a.Content,
			"--tls-ca-out=" + e.ContentCA,
			"--health-probe-bind-address=" + a.ProvisionerProbe,
			"--metrics-bind-address=" + a.ProvisionerMetrics,
		},
	}
	fmt.Fprintf(e.Out, ">> starting the webhook (log: %s)\n", e.Webhook.LogPath)
	if err := e.Webhook.Start(); err != nil {
		return err
	}
	if err := waitReady(ctx, e.Webhook, "http://"+a.WebhookProbe+"/readyz"); err != nil {
		return err
	}
	fmt.Fprintf(e.Out, ">> starting the provisioners (log: %s)\n", e.Provisioner.LogPath)
	return e.StartProvisioner(ctx)
}

// StartProvisioner (re)starts the provisioner and waits until it is ready.
func (e *Env) StartProvisioner(ctx context.Context) error {
	if err := e.Provisioner.Start(); err != nil {
		return err
	}
	return waitReady(ctx, e.Provisioner, "http://"+e.Addresses.ProvisionerProbe+"/readyz")
}

// Down stops everything Up started.
func (e *Env) Down() {
	var wg sync.WaitGroup
	for _, p := range []*Process{e.Provisioner, e.Webhook} {
		if p != nil {
			wg.Go(p.Stop)
		}
	}
	wg.Wait()
	if e.Cluster != nil {
		if err := e.Cluster.Delete(); err != nil {
			fmt.Fprintf(e.Out, "deleting local cluster: %v\n", err)
		}
	}
}

// Kubectl runs kubectl against the cluster; stdin may be nil.
func (e *Env) Kubectl(ctx context.Context, stdin []byte, args ...string) (string, error) {
	// The kubectl built with the control plane, when there is one.
	kubectl := filepath.Join(e.Assets, "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		kubectl = "kubectl"
	}
	cmd := exec.CommandContext(ctx, kubectl, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.Kubeconfig)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

// LocalWebhookConfiguration is manifests/base's ValidatingWebhookConfiguration
// with every webhook pointed at https://localhost:<port> instead of the
// in-cluster Service, for a webhook running on the host.
func LocalWebhookConfiguration(repoRoot string, port int) ([]byte, error) {
	path := filepath.Join(repoRoot, "manifests", "base", "webhook", "validatingwebhookconfiguration.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	vwc := &admissionv1.ValidatingWebhookConfiguration{}
	if err := yaml.UnmarshalStrict(data, vwc); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", path, err)
	}
	for i := range vwc.Webhooks {
		cc := &vwc.Webhooks[i].ClientConfig
		if cc.Service == nil || cc.Service.Path == nil {
			return nil, fmt.Errorf("%s: webhook %q has no service path", path, vwc.Webhooks[i].Name)
		}
		url := fmt.Sprintf("https://localhost:%d%s", port, *cc.Service.Path)
		cc.Service, cc.URL = nil, &url
	}
	vwc.APIVersion, vwc.Kind = "admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"
	return yaml.Marshal(vwc)
}

// readyTimeout bounds the wait for a process to be ready: minutes, for a
// busy machine; a process that exits ends the wait at once.
const readyTimeout = 5 * time.Minute

func waitReady(ctx context.Context, p *Process, url string) error {
	deadline := time.Now().Add(readyTimeout)
	for time.Now().Before(deadline) {
		if !p.Running() {
			return fmt.Errorf("%s exited; see %s", p.Name, p.LogPath)
		}
		resp, err := http.Get(url)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready (GET %s) after %s; see %s", p.Name, url, readyTimeout, p.LogPath)
}
