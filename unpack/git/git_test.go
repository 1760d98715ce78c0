package git_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh/knownhosts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testgit"
	"github.com/rukpak-dev/rukpak/unpack"
	"github.com/rukpak-dev/rukpak/unpack/git"
)

const namespace = "rukpak-system"

// longDir is a deep directory with long names, to catch path-length bugs.
var longDir = "bundles/" + strings.Repeat("a-very-long-directory-name-", 8) + "x/" + strings.Repeat("nested/", 12) + "bundle"

// fixture is one repository served over plain HTTP, HTTPS with basic auth
// and SSH.
type fixture struct {
	repo                 *testgit.Repo
	http, https          *testgit.HTTPServer
	ssh                  *testgit.SSHServer
	first, second, third string // commits on main, oldest first
	feature, hidden      string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	root := testgit.NewRoot(t)
	repo := root.NewRepo("org/bundles")
	f := &fixture{repo: repo}

	repo.WriteFiles(map[string]string{
		"manifests/a.yaml":               "a: 1\n",
		longDir + "/manifests/deep.yaml": "deep: 1\n",
		"README.md":                      "readme\n",
	})
	repo.Symlink("manifests/passwd", "/etc/passwd")
	repo.Symlink("manifests/etc", "/etc")
	f.first = repo.Commit("first")
	repo.AnnotatedTag("v1", f.first, "release v1")
	repo.Tag("light", f.first)

	repo.WriteFiles(map[string]string{"manifests/a.yaml": "a: 2\n"})
	f.second = repo.Commit("second")

	repo.Checkout("feature")
	repo.WriteFiles(map[string]string{"manifests/feature.yaml": "feature: 1\n"})
	f.feature = repo.Commit("feature")
	repo.Checkout("main")

	f.hidden = repo.UnreachableCommit(map[string]string{"manifests/hidden.yaml": "hidden: 1\n"}, "hidden")

	repo.WriteFiles(map[string]string{"manifests/a.yaml": "a: 3\n"})
	f.third = repo.Commit("third")

	f.http = root.ServeHTTP(testgit.HTTPOptions{})
	f.https = root.ServeHTTP(testgit.HTTPOptions{TLS: true, Username: "user", Password: "secret"})
	f.ssh = root.ServeSSH()
	return f
}

func newUnpacker(t *testing.T, objs ...client.Object) unpack.Unpacker {
	t.Helper()
	reader := fake.NewClientBuilder().WithObjects(objs...).Build()
	return git.New(unpack.Config{Reader: reader, Namespace: namespace, BaseDir: t.TempDir()})
}

// secret is an auth Secret for the test servers' host, 127.0.0.1.
func secret(name string, data map[string]string) *corev1.Secret {
	return secretFor(name, "127.0.0.1", data)
}

// secretFor is an auth Secret whose allowed-hosts annotation is hosts (none
// when empty).
func secretFor(name, hosts string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Data: map[string][]byte{}}
	if hosts != "" {
		s.Annotations = map[string]string{rukpakv1alpha1.AnnotationAllowedHosts: hosts}
	}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func bundle(src rukpakv1alpha1.GitSource) *rukpakv1alpha1.Bundle {
	return &rukpakv1alpha1.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "test-bundle"},
		Spec: rukpakv1alpha1.BundleSpec{
			ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain,
			Source:               rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeGit, Git: &src},
		},
	}
}

// contents reads every entry of fsys: files by content, directories as
// "<dir>", anything else as "<other>".
func contents(t *testing.T, fsys fs.FS) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return err
		}
		switch {
		case d.IsDir():
			out[p] = "<dir>"
		case d.Type().IsRegular():
			b, err := fs.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			out[p] = string(b)
		default:
			out[p] = "<other>"
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading unpacked content: %v", err)
	}
	return out
}

// files keeps only the regular files of contents.
func files(c map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range c {
		if v != "<dir>" {
			out[k] = v
		}
	}
	return out
}

func equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestUnpackRefsAndDirectories(t *testing.T) {
	f := newFixture(t)
	url := f.http.RepoURL(f.repo.Name)
	u := newUnpacker(t)

	rootAt := func(a string, extra map[string]string) map[string]string {
		m := map[string]string{
			"manifests/a.yaml":               a,
			longDir + "/manifests/deep.yaml": "deep: 1\n",
			"README.md":                      "readme\n",
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		name       string
		ref        rukpakv1alpha1.GitRef
		directory  string
		wantCommit string
		want       map[string]string
	}{
		{name: "branch", ref: rukpakv1alpha1.GitRef{Branch: "main"}, wantCommit: f.third, want: rootAt("a: 3\n", nil)},
		{name: "other branch", ref: rukpakv1alpha1.GitRef{Branch: "feature"}, wantCommit: f.feature,
			want: rootAt("a: 2\n", map[string]string{"manifests/feature.yaml": "feature: 1\n"})},
		{name: "annotated tag", ref: rukpakv1alpha1.GitRef{Tag: "v1"}, wantCommit: f.first, want: rootAt("a: 1\n", nil)},
		{name: "lightweight tag", ref: rukpakv1alpha1.GitRef{Tag: "light"}, wantCommit: f.first, want: rootAt("a: 1\n", nil)},
		{name: "full commit", ref: rukpakv1alpha1.GitRef{Commit: f.second}, wantCommit: f.second, want: rootAt("a: 2\n", nil)},
		{name: "abbreviated commit", ref: rukpakv1alpha1.GitRef{Commit: f.second[:7]}, wantCommit: f.second, want: rootAt("a: 2\n", nil)},
		{name: "commit reachable only by hash", ref: rukpakv1alpha1.GitRef{Commit: f.hidden}, wantCommit: f.hidden,
			want: rootAt("a: 2\n", map[string]string{"manifests/hidden.yaml": "hidden: 1\n"})},
		{name: "directory", ref: rukpakv1alpha1.GitRef{Branch: "main"}, directory: "manifests", wantCommit: f.third,
			want: map[string]string{"a.yaml": "a: 3\n"}},
		{name: "nested long directory", ref: rukpakv1alpha1.GitRef{Tag: "v1"}, directory: "./" + longDir + "/", wantCommit: f.first,
			want: map[string]string{"manifests/deep.yaml": "deep: 1\n"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := rukpakv1alpha1.GitSource{Repository: url, Directory: tc.directory, Ref: tc.ref}
			res, err := u.Unpack(context.Background(), bundle(src))
			if err != nil {
				t.Fatalf("Unpack: %v", err)
			}
			t.Cleanup(func() { _ = res.Close() })
			if res.State != unpack.StateUnpacked {
				t.Fatalf("state = %s, want %s", res.State, unpack.StateUnpacked)
			}
			got := contents(t, res.FS)
			if !equal(files(got), tc.want) {
				t.Fatalf("content = %v, want %v", files(got), tc.want)
			}
			for p, v := range got {
				if v == "<other>" {
					t.Errorf("unpacked %s is neither a file nor a directory", p)
				}
			}
			want := &rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeGit, Git: &rukpakv1alpha1.GitSource{
				Repository: url, Directory: tc.directory, Ref: rukpakv1alpha1.GitRef{Commit: tc.wantCommit},
			}}
			if r := res.ResolvedSource; r == nil || r.Type != want.Type || r.Git == nil || *r.Git != *want.Git {
				t.Fatalf("resolved source = %+v, want %+v", r, want.Git)
			}
		})
	}
}

