package git

import (
	"context"
	"errors"
	"fmt"
	"strings"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/unpack"
)

// pinnedRef receives a commit fetched by hash.
const pinnedRef = "refs/rukpak/commit"

// fetcher fetches one ref of a remote into a fresh repository.
type fetcher struct {
	repo   *gogit.Repository
	remote *gogit.Remote
	url    string
	auth   *access
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
	spec := config.RefSpec("+" + name.String() + ":" + name.String())
	err := f.fetch(ctx, []config.RefSpec{spec}, 1)
	if errors.As(err, new(gogit.NoMatchingRefSpecError)) {
		return nil, unpack.Terminal(fmt.Errorf("%s %q not found in repository %q", kind, short, f.url))
	}
	if err != nil {
		return nil, err
	}
	r, err := f.repo.Reference(name, true)
	if err != nil {
		return nil, fmt.Errorf("reading fetched %s %q: %w", kind, short, err)
	}
	return f.peel(kind, short, r.Hash())
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

// commit fetches a full hash directly when the server allows it, and falls
// back to fetching every branch and tag and looking the (possibly
// abbreviated) hash up among their history.
func (f *fetcher) commit(ctx context.Context, hash string) (*object.Commit, error) {
	if !isHex(hash) || len(hash) < 4 || len(hash) > 40 {
		return nil, unpack.Terminal(fmt.Errorf("invalid commit %q: want 4 to 40 hexadecimal digits", hash))
	}
	if len(hash) == 40 {
		spec := config.RefSpec(hash + ":" + pinnedRef)
		err := f.fetch(ctx, []config.RefSpec{spec}, 1)
		if err == nil {
			return f.lookup(hash)
		}
		// A denied or missing repository fails the fallback the same way;
		// anything else (the server refusing an unadvertised hash, say)
		// may still succeed by fetching everything.
		if unpack.IsTerminal(err) || ctx.Err() != nil {
			return nil, err
		}
	}

	all := []config.RefSpec{"+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"}
	if err := f.fetch(ctx, all, 0); err != nil {
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

// fetch runs one fetch; an up-to-date result is success.
func (f *fetcher) fetch(ctx context.Context, specs []config.RefSpec, depth int) error {
	err := f.remote.FetchContext(ctx, &gogit.FetchOptions{
		RefSpecs:        specs,
		Depth:           depth,
		Auth:            f.auth.auth,
		InsecureSkipTLS: f.auth.insecureSkipTLS,
		Tags:            gogit.NoTags,
	})
	if err == nil || errors.Is(err, gogit.NoErrAlreadyUpToDate) {
		return nil
	}
	var noMatch gogit.NoMatchingRefSpecError
	if errors.As(err, &noMatch) {
		return err
	}
	return classify(err, f.url)
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
