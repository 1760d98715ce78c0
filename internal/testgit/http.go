package testgit

import (
	"crypto/subtle"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
)

// HTTPOptions configure a smart HTTP server.
type HTTPOptions struct {
	// TLS serves https with a self-signed certificate (see HTTPServer.CAPEM).
	TLS bool
	// Username and Password, when Username is set, require HTTP basic auth.
	Username, Password string
}

// HTTPServer serves a Root's repositories over git's smart HTTP protocol.
type HTTPServer struct {
	// URL is the server's base URL, e.g. https://127.0.0.1:41234.
	URL string
	// CAPEM is the PEM certificate clients must trust for a TLS server.
	CAPEM []byte
	// Server is the underlying server; Server.Client() trusts it.
	Server *httptest.Server
}

// RepoURL is the clone URL of repository name.
func (s *HTTPServer) RepoURL(name string) string { return s.URL + "/" + name }

// ServeHTTP starts git http-backend for the root's repositories on
// 127.0.0.1, stopped when the test ends.
func (r *Root) ServeHTTP(opts HTTPOptions) *HTTPServer {
	r.t.Helper()
	gitPath, err := exec.LookPath("git")
	if err != nil {
		r.t.Fatalf("git http-backend needs git: %v", err)
	}
	var h http.Handler = &cgi.Handler{
		Path: gitPath,
		Args: []string{"http-backend"},
		Dir:  r.Dir,
		// Clients see the errors that matter; keep test output clean.
		Stderr: io.Discard,
		Env: append(append([]string{"PATH=" + os.Getenv("PATH")}, gitSettings...),
			"GIT_PROJECT_ROOT="+r.Dir,
			// Serve every repository without a git-daemon-export-ok file.
			"GIT_HTTP_EXPORT_ALL=1",
		),
	}
	if opts.Username != "" {
		h = basicAuth(h, opts.Username, opts.Password)
	}

	srv := httptest.NewUnstartedServer(h)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		r.t.Fatalf("listening on loopback: %v", err)
	}
	srv.Listener.Close()
	srv.Listener = ln
	out := &HTTPServer{Server: srv}
	if opts.TLS {
		srv.StartTLS()
		out.CAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	} else {
		srv.Start()
	}
	r.t.Cleanup(srv.Close)
	out.URL = srv.URL
	return out
}

// CertPool is a pool holding the server's certificate.
func (s *HTTPServer) CertPool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.CAPEM)
	return pool
}

func basicAuth(next http.Handler, username, password string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		u, p, ok := req.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(username)) != 1 ||
			subtle.ConstantTimeCompare([]byte(p), []byte(password)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="testgit"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, req)
	})
}
