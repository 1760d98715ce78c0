package helm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"testing/fstest"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/client-go/rest"

	"github.com/rukpak-dev/rukpak/provisioner/plain"
)

// Helm's template engine is bounded neither in time nor in memory (a chart
// may `range until 100000000` or double a string a hundred times), and a
// render cannot be cancelled. So a chart's templates are never executed in
// the provisioner's (or rukpakctl's) process: Freeze executes them in a
// child process (the running binary again, see init) capped in address
// space and killed at a deadline, and returns the chart with every template
// replaced by the text it rendered to. Helm's install and upgrade actions
// then render that frozen chart in process, which costs time and memory
// linear in its size, and install exactly what the child rendered: nothing
// the child's limits did not see runs twice, so randomness, the time or a
// lookup cannot make the second render differ from the first.

// SandboxLimits bound rendering one chart in the child process. Unset
// (zero) fields take DefaultSandboxLimits.
type SandboxLimits struct {
	// Memory is the address space the child may add to what it has
	// mapped when it starts (its binary, the Go runtime), with the chart,
	// the values and the rendered output in it.
	Memory int64
	// Timeout bounds the child's whole run from the render's request, its
	// start included unless it was started ahead (Warm).
	Timeout time.Duration
	// Output bounds the rendered text of all templates together.
	Output int64
}

// DefaultSandboxLimits render every chart of the shared test data with room
// to spare (prometheus-operator-crds, the largest, renders 4.4 MB within 96
// MiB, not within 48, in about a second): Output is LoadChart's bound on a
// chart's files.
var DefaultSandboxLimits = SandboxLimits{
	Memory:  512 << 20,
	Timeout: 30 * time.Second,
	Output:  DefaultLimits.MaxTotalBytes,
}

// OrDefault fills unset fields from DefaultSandboxLimits.
func (l SandboxLimits) OrDefault() SandboxLimits {
	if l.Memory <= 0 {
		l.Memory = DefaultSandboxLimits.Memory
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultSandboxLimits.Timeout
	}
	if l.Output <= 0 {
		l.Output = DefaultSandboxLimits.Output
	}
	return l
}

// FreezeInput is what a render depends on besides the chart and values:
// exactly what Helm's install or upgrade action would render with.
type FreezeInput struct {
	// Release is .Release: an install renders revision 1 with IsInstall,
	// an upgrade the last revision + 1 with IsUpgrade, in the namespace of
	// the release it upgrades.
	Release chartutil.ReleaseOptions
	// Capabilities are the cluster's (action.Configuration.Capabilities,
	// which the action must then use too); nil takes Helm's defaults.
	Capabilities *chartutil.Capabilities
	// RESTConfig, when set, lets `lookup` read the cluster as this config
	// may (as an install does); nil finds nothing (as `helm template`).
	// Only its address, TLS settings, bearer token and impersonation are
	// passed on: a config with another way to authenticate or a wrapped
	// transport is refused (pass the guard as Lookup instead).
	RESTConfig *rest.Config
	// Lookup, when set, guards what lookups may read (with RESTConfig).
	Lookup *LookupGuard
	// InstallCRDs adds to Capabilities what the crds/ of the chart (and of
	// the subcharts vals enable) add once created, as Helm's install
	// action creates them before it renders.
	InstallCRDs bool
	// Owner, when set, is whose render this is (a release): renders share
	// the children that run them fairly among owners (see lanes.go).
	Owner string
	// Slow, when set, is called when the render goes to the slow lane.
	Slow func()
}

// limitError is a render that went over a limit (its message names the
// chart and the limit).
type limitError struct {
	error
	kind limitKind
}

type limitKind int

const (
	limitTime limitKind = iota
	limitMemory
	limitOutput
)

// chartError is Helm's own error of a render (a template that failed, a
// value the schema refuses, a kubeVersion the cluster is not, a lookup
// that failed), as the child reported it.
type chartError struct{ error }

// Refused reports whether err is a render's verdict on its inputs (the
// chart, values, release and capabilities): over a limit, or refused by
// Helm. Rendering the same inputs again gives the same verdict, but for
// lookups, which read the cluster. Other errors (the caller's context, the
// child that could not run) say nothing of the inputs.
func Refused(err error) bool {
	var over limitError
	var ce chartError
	return errors.As(err, &over) || errors.As(err, &ce)
}

