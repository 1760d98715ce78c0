// Package git unpacks Bundles whose source is a git repository, with go-git
// and no git binary.
//
// A branch or tag is fetched shallow (depth 1, that ref only). A commit is
// fetched by hash when the server allows it (uploadpack.allowAnySHA1InWant
// or allowReachableSHA1InWant), which also reaches commits no branch or tag
// points to; otherwise every branch and tag is fetched and the hash, full or
// abbreviated, is looked up among them. An abbreviated hash therefore names
// only commits some branch or tag reaches (servers never match prefixes).
//
// Sources are untrusted, so every fetch is bounded (see unpack.Limits):
//   - time: the whole unpack runs under FetchTimeout and the caller's
//     context, and every transport's connection is closed when it ends
//     (http(s) through a client of this package's, ssh and git:// through
//     sessions this package dials and speaks itself, transport.go);
//   - size: every byte the server sends (http bodies, the git://
//     connection, the ssh session's output) counts against MaxFetchBytes,
//     the ref advertisement against 16 MiB, and error bodies are not read
//     (an error reports the status code, unpack.StatusText);
//   - concurrency: at most maxGitFetches with a ref advertisement over
//     largeAdvertisementBytes run at once in the process, the others
//     wait (within their FetchTimeout);
//   - memory: the pack is spooled to a temporary directory under
//     Config.BaseDir, its headers checked against MaxFileBytes before
//     anything is inflated, and indexed by this package while streaming
//     (pack.go): memory does not grow with object sizes, and blobs stream
//     into the tree;
//   - credentials: an auth Secret is used only for the hosts its
//     core.rukpak.io/allowed-hosts annotation lists.
package git

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/go-git/go-billy/v5/osfs"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"golang.org/x/sync/semaphore"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/unpack"
)

// Unpacker unpacks git sources.
type Unpacker struct {
	cfg unpack.Config
}

var _ unpack.Unpacker = (*Unpacker)(nil)

// New returns an Unpacker for git sources. cfg.Reader reads auth Secrets in
// cfg.Namespace; cfg.BaseDir holds the fetched objects (briefly) and the
// unpacked trees.
func New(cfg unpack.Config) unpack.Unpacker {
	return &Unpacker{cfg: cfg}
}

// Unpack fetches the bundle's commit and copies its directory into a new
// tree. It uses bundle.Status.ResolvedSource when set, so a Bundle keeps the
// commit of its first unpack even if its branch or tag moves.
// maxGitFetches bounds the git fetches with a large ref advertisement
// (over largeAdvertisementBytes) that run at once in the process: the
// advertisement is held decoded, about three times its size, for as long
// as its server takes, so ten servers that sent 16 MiB and stalled ran a
// 512 MiB provisioner out of memory. A fetch takes its slot once its
// advertisement passes the threshold and keeps it to its end; fetches of
// ordinary repositories (advertisements of a few KiB to a few hundred)
// never wait for one, so stalled servers delay only other large ones.
const (
	maxGitFetches           = 4
	largeAdvertisementBytes = 256 << 10
)

var fetching = semaphore.NewWeighted(maxGitFetches)

func (u *Unpacker) Unpack(ctx context.Context, bundle *rukpakv1alpha1.Bundle) (*unpack.Result, error) {
	src, err := gitSource(bundle)
	if err != nil {
		return nil, err
	}
	dir, err := unpack.CleanName(src.Directory)
	if err != nil {
		return nil, unpack.Terminal(fmt.Errorf("invalid source.git.directory %q: %w", src.Directory, err))
	}
	ep, err := endpoint(src.Repository)
	if err != nil {
		return nil, err
	}
	auth, err := u.auth(ctx, src, ep)
	if err != nil {
		return nil, err
	}

	if err := os.MkdirAll(u.cfg.BaseDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating unpack directory: %w", err)
	}
	objects, err := os.MkdirTemp(u.cfg.BaseDir, "git-objects-")
	if err != nil {
		return nil, fmt.Errorf("creating git object directory: %w", err)
	}
	defer os.RemoveAll(objects)

	limits := u.cfg.Limits.OrDefault()
	fetchCtx, cancel := context.WithTimeout(ctx, limits.FetchTimeout)
	defer cancel()
	commit, tree, err := u.fetch(fetchCtx, src, ep, auth, objects, dir, bundle.Name, limits)
	if err != nil {
		if errors.Is(fetchCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			// Retryable: the server may answer in time later.
			return nil, fmt.Errorf("fetching repository %q: not done within the fetch timeout of %s (--fetch-timeout): %w",
				redact(src.Repository), limits.FetchTimeout, context.DeadlineExceeded)
		}
		return nil, err
	}

	resolved := &rukpakv1alpha1.BundleSource{
		Type: rukpakv1alpha1.SourceTypeGit,
		Git: &rukpakv1alpha1.GitSource{
			Repository: src.Repository,
			Directory:  src.Directory,
			Ref:        rukpakv1alpha1.GitRef{Commit: commit.Hash.String()},
			Auth:       src.Auth,
		},
	}
	return unpack.Unpacked(tree.FS(), resolved, tree.Discard), nil
}

// Objects of at most largeObjectBytes are read into memory whole; larger
// blobs stream from the pack into the tree. objectCacheBytes bounds go-git's
// cache of decoded objects (trees and small blobs, mostly).
const (
	largeObjectBytes = 1 << 20
	objectCacheBytes = 16 << 20
)

// fetch fetches src's commit into a repository in objects and copies its
// directory dir into a new tree.
func (u *Unpacker) fetch(ctx context.Context, src *rukpakv1alpha1.GitSource, ep *transport.Endpoint, auth *access,
	objects, dir, name string, limits unpack.Limits,
) (*object.Commit, *unpack.Tree, error) {
	storage := filesystem.NewStorageWithOptions(osfs.New(objects), cache.NewObjectLRU(objectCacheBytes),
		filesystem.Options{LargeObjectThreshold: largeObjectBytes})
	repo, err := gogit.Init(storage, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("initialising git storage: %w", err)
	}
	f := &fetcher{repo: repo, storage: storage, root: objects, ep: ep, url: redact(src.Repository), access: auth, limits: limits}
	commit, err := f.checkout(ctx, src.Ref)
	if err != nil {
		return nil, nil, err
	}
	tree, err := unpack.NewTempTree(u.cfg.BaseDir, "git-"+name+"-", limits)
	if err != nil {
		return nil, nil, err
	}
	if err := copyDirectory(ctx, tree, commit, dir, src.Directory); err != nil {
		_ = tree.Discard()
		return nil, nil, err
	}
	return commit, tree, nil
}

// gitSource is the spec's source, pinned to the resolved commit when
// status.resolvedSource matches the spec (unpack.FetchSource).
func gitSource(bundle *rukpakv1alpha1.Bundle) (*rukpakv1alpha1.GitSource, error) {
	src := unpack.FetchSource(bundle)
	if src.Git == nil {
		return nil, unpack.Terminal(errors.New("source.git is not set"))
	}
	return src.Git, nil
}
