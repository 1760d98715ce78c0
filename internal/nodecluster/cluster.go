package nodecluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Addresses of the cluster network: the pod subnet on bridge rukpak0 and
// the Service range (its first address is the kubernetes Service).
const (
	BridgeName  = "rukpak0"
	PodSubnet   = "10.244.77.0/24"
	ServiceCIDR = "10.96.77.0/24"
	kubeSvcIP   = "10.96.77.1"
	NodeName    = "rukpak-node"
	adminToken  = "rukpak-node-admin-token"
)

// clusterSysctls are the sysctls Stop restores: HostSysctls and what
// kube-proxy may set.
var clusterSysctls = append(append([]string{}, HostSysctls...),
	"net/ipv4/conf/all/route_localnet")

// Options configure Start.
type Options struct {
	// Assets holds etcd, kube-apiserver, kube-controller-manager,
	// kube-scheduler and kubectl (hack/testbin.sh envtest).
	Assets string
	// NodeBin holds kubelet and kube-proxy (hack/testbin.sh node).
	NodeBin string
	// Images are ctr-importable tarballs imported before the kubelet
	// starts; the sandbox image must be among them.
	Images []string
	// SandboxImage is containerd's sandbox (pause) image reference.
	SandboxImage string
	// HostIP is the address the API server advertises (default: the first
	// non-loopback IPv4 address of an up interface).
	HostIP string
}

// Cluster is a running single-node cluster with a real kubelet.
type Cluster struct {
	// Dir holds everything of the cluster (logs, certificates, data).
	Dir string
	// Kubeconfig is an admin kubeconfig (token auth).
	Kubeconfig string
	// Server is the API server URL (the advertised host address).
	Server     string
	HostIP     string
	Containerd *Containerd
	// Timings of the bring-up phases, in order.
	Timings []Timing

	opts  Options
	procs []*proc
	// hostLock is held from Start to the end of Stop: one node cluster per
	// host (its bridge, iptables rules and sysctls are the host's).
	hostLock *os.File
	before   HostState
	sysctls  map[string]string
	// paths of HostPaths (and device-plugins) that did not exist.
	missing []string
}

// Timing is how long a bring-up phase took since Start began.
type Timing struct {
	Phase string
	At    time.Duration
}