func TestSymlinksAreNotMaterialised(t *testing.T) {
	f := newFixture(t)
	u := newUnpacker(t)
	res, err := u.Unpack(context.Background(), bundle(rukpakv1alpha1.GitSource{
		Repository: f.http.RepoURL(f.repo.Name), Directory: "manifests", Ref: rukpakv1alpha1.GitRef{Tag: "v1"},
	}))
	if err != nil {
		t.Fatalf("Unpack: %v", err)
	}
	defer res.Close()
	for _, name := range []string{"passwd", "etc"} {
		if _, err := fs.Stat(res.FS, name); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("symlink %s was materialised (stat error %v)", name, err)
		}
	}
	if got := contents(t, res.FS); !equal(got, map[string]string{"a.yaml": "a: 1\n"}) {
		t.Fatalf("content = %v, want only a.yaml", got)
	}
}

// A Bundle that already records its resolved source keeps its content when
// its tag or branch later moves, even to an unrelated history.
func TestResolvedSourceWinsOverMovedRefs(t *testing.T) {
	for _, ref := range []rukpakv1alpha1.GitRef{{Tag: "v1"}, {Branch: "feature"}} {
		t.Run(ref.Tag+ref.Branch, func(t *testing.T) {
			f := newFixture(t)
			u := newUnpacker(t)
			b := bundle(rukpakv1alpha1.GitSource{Repository: f.http.RepoURL(f.repo.Name), Directory: "manifests", Ref: ref})
			first, err := u.Unpack(context.Background(), b)
			if err != nil {
				t.Fatalf("first Unpack: %v", err)
			}
			before := contents(t, first.FS)
			_ = first.Close()

			// Move the ref to a new root commit, leaving the old commit
			// reachable by hash only.
			f.repo.Git("checkout", "--quiet", "--orphan", "rewritten")
			f.repo.Git("rm", "-r", "--quiet", "--cached", ".")
			f.repo.Remove("manifests")
			f.repo.WriteFiles(map[string]string{"manifests/a.yaml": "moved: true\n"})
			moved := f.repo.Commit("rewritten")
			f.repo.Tag("v1", moved)
			f.repo.Branch("feature", moved)

			fresh, err := u.Unpack(context.Background(), b)
			if err != nil {
				t.Fatalf("Unpack without resolved source: %v", err)
			}
			if got := contents(t, fresh.FS); got["a.yaml"] != "moved: true\n" {
				t.Fatalf("a Bundle without resolved source got %v, want the moved content", got)
			}
			_ = fresh.Close()

			b.Status.ResolvedSource = first.ResolvedSource
			again, err := u.Unpack(context.Background(), b)
			if err != nil {
				t.Fatalf("Unpack with resolved source: %v", err)
			}
			defer again.Close()
			if got := contents(t, again.FS); !equal(got, before) {
				t.Fatalf("content after the ref moved = %v, want the original %v", got, before)
			}
			if again.ResolvedSource.Git.Ref.Commit != first.ResolvedSource.Git.Ref.Commit {
				t.Fatalf("resolved commit changed from %s to %s", first.ResolvedSource.Git.Ref.Commit, again.ResolvedSource.Git.Ref.Commit)
			}
		})
	}
}

