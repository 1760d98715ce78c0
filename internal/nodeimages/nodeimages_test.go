package nodeimages

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/rukpak-dev/rukpak/internal/scratchimage"
	"github.com/rukpak-dev/rukpak/internal/selfsigned"
)

// layerFiles reads the image's single layer.
func layerFiles(t *testing.T, img v1.Image) map[string]scratchimage.Entry {
	t.Helper()
	entries, err := scratchimage.Contents(img)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]scratchimage.Entry{}
	for _, e := range entries {
		out[e.Header.Name] = e
	}
	return out
}

// TestImages builds every image into a docker-archive tarball with
// BuildAll, as the real-node suite does, and checks what containerd and
// kubelet rely on: the tag, linux/GOARCH, a non-root user, the entrypoint,
// and a static executable at that path.
func TestImages(t *testing.T) {
	var specs []Spec
	for _, spec := range All {
		// Third-party programs come from the cache make test-deps fills
		// (TestThirdPartyNotBuilt); -short leaves them out.
		if spec.Module == "" || !testing.Short() {
			specs = append(specs, spec)
		}
	}
	tbs, err := BuildAll(context.Background(), t.TempDir(), Options{}, specs...)
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tbs {
		spec := tb.Spec
		t.Run(spec.Name, func(t *testing.T) {
			t.Parallel()
			checkManifestJSON(t, tb.Path, spec.Ref())
			tag, err := name.NewTag(spec.Ref())
			if err != nil {
				t.Fatal(err)
			}
			img, err := tarball.ImageFromPath(tb.Path, &tag)
			if err != nil {
				t.Fatal(err)
			}
			if id, err := img.ConfigName(); err != nil || id != tb.ID {
				t.Errorf("image ID read back %v (%v), built %v", id, err, tb.ID)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
				t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
			}
			want := []string{"/" + spec.Name}
			if strings.Join(cf.Config.Entrypoint, " ") != want[0] || len(cf.Config.Cmd) != 0 {
				t.Errorf("entrypoint %q cmd %q, want %q", cf.Config.Entrypoint, cf.Config.Cmd, want)
			}
			if u := cf.Config.User; u == "" || u == "0" || strings.HasPrefix(u, "0:") || strings.HasPrefix(u, "root") {
				t.Errorf("user %q: must be numeric non-root", u)
			}
			files := layerFiles(t, img)
			bin, ok := files[spec.Name]
			if !ok {
				t.Fatalf("no /%s in the layer", spec.Name)
			}
			if bin.Header.Mode != 0o755 || bin.Header.Typeflag != tar.TypeReg {
				t.Errorf("/%s: mode %o type %c", spec.Name, bin.Header.Mode, bin.Header.Typeflag)
			}
			if err := scratchimage.CheckStatic(bin.Data); err != nil {
				t.Errorf("/%s: %v", spec.Name, err)
			}
			if v, ok := versions[spec.Name]; ok {
				checkVersion(t, bin.Data, v)
			}
			for _, f := range []string{"etc/passwd", "etc/group", "tmp/"} {
				if _, ok := files[f]; !ok {
					t.Errorf("no /%s in the layer", f)
				}
			}
			if !strings.Contains(string(files["etc/passwd"].Data), ":"+strings.Split(cf.Config.User, ":")[0]+":") {
				t.Errorf("/etc/passwd has no entry for user %s", cf.Config.User)
			}
			for _, f := range files {
				if !f.Header.ModTime.Equal(time.Unix(0, 0)) {
					t.Errorf("%s: mtime %v, want the epoch", f.Header.Name, f.Header.ModTime)
				}
			}
		})
	}
}