// Freeze renders ch's templates with vals in a child process within limits
// and returns a copy of ch whose templates are the text they rendered to
// (partials emptied, templates of subcharts that vals disable emptied);
// ch is not changed. Installing the copy with the same vals and input
// installs what installing ch would have. Errors name the chart and the
// limit a render went over, or are Helm's own, as its action returns them.
func Freeze(ctx context.Context, ch *chart.Chart, vals map[string]any, in FreezeInput, limits SandboxLimits) (*chart.Chart, error) {
	f, _, err := freeze(ctx, ch, vals, in, limits)
	return f, err
}

// freeze is Freeze, also returning the capabilities the child rendered
// with.
func freeze(ctx context.Context, ch *chart.Chart, vals map[string]any, in FreezeInput, limits SandboxLimits) (*chart.Chart, *chartutil.Capabilities, error) {
	resp, err := renderSandboxed(ctx, ch, vals, in, limits.OrDefault())
	if err != nil {
		return nil, nil, err
	}
	return frozen(ch, resp.Files), resp.Capabilities, nil
}

// sandboxEnv, set to sandboxEnvValue, makes a binary that links this
// package the child: it renders the request on stdin and exits.
const (
	sandboxEnv      = "RUKPAK_HELM_RENDER_SANDBOX"
	sandboxEnvValue = "child-v1"
)

// init runs the child before main (and before a test binary's TestMain),
// so the provisioner, rukpakctl and every test binary linking this package
// can render in a child of themselves, with no other binary to ship.
func init() {
	if os.Getenv(sandboxEnv) == sandboxEnvValue {
		os.Exit(sandboxChild(os.Stdin, os.Stdout))
	}
}

type sandboxRequest struct {
	Files        map[string][]byte        `json:"files"`
	Values       map[string]any           `json:"values"`
	Release      chartutil.ReleaseOptions `json:"release"`
	Capabilities *chartutil.Capabilities  `json:"capabilities,omitempty"`
	REST         *sandboxREST             `json:"rest,omitempty"`
	Lookup       *LookupGuard             `json:"lookup,omitempty"`
	InstallCRDs  bool                     `json:"installCRDs,omitempty"`
	Memory       int64                    `json:"memory"`
	Limits       Limits                   `json:"limits"`
}

type sandboxREST struct {
	Host, APIPath   string
	BearerToken     string
	BearerTokenFile string
	TLS             rest.TLSClientConfig
	Impersonate     rest.ImpersonationConfig
}

type sandboxResponse struct {
	Files        map[string]string       `json:"files,omitempty"`
	Capabilities *chartutil.Capabilities `json:"capabilities,omitempty"`
	Error        string                  `json:"error,omitempty"`
}

// child is a started child process waiting for its request on stdin.
type child struct {
	cmd            *exec.Cmd
	stdin          io.WriteCloser
	stdout, stderr *capped
	done           chan struct{}
	err            error // cmd.Wait's, once done is closed
}

// startChild starts the running binary again as the child.
func startChild() (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the running binary: %w", err)
	}
	cmd := exec.Command(self)
	cmd.Env = []string{sandboxEnv + "=" + sandboxEnvValue, "GOMAXPROCS=1"}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("starting a child process: %w", err)
	}
	c := &child{cmd: cmd, stdin: stdin, stdout: &capped{max: 1 << 20}, stderr: &capped{max: 4 << 10, tail: true}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = c.stdout, c.stderr
	// The child dies with its parent.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting a child process: %w", err)
	}
	go func() { c.err = cmd.Wait(); close(c.done) }()
	return c, nil
}

