package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/catalog/fbc"
	"github.com/rukpak-dev/rukpak/storage"
	"github.com/rukpak-dev/rukpak/unpack"
)

// catalogReaderRole is the shipped ClusterRole that may read served
// catalogs (manifests/base/rbac).
const catalogReaderRole = "catalog-reader"

// Prefixes of a catalog SOURCE argument; anything else is a directory.
const (
	clusterCatalogPrefix = "catalog/"
	imageCatalogPrefix   = "image:"
)

// maxRemoteIndexBytes bounds a served index.json: one entry per package,
// as fbc bounds reading it back.
const maxRemoteIndexBytes = 64 << 20

// catalogSourceOptions say how catalog SOURCEs are reached and bounded.
type catalogSourceOptions struct {
	content      contentOptions // catalog/NAME: the cluster and its content service
	image        imageOptions
	unpackLimits unpack.Limits
	fbcLimits    fbc.Limits
}

// openedCatalog is one SOURCE read as a stored catalog document: a local
// directory holding fbc.IndexFile (and fbc.DocumentFile, unless remote is
// set and the document has not been fetched).
type openedCatalog struct {
	name     string // as resolution and output name it
	kind     string // directory, image or Catalog
	priority int32
	index    *fbc.Index
	dir      string
	remote   *remoteDocument
}

// remoteDocument reads a catalog served by the content service.
type remoteDocument struct {
	hc    *http.Client
	base  string // <content service>/catalogs/<name>/
	token string
	full  bool // fbc.DocumentFile is in dir
}

// catalogOpener opens SOURCEs; the cluster connection and its token are
// made once, for the first catalog/NAME, and released by close.
type catalogOpener struct {
	o       catalogSourceOptions
	cluster *clusterReader
	closers []func()
}

type clusterReader struct {
	c     client.Client
	hc    *http.Client
	token string
}

func (op *catalogOpener) close() {
	for i := len(op.closers) - 1; i >= 0; i-- {
		op.closers[i]()
	}
	op.closers = nil
}

// openAll opens every source; names must differ, since results and
// errors name catalogs by them.
func (op *catalogOpener) openAll(ctx context.Context, sources []string) ([]*openedCatalog, error) {
	seen := map[string]bool{}
	var out []*openedCatalog
	for _, s := range sources {
		c, err := op.open(ctx, s)
		if err != nil {
			return nil, err
		}
		if seen[c.name] {
			return nil, fmt.Errorf("catalog %q is given twice", c.name)
		}
		seen[c.name] = true
		out = append(out, c)
	}
	return out, nil
}

// open reads one SOURCE: catalog/NAME (a Catalog on the cluster, read from
// the content service), image:REF (an FBC image), or a directory.
func (op *catalogOpener) open(ctx context.Context, source string) (*openedCatalog, error) {
	if name, ok := strings.CutPrefix(source, clusterCatalogPrefix); ok {
		return op.openCluster(ctx, name)
	}
	if ref, ok := strings.CutPrefix(source, imageCatalogPrefix); ok {
		if ref == "" {
			return nil, errors.New("image: needs an image reference, as in image:quay.io/org/catalog:tag")
		}
		fsys, cleanup, err := pullBundle(ctx, ref, op.o.image, op.o.unpackLimits)
		if err != nil {
			return nil, fmt.Errorf("pulling catalog image %s: %w", ref, err)
		}
		op.closers = append(op.closers, cleanup)
		return op.build(fsys, ref, "image")
	}
	fi, err := os.Stat(source)
	if err != nil {
		return nil, fmt.Errorf("catalog source %s: %w (a directory, image:REF or catalog/NAME)", source, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("catalog source %s is not a directory (a directory, image:REF or catalog/NAME)", source)
	}
	return op.build(os.DirFS(source), filepath.Clean(source), "directory")
}

// build validates the catalog in fsys with fbc, as the provisioner does
// for a Catalog, into a temporary stored document.
func (op *catalogOpener) build(fsys fs.FS, name, kind string) (*openedCatalog, error) {
	dir, err := os.MkdirTemp("", "rukpakctl-catalog-")
	if err != nil {
		return nil, err
	}
	op.closers = append(op.closers, func() { _ = os.RemoveAll(dir) })
	x, err := fbc.Build(fsys, dir, op.o.fbcLimits)
	if err != nil {
		return nil, fmt.Errorf("catalog %s: %w", name, err)
	}
	return &openedCatalog{name: name, kind: kind, index: x, dir: dir}, nil
}

// connect makes the cluster client and a token of the content service's
// audience for a ServiceAccount bound to catalog-reader: the content
// service accepts no token the API server would.
func (op *catalogOpener) connect(ctx context.Context) (*clusterReader, error) {
	if op.cluster != nil {
		return op.cluster, nil
	}
	co := op.o.content
	c, err := rukpakClient(co)
	if err != nil {
		return nil, err
	}
	cfg, err := (diffOptions{kubeconfig: co.kubeconfig, config: co.config}).restConfig()
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	hc, err := co.httpClient(ctx, cs)
	if err != nil {
		return nil, err
	}
	token, cleanup, err := co.token(ctx, cs, catalogReaderRole, "rukpakctl-catalog-")
	if err != nil {
		return nil, err
	}
	op.closers = append(op.closers, cleanup)
	op.cluster = &clusterReader{c: c, hc: hc, token: token}
	return op.cluster, nil
}

func (op *catalogOpener) openCluster(ctx context.Context, name string) (*openedCatalog, error) {
	if name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("catalog/%s: want catalog/NAME, the name of a Catalog", name)
	}
	cr, err := op.connect(ctx)
	if err != nil {
		return nil, err
	}
	cat := &rukpakv1alpha1.Catalog{}
	if err := cr.c.Get(ctx, client.ObjectKey{Name: name}, cat); err != nil {
		return nil, fmt.Errorf("reading Catalog %q: %w", name, err)
	}
	base := cat.Status.ContentURL
	if op.o.content.contentURL != "" {
		base = strings.TrimSuffix(op.o.content.contentURL, "/") + storage.CatalogsPath + name + "/"
	}
	if base == "" {
		return nil, fmt.Errorf("catalog %q is not served yet: it has no status.contentURL (see its Serving condition)", name)
	}
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	dir, err := os.MkdirTemp("", "rukpakctl-catalog-")
	if err != nil {
		return nil, err
	}
	op.closers = append(op.closers, func() { _ = os.RemoveAll(dir) })
	rd := &remoteDocument{hc: cr.hc, base: base, token: cr.token}
	if _, err := rd.get(ctx, fbc.IndexFile, filepath.Join(dir, fbc.IndexFile), maxRemoteIndexBytes); err != nil {
		return nil, fmt.Errorf("catalog %q: %w", name, err)
	}
	x, err := fbc.ReadIndex(dir)
	if err != nil {
		return nil, fmt.Errorf("catalog %q: %w", name, err)
	}
	return &openedCatalog{name: name, kind: "Catalog", priority: cat.Spec.Priority, index: x, dir: dir, remote: rd}, nil
}