type proc struct {
	name string
	bin  string
	args []string
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

// Start brings the cluster up under dir (created; short, for the unix
// socket). On error everything started is stopped and the host restored.
func Start(ctx context.Context, dir string, o Options) (c *Cluster, err error) {
	begin := time.Now()
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	c = &Cluster{Dir: dir, opts: o, Kubeconfig: filepath.Join(dir, "kubeconfig"), sysctls: map[string]string{}}
	var marks sync.Mutex
	mark := func(p string) {
		marks.Lock()
		defer marks.Unlock()
		c.Timings = append(c.Timings, Timing{p, time.Since(begin).Round(time.Millisecond)})
	}
	if c.hostLock, err = lockHost(ctx, hostLockPath); err != nil {
		return nil, err
	}
	mark("host lock")
	if c.before, err = SnapshotHost(ctx); err != nil {
		_ = c.hostLock.Close()
		return nil, err
	}
	for _, s := range clusterSysctls {
		if v, err := os.ReadFile(filepath.Join("/proc/sys", s)); err == nil {
			c.sysctls[s] = strings.TrimSpace(string(v))
		}
	}
	for _, p := range append(append([]string{}, HostPaths...), "/var/lib/kubelet/device-plugins") {
		if _, err := os.Lstat(p); err != nil {
			c.missing = append(c.missing, p)
		}
	}
	defer func() {
		if err != nil {
			_ = c.Stop()
			c = nil
		}
	}()
	if c.HostIP = o.HostIP; c.HostIP == "" {
		if c.HostIP, err = hostIP(); err != nil {
			return c, err
		}
	}
	pki := filepath.Join(dir, "pki")
	for _, d := range []string{pki, filepath.Join(dir, "etcd"), filepath.Join(dir, "kubelet")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return c, err
		}
	}
	if err := writePKI(pki, []net.IP{net.ParseIP(c.HostIP), net.ParseIP("127.0.0.1"), net.ParseIP(kubeSvcIP)}); err != nil {
		return c, err
	}
	ports, err := freePorts(9)
	if err != nil {
		return c, err
	}
	etcdPort, peerPort, apiPort, kcmPort, schedPort, kubeletPort, kubeletHealthz, proxyHealthz, proxyMetrics := ports[0], ports[1], ports[2], ports[3], ports[4], ports[5], ports[6], ports[7], ports[8]
	c.Server = fmt.Sprintf("https://%s:%d", c.HostIP, apiPort)
	if err := os.WriteFile(filepath.Join(pki, "tokens.csv"), []byte(adminToken+",admin,admin,system:masters\n"), 0o600); err != nil {
		return c, err
	}
	ca, _ := os.ReadFile(filepath.Join(pki, "ca.crt"))
	if err := os.WriteFile(c.Kubeconfig, []byte(kubeconfig(c.Server, filepath.Join(pki, "ca.crt"))), 0o600); err != nil {
		return c, err
	}
	// Forwarding for the bridge (restored by Stop).
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		return c, err
	}

	asset := func(n string) string { return filepath.Join(o.Assets, n) }
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	if err := c.start("etcd", asset("etcd"),
		"--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peerPort),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peerPort),
		"--initial-cluster", fmt.Sprintf("default=http://127.0.0.1:%d", peerPort),
		"--unsafe-no-fsync"); err != nil {
		return c, err
	}
	if err := c.start("kube-apiserver", asset("kube-apiserver"),
		"--etcd-servers", etcdURL,
		"--bind-address", "0.0.0.0", "--secure-port", strconv.Itoa(apiPort),
		"--advertise-address", c.HostIP,
		"--cert-dir", pki,
		"--tls-cert-file", filepath.Join(pki, "apiserver.crt"),
		"--tls-private-key-file", filepath.Join(pki, "apiserver.key"),
		"--token-auth-file", filepath.Join(pki, "tokens.csv"),
		"--authorization-mode", "RBAC",
		"--service-cluster-ip-range", ServiceCIDR,
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", filepath.Join(pki, "sa.pub"),
		"--service-account-signing-key-file", filepath.Join(pki, "sa.key"),
		"--allow-privileged=true",
		"--kubelet-preferred-address-types", "InternalIP"); err != nil {
		return c, err
	}
	// containerd, the CNI bridge and the images.
	ctd, err := StartContainerd(ctx, filepath.Join(dir, "ctd"), ContainerdOptions{
		SandboxImage: o.SandboxImage,
		Cgroups:      []string{"kubepods", "k8s.io"},
	})
	if err != nil {
		return c, err
	}
	c.Containerd = ctd
	if err := os.WriteFile(filepath.Join(ctd.CNIConfDir, "10-rukpak.conflist"), []byte(fmt.Sprintf(cniConfig, BridgeName, PodSubnet, filepath.Join(dir, "cni-ipam"))), 0o644); err != nil {
		return c, err
	}
	mark("containerd ready")
	// The images are imported while the API server starts and then while
	// the kubelet registers the node: no pod can be created before Start
	// returns, and it returns once both are done. They have ended, and
	// their ctr processes with them, before a failed Start tears down.
	ictx, icancel := context.WithCancel(ctx)
	imports := startImports(ictx, ctd, o.Images, func() { mark("images imported") })
	defer func() {
		icancel()
		_ = imports.wait()
	}()

	if err := c.waitHTTPS(ctx, fmt.Sprintf("https://127.0.0.1:%d/readyz", apiPort), ca); err != nil {
		return c, err
	}
	mark("kube-apiserver ready")
	if err := c.start("kube-controller-manager", asset("kube-controller-manager"),
		"--kubeconfig", c.Kubeconfig, "--leader-elect=false",
		"--secure-port", strconv.Itoa(kcmPort), "--bind-address", "127.0.0.1",
		"--cert-dir", filepath.Join(dir, "kcm-certs"),
		"--service-account-private-key-file", filepath.Join(pki, "sa.key"),
		"--root-ca-file", filepath.Join(pki, "ca.crt"),
		"--use-service-account-credentials=false"); err != nil {
		return c, err
	}
	if err := c.start("kube-scheduler", asset("kube-scheduler"),
		"--kubeconfig", c.Kubeconfig, "--leader-elect=false",
		"--secure-port", strconv.Itoa(schedPort), "--bind-address", "127.0.0.1",
		"--cert-dir", filepath.Join(dir, "sched-certs")); err != nil {
		return c, err
	}

	// An image that failed to import fails the bring-up before the node.
	if err := imports.failed(); err != nil {
		return c, err
	}

	kubeletCfg := filepath.Join(dir, "kubelet-config.yaml")
	if err := os.WriteFile(kubeletCfg, []byte(fmt.Sprintf(kubeletConfig,
		"unix://"+ctd.Socket, kubeletPort, kubeletHealthz, filepath.Join(dir, "pod-logs"))), 0o644); err != nil {
		return c, err
	}
	if err := c.start("kubelet", filepath.Join(o.NodeBin, "kubelet"),
		"--config", kubeletCfg, "--kubeconfig", c.Kubeconfig,
		"--root-dir", filepath.Join(dir, "kubelet"),
		"--hostname-override", NodeName, "--node-ip", c.HostIP, "--v=2"); err != nil {
		return c, err
	}
	proxyCfg := filepath.Join(dir, "kube-proxy-config.yaml")
	if err := os.WriteFile(proxyCfg, []byte(fmt.Sprintf(kubeProxyConfig,
		c.Kubeconfig, NodeName, PodSubnet, proxyHealthz, proxyMetrics)), 0o644); err != nil {
		return c, err
	}
	if err := c.start("kube-proxy", filepath.Join(o.NodeBin, "kube-proxy"), "--config", proxyCfg, "--v=2"); err != nil {
		return c, err
	}
	if err := c.waitKubectl(ctx, 2*time.Minute, "wait", "--for=condition=Ready", "node/"+NodeName, "--timeout=5s"); err != nil {
		return c, err
	}
	mark("node Ready")
	if err := imports.wait(); err != nil {
		return c, err
	}
	return c, nil
}

