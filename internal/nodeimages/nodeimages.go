// Package nodeimages builds, offline and without Docker, the container
// images the real-node test cluster runs: a pause (sandbox) image and small
// test operator images whose Go sources live under test/images/. Each image
// is one static binary on a scratch base assembled in code (passwd, group,
// /tmp), written as a docker-archive tarball that
// `ctr -n k8s.io images import` (and `docker load`, `kind load
// image-archive`) accept.
//
// The output is reproducible: binaries are built with -trimpath and no VCS
// stamp (their Go build ID derives from their inputs), and every timestamp
// is Options.Created.
package nodeimages

import (
	"context"
	"crypto/sha256"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/rukpak-dev/rukpak/internal/scratchimage"
)

// Registry is the (never contacted) registry host of every test image. It
// has a dot so containerd keeps it as the domain instead of docker.io.
const Registry = "rukpak.test"

// Tag of every test image. Not "latest", so kubelet's default pull policy
// is IfNotPresent and the imported image is used.
const Tag = "v1"

// Spec describes one image: a Go main package run as the entrypoint.
type Spec struct {
	// Name is the image's repository name under Registry and the binary's
	// path in the image (/<Name>).
	Name string
	// Package is the Go import path of the main package.
	Package string
	// UID and GID the image runs as (never 0).
	UID, GID int
	// Env and ExposedPorts (e.g. "8080/tcp") of the image config.
	Env          []string
	ExposedPorts []string
	// Module, when set, is the directory (relative to this module's root)
	// of a module of ours that pins Package's third-party module at the
	// version a chart runs: its dependencies are that module's own and
	// cannot join our go.mod. Empty: Package is in this module.
	Module string
	// LDFlags are extra linker flags, e.g. -X for the version a program
	// reports.
	LDFlags []string
}

// Ref is the image reference the tarball is tagged with, e.g.
// rukpak.test/pause:v1.
func (s Spec) Ref() string { return Registry + "/" + s.Name + ":" + Tag }

const modulePath = "github.com/rukpak-dev/rukpak"

// Pause is the sandbox image: containerd's sandbox_image must name
// Pause.Ref(). It runs as 65535, like the upstream pause image.
var Pause = Spec{Name: "pause", Package: modulePath + "/test/images/pause", UID: 65535, GID: 65535}

// Ready is a Deployment-style HTTP server that becomes Ready: /readyz
// answers 200 once $READY_AFTER (default 0) has passed, 503 before or after
// a POST /unready; /healthz always answers 200. It listens on $PORT (8080).
var Ready = Spec{Name: "ready", Package: modulePath + "/test/images/ready", UID: 65532, GID: 65532, Env: []string{"PORT=8080"}, ExposedPorts: []string{"8080/tcp"}}

// CrashLoop exits with $EXIT_CODE (1) after $CRASH_AFTER (1s), writing the
// reason to /dev/termination-log, so its pods go to CrashLoopBackOff.
var CrashLoop = Spec{Name: "crashloop", Package: modulePath + "/test/images/crashloop", UID: 65532, GID: 65532}

// Webhook serves a mutating and a validating admission webhook (/mutate,
// /validate) and a CRD conversion webhook (/convert) over TLS on $PORT
// (9443) with the certificate in /tmp/k8s-webhook-server/serving-certs
// (tls.crt, tls.key; re-read when they change), and plain-HTTP probes
// /healthz, /readyz on $HEALTH_PORT (8081); on $PORT it also serves the
// discovery of any aggregated API (GET /apis/{group}/{version}, one
// resource: widgets). See test/images/webhook.
var Webhook = Spec{Name: "webhook", Package: modulePath + "/test/images/webhook", UID: 65532, GID: 65532, Env: []string{"PORT=9443", "HEALTH_PORT=8081"}, ExposedPorts: []string{"9443/tcp", "8081/tcp"}}

// Hello is Ready serving on port 80 (/ answers 200), for charts whose
// Deployment probes / on port 80 with a fixed containerPort, as the
// hello-world chart does with nginx. A non-root process binds port 80
// because the node's containerd opens unprivileged ports to pods.
var Hello = Spec{Name: "hello", Package: modulePath + "/test/images/ready", UID: 65532, GID: 65532, Env: []string{"PORT=80"}, ExposedPorts: []string{"80/tcp"}}

// Certgen implements kube-webhook-certgen's create and patch commands,
// which charts' hook Jobs run to give their admission webhooks a
// certificate (see test/images/certgen for why it is not upstream's).
var Certgen = Spec{Name: "certgen", Package: modulePath + "/test/images/certgen", UID: 65532, GID: 65532}

