package testgit

import (
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/rukpak-dev/rukpak/internal/selfsigned"
)

// HTTPOptions configure a smart HTTP server.
type HTTPOptions struct {
	// TLS serves https with a self-signed certificate (see HTTPServer.CAPEM).
	TLS bool
	// Username and Password, when Username is set, require HTTP basic auth.
	Username, Password string
	// Host, when set, is the host (an IP address or a DNS name, without
	// port) the server is named by in URL and RepoURL instead of
	// 127.0.0.1. The server listens on that IP address; on 127.0.0.1 for
	// "localhost"; and on all interfaces for any other name (such as
	// host.docker.internal). With TLS, the certificate is then a fresh
	// self-signed one valid for Host, 127.0.0.1, ::1 and localhost. Only
	// name a non-loopback host for a network you trust (such as kind's
	// Docker bridge): anyone who reaches it can clone.
	Host string
}

// HTTPServer serves a Root's repositories over git's smart HTTP protocol.
type HTTPServer struct {
	// URL is the server's base URL, e.g. https://127.0.0.1:41234, with
	// HTTPOptions.Host as its host when set. (Server.URL always names the
	// listening address.)
	URL string
	// CAPEM is the PEM certificate clients must trust for a TLS server.
	CAPEM []byte
	// Server is the underlying server; Server.Client() trusts it.
	Server *httptest.Server
}

// RepoURL is the clone URL of repository name.
func (s *HTTPServer) RepoURL(name string) string { return s.URL + "/" + name }

// ServeHTTP starts git http-backend for the root's repositories on
// 127.0.0.1 (or opts.Host), stopped when the test ends.
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

	host := strings.TrimSuffix(strings.TrimPrefix(opts.Host, "["), "]")
	if host == "" {
		host = "127.0.0.1"
	} else if strings.ContainsAny(host, "/@ ") || (strings.Contains(host, ":") && net.ParseIP(host) == nil) {
		r.t.Fatalf("testgit: HTTPOptions.Host %q: want an IP address or a DNS name, without port", opts.Host)
	}
	srv := httptest.NewUnstartedServer(h)
	ln, err := net.Listen("tcp", net.JoinHostPort(listenHost(host), "0"))
	if err != nil {
		r.t.Fatalf("listening for host %s: %v", host, err)
	}
	srv.Listener.Close()
	srv.Listener = ln
	out := &HTTPServer{Server: srv}
	scheme := "http"
	if opts.TLS {
		scheme = "https"
		if opts.Host != "" {
			// httptest's own certificate covers only loopback names.
			pair, err := selfsigned.New([]string{host, "127.0.0.1", "::1", "localhost"}, 24*time.Hour)
			if err != nil {
				r.t.Fatalf("testgit: %v", err)
			}
			cert, err := pair.TLSCertificate()
			if err != nil {
				r.t.Fatalf("testgit: %v", err)
			}
			srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
			out.CAPEM = pair.CAPEM
		}
		srv.StartTLS()
		if out.CAPEM == nil {
			out.CAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
		}
	} else {
		srv.Start()
	}
	r.t.Cleanup(srv.Close)
	_, port, err := net.SplitHostPort(ln.Addr().String())
	if err != nil {
		r.t.Fatalf("testgit: %v", err)
	}
	out.URL = scheme + "://" + net.JoinHostPort(host, port)
	return out
}

// listenHost is the address to listen on for clients naming host: the IP
// itself, loopback for localhost, all interfaces ("") for any other name.
func listenHost(host string) string {
	if host == "localhost" {
		return "127.0.0.1"
	}
	if net.ParseIP(host) != nil {
		return host
	}
	return ""
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