func TestUnpackErrors(t *testing.T) {
	f := newFixture(t)
	url := f.http.RepoURL(f.repo.Name)
	missingHash := strings.Repeat("0123456789", 4)

	tests := []struct {
		name         string
		src          rukpakv1alpha1.GitSource
		wantErr      string
		wantTerminal bool
	}{
		{name: "missing branch", src: rukpakv1alpha1.GitSource{Repository: url, Ref: rukpakv1alpha1.GitRef{Branch: "nope"}},
			wantErr: `branch "nope" not found in repository "` + url + `"`, wantTerminal: true},
		{name: "missing tag", src: rukpakv1alpha1.GitSource{Repository: url, Ref: rukpakv1alpha1.GitRef{Tag: "v9"}},
			wantErr: `tag "v9" not found in repository "` + url + `"`, wantTerminal: true},
		{name: "missing commit", src: rukpakv1alpha1.GitSource{Repository: url, Ref: rukpakv1alpha1.GitRef{Commit: missingHash}},
			wantErr: `commit "` + missingHash + `" not found in repository "` + url + `"`, wantTerminal: true},
		{name: "missing abbreviated commit", src: rukpakv1alpha1.GitSource{Repository: url, Ref: rukpakv1alpha1.GitRef{Commit: "abcdef0"}},
			wantErr: `commit "abcdef0" not found in repository`, wantTerminal: true},
		// An abbreviated hash is resolved among what branches and tags reach.
		{name: "abbreviated unreachable commit", src: rukpakv1alpha1.GitSource{Repository: url, Ref: rukpakv1alpha1.GitRef{Commit: f.hidden[:10]}},
			wantErr: `commit "` + f.hidden[:10] + `" not found`, wantTerminal: true},
		{name: "invalid commit", src: rukpakv1alpha1.GitSource{Repository: url, Ref: rukpakv1alpha1.GitRef{Commit: "xyz"}},
			wantErr: `invalid commit "xyz"`, wantTerminal: true},
		{name: "two refs", src: rukpakv1alpha1.GitSource{Repository: url, Ref: rukpakv1alpha1.GitRef{Branch: "main", Tag: "v1"}},
			wantErr: "exactly one of branch, tag or commit", wantTerminal: true},
		{name: "branch name with refspec syntax", src: rukpakv1alpha1.GitSource{Repository: url, Ref: rukpakv1alpha1.GitRef{Branch: "a:b"}},
			wantErr: `invalid branch name "a:b"`, wantTerminal: true},
		{name: "directory escaping", src: rukpakv1alpha1.GitSource{Repository: url, Directory: "../..", Ref: rukpakv1alpha1.GitRef{Branch: "main"}},
			wantErr: `invalid source.git.directory "../..": path "../.." escapes the bundle root`, wantTerminal: true},
		{name: "directory escaping after clean", src: rukpakv1alpha1.GitSource{Repository: url, Directory: "manifests/../../x", Ref: rukpakv1alpha1.GitRef{Branch: "main"}},
			wantErr: `invalid source.git.directory "manifests/../../x"`, wantTerminal: true},
		{name: "absolute directory", src: rukpakv1alpha1.GitSource{Repository: url, Directory: "/etc", Ref: rukpakv1alpha1.GitRef{Branch: "main"}},
			wantErr: `invalid source.git.directory "/etc": path "/etc" is absolute`, wantTerminal: true},
		{name: "missing directory", src: rukpakv1alpha1.GitSource{Repository: url, Directory: "nope/deeper", Ref: rukpakv1alpha1.GitRef{Branch: "main"}},
			wantErr: `source.git.directory "nope/deeper" not found in commit ` + f.third, wantTerminal: true},
		{name: "directory is a file", src: rukpakv1alpha1.GitSource{Repository: url, Directory: "README.md", Ref: rukpakv1alpha1.GitRef{Branch: "main"}},
			wantErr: `source.git.directory "README.md" in commit ` + f.third + ` is not a directory`, wantTerminal: true},
		{name: "directory is a symlink", src: rukpakv1alpha1.GitSource{Repository: url, Directory: "manifests/etc", Ref: rukpakv1alpha1.GitRef{Branch: "main"}},
			wantErr: `source.git.directory "manifests/etc" in commit ` + f.third + ` is not a directory`, wantTerminal: true},
		{name: "missing repository", src: rukpakv1alpha1.GitSource{Repository: f.http.RepoURL("org/missing"), Ref: rukpakv1alpha1.GitRef{Branch: "main"}},
			wantErr: `repository "` + f.http.RepoURL("org/missing") + `" not found`, wantTerminal: true},
		{name: "local path", src: rukpakv1alpha1.GitSource{Repository: f.repo.Dir, Ref: rukpakv1alpha1.GitRef{Branch: "main"}},
			wantErr: `protocol "file" is not supported`, wantTerminal: true},
		{name: "file URL", src: rukpakv1alpha1.GitSource{Repository: "file://" + f.repo.Dir, Ref: rukpakv1alpha1.GitRef{Branch: "main"}},
			wantErr: `protocol "file" is not supported`, wantTerminal: true},
		{name: "unreachable server is retryable", src: rukpakv1alpha1.GitSource{Repository: closedURL(t), Ref: rukpakv1alpha1.GitRef{Branch: "main"}},
			wantErr: "connection refused", wantTerminal: false},
	}
	u := newUnpacker(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assertErr(t, u, bundle(tc.src), tc.wantErr, tc.wantTerminal)
		})
	}
}