// run sends the child its request and waits for it to exit, killing it
// when ctx is done first.
func (c *child) run(ctx context.Context, body []byte) error {
	go func() {
		// A child that exits before reading it all fails the write.
		_, _ = c.stdin.Write(body)
		_ = c.stdin.Close()
	}()
	select {
	case <-c.done:
	case <-ctx.Done():
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	return c.err
}

// A child's start (the binary executed again, every package of it
// initialised) costs ~50 ms on an idle machine and several times that
// under load, more than rendering most charts does (BenchmarkFreeze;
// issue 14). Warm starts one before a render is needed (a
// helm-class BundleDeployment waits for its Bundle to unpack): it waits,
// with no request and no limit applied yet, for the next render, which
// sends it its request instead of starting a child of its own; from there
// on it is that render's child, as bounded as one started for it. At most
// one waits; it is stopped after warmIdle unused.
var warm struct {
	sync.Mutex
	child *child
}

// warmIdle is how long a warm child waits for a render.
var warmIdle = 10 * time.Second

// Warm starts a child for the next render, unless one is waiting already.
// A child that fails to start is not reported: the render starts its own,
// and reports that.
func Warm() {
	warm.Lock()
	defer warm.Unlock()
	if warm.child != nil {
		return
	}
	c, err := startChild()
	if err != nil {
		return
	}
	warm.child = c
	time.AfterFunc(warmIdle, func() {
		warm.Lock()
		unused := warm.child == c
		if unused {
			warm.child = nil
		}
		warm.Unlock()
		if unused {
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	})
}

// takeWarm returns the warm child, if one waits and is still running.
func takeWarm() *child {
	warm.Lock()
	c := warm.child
	warm.child = nil
	warm.Unlock()
	if c == nil {
		return nil
	}
	select {
	case <-c.done:
		// It stopped (killed by someone else): not one to send a
		// request to.
		return nil
	default:
		return c
	}
}

// sandboxExitNoMemory is the child's exit code when its address space ran
// out where Go reports it as an error rather than a fatal runtime error.
const sandboxExitNoMemory = 3

func renderSandboxed(ctx context.Context, ch *chart.Chart, vals map[string]any, in FreezeInput, limits SandboxLimits) (*sandboxResponse, error) {
	// The chart loaded in this process; the child loads it within the
	// same bounds (the YAML ones may come from the provisioner's flags).
	load := DefaultLimits
	load.YAML = plain.DefaultLimits
	req := sandboxRequest{Values: vals, Release: in.Release, Capabilities: in.Capabilities, Lookup: in.Lookup, InstallCRDs: in.InstallCRDs, Memory: limits.Memory, Limits: load}
	req.Files = map[string][]byte{}
	for _, f := range ch.Raw {
		req.Files[path.Join(ChartDir, f.Name)] = f.Data
	}
	if c := in.RESTConfig; c != nil {
		if c.ExecProvider != nil || c.AuthProvider != nil || c.Transport != nil || c.WrapTransport != nil || c.Dial != nil || c.Username != "" {
			return nil, errors.New("rendering in a child process: the cluster's REST config authenticates in a way the child cannot be given (only bearer tokens and client certificates are)")
		}
		req.REST = &sandboxREST{Host: c.Host, APIPath: c.APIPath, BearerToken: c.BearerToken, BearerTokenFile: c.BearerTokenFile, TLS: c.TLSClientConfig, Impersonate: c.Impersonate}
	}
	l := renderLanes
	if in.Owner == "" {
		// Nobody to be fair to: a child of the fast lane, with the
		// render's own limits.
		return runSandboxed(ctx, ch, &req, fastLane, "", limits)
	}
	if !l.isSlow(in.Owner) {
		cfg := l.config()
		fast := limits
		fast.Timeout = min(limits.Timeout, cfg.FastTimeout)
		fast.Memory = min(limits.Memory, cfg.FastMemory)
		resp, err := runSandboxed(ctx, ch, &req, fastLane, in.Owner, fast)
		var over limitError
		if !errors.As(err, &over) || over.kind == limitOutput || fast == limits {
			return resp, err
		}
		// Over the fast lane's time or memory: again in the slow lane,
		// within the render's own limits.
		l.markSlow(in.Owner)
	}
	if in.Slow != nil {
		in.Slow()
	}
	start := time.Now()
	resp, err := runSandboxed(ctx, ch, &req, slowLane, in.Owner, limits)
	var over limitError
	if ctx.Err() == nil {
		l.slowDone(in.Owner, time.Since(start), errors.As(err, &over) && over.kind == limitTime)
	}
	return resp, err
}

// runSandboxed renders req in a child of lane ln within limits.
func runSandboxed(ctx context.Context, ch *chart.Chart, req *sandboxRequest, ln lane, owner string, limits SandboxLimits) (*sandboxResponse, error) {
	req.Memory = limits.Memory
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("rendering chart %q: encoding the request: %w", ch.Name(), err)
	}
	// At most a few children at once: each may map limits.Memory.
	release, err := renderLanes.acquire(ctx, ln, owner)
	if err != nil {
		return nil, fmt.Errorf("rendering chart %q: %w", ch.Name(), err)
	}
	defer release()
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, limits.Timeout)
	defer cancel()
	c := takeWarm()
	if c == nil {
		if c, err = startChild(); err != nil {
			return nil, fmt.Errorf("rendering chart %q: %w", ch.Name(), err)
		}
	}
	if ln == slowLane {
		nice(c)
	}
	stdout, stderr := c.stdout, c.stderr
	stdout.limit(limits.Output*2 + 1<<20)
	runErr := c.run(ctx, body)
	switch {
	case parent.Err() != nil:
		return nil, fmt.Errorf("rendering chart %q: %w", ch.Name(), parent.Err())
	case ctx.Err() != nil:
		return nil, limitError{fmt.Errorf("rendering chart %q did not finish within the time limit of %s", ch.Name(), limits.Timeout), limitTime}
	case stdout.over:
		return nil, limitError{fmt.Errorf("rendering chart %q: the rendered templates exceed the limit of %d bytes", ch.Name(), limits.Output), limitOutput}
	case runErr != nil && (outOfMemory(stderr.String()) || exitCode(runErr) == sandboxExitNoMemory):
		return nil, limitError{fmt.Errorf("rendering chart %q exceeded the memory limit of %d MiB", ch.Name(), limits.Memory>>20), limitMemory}
	case runErr != nil:
		return nil, fmt.Errorf("rendering chart %q in a child process: %w: %s", ch.Name(), runErr, oneLine(stderr.String()))
	}
	var resp sandboxResponse
	if err := json.Unmarshal(stdout.Bytes(), &resp); err != nil {
		return nil, fmt.Errorf("rendering chart %q: reading the child's answer: %w", ch.Name(), err)
	}
	if resp.Error != "" {
		// Helm's own message, as its action would return it.
		return nil, chartError{errors.New(resp.Error)}
	}
	var n int64
	for _, s := range resp.Files {
		n += int64(len(s))
	}
	if n > limits.Output {
		return nil, limitError{fmt.Errorf("rendering chart %q: the rendered templates exceed the limit of %d bytes", ch.Name(), limits.Output), limitOutput}
	}
	return &resp, nil
}