// get downloads the served file rel to dst, refusing more than limit
// bytes, and returns its SHA-256 digest.
func (rd *remoteDocument) get(ctx context.Context, rel, dst string, limit int64) (string, error) {
	u := rd.base + rel
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+rd.token)
	resp, err := rd.hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("reading %s: %s: %s", u, unpack.StatusText(resp.StatusCode), unpack.Excerpt(resp.Body))
	}
	f, err := os.Create(dst)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(resp.Body, limit+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", u, err)
	}
	if n > limit {
		return "", fmt.Errorf("reading %s: larger than the limit of %d bytes", u, limit)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// loadAll makes every package readable locally: a served catalog's whole
// document is fetched once (one request instead of one per package) and
// checked against the index's digest.
func (c *openedCatalog) loadAll(ctx context.Context, l fbc.Limits) error {
	if c.remote == nil || c.remote.full {
		return nil
	}
	limit := l.OrDefault().MaxTotalBytes
	if c.index.Size > limit {
		return fmt.Errorf("catalog %q: its document is %d bytes, over the limit of %d (--max-catalog-bytes)", c.name, c.index.Size, limit)
	}
	digest, err := c.remote.get(ctx, fbc.DocumentFile, filepath.Join(c.dir, fbc.DocumentFile), c.index.Size)
	if err != nil {
		return fmt.Errorf("catalog %q: %w", c.name, err)
	}
	if digest != c.index.Digest {
		return fmt.Errorf("catalog %q: %s has digest %s, its index says %s (the catalog changed while reading it: try again)", c.name, fbc.DocumentFile, digest, c.index.Digest)
	}
	c.remote.full = true
	return nil
}

// readPackage reads one package; an error wrapping fs.ErrNotExist when the
// catalog has none of that name.
func (c *openedCatalog) readPackage(ctx context.Context, name string, l fbc.Limits) (*fbc.Package, error) {
	pi, ok := c.index.Package(name)
	if !ok {
		return nil, fmt.Errorf("catalog %q has no package %q: %w", c.name, name, fs.ErrNotExist)
	}
	if c.remote == nil || c.remote.full {
		p, err := fbc.ReadPackage(c.dir, c.index, name)
		if err != nil {
			return nil, fmt.Errorf("catalog %q: %w", c.name, err)
		}
		return p, nil
	}
	// Only the package's lines, served on their own: the package is the
	// whole of a small document of its own.
	dir, err := os.MkdirTemp(c.dir, "package-")
	if err != nil {
		return nil, err
	}
	limit := l.OrDefault().MaxTotalBytes
	if _, err := c.remote.get(ctx, "packages/"+url.PathEscape(name)+".jsonl", filepath.Join(dir, fbc.DocumentFile), limit); err != nil {
		return nil, fmt.Errorf("catalog %q: %w", c.name, err)
	}
	fi, err := os.Stat(filepath.Join(dir, fbc.DocumentFile))
	if err != nil {
		return nil, err
	}
	one := &fbc.Index{Packages: []fbc.PackageIndex{{Name: pi.Name, DefaultChannel: pi.DefaultChannel, Range: fbc.Range{Length: fi.Size()}}}}
	p, err := fbc.ReadPackage(dir, one, name)
	if err != nil {
		return nil, fmt.Errorf("catalog %q: %w", c.name, err)
	}
	return p, nil
}