func TestLimits(t *testing.T) {
	f := newFixture(t)
	u := git.New(unpack.Config{Reader: fake.NewClientBuilder().Build(), Namespace: namespace, BaseDir: t.TempDir(),
		Limits: unpack.Limits{MaxFiles: 3}})
	assertErr(t, u, bundle(rukpakv1alpha1.GitSource{Repository: f.http.RepoURL(f.repo.Name), Ref: rukpakv1alpha1.GitRef{Branch: "main"}}),
		"bundle has more than 3 files and directories", true)
}

func TestAuth(t *testing.T) {
	f := newFixture(t)
	httpsURL := f.https.RepoURL(f.repo.Name)
	sshURL := f.ssh.RepoURL(f.repo.Name)
	otherKey, err := testgit.NewClientKeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	// A known_hosts line for the server's address with another key.
	otherHost := testgit.NewRoot(t).ServeSSH()
	wrongKnownHosts := knownhosts.Line([]string{knownhosts.Normalize(f.ssh.Addr)}, otherHost.HostKey)

	u := newUnpacker(t,
		secret("basic", map[string]string{"username": "user", "password": "secret"}),
		secret("basic-wrong", map[string]string{"username": "user", "password": "wrong"}),
		secret("empty", nil),
		secret("ssh", map[string]string{"ssh-privatekey": string(f.ssh.ClientKeyPEM), "ssh-knownhosts": f.ssh.KnownHosts}),
		secret("ssh-wrong-host", map[string]string{"ssh-privatekey": string(f.ssh.ClientKeyPEM), "ssh-knownhosts": wrongKnownHosts}),
		secret("ssh-no-known-hosts", map[string]string{"ssh-privatekey": string(f.ssh.ClientKeyPEM)}),
		secret("ssh-wrong-key", map[string]string{"ssh-privatekey": string(otherKey), "ssh-knownhosts": f.ssh.KnownHosts}),
		secret("ssh-bad-key", map[string]string{"ssh-privatekey": "not a key", "ssh-knownhosts": f.ssh.KnownHosts}),
	)
	auth := func(name string, insecure bool) *rukpakv1alpha1.Authorization {
		return &rukpakv1alpha1.Authorization{Secret: &rukpakv1alpha1.LocalObjectReference{Name: name}, InsecureSkipVerify: insecure}
	}
	tests := []struct {
		name         string
		repository   string
		auth         *rukpakv1alpha1.Authorization
		wantErr      string
		wantTerminal bool
	}{
		{name: "https basic auth", repository: httpsURL, auth: auth("basic", true)},
		{name: "https wrong password", repository: httpsURL, auth: auth("basic-wrong", true),
			wantErr: `access to repository "` + httpsURL + `" denied`, wantTerminal: true},
		{name: "https without credentials", repository: httpsURL, auth: auth("", true),
			wantErr: `access to repository "` + httpsURL + `" denied`, wantTerminal: true},
		{name: "https untrusted certificate", repository: httpsURL, auth: auth("basic", false),
			wantErr: `TLS certificate of repository "` + httpsURL + `" not trusted`, wantTerminal: true},
		{name: "secret without keys", repository: httpsURL, auth: auth("empty", true),
			wantErr: "auth Secret " + namespace + "/empty has neither username nor password", wantTerminal: true},
		{name: "missing secret is retryable", repository: httpsURL, auth: auth("absent", true),
			wantErr: "getting auth Secret " + namespace + "/absent", wantTerminal: false},
		{name: "ssh with known hosts", repository: sshURL, auth: auth("ssh", false)},
		{name: "ssh wrong host key", repository: sshURL, auth: auth("ssh-wrong-host", false),
			wantErr: `ssh host key of repository "` + sshURL + `" not trusted`, wantTerminal: true},
		{name: "ssh wrong host key skipped", repository: sshURL, auth: auth("ssh-wrong-host", true)},
		{name: "ssh without known hosts", repository: sshURL, auth: auth("ssh-no-known-hosts", false),
			wantErr: "auth Secret " + namespace + "/ssh-no-known-hosts has no ssh-knownhosts", wantTerminal: true},
		{name: "ssh without known hosts, skipped", repository: sshURL, auth: auth("ssh-no-known-hosts", true)},
		{name: "ssh unknown client key", repository: sshURL, auth: auth("ssh-wrong-key", false),
			wantErr: `access to repository "` + sshURL + `" denied`, wantTerminal: true},
		{name: "ssh unparsable key", repository: sshURL, auth: auth("ssh-bad-key", false),
			wantErr: "parsing ssh-privatekey of auth Secret " + namespace + "/ssh-bad-key", wantTerminal: true},
		{name: "ssh without secret", repository: sshURL, auth: auth("", false),
			wantErr: `repository "` + sshURL + `" uses ssh: auth.secret must name a Secret with ssh-privatekey`, wantTerminal: true},
		{name: "scp-like address is ssh", repository: "git@127.0.0.1:org/bundles.git", auth: auth("", false),
			wantErr: `repository "git@127.0.0.1:org/bundles.git" uses ssh: auth.secret must name a Secret with ssh-privatekey`, wantTerminal: true},
		{name: "ssh missing repository", repository: f.ssh.RepoURL("org/missing"), auth: auth("ssh", false),
			wantErr: `repository "` + f.ssh.RepoURL("org/missing") + `" not found`, wantTerminal: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := bundle(rukpakv1alpha1.GitSource{Repository: tc.repository, Directory: "manifests",
				Ref: rukpakv1alpha1.GitRef{Commit: f.hidden}, Auth: tc.auth})
			if tc.wantErr != "" {
				assertErr(t, u, b, tc.wantErr, tc.wantTerminal)
				return
			}
			res, err := u.Unpack(context.Background(), b)
			if err != nil {
				t.Fatalf("Unpack: %v", err)
			}
			defer res.Close()
			if got := contents(t, res.FS); got["hidden.yaml"] != "hidden: 1\n" {
				t.Fatalf("content = %v, want hidden.yaml", got)
			}
			if !reflect.DeepEqual(res.ResolvedSource.Git.Auth, tc.auth) {
				t.Fatalf("resolved source auth = %+v, want %+v", res.ResolvedSource.Git.Auth, tc.auth)
			}
		})
	}

	// Branches work over ssh too, by the shallow path.
	res, err := u.Unpack(context.Background(), bundle(rukpakv1alpha1.GitSource{Repository: sshURL,
		Ref: rukpakv1alpha1.GitRef{Branch: "feature"}, Auth: auth("ssh", false)}))
	if err != nil {
		t.Fatalf("Unpack branch over ssh: %v", err)
	}
	defer res.Close()
	if got := res.ResolvedSource.Git.Ref.Commit; got != f.feature {
		t.Fatalf("resolved commit over ssh = %s, want %s", got, f.feature)
	}
}