// sandboxChild is the child: it caps its address space, loads the chart
// as LoadChart does and renders it as Helm's install action does
// (dependencies processed, values coalesced and checked against the
// schema, the engine run with lookups when given a cluster).
func sandboxChild(stdin io.Reader, stdout io.Writer) int {
	var req sandboxRequest
	if err := json.NewDecoder(stdin).Decode(&req); err != nil {
		fmt.Fprintf(os.Stderr, "decoding the request: %v\n", err)
		return 1
	}
	if err := capAddressSpace(req.Memory); err != nil {
		fmt.Fprintf(os.Stderr, "capping memory: %v\n", err)
		return 1
	}
	// Collect garbage harder before the cap is reached.
	debug.SetMemoryLimit(req.Memory / 2)
	files, caps, err := sandboxRender(&req)
	resp := sandboxResponse{Files: files, Capabilities: caps}
	if err != nil {
		if errors.Is(err, syscall.ENOMEM) {
			return sandboxExitNoMemory
		}
		resp = sandboxResponse{Error: err.Error()}
	}
	req = sandboxRequest{} // garbage before encoding the answer
	if err := json.NewEncoder(stdout).Encode(resp); err != nil {
		fmt.Fprintf(os.Stderr, "writing the answer: %v\n", err)
		return 1
	}
	return 0
}

func sandboxRender(req *sandboxRequest) (map[string]string, *chartutil.Capabilities, error) {
	fsys := make(fstest.MapFS, len(req.Files))
	for name, data := range req.Files {
		fsys[name] = &fstest.MapFile{Data: data, Mode: 0o644}
	}
	ch, err := LoadChartLimited(fsys, req.Limits)
	if err != nil {
		return nil, nil, err
	}
	if req.Values == nil {
		req.Values = map[string]any{}
	}
	if err := chartutil.ProcessDependenciesWithMerge(ch, req.Values); err != nil {
		return nil, nil, err
	}
	caps := req.Capabilities
	if caps == nil {
		caps = chartutil.DefaultCapabilities.Copy()
	}
	if req.InstallCRDs {
		// The enabled charts' crds/, as action.Install creates them.
		if caps, err = withCRDs(caps, ch.CRDObjects()); err != nil {
			return nil, nil, err
		}
	}
	// Helm's renderResources checks this before rendering.
	if v := ch.Metadata.KubeVersion; v != "" && !chartutil.IsCompatibleRange(v, caps.KubeVersion.String()) {
		return nil, nil, fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", v, caps.KubeVersion.String())
	}
	// Values coalesced as Helm's action does, then checked against the
	// schemas here, with $refs to the chart's own files only
	// (validateValues), never by Helm's loaders.
	top, err := chartutil.ToRenderValuesWithSchemaValidation(ch, req.Values, req.Release, caps, true)
	if err != nil {
		return nil, nil, err
	}
	if err := validateValues(ch, top["Values"].(chartutil.Values)); err != nil {
		return nil, nil, err
	}
	if r := req.REST; r != nil {
		cfg := &rest.Config{Host: r.Host, APIPath: r.APIPath, BearerToken: r.BearerToken, BearerTokenFile: r.BearerTokenFile, TLSClientConfig: r.TLS, Impersonate: r.Impersonate}
		if req.Lookup != nil {
			cfg.Wrap(req.Lookup.Wrap)
		}
		files, err := engine.New(cfg).Render(ch, top)
		return files, caps, err
	}
	var e engine.Engine
	files, err := e.Render(ch, top)
	return files, caps, err
}