// AdmissionWebhook is prometheus-operator's own admission webhook, the
// image quay.io/prometheus-operator/admission-webhook runs, built from
// the version hack/admissionwebhook pins (the chart's appVersion).
var AdmissionWebhook = Spec{
	Name: "admission-webhook", Package: "github.com/prometheus-operator/prometheus-operator/cmd/admission-webhook",
	UID: 65534, GID: 65534, ExposedPorts: []string{"8443/tcp"},
	Module:  "hack/admissionwebhook",
	LDFlags: []string{"-X github.com/prometheus/common/version.Version=0.93.1"},
}

// KubeStateMetrics is kube-state-metrics itself, the image
// registry.k8s.io/kube-state-metrics/kube-state-metrics runs, built from
// the version hack/kubestatemetrics pins (the chart's appVersion).
var KubeStateMetrics = Spec{
	Name: "kube-state-metrics", Package: "k8s.io/kube-state-metrics/v2",
	UID: 65534, GID: 65534, ExposedPorts: []string{"8080/tcp", "8081/tcp"},
	Module:  "hack/kubestatemetrics",
	LDFlags: []string{"-X github.com/prometheus/common/version.Version=v2.20.0"},
}

// All are the images BuildAll writes.
var All = []Spec{Pause, Ready, CrashLoop, Webhook, Hello, Certgen, AdmissionWebhook, KubeStateMetrics}

// Options apply to every build.
type Options struct {
	// Dir is the directory `go build` runs in; it must be inside this
	// module (default: the working directory).
	Dir string
	// Arch of the binaries and the image; default runtime.GOARCH. The OS is
	// always linux.
	Arch string
	// Created is the image's creation time and every file's mtime (default
	// the Unix epoch).
	Created time.Time
	// CacheDir keeps the binaries, so that a warm build links nothing:
	// those of third-party programs (Spec.Module) keyed by everything they
	// are built from (their module's go.mod and go.sum, the package, linker
	// flags, architecture and Go version; their link alone costs seconds),
	// ours one file per package, linker flags and architecture, which `go
	// build` relinks only when its own build ID says an input changed.
	// Default: rukpak-nodeimages in the user's cache directory; "-" turns
	// the cache off.
	CacheDir string
	// BuildThirdParty lets a build compile the third-party programs
	// (Spec.Module) missing from the cache; they take minutes on a cold
	// build cache. Without it, a missing one is an error naming the command
	// that builds it (make test-deps): tests never build them, so the
	// build never counts against a test's timeout.
	BuildThirdParty bool
}

// cacheDir is where binaries are kept, or "" for nowhere.
func (o Options) cacheDir() string {
	switch o.CacheDir {
	case "-":
		return ""
	case "":
		d, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		return filepath.Join(d, "rukpak-nodeimages")
	}
	return o.CacheDir
}

func (o Options) arch() string {
	if o.Arch == "" {
		return runtime.GOARCH
	}
	return o.Arch
}

// Binary compiles spec's package into a static linux binary and returns
// its bytes.
func Binary(ctx context.Context, spec Spec, o Options) ([]byte, error) {
	bins, err := Binaries(ctx, []Spec{spec}, o)
	if err != nil {
		return nil, err
	}
	return bins[0], nil
}

// Binaries compiles the packages of specs into static linux binaries and
// returns their bytes, in the order of specs: ours with one `go build` per
// set of linker flags (a warm build is one go command hashing the inputs),
// third-party ones from the cache or one build each.
func Binaries(ctx context.Context, specs []Spec, o Options) ([][]byte, error) {
	bins := make([][]byte, len(specs))
	ours := map[string][]int{} // linker flags -> indexes in specs
	var flags []string
	for i, spec := range specs {
		if spec.Module != "" {
			b, err := thirdParty(ctx, spec, o)
			if err != nil {
				return nil, err
			}
			bins[i] = b
			continue
		}
		ld := strings.Join(append([]string{"-s", "-w"}, spec.LDFlags...), " ")
		if _, ok := ours[ld]; !ok {
			flags = append(flags, ld)
		}
		ours[ld] = append(ours[ld], i)
	}
	for _, ld := range flags {
		var pkgs []string
		for _, i := range ours[ld] {
			pkgs = append(pkgs, specs[i].Package)
		}
		got, err := o.buildOurs(ctx, pkgs, ld)
		if err != nil {
			return nil, err
		}
		for _, i := range ours[ld] {
			bins[i] = got[specs[i].Package]
		}
	}
	return bins, nil
}