// TestThirdPartyNotBuilt: a test never compiles a third-party program (it
// takes minutes on a cold build cache, against the test's timeout): one
// missing from the cache is an error at once that names the command that
// builds it.
func TestThirdPartyNotBuilt(t *testing.T) {
	start := time.Now()
	_, err := Binary(context.Background(), KubeStateMetrics, Options{CacheDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "kube-state-metrics") || !strings.Contains(err.Error(), "make test-deps") {
		t.Fatalf("building kube-state-metrics without BuildThirdParty into an empty cache: %v, want an error naming make test-deps", err)
	}
	t.Logf("%v (after %v)", err, time.Since(start))
}

// versions: what the third-party programs print when asked for their
// version, which says the pinned upstream program was built, with the
// version the chart expects stamped in.
var versions = map[string]struct {
	args []string
	want string
}{
	AdmissionWebhook.Name: {[]string{"--short-version"}, "0.93.1"},
	KubeStateMetrics.Name: {[]string{"version"}, "kube-state-metrics, version v2.20.0"},
}

// TestThirdPartyPins: the version a third-party image's program reports
// (its -X flag) is the one its module of ours requires.
func TestThirdPartyPins(t *testing.T) {
	for spec, require := range map[*Spec]string{
		&AdmissionWebhook: "github.com/prometheus-operator/prometheus-operator v0.93.1",
		&KubeStateMetrics: "k8s.io/kube-state-metrics/v2 v2.20.0",
	} {
		gomod, err := os.ReadFile(filepath.Join("..", "..", spec.Module, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(gomod), "\t"+require+"\n") && !strings.Contains(string(gomod), "require "+require+"\n") {
			t.Errorf("%s/go.mod does not require %s", spec.Module, require)
		}
		version := require[strings.LastIndex(require, " ")+1:]
		if !strings.HasSuffix(strings.Join(spec.LDFlags, " "), "version.Version="+strings.TrimPrefix(version, "v")) &&
			!strings.HasSuffix(strings.Join(spec.LDFlags, " "), "version.Version="+version) {
			t.Errorf("%s: LDFlags %q do not stamp %s", spec.Name, spec.LDFlags, version)
		}
		if !strings.Contains(versions[spec.Name].want, strings.TrimPrefix(version, "v")) {
			t.Errorf("%s: TestImages expects version %q, the module pins %s", spec.Name, versions[spec.Name].want, version)
		}
	}
}

// checkVersion runs the binary on this host (Linux of the same
// architecture only) and checks what it prints.
func checkVersion(t *testing.T, bin []byte, v struct {
	args []string
	want string
}) {
	t.Helper()
	if runtime.GOOS != "linux" {
		return
	}
	p := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(p, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, p, v.args...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), v.want) {
		t.Errorf("%s %s: %v, %q lacks %q", filepath.Base(p), strings.Join(v.args, " "), err, out, v.want)
	}
}

// checkManifestJSON checks the docker-archive index that ctr import reads:
// one image with the config, its layers and the full tag.
func checkManifestJSON(t *testing.T, path, ref string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatal("no manifest.json in the tarball")
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name != "manifest.json" {
			continue
		}
		var m []struct {
			Config   string
			RepoTags []string
			Layers   []string
		}
		if err := json.NewDecoder(tr).Decode(&m); err != nil {
			t.Fatal(err)
		}
		if len(m) != 1 || len(m[0].RepoTags) != 1 || m[0].RepoTags[0] != ref || m[0].Config == "" || len(m[0].Layers) != 1 {
			t.Errorf("manifest.json %+v, want one image tagged %s with one layer", m, ref)
		}
		return
	}
}

// TestReproducible: a fresh link of the pause binary, outside any cache,
// gives the image the cached build gives.
func TestReproducible(t *testing.T) {
	ctx := context.Background()
	var digests []v1.Hash
	for _, o := range []Options{{CacheDir: "-"}, {}} {
		img, err := Build(ctx, Pause, o)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d)
	}
	if digests[0] != digests[1] {
		t.Errorf("a fresh build %v, the cached one %v", digests[0], digests[1])
	}
}

// TestOwnCache: a binary of ours in the cache that go build cannot vouch
// for (here: not a binary at all) is relinked over, into the bytes a fresh
// build gives.
func TestOwnCache(t *testing.T) {
	ctx := context.Background()
	o := Options{CacheDir: t.TempDir()}
	first, err := Binary(ctx, Pause, o)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(o.CacheDir, "bin", "*", "pause"))
	if len(files) != 1 {
		t.Fatalf("cache holds %q, want one pause binary", files)
	}
	if err := os.WriteFile(files[0], []byte("not a binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	again, err := Binary(ctx, Pause, o)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, first) {
		t.Fatal("the relinked binary differs from the first build")
	}
	if cached, _ := os.ReadFile(files[0]); !bytes.Equal(cached, first) {
		t.Fatal("the corrupt cache entry was not replaced")
	}
}