// capAddressSpace lets the process map at most extra bytes more than it
// has mapped now; the Go runtime then fails (fatally, "out of memory")
// where an allocation would go over.
func capAddressSpace(extra int64) error {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return fmt.Errorf("reading the address space size: %w", err)
	}
	var kib int64
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmSize:"); ok {
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kib); err != nil {
				return fmt.Errorf("parsing VmSize %q: %w", v, err)
			}
		}
	}
	if kib == 0 {
		return errors.New("no VmSize in /proc/self/status")
	}
	limit := uint64(kib<<10 + extra)
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: limit, Max: limit}); err != nil {
		return fmt.Errorf("setting RLIMIT_AS: %w", err)
	}
	return nil
}

func outOfMemory(stderr string) bool {
	for _, s := range []string{"out of memory", "cannot allocate memory", "failed to create new OS thread"} {
		if strings.Contains(stderr, s) {
			return true
		}
	}
	return false
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// frozen copies ch (and its subcharts) with every template replaced by a
// template that prints what it rendered to.
func frozen(ch *chart.Chart, files map[string]string) *chart.Chart {
	cp := *ch
	if ch.Metadata != nil && ch.Metadata.Dependencies != nil {
		// Helm's actions rewrite the dependencies listed in the metadata
		// (disabled ones removed, aliases resolved): each copy its own.
		md := *ch.Metadata
		md.Dependencies = make([]*chart.Dependency, 0, len(ch.Metadata.Dependencies))
		for _, d := range ch.Metadata.Dependencies {
			if d != nil {
				dc := *d
				d = &dc
			}
			md.Dependencies = append(md.Dependencies, d)
		}
		cp.Metadata = &md
	}
	// The child validated the values against the schema (validateValues);
	// Helm's actions would again, in this process, following any $ref.
	cp.Schema = nil
	cp.Templates = make([]*chart.File, 0, len(ch.Templates))
	for _, t := range ch.Templates {
		text := ""
		if !strings.HasPrefix(path.Base(t.Name), "_") {
			text = files[path.Join(ch.ChartFullPath(), t.Name)]
		}
		cp.Templates = append(cp.Templates, &chart.File{Name: t.Name, Data: []byte(literal(text))})
	}
	deps := make([]*chart.Chart, 0, len(ch.Dependencies()))
	for _, d := range ch.Dependencies() {
		deps = append(deps, frozen(d, files))
	}
	cp.SetDependencies(deps...)
	return &cp
}

// literal is a Go template printing s as it is: raw string actions, with
// the backquotes a raw string cannot hold printed by interpreted ones.
func literal(s string) string {
	if s == "" {
		return ""
	}
	return "{{`" + strings.ReplaceAll(s, "`", "`}}{{\"`\"}}{{`") + "`}}"
}

// capped is a writer that keeps at most max bytes: the first ones, or with
// tail the last ones; over says whether more were written. Read it once
// its writer is done.
type capped struct {
	bytes.Buffer
	mu   sync.Mutex
	max  int64
	tail bool
	over bool
}

// limit sets max before anything is written: a warm child's bound is its
// render's.
func (c *capped) limit(max int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.max = max
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	if room := c.max - int64(c.Len()); int64(len(p)) > room {
		c.over = true
		if !c.tail {
			if room > 0 {
				c.Buffer.Write(p[:room])
			}
			return n, nil
		}
		keep := append(c.Bytes(), p...)
		if int64(len(keep)) > c.max {
			keep = keep[int64(len(keep))-c.max:]
		}
		c.Reset()
		c.Buffer.Write(keep)
		return n, nil
	}
	c.Buffer.Write(p)
	return n, nil
}