// imports are image imports running in the background.
type imports struct {
	done chan struct{}
	err  error
}

// startImports imports images in the background and calls imported once
// they all are.
func startImports(ctx context.Context, ctd *Containerd, images []string, imported func()) *imports {
	im := &imports{done: make(chan struct{})}
	go func() {
		defer close(im.done)
		if im.err = importImages(ctx, ctd, images); im.err == nil {
			imported()
		}
	}()
	return im
}

// failed returns the imports' error if they have ended, without waiting.
func (im *imports) failed() error {
	select {
	case <-im.done:
		return im.err
	default:
		return nil
	}
}

// wait waits for the imports to end and returns their error.
func (im *imports) wait() error {
	<-im.done
	return im.err
}

// importImages imports the tarballs side by side: each ctr import mostly
// waits on its own process start, reads and writes, not on one another.
func importImages(ctx context.Context, ctd *Containerd, images []string) error {
	errs := make([]error, len(images))
	var wg sync.WaitGroup
	for i, img := range images {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = ctd.ImportImage(ctx, img)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Kubectl runs kubectl (from Assets) against the cluster.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.opts.Assets, "kubectl"), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// waitKubectl retries a kubectl command until it succeeds.
func (c *Cluster) waitKubectl(ctx context.Context, d time.Duration, args ...string) error {
	deadline := time.Now().Add(d)
	for {
		_, err := c.Kubectl(ctx, args...)
		if err == nil {
			return nil
		}
		if err := c.exited(); err != nil {
			return err
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%w\n%s", err, c.Logs("kubelet"))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (c *Cluster) waitHTTPS(ctx context.Context, url string, ca []byte) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	cl := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	deadline := time.Now().Add(time.Minute)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := cl.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = errors.New(resp.Status)
		}
		if e := c.exited(); e != nil {
			return e
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s: %w\n%s", url, err, c.Logs("kube-apiserver"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// exited reports a component that has exited.
func (c *Cluster) exited() error {
	for _, p := range c.procs {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited: %v\n%s", p.name, p.cmd.ProcessState, c.Logs(p.name))
		default:
		}
	}
	return nil
}

func (c *Cluster) start(name, bin string, args ...string) error {
	// Appended to: a restarted component keeps its earlier log.
	log, err := os.OpenFile(filepath.Join(c.Dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(os.Environ(), "PATH="+os.Getenv("PATH")+":/usr/sbin:/sbin")
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, bin: bin, args: args, cmd: cmd, done: make(chan struct{}), log: log}
	go func() { _ = cmd.Wait(); close(p.done) }()
	c.procs = append(c.procs, p)
	return nil
}

// RestartKubelet stops the kubelet (SIGTERM, as a service manager would)
// and starts it again with the same flags; containers keep running, as on
// a real node. It returns once the node is Ready again.
func (c *Cluster) RestartKubelet(ctx context.Context) error {
	for i, p := range c.procs {
		if p.name != "kubelet" {
			continue
		}
		stopProc(p)
		c.procs = append(c.procs[:i], c.procs[i+1:]...)
		if err := c.start(p.name, p.bin, p.args...); err != nil {
			return err
		}
		return c.waitKubectl(ctx, 2*time.Minute, "wait", "--for=condition=Ready", "node/"+NodeName, "--timeout=5s")
	}
	return errors.New("no kubelet is running")
}

// Logs returns the last lines of a component's log.
func (c *Cluster) Logs(name string) string {
	data, _ := os.ReadFile(filepath.Join(c.Dir, name+".log"))
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}

// HostBefore is the host as Start found it, once it had the host to itself
// (after the host lock): what Stop must leave. A snapshot taken before Start
// may include another checkout's node cluster that was still running.
func (c *Cluster) HostBefore() HostState { return c.before }

// Stop stops every process by PID (kubelet first, then containerd and its
// containers, then kube-proxy and the control plane) and restores the
// host: network namespaces, veths and the bridge, KUBE-*/CNI-* iptables
// chains that were not there, mounts under Dir, cgroups, sysctls and the
// host paths the kubelet created. Dir is left for the logs.
func (c *Cluster) Stop() error {
	var errs []error
	stop := func(name string) {
		for _, p := range c.procs {
			if p.name == name {
				stopProc(p)
			}
		}
	}
	stop("kubelet")
	if c.Containerd != nil {
		errs = append(errs, c.Containerd.Stop())
	}
	// The rest are told to stop all at once, then waited for in turn: each
	// shutting down (the API server drains its requests) overlaps the others'.
	for _, p := range c.procs {
		select {
		case <-p.done:
		default:
			_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM)
		}
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		stopProc(c.procs[i])
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Network namespaces the CRI plugin left (deleting one destroys the
	// veth end in it, and so the pair).
	if ents, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range ents {
			if !contains(c.before.Netns, e.Name()) {
				if _, err := runTool(ctx, "ip", "netns", "delete", e.Name()); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	if links, err := linkNames(); err == nil {
		for _, l := range links {
			if !contains(c.before.Links, l) && (l == BridgeName || strings.HasPrefix(l, "veth")) {
				// A veth goes with its peer's network namespace, so it can
				// be gone by now: "Cannot find device" or "No such device".
				if _, err := runTool(ctx, "ip", "link", "delete", l); err != nil && !strings.Contains(err.Error(), "Cannot find device") && !strings.Contains(err.Error(), "No such device") {
					errs = append(errs, err)
				}
			}
		}
	}
	errs = append(errs, c.cleanIptables(ctx))
	errs = append(errs, UnmountUnder(c.Dir))
	errs = append(errs, RemoveCgroups("kubepods"))
	for _, s := range clusterSysctls {
		v, ok := c.sysctls[s]
		if !ok {
			continue
		}
		p := filepath.Join("/proc/sys", s)
		if cur, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(cur)) != v {
			if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("restoring %s: %w", s, err))
			}
		}
	}
	// Deepest first, so device-plugins goes before /var/lib/kubelet.
	for i := len(c.missing) - 1; i >= 0; i-- {
		_ = os.RemoveAll(c.missing[i])
	}
	c.procs = nil
	if c.hostLock != nil {
		// Closing the file releases the lock.
		_ = c.hostLock.Close()
		c.hostLock = nil
	}
	return errors.Join(errs...)
}

// hostLockPath is where node clusters on one host take turns: a second
// `make test-e2e-node` (another checkout, a CI run) waits instead of
// fighting over the bridge, iptables rules and sysctls.
const hostLockPath = "/run/rukpak-nodecluster.lock"

// lockHost waits, until ctx ends, for the lock at path; it is released when
// the returned file is closed (or the process exits).
func lockHost(ctx context.Context, path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	waited := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if !waited {
			fmt.Fprintf(os.Stderr, "nodecluster: another node cluster runs on this host; waiting for %s\n", path)
			waited = true
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("waiting for %s: %w", path, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

func stopProc(p *proc) {
	select {
	case <-p.done:
	default:
		_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	_ = p.log.Close()
}

// cleanIptables removes the KUBE-* and CNI-* chains that were not there
// before Start, and every rule jumping to them, in every table, for IPv4
// and IPv6.
func (c *Cluster) cleanIptables(ctx context.Context) error {
	var errs []error
	for _, tool := range []string{"iptables", "ip6tables"} {
		out, err := runTool(ctx, tool+"-save")
		if err != nil {
			continue
		}
		table := ""
		var rules [][]string
		var chains [][2]string
		for _, line := range strings.Split(out, "\n") {
			switch {
			case strings.HasPrefix(line, "*"):
				table = line[1:]
			case strings.HasPrefix(line, ":"):
				name := strings.Fields(line[1:])[0]
				if (strings.HasPrefix(name, "KUBE-") || strings.HasPrefix(name, "CNI-")) && !c.chainExisted(tool, table, name) {
					chains = append(chains, [2]string{table, name})
				}
			case strings.HasPrefix(line, "-A "):
				if strings.Contains(line, "KUBE-") || strings.Contains(line, "CNI-") {
					rules = append(rules, append([]string{table}, line))
				}
			}
		}
		ours := map[string]bool{}
		for _, ch := range chains {
			ours[ch[0]+"/"+ch[1]] = true
		}
		done := map[string]bool{}
		// Rules of the other chains that jump to ours, deleted by number,
		// last first (iptables-save's quoting does not survive a shell).
		for _, r := range rules {
			f := strings.Fields(r[1])
			if ours[r[0]+"/"+f[1]] {
				continue
			}
			if done[r[0]+"/"+f[1]] {
				continue
			}
			done[r[0]+"/"+f[1]] = true
			errs = append(errs, deleteJumps(ctx, tool, r[0], f[1], ours))
		}
		for _, ch := range chains {
			_, _ = runTool(ctx, tool, "-w", "-t", ch[0], "-F", ch[1])
		}
		for _, ch := range chains {
			if _, err := runTool(ctx, tool, "-w", "-t", ch[0], "-X", ch[1]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// deleteJumps deletes the rules of chain in table that jump to one of
// ours ("table/chain"), by rule number from the last.
func deleteJumps(ctx context.Context, tool, table, chain string, ours map[string]bool) error {
	out, err := runTool(ctx, tool, "-w", "-t", table, "-S", chain)
	if err != nil {
		return err
	}
	var nums []int
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "-A ") {
			continue
		}
		n++
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if (f[i] == "-j" || f[i] == "-g") && ours[table+"/"+f[i+1]] {
				nums = append(nums, n)
				break
			}
		}
	}
	var errs []error
	for i := len(nums) - 1; i >= 0; i-- {
		if _, err := runTool(ctx, tool, "-w", "-t", table, "-D", chain, strconv.Itoa(nums[i])); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// chainExisted reports whether the before snapshot lists chain in table.
// HostState.Iptables keeps "<tool> <line>" in iptables-save's order.
func (c *Cluster) chainExisted(tool, table, chain string) bool {
	cur := ""
	for _, l := range c.before.Iptables {
		l, ok := strings.CutPrefix(l, tool+"-save ")
		if !ok {
			continue
		}
		if strings.HasPrefix(l, "*") {
			cur = l[1:]
		}
		if cur == table && (l == ":"+chain || strings.HasPrefix(l, ":"+chain+" ")) {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

// hostIP returns the first non-loopback IPv4 address of an up interface.
func hostIP() (string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return "", err
	}
	for _, i := range ifs {
		if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 || i.Name == BridgeName {
			continue
		}
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
				return n.IP.String(), nil
			}
		}
	}
	return "", errors.New("no non-loopback IPv4 address on this host for the API server to advertise")
}

func kubeconfig(server, caFile string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: rukpak-node
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: admin
  user:
    token: %s
contexts:
- name: rukpak-node
  context: {cluster: rukpak-node, user: admin}
current-context: rukpak-node
`, server, caFile, adminToken)
}

// cniConfig: bridge with host-local IPAM (state in our directory) and
// portmap; the CRI plugin adds the loopback plugin itself.
const cniConfig = `{
  "cniVersion": "0.4.0",
  "name": "rukpak",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": %q
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`

// kubeletConfig: the settings issue 12 lists for this host (cgroup v1,
// containerd 1.6, no CAP_SYS_RESOURCE), anonymous/AlwaysAllow on its own
// API (a test node), no image garbage collection or disk eviction.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
oomScoreAdj: 0
containerRuntimeEndpoint: %q
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
podLogsDirectory: %q
failSwapOn: false
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization:
  mode: AlwaysAllow
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
resolvConf: /etc/resolv.conf
# Pods' Secret volumes are refreshed at each pod sync: every 10 s instead of
# every minute, so certificate rotations reach the pods the suites watch
# within seconds (a test cluster's choice; the kubelet default is 1m).
syncFrequency: 10s
`

// kubeProxyConfig: iptables mode; no conntrack sysctls, no localhost node
// ports (route_localnet).
const kubeProxyConfig = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: %q
hostnameOverride: %q
clusterCIDR: %q
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
oomScoreAdj: 0
iptables:
  localhostNodePorts: false
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`
