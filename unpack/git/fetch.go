package git

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/sideband"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/filesystem"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/unpack"
)

// fetcher fetches one ref of a remote into a fresh repository.
type fetcher struct {
	repo    *gogit.Repository
	storage *filesystem.Storage
	// root is the repository's directory.
	root   string
	ep     *transport.Endpoint
	url    string // redacted, for messages
	access *access
	limits unpack.Limits
}

// checkout fetches what ref names and returns its commit.
func (f *fetcher) checkout(ctx context.Context, ref rukpakv1alpha1.GitRef) (*object.Commit, error) {
	set := 0
	for _, v := range []string{ref.Branch, ref.Tag, ref.Commit} {
		if v != "" {
			set++
		}
	}
	if set != 1 {
		return nil, unpack.Terminal(errors.New("source.git.ref must set exactly one of branch, tag or commit"))
	}
	switch {
	case ref.Branch != "":
		return f.named(ctx, "branch", ref.Branch, plumbing.NewBranchReferenceName(ref.Branch))
	case ref.Tag != "":
		return f.named(ctx, "tag", ref.Tag, plumbing.NewTagReferenceName(ref.Tag))
	default:
		return f.commit(ctx, strings.ToLower(ref.Commit))
	}
}

// named fetches the tip of a branch or tag, shallow.
func (f *fetcher) named(ctx context.Context, kind, short string, name plumbing.ReferenceName) (*object.Commit, error) {
	if !validRefName(short) {
		return nil, unpack.Terminal(fmt.Errorf("invalid %s name %q", kind, short))
	}
	var tip plumbing.Hash
	err := f.fetch(ctx, func(ar *packp.AdvRefs) ([]plumbing.Hash, error) {
		h, ok := ar.References[name.String()]
		if !ok {
			return nil, unpack.Terminal(fmt.Errorf("%s %q not found in repository %q", kind, short, f.url))
		}
		tip = h
		return []plumbing.Hash{h}, nil
	}, 1)
	if err != nil {
		return nil, err
	}
	return f.peel(kind, short, tip)
}

// peel resolves annotated tags down to the commit they point at.
func (f *fetcher) peel(kind, short string, h plumbing.Hash) (*object.Commit, error) {
	for range 10 {
		obj, err := f.repo.Object(plumbing.AnyObject, h)
		if err != nil {
			return nil, fmt.Errorf("reading %s %q at %s: %w", kind, short, h, err)
		}
		switch o := obj.(type) {
		case *object.Commit:
			return o, nil
		case *object.Tag:
			h = o.Target
		default:
			return nil, unpack.Terminal(fmt.Errorf("%s %q points at a %s, not a commit", kind, short, obj.Type()))
		}
	}
	return nil, unpack.Terminal(fmt.Errorf("%s %q: too many nested tags", kind, short))
}

// errNoHashWants is a server that does not let clients ask for a commit by
// hash.
var errNoHashWants = errors.New("the server does not allow fetching by hash")

// commit fetches a full hash directly when the server allows it, and falls
// back to fetching every branch and tag and looking the (possibly
// abbreviated) hash up among their history.
func (f *fetcher) commit(ctx context.Context, hash string) (*object.Commit, error) {
	if !isHex(hash) || len(hash) < 4 || len(hash) > 40 {
		return nil, unpack.Terminal(fmt.Errorf("invalid commit %q: want 4 to 40 hexadecimal digits", hash))
	}
	if len(hash) == 40 {
		err := f.fetch(ctx, func(ar *packp.AdvRefs) ([]plumbing.Hash, error) {
			if !ar.Capabilities.Supports(capability.AllowReachableSHA1InWant) && !ar.Capabilities.Supports(capability.AllowTipSHA1InWant) {
				return nil, errNoHashWants
			}
			return []plumbing.Hash{plumbing.NewHash(hash)}, nil
		}, 1)
		if err == nil {
			return f.lookup(hash)
		}
		// A denied or missing repository, a limit or the deadline fail
		// the fallback the same way; anything else (the server refusing
		// an unadvertised hash, say) may still succeed by fetching
		// everything.
		if unpack.IsTerminal(err) || ctx.Err() != nil {
			return nil, err
		}
	}

	err := f.fetch(ctx, func(ar *packp.AdvRefs) ([]plumbing.Hash, error) {
		seen := map[plumbing.Hash]bool{}
		var wants []plumbing.Hash
		for name, h := range ar.References {
			if (strings.HasPrefix(name, "refs/heads/") || strings.HasPrefix(name, "refs/tags/")) && !seen[h] {
				seen[h] = true
				wants = append(wants, h)
			}
		}
		if len(wants) == 0 {
			return nil, unpack.Terminal(fmt.Errorf("commit %q not found in repository %q: it has no branches or tags", hash, f.url))
		}
		return wants, nil
	}, 0)
	if err != nil {
		return nil, err
	}
	return f.lookup(hash)
}