func TestCloseRemovesContent(t *testing.T) {
	f := newFixture(t)
	base := t.TempDir()
	u := git.New(unpack.Config{Reader: fake.NewClientBuilder().Build(), Namespace: namespace, BaseDir: base})
	res, err := u.Unpack(context.Background(), bundle(rukpakv1alpha1.GitSource{Repository: f.http.RepoURL(f.repo.Name), Ref: rukpakv1alpha1.GitRef{Tag: "v1"}}))
	if err != nil {
		t.Fatalf("Unpack: %v", err)
	}
	if err := res.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	left, err := os.ReadDir(base)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("BaseDir still holds %v after Close", left)
	}
}

func assertErr(t *testing.T, u unpack.Unpacker, b *rukpakv1alpha1.Bundle, want string, terminal bool) {
	t.Helper()
	res, err := u.Unpack(context.Background(), b)
	if err == nil {
		_ = res.Close()
		t.Fatalf("Unpack succeeded, want an error containing %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error = %q, want it to contain %q", err, want)
	}
	if unpack.IsTerminal(err) != terminal {
		t.Fatalf("IsTerminal(%q) = %v, want %v", err, !terminal, terminal)
	}
}

// closedURL is an http URL on a loopback port nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	srv := testgit.NewRoot(t).ServeHTTP(testgit.HTTPOptions{})
	url := srv.RepoURL("org/bundles")
	srv.Server.Close()
	return url
}