// buildOurs builds packages of this module with one `go build` and returns
// each binary by package. With a cache, the outputs stay in a directory of
// it keyed by the linker flags and architecture, where `go build` relinks
// only what its build ID says changed; a lock keeps parallel builds (test
// processes, the e2e suite) from writing there at once.
func (o Options) buildOurs(ctx context.Context, pkgs []string, ldflags string) (map[string][]byte, error) {
	var dir string
	if cdir := o.cacheDir(); cdir != "" {
		sum := sha256.Sum256([]byte(ldflags))
		dir = filepath.Join(cdir, "bin", fmt.Sprintf("%s-%x", o.arch(), sum[:6]))
		unlock, err := lockFile(dir + ".lock")
		if err != nil {
			return nil, err
		}
		defer unlock()
	} else {
		tmp, err := os.MkdirTemp("", "nodeimages-")
		if err != nil {
			return nil, err
		}
		defer func() { _ = os.RemoveAll(tmp) }()
		dir = tmp
	}
	byBase := map[string]string{}
	var unique []string
	for _, p := range pkgs {
		b := path.Base(p)
		if other, ok := byBase[b]; ok && other != p {
			return nil, fmt.Errorf("packages %s and %s would both build %s", other, p, b)
		} else if !ok {
			byBase[b] = p
			unique = append(unique, p)
		}
	}
	for _, p := range unique {
		// go build refuses to write over what is no object file.
		out := filepath.Join(dir, path.Base(p))
		if f, err := elf.Open(out); err == nil {
			_ = f.Close()
		} else if !errors.Is(err, os.ErrNotExist) {
			if err := os.Remove(out); err != nil {
				return nil, err
			}
		}
	}
	args := append([]string{"build", "-trimpath", "-buildvcs=false", "-ldflags=" + ldflags, "-o", dir + string(filepath.Separator)}, unique...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = o.Dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+o.arch())
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build %s: %w\n%s", strings.Join(unique, " "), err, b)
	}
	out := map[string][]byte{}
	for _, p := range unique {
		data, err := os.ReadFile(filepath.Join(dir, path.Base(p)))
		if err != nil {
			return nil, err
		}
		if err := scratchimage.CheckStatic(data); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out[p] = data
	}
	return out, nil
}

// thirdParty builds the binary of a third-party program (spec.Module set)
// in its own module, or returns it from the cache, where it is keyed by
// its inputs (no build ID in it, so no two builds differ).
func thirdParty(ctx context.Context, spec Spec, o Options) ([]byte, error) {
	ldflags := strings.Join(append([]string{"-s", "-w", "-buildid="}, spec.LDFlags...), " ")
	root, err := moduleRoot(ctx, o.Dir)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(root, spec.Module)
	cached, err := o.cachePath(ctx, spec, dir, ldflags)
	if err != nil {
		return nil, err
	}
	if cached != "" {
		if data, err := os.ReadFile(cached); err == nil && scratchimage.CheckStatic(data) == nil {
			return data, nil
		}
	}
	if !o.BuildThirdParty {
		return nil, fmt.Errorf("image %s: its binary (%s) is not built; build what the tests need with 'make test-deps' (or: go run ./test/images/build --binaries-only)", spec.Name, spec.Package)
	}
	tmp, err := os.MkdirTemp("", "nodeimages-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	out := filepath.Join(tmp, spec.Name)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags="+ldflags, "-o", out, spec.Package)
	cmd.Dir = dir
	// A workspace would mix our module's requirements into theirs.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+o.arch(), "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build %s: %w\n%s", spec.Package, err, b)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		return nil, err
	}
	if err := scratchimage.CheckStatic(data); err != nil {
		return nil, fmt.Errorf("%s: %w", spec.Package, err)
	}
	if cached != "" {
		// Best effort: a cache that cannot be written only costs time.
		_ = writeAtomic(cached, data)
	}
	return data, nil
}

// lockFile takes an exclusive lock on path (created, with its directory)
// and returns its release.
func lockFile(path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	// Closing the file releases the lock.
	return func() { _ = f.Close() }, nil
}

// cachePath is the cache file of a third-party binary ("" without a
// cache): its name digests what the binary is built from.
func (o Options) cachePath(ctx context.Context, spec Spec, moduleDir, ldflags string) (string, error) {
	dir := o.cacheDir()
	if dir == "" {
		return "", nil
	}
	cmd := exec.CommandContext(ctx, "go", "env", "GOVERSION")
	goVersion, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go env GOVERSION: %w", err)
	}
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(moduleDir, f))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", f, len(b))
		h.Write(b)
	}
	fmt.Fprintf(h, "%s\n%s\n%s\n%s", spec.Package, ldflags, o.arch(), goVersion)
	return filepath.Join(dir, fmt.Sprintf("%s-%x", spec.Name, h.Sum(nil)[:12])), nil
}

