package testgit_test

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rukpak-dev/rukpak/internal/testgit"
)

// gitClient runs the git CLI as a client in dir and returns its combined
// output and error.
func gitClient(t *testing.T, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_TERMINAL_PROMPT=0")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func newFixture(t *testing.T) (*testgit.Root, *testgit.Repo, string, string) {
	root := testgit.NewRoot(t)
	repo := root.NewRepo("org/bundles")
	repo.WriteFiles(map[string]string{"manifests/a.yaml": "a: 1\n"})
	main := repo.Commit("first")
	hidden := repo.UnreachableCommit(map[string]string{"manifests/hidden.yaml": "h: 1\n"}, "hidden")
	if branches := repo.Git("branch", "--contains", hidden); branches != "" {
		t.Fatalf("commit %s is still on branches %q", hidden, branches)
	}
	return root, repo, main, hidden
}

func TestHTTP(t *testing.T) {
	root, repo, main, hidden := newFixture(t)
	repo.Tag("v1", main)

	tests := []struct {
		name    string
		opts    testgit.HTTPOptions
		userURL func(srv *testgit.HTTPServer) string
		env     func(t *testing.T, srv *testgit.HTTPServer) []string
		wantErr string
	}{
		{name: "plain", userURL: func(s *testgit.HTTPServer) string { return s.RepoURL(repo.Name) }},
		{
			name: "tls with basic auth",
			opts: testgit.HTTPOptions{TLS: true, Username: "u", Password: "p"},
			userURL: func(s *testgit.HTTPServer) string {
				return strings.Replace(s.RepoURL(repo.Name), "https://", "https://u:p@", 1)
			},
			env: func(t *testing.T, s *testgit.HTTPServer) []string {
				ca := filepath.Join(t.TempDir(), "ca.pem")
				if err := os.WriteFile(ca, s.CAPEM, 0o600); err != nil {
					t.Fatal(err)
				}
				return []string{"GIT_SSL_CAINFO=" + ca}
			},
		},
		{
			name: "wrong password",
			opts: testgit.HTTPOptions{Username: "u", Password: "p"},
			userURL: func(s *testgit.HTTPServer) string {
				return strings.Replace(s.RepoURL(repo.Name), "http://", "http://u:wrong@", 1)
			},
			wantErr: "Authentication failed",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := root.ServeHTTP(tc.opts)
			if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") && !strings.HasPrefix(srv.URL, "https://127.0.0.1:") {
				t.Fatalf("server URL %q is not on 127.0.0.1", srv.URL)
			}
			var env []string
			if tc.env != nil {
				env = tc.env(t, srv)
			}
			clone := t.TempDir()
			out, err := gitClient(t, clone, env, "clone", "--quiet", tc.userURL(srv), ".")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(out, tc.wantErr) {
					t.Fatalf("clone: err=%v output=%q, want an error containing %q", err, out, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("clone: %v: %s", err, out)
			}
			if _, err := os.Stat(filepath.Join(clone, "manifests", "a.yaml")); err != nil {
				t.Fatalf("cloned tree: %v", err)
			}
			// The unreachable commit is served to a client that asks for it.
			if out, err := gitClient(t, clone, env, "fetch", "--quiet", "origin", hidden); err != nil {
				t.Fatalf("fetching unreachable commit %s: %v: %s", hidden, err, out)
			}
			if out, err := gitClient(t, clone, nil, "cat-file", "-e", hidden+":manifests/hidden.yaml"); err != nil {
				t.Fatalf("fetched commit lacks its file: %v: %s", err, out)
			}
		})
	}
}