// lookup finds the one commit whose hash starts with prefix.
func (f *fetcher) lookup(prefix string) (*object.Commit, error) {
	notFound := unpack.Terminal(fmt.Errorf("commit %q not found in repository %q", prefix, f.url))
	if len(prefix) == 40 {
		c, err := f.repo.CommitObject(plumbing.NewHash(prefix))
		switch {
		case errors.Is(err, plumbing.ErrObjectNotFound):
			return nil, notFound
		case errors.Is(err, plumbing.ErrInvalidType):
			return nil, unpack.Terminal(fmt.Errorf("object %q in repository %q is not a commit", prefix, f.url))
		}
		return c, err
	}
	iter, err := f.repo.CommitObjects()
	if err != nil {
		return nil, fmt.Errorf("listing commits: %w", err)
	}
	var found *object.Commit
	err = iter.ForEach(func(c *object.Commit) error {
		if !strings.HasPrefix(c.Hash.String(), prefix) {
			return nil
		}
		if found != nil {
			return unpack.Terminal(fmt.Errorf("commit %q is ambiguous in repository %q: it matches %s and %s", prefix, f.url, found.Hash, c.Hash))
		}
		found = c
		return nil
	})
	if err != nil && !errors.Is(err, storer.ErrStop) {
		return nil, err
	}
	if found == nil {
		return nil, notFound
	}
	return found, nil
}

// fetch runs one fetch on a new connection: wants picks the objects to ask
// for from the server's refs, depth (0: all) limits the history. Every
// read counts against MaxFetchBytes, and ctx (with the fetch deadline)
// interrupts the connection on every transport.
func (f *fetcher) fetch(ctx context.Context, wants func(*packp.AdvRefs) ([]plumbing.Hash, error), depth int) error {
	w := newWire(ctx, f.limits.MaxFetchBytes)
	defer w.release()
	s, err := openSession(ctx, f.ep, f.access, w)
	if err != nil {
		return classify(ctx, w.failure(err), f.url)
	}
	defer s.Close()
	ar, err := s.AdvertisedReferencesContext(ctx)
	if err != nil {
		return classify(ctx, w.failure(err), f.url)
	}
	hashes, err := wants(ar)
	if err != nil {
		return err
	}
	req := packp.NewUploadPackRequestFromCapabilities(ar.Capabilities)
	req.Wants = hashes
	if depth > 0 {
		req.Depth = packp.DepthCommits(depth)
		if err := req.Capabilities.Set(capability.Shallow); err != nil {
			return fmt.Errorf("building fetch request: %w", err)
		}
	}
	if ar.Capabilities.Supports(capability.NoProgress) {
		if err := req.Capabilities.Set(capability.NoProgress); err != nil {
			return fmt.Errorf("building fetch request: %w", err)
		}
	}
	res, err := s.UploadPack(ctx, req)
	if err != nil {
		return classify(ctx, w.failure(err), f.url)
	}
	defer res.Close()
	w.startPack()
	if len(res.Shallows) > 0 {
		if err := f.storage.SetShallow(res.Shallows); err != nil {
			return fmt.Errorf("recording shallow commits: %w", err)
		}
	}
	var pack io.Reader = res
	switch {
	case req.Capabilities.Supports(capability.Sideband64k):
		pack = sideband.NewDemuxer(sideband.Sideband64k, res)
	case req.Capabilities.Supports(capability.Sideband):
		pack = sideband.NewDemuxer(sideband.Sideband, res)
	}
	return classify(ctx, w.failure(storePack(ctx, f.storage, f.root, pack, f.limits)), f.url)
}

// validRefName rejects names git refuses and ones that would change the
// meaning of a refspec.
func validRefName(name string) bool {
	if strings.ContainsAny(name, " ~^:?*[\\\x7f") || strings.Contains(name, "..") || strings.Contains(name, "@{") ||
		strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") || strings.HasSuffix(name, ".lock") || strings.HasPrefix(name, "-") {
		return false
	}
	for _, r := range name {
		if r < 0x20 {
			return false
		}
	}
	return true
}

func isHex(s string) bool {
	for _, r := range s {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}
