package devenv

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Examples are the image registry and git server `make run` preloads with
// the example bundles the README uses. Both speak plain HTTP on loopback,
// which go-containerregistry and go-git accept for 127.0.0.1 without extra
// TLS settings, so the README's YAML works verbatim.
type Examples struct {
	RegistryAddr string
	GitAddr      string
	servers      []*http.Server
}

// Example images and repositories.
var (
	exampleImages = map[string]string{
		"combo:v0.0.2":       "test/testdata/bundles/plain/combo-v0.0.2",
		"etcd-bundle:v0.9.4": "test/testdata/bundles/registry-v1/etcd-0.9.4",
	}
)

// ServeExamples starts both servers and loads the examples.
func ServeExamples(ctx context.Context, repoRoot, stateDir, registryAddr, gitAddr string) (*Examples, error) {
	ex := &Examples{RegistryAddr: registryAddr, GitAddr: gitAddr}
	if err := ex.serve(registryAddr, registry.New(registry.Logger(nopLogger()))); err != nil {
		return nil, err
	}
	for tag, dir := range exampleImages {
		if err := pushDir(ctx, registryAddr+"/"+tag, filepath.Join(repoRoot, dir)); err != nil {
			ex.Close()
			return nil, err
		}
	}
	gitRoot := filepath.Join(stateDir, "git")
	if err := comboRepo(filepath.Join(gitRoot, "combo"), filepath.Join(repoRoot, "test/testdata/bundles/plain/combo-v0.0.2")); err != nil {
		ex.Close()
		return nil, err
	}
	if err := chartsRepo(filepath.Join(gitRoot, "charts"), filepath.Join(repoRoot, "test/testdata/charts/hello-world")); err != nil {
		ex.Close()
		return nil, err
	}
	gitPath, err := exec.LookPath("git")
	if err != nil {
		ex.Close()
		return nil, err
	}
	backend := &cgi.Handler{
		Path: gitPath,
		Args: []string{"http-backend"},
		Env:  []string{"GIT_PROJECT_ROOT=" + gitRoot, "GIT_HTTP_EXPORT_ALL=1"},
	}
	if err := ex.serve(gitAddr, backend); err != nil {
		ex.Close()
		return nil, err
	}
	return ex, nil
}

func (ex *Examples) serve(addr string, h http.Handler) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	ex.servers = append(ex.servers, srv)
	go func() { _ = srv.Serve(l) }()
	return nil
}

// Close stops both servers.
func (ex *Examples) Close() {
	for _, s := range ex.servers {
		_ = s.Close()
	}
}

// pushDir pushes an image whose single layer holds dir's files at the root.
func pushDir(ctx context.Context, ref, dir string) error {
	data, err := tarDir(dir)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	img, err = mutate.Config(img, v1.Config{Labels: map[string]string{"org.opencontainers.image.source": "rukpak examples"}})
	if err != nil {
		return err
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return err
	}
	if err := remote.Write(r, img, remote.WithContext(ctx)); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	return nil
}

func tarDir(dir string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if d.Type().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			_, err = tw.Write(data)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// comboRepo makes a repository shaped like operator-framework/combo: tag
// v0.0.2 holds the combo manifests, tag v0.0.3 the same with one more
// replica.
func comboRepo(dir, manifests string) error {
	if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	git := gitIn(dir)
	if err := git("init", "-q", "-b", "main"); err != nil {
		return err
	}
	if err := os.CopyFS(dir, os.DirFS(manifests)); err != nil {
		return err
	}
	if err := git("add", "-A"); err != nil {
		return err
	}
	if err := git("commit", "-q", "-m", "combo v0.0.2"); err != nil {
		return err
	}
	if err := git("tag", "v0.0.2"); err != nil {
		return err
	}
	deploy := filepath.Join(dir, "manifests", "06_deployment.yaml")
	data, err := os.ReadFile(deploy)
	if err != nil {
		return err
	}
	data = bytes.Replace(data, []byte("replicas: 1"), []byte("replicas: 2"), 1)
	if err := os.WriteFile(deploy, data, 0o644); err != nil {
		return err
	}
	if err := git("commit", "-q", "-am", "combo v0.0.3"); err != nil {
		return err
	}
	if err := git("tag", "v0.0.3"); err != nil {
		return err
	}
	return git("update-server-info")
}

// chartsRepo makes a repository of Helm charts: hello-world/ holds the
// hello-world chart of helm/examples (for the helm class's git source with
// directory), on branch main.
func chartsRepo(dir, chart string) error {
	if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, "hello-world"), 0o755); err != nil {
		return err
	}
	git := gitIn(dir)
	if err := git("init", "-q", "-b", "main"); err != nil {
		return err
	}
	if err := os.CopyFS(filepath.Join(dir, "hello-world"), os.DirFS(chart)); err != nil {
		return err
	}
	if err := git("add", "-A"); err != nil {
		return err
	}
	if err := git("commit", "-q", "-m", "hello-world 0.1.0"); err != nil {
		return err
	}
	return git("update-server-info")
}

// gitIn runs git commands in dir as a fixed author, unsigned.
func gitIn(dir string) func(args ...string) error {
	return func(args ...string) error {
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=rukpak", "-c", "user.email=rukpak@example.com", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %v: %w: %s", args, err, out)
		}
		return nil
	}
}

func nopLogger() *log.Logger { return log.New(io.Discard, "", 0) }