func TestHTTPHost(t *testing.T) {
	root, repo, _, _ := newFixture(t)
	ipv6 := true
	if ln, err := net.Listen("tcp", "[::1]:0"); err != nil {
		ipv6 = false
	} else {
		_ = ln.Close()
	}
	for _, tc := range []struct {
		name   string
		opts   testgit.HTTPOptions
		prefix string // of URL
	}{
		{"explicit 127.0.0.1", testgit.HTTPOptions{Host: "127.0.0.1"}, "http://127.0.0.1:"},
		{"localhost", testgit.HTTPOptions{Host: "localhost"}, "http://localhost:"},
		{"localhost over tls", testgit.HTTPOptions{Host: "localhost", TLS: true}, "https://localhost:"},
		{"127.0.0.1 over tls", testgit.HTTPOptions{Host: "127.0.0.1", TLS: true}, "https://127.0.0.1:"},
		{"::1 over tls", testgit.HTTPOptions{Host: "::1", TLS: true}, "https://[::1]:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if strings.Contains(tc.prefix, "[::1]") && !ipv6 {
				t.Skip("no IPv6 loopback here")
			}
			srv := root.ServeHTTP(tc.opts)
			if !strings.HasPrefix(srv.URL, tc.prefix) {
				t.Fatalf("URL = %q, want prefix %q", srv.URL, tc.prefix)
			}
			url := srv.RepoURL(repo.Name)
			if !strings.HasPrefix(url, tc.prefix) {
				t.Fatalf("RepoURL = %q, want prefix %q", url, tc.prefix)
			}
			var env []string
			if tc.opts.TLS {
				ca := filepath.Join(t.TempDir(), "ca.pem")
				if err := os.WriteFile(ca, srv.CAPEM, 0o600); err != nil {
					t.Fatal(err)
				}
				env = []string{"GIT_SSL_CAINFO=" + ca}
			}
			// git verifies the certificate against the name in the URL.
			clone := t.TempDir()
			if out, err := gitClient(t, clone, env, "clone", "--quiet", url, "."); err != nil {
				t.Fatalf("clone %s: %v: %s", url, err, out)
			}
			if _, err := os.Stat(filepath.Join(clone, "manifests", "a.yaml")); err != nil {
				t.Fatalf("cloned tree: %v", err)
			}
			// So does Go, trusting only CAPEM (Server.Client()).
			resp, err := srv.Server.Client().Get(url + "/info/refs?service=git-upload-pack")
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET info/refs: %s", resp.Status)
			}
		})
	}
}

func TestSSH(t *testing.T) {
	root, repo, main, _ := newFixture(t)
	srv := root.ServeSSH()
	dir := t.TempDir()
	key := filepath.Join(dir, "id")
	knownHosts := filepath.Join(dir, "known_hosts")
	otherKey := filepath.Join(dir, "other")
	other, err := testgit.NewClientKeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{key: srv.ClientKeyPEM, knownHosts: []byte(srv.KnownHosts + "\n"), otherKey: other} {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sshCommand := func(key string) []string {
		return []string{"GIT_SSH_COMMAND=ssh -F /dev/null -o BatchMode=yes -o IdentitiesOnly=yes -o StrictHostKeyChecking=yes" +
			" -o UserKnownHostsFile=" + knownHosts + " -i " + key}
	}

	tests := []struct {
		name    string
		key     string
		repo    string
		wantErr string
	}{
		{name: "authorised key", key: key, repo: repo.Name},
		{name: "unknown key", key: otherKey, repo: repo.Name, wantErr: "Permission denied"},
		{name: "missing repository", key: key, repo: "nope", wantErr: "does not appear to be a git repository"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := gitClient(t, t.TempDir(), sshCommand(tc.key), "ls-remote", srv.RepoURL(tc.repo), "refs/heads/main")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(out, tc.wantErr) {
					t.Fatalf("ls-remote: err=%v output=%q, want an error containing %q", err, out, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ls-remote: %v: %s", err, out)
			}
			if want := main + "\trefs/heads/main"; strings.TrimSpace(out) != want {
				t.Fatalf("ls-remote = %q, want %q", out, want)
			}
		})
	}
}