// TestPauseRuns runs the pause binary on this host (Linux only): it keeps
// running, reaps nothing it should not, and exits 0 on SIGTERM.
func TestPauseRuns(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the pause binary is a linux binary; this host is " + runtime.GOOS)
	}
	bin, err := Binary(context.Background(), Pause, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "pause")
	if err := os.WriteFile(p, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(p)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		t.Fatalf("pause exited on its own: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("pause after SIGTERM: %v, want exit 0", err)
		}
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("pause still running 5s after SIGTERM")
	}
}

// hostBinary builds spec's binary for this host (Linux only).
func hostBinary(t *testing.T, spec Spec) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the image binaries are linux binaries; this host is " + runtime.GOOS)
	}
	bin, err := Binary(context.Background(), spec, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), spec.Name)
	if err := os.WriteFile(p, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCrashLoopRuns: the crashloop binary fails with its exit code and says why.
func TestCrashLoopRuns(t *testing.T) {
	cmd := exec.Command(hostBinary(t, CrashLoop))
	cmd.Env = append(os.Environ(), "CRASH_AFTER=0s", "EXIT_CODE=3")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("crashloop: %v, want exit code 3", err)
	}
	if !strings.Contains(string(out), "failing on purpose with exit code 3") {
		t.Errorf("crashloop output %q", out)
	}
}

// TestReadyRuns: the ready server answers /readyz and stops cleanly on SIGTERM.
func TestReadyRuns(t *testing.T) {
	bin := hostBinary(t, Ready)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	runUntilReady(t, cmd, fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
}

// TestWebhookRuns: the webhook server loads its certificate from CERT_DIR,
// answers /readyz and stops cleanly on SIGTERM.
func TestWebhookRuns(t *testing.T) {
	bin := hostBinary(t, Webhook)
	dir := t.TempDir()
	p, err := selfsigned.New([]string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), p.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), p.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	var ports []int
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
		_ = ln.Close()
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "CERT_DIR="+dir, fmt.Sprintf("PORT=%d", ports[0]), fmt.Sprintf("HEALTH_PORT=%d", ports[1]))
	runUntilReady(t, cmd, fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[1]))
}

// runUntilReady starts cmd, waits for url to answer 200, then sends SIGTERM
// and expects exit 0.
func runUntilReady(t *testing.T, cmd *exec.Cmd, url string) {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() { _ = cmd.Process.Kill() }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", url, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("%s after SIGTERM: %v, want exit 0", cmd.Path, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s still running 5s after SIGTERM", cmd.Path)
	}
}

// TestThirdPartyCache: a third-party binary is built once per set of
// inputs; a cached file that is no static binary is rebuilt over, into the
// same bytes (the build is reproducible), and a hit returns them. The
// program is a module of its own under testdata, built as
// kube-state-metrics is, only in a second.
func TestThirdPartyCache(t *testing.T) {
	ctx := context.Background()
	spec := Spec{Name: "thirdparty", Package: "example.com/thirdparty", UID: 65534, GID: 65534, Module: "internal/nodeimages/testdata/thirdparty"}
	// The test's own tiny module: building it is what the cache is tested on.
	o := Options{CacheDir: filepath.Join(t.TempDir(), "cache"), BuildThirdParty: true}
	first, err := Binary(ctx, spec, o)
	if err != nil {
		t.Fatal(err)
	}
	root, err := moduleRoot(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	entry, err := o.cachePath(ctx, spec, filepath.Join(root, spec.Module), "-s -w -buildid=")
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(o.CacheDir, spec.Name+"-*"))
	if len(files) != 1 || files[0] != entry {
		t.Fatalf("cache holds %q, want one binary at %s", files, entry)
	}
	if err := writeAtomic(entry, []byte("not a binary")); err != nil {
		t.Fatal(err)
	}
	again, err := Binary(ctx, spec, o)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, first) {
		t.Fatal("the rebuilt binary differs from the first build")
	}
	if cached, _ := os.ReadFile(entry); !bytes.Equal(cached, first) {
		t.Fatal("the corrupt cache entry was not replaced")
	}
	hit, err := Binary(ctx, spec, o)
	if err != nil || !bytes.Equal(hit, first) {
		t.Fatalf("a cache hit returned other bytes (%v)", err)
	}
	if runtime.GOOS == "linux" {
		if out, err := exec.CommandContext(ctx, writeExec(t, hit)).Output(); err != nil || string(out) != "thirdparty\n" {
			t.Errorf("the cached binary ran: %v, %q", err, out)
		}
	}
}

// writeExec writes bin to an executable file and returns its path.
func writeExec(t *testing.T, bin []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(p, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}