func TestPasswordInURLIsRedacted(t *testing.T) {
	f := newFixture(t)
	repository := strings.Replace(f.https.RepoURL(f.repo.Name), "https://", "https://user:hunter2@", 1)
	u := newUnpacker(t)
	_, err := u.Unpack(context.Background(), bundle(rukpakv1alpha1.GitSource{Repository: repository,
		Ref: rukpakv1alpha1.GitRef{Branch: "main"}, Auth: &rukpakv1alpha1.Authorization{InsecureSkipVerify: true}}))
	if err == nil || !strings.Contains(err.Error(), "https://user:xxxxx@127.0.0.1") || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("error = %v, want a denial naming the repository with its password redacted", err)
	}
}

// Objects stored as deltas, in chains, are resolved to their exact content:
// the served repository is repacked with deep delta chains, and an old
// commit is fetched by an abbreviated hash (the whole history).
func TestDeltaChains(t *testing.T) {
	root := testgit.NewRoot(t)
	repo := root.NewRepo("org/deltas")
	lines := make([]string, 2000)
	for i := range lines {
		lines[i] = fmt.Sprintf("key%d: value %d of a manifest long enough to be worth a delta", i, i)
	}
	var commits, revisions []string
	for rev := range 30 {
		lines[rev*37%len(lines)] = fmt.Sprintf("changed%d: in revision %d", rev, rev)
		content := strings.Join(lines, "\n") + "\n"
		repo.WriteFiles(map[string]string{"manifests/big.yaml": content, "manifests/rev.yaml": fmt.Sprintf("rev: %d\n", rev)})
		commits = append(commits, repo.Commit(fmt.Sprintf("revision %d", rev)))
		revisions = append(revisions, content)
	}
	repo.Git("repack", "-a", "-d", "-f", "-q", "--depth=50", "--window=250")
	srv := root.ServeHTTP(testgit.HTTPOptions{})
	u := newUnpacker(t)
	for _, tc := range []struct {
		name string
		ref  rukpakv1alpha1.GitRef
		rev  int
	}{
		{name: "abbreviated old commit", ref: rukpakv1alpha1.GitRef{Commit: commits[3][:8]}, rev: 3},
		{name: "full old commit", ref: rukpakv1alpha1.GitRef{Commit: commits[17]}, rev: 17},
		{name: "branch", ref: rukpakv1alpha1.GitRef{Branch: "main"}, rev: 29},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := u.Unpack(context.Background(), bundle(rukpakv1alpha1.GitSource{Repository: srv.RepoURL(repo.Name), Directory: "manifests", Ref: tc.ref}))
			if err != nil {
				t.Fatalf("Unpack: %v", err)
			}
			defer res.Close()
			want := map[string]string{"big.yaml": revisions[tc.rev], "rev.yaml": fmt.Sprintf("rev: %d\n", tc.rev)}
			if got := contents(t, res.FS); !equal(got, want) {
				t.Fatalf("content of revision %d differs", tc.rev)
			}
		})
	}
}
