// Package testgit builds real git repositories with the git CLI and serves
// them over smart HTTP(S) (git http-backend behind net/http/cgi) and SSH
// (git upload-pack behind golang.org/x/crypto/ssh), on 127.0.0.1 only.
//
// It is a test helper: every failure calls T.Fatalf.
package testgit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// T is the part of testing.TB the helpers use; *testing.T, *testing.B and
// Ginkgo's GinkgoT() all satisfy it.
type T interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
	TempDir() string
}

// Root is a directory of repositories; servers started from it serve every
// repository in it by name.
type Root struct {
	Dir string
	t   T
}

// NewRoot creates an empty repository root in a temporary directory.
func NewRoot(t T) *Root {
	t.Helper()
	return &Root{Dir: t.TempDir(), t: t}
}

// Repo is a non-bare repository with a working tree, served as /<Name>.
type Repo struct {
	Name string
	Dir  string
	t    T
}

// NewRepo creates repository name (a path relative to the root, such as
// "org/bundles") with an initial branch "main" and no commits. It allows
// fetching any object by hash, so commits that no ref points to can be
// fetched by clients that ask for them.
func (r *Root) NewRepo(name string) *Repo {
	r.t.Helper()
	dir := filepath.Join(r.Dir, filepath.FromSlash(name))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.t.Fatalf("creating repository directory: %v", err)
	}
	repo := &Repo{Name: name, Dir: dir, t: r.t}
	repo.Git("init", "--quiet", "--initial-branch=main")
	repo.Git("config", "uploadpack.allowReachableSHA1InWant", "true")
	repo.Git("config", "uploadpack.allowAnySHA1InWant", "true")
	return repo
}

// gitSettings isolate git from the user's and system's configuration and
// give commits a fixed identity.
var gitSettings = []string{
	"GIT_CONFIG_NOSYSTEM=1",
	"GIT_CONFIG_GLOBAL=" + os.DevNull,
	"GIT_AUTHOR_NAME=testgit", "GIT_AUTHOR_EMAIL=testgit@example.com",
	"GIT_COMMITTER_NAME=testgit", "GIT_COMMITTER_EMAIL=testgit@example.com",
	"GIT_TERMINAL_PROMPT=0",
}

// gitEnv is the process environment without inherited GIT_* variables (a
// GIT_DIR from a surrounding hook would redirect every command), plus
// gitSettings.
func gitEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	return append(env, gitSettings...)
}

// Git runs git with args in the working tree and returns its trimmed
// standard output.
func (r *Repo) Git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = r.Dir
	cmd.Env = gitEnv()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		r.t.Fatalf("git %s in %s: %v: %s", strings.Join(args, " "), r.Name, err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// WriteFiles writes files (slash-separated names relative to the working
// tree) with the given contents, creating directories as needed.
func (r *Repo) WriteFiles(files map[string]string) {
	r.t.Helper()
	for name, content := range files {
		p := filepath.Join(r.Dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.t.Fatalf("creating directory for %s: %v", name, err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			r.t.Fatalf("writing %s: %v", name, err)
		}
	}
}

// Symlink creates a symbolic link name pointing at target (which need not
// exist), as git stores it.
func (r *Repo) Symlink(name, target string) {
	r.t.Helper()
	p := filepath.Join(r.Dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatalf("creating directory for %s: %v", name, err)
	}
	if err := os.Symlink(target, p); err != nil {
		r.t.Fatalf("creating symlink %s: %v", name, err)
	}
}

// Remove deletes a file or directory from the working tree.
func (r *Repo) Remove(name string) {
	r.t.Helper()
	if err := os.RemoveAll(filepath.Join(r.Dir, filepath.FromSlash(name))); err != nil {
		r.t.Fatalf("removing %s: %v", name, err)
	}
}

// Commit stages every change in the working tree, commits it on the current
// branch and returns the full commit hash.
func (r *Repo) Commit(message string) string {
	r.t.Helper()
	r.Git("add", "--all")
	r.Git("commit", "--quiet", "--allow-empty", "-m", message)
	return r.Head()
}

// Head is the full hash of the checked-out commit.
func (r *Repo) Head() string {
	r.t.Helper()
	return r.Git("rev-parse", "HEAD")
}

// Checkout switches to branch, creating it at the current commit if it does
// not exist.
func (r *Repo) Checkout(branch string) {
	r.t.Helper()
	if r.gitOK("rev-parse", "--verify", "--quiet", "refs/heads/"+branch) {
		r.Git("checkout", "--quiet", branch)
		return
	}
	r.Git("checkout", "--quiet", "-b", branch)
}

// Branch points branch at commit (any revision), creating or moving it.
func (r *Repo) Branch(branch, commit string) {
	r.t.Helper()
	r.Git("branch", "--force", branch, commit)
}

// DeleteBranch deletes branch; its commits stay in the object store.
func (r *Repo) DeleteBranch(branch string) {
	r.t.Helper()
	r.Git("branch", "--quiet", "-D", branch)
}

// Tag creates or moves a lightweight tag to commit (any revision).
func (r *Repo) Tag(tag, commit string) {
	r.t.Helper()
	r.Git("tag", "--force", tag, commit)
}

// AnnotatedTag creates or moves an annotated tag to commit.
func (r *Repo) AnnotatedTag(tag, commit, message string) {
	r.t.Helper()
	r.Git("tag", "--force", "--annotate", "-m", message, tag, commit)
}

// UnreachableCommit commits files on a temporary branch off the current
// commit, deletes the branch and returns to where it was: the commit is in
// the object store but no branch or tag reaches it, so it can only be
// fetched by its hash.
func (r *Repo) UnreachableCommit(files map[string]string, message string) string {
	r.t.Helper()
	current := r.Git("rev-parse", "--abbrev-ref", "HEAD")
	r.Git("checkout", "--quiet", "-b", "testgit-unreachable")
	r.WriteFiles(files)
	hash := r.Commit(message)
	r.Git("checkout", "--quiet", current)
	r.DeleteBranch("testgit-unreachable")
	return hash
}

func (r *Repo) gitOK(args ...string) bool {
	cmd := exec.Command("git", args...)
	cmd.Dir = r.Dir
	cmd.Env = gitEnv()
	return cmd.Run() == nil
}