// writeAtomic writes data to path through a temporary file, so parallel
// builds never read a partial binary.
func writeAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), path)
}

// moduleRoot is the root directory of this module, as seen from dir (the
// working directory when empty).
func moduleRoot(ctx context.Context, dir string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "env", "GOMOD")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("building a third-party image needs the %s module: %q is outside it", modulePath, dir)
	}
	return filepath.Dir(gomod), nil
}

// Build compiles spec's binary and assembles its image.
func Build(ctx context.Context, spec Spec, o Options) (v1.Image, error) {
	bin, err := Binary(ctx, spec, o)
	if err != nil {
		return nil, err
	}
	return Assemble(spec, bin, o)
}

// Assemble builds spec's image around an already built binary. Its layer
// is uncompressed, as `docker save` writes layers: gzip would cost more CPU
// than the tarballs' size ever does (they are imported from the local
// disk), on writing and again on every import.
func Assemble(spec Spec, bin []byte, o Options) (v1.Image, error) {
	if spec.UID == 0 || spec.GID == 0 {
		return nil, fmt.Errorf("image %s: must not run as root", spec.Name)
	}
	user := "nonroot"
	if spec.UID == 65535 {
		user = "pause"
	}
	// Upstream images of third-party programs run as nobody, already there.
	files := append(scratchimage.Accounts(user, spec.UID, spec.GID, "/tmp"),
		scratchimage.File{Name: "tmp", Dir: true, Mode: 0o1777},
		scratchimage.File{Name: spec.Name, Mode: 0o755, Data: bin},
	)
	cfg := v1.Config{
		Entrypoint: []string{"/" + spec.Name},
		User:       fmt.Sprintf("%d:%d", spec.UID, spec.GID),
		WorkingDir: "/",
		Env:        append([]string{"PATH=/"}, spec.Env...),
		Labels: map[string]string{
			"org.opencontainers.image.title":  "rukpak-test-" + spec.Name,
			"org.opencontainers.image.source": "https://" + modulePath,
		},
	}
	if len(spec.ExposedPorts) > 0 {
		cfg.ExposedPorts = map[string]struct{}{}
		for _, p := range spec.ExposedPorts {
			cfg.ExposedPorts[p] = struct{}{}
		}
	}
	return scratchimage.Build(scratchimage.Spec{
		Files:   files,
		Created: o.Created,
		OS:      "linux",
		Arch:    o.arch(),
		History: v1.History{
			CreatedBy: "internal/nodeimages: /" + spec.Name + " from " + spec.Package,
			Comment:   "rukpak test image",
		},
		Config: cfg,
	})
}

// WriteTarball writes img as a docker-archive tarball tagged ref, the
// format `ctr -n k8s.io images import FILE` imports.
func WriteTarball(path, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return tarball.WriteToFile(path, tag, img)
}

// Tarball is one written image.
type Tarball struct {
	Spec Spec
	Path string
	// ID is the config digest: the image ID containerd and crictl show
	// after the import (the manifest digest changes when containerd
	// converts the docker archive).
	ID v1.Hash
}

// BuildTarball builds spec and writes it to dir/<Name>.tar.
func BuildTarball(ctx context.Context, spec Spec, dir string, o Options) (Tarball, error) {
	bin, err := Binary(ctx, spec, o)
	if err != nil {
		return Tarball{}, err
	}
	return writeImage(spec, bin, dir, o)
}

// writeImage assembles spec's image around bin and writes it to
// dir/<Name>.tar.
func writeImage(spec Spec, bin []byte, dir string, o Options) (Tarball, error) {
	img, err := Assemble(spec, bin, o)
	if err != nil {
		return Tarball{}, err
	}
	id, err := img.ConfigName()
	if err != nil {
		return Tarball{}, err
	}
	p := filepath.Join(dir, spec.Name+".tar")
	if err := WriteTarball(p, spec.Ref(), img); err != nil {
		return Tarball{}, err
	}
	return Tarball{Spec: spec, Path: p, ID: id}, nil
}

// BuildAll writes every image of specs (All when empty) into dir.
func BuildAll(ctx context.Context, dir string, o Options, specs ...Spec) ([]Tarball, error) {
	if len(specs) == 0 {
		specs = All
	}
	bins, err := Binaries(ctx, specs, o)
	if err != nil {
		return nil, err
	}
	var out []Tarball
	for i, s := range specs {
		t, err := writeImage(s, bins[i], dir, o)
		if err != nil {
			return out, err
		}
		out = append(out, t)
	}
	return out, nil
}
