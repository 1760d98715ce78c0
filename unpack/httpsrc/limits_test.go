package httpsrc_test

import (
	"archive/tar"
	"compress/gzip"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rukpak-dev/rukpak/internal/testnet"
	"github.com/rukpak-dev/rukpak/unpack"
)

// endlessArchive streams a gzip tar whose one file never ends, in
// incompressible bytes: only the fetch limit stops it.
func endlessArchive(w http.ResponseWriter, r *http.Request) {
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	_ = tw.WriteHeader(&tar.Header{Name: "manifests/endless.yaml", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1 << 40})
	rng := rand.NewChaCha8([32]byte{})
	chunk := make([]byte, 64<<10)
	for r.Context().Err() == nil {
		_, _ = rng.Read(chunk)
		if _, err := tw.Write(chunk); err != nil {
			return
		}
	}
}

func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestUnpackBoundsResponses(t *testing.T) {
	page := strings.Repeat("<p>not found</p>\n", 64<<10) // 1.1 MiB
	srv := server(t, false, nil)
	mux := http.NewServeMux()
	mux.HandleFunc("/endless.tgz", endlessArchive)
	mux.HandleFunc("/declared.tgz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(2560<<20)) // 2.5 GiB, never sent
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("/page", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, page, http.StatusNotFound) })
	srv.Config.Handler = mux

	for _, tc := range []struct {
		name, path, wantErr string
		limits              unpack.Limits
	}{
		{
			name: "endless body", path: "/endless.tgz", limits: unpack.Limits{MaxFetchBytes: 1 << 20},
			wantErr: "GET " + srv.URL + "/endless.tgz: reading archive: entry \"manifests/endless.yaml\": the response is larger than the fetch limit of 1048576 bytes",
		},
		{
			name: "declared too large", path: "/declared.tgz",
			wantErr: "GET " + srv.URL + "/declared.tgz: the response declares 2684354560 bytes, more than the fetch limit of 536870912",
		},
		{
			name: "error page", path: "/page",
			wantErr: "GET " + srv.URL + "/page: unexpected status \"404 Not Found\"",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			alloc := allocated(func() {
				_, err = newUnpacker(t, tc.limits).Unpack(t.Context(), bundleFor(srv.URL+tc.path, "", false))
			})
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("error = %v\nwant    %q", err, tc.wantErr)
			}
			if !unpack.IsTerminal(err) {
				t.Errorf("error %v is retryable", err)
			}
			if alloc > 64<<20 {
				t.Errorf("allocated %d MiB, want < 64 MiB", alloc>>20)
			}
		})
	}
}

// A server that never answers, or stops half way, costs one fetch timeout.
func TestUnpackFetchTimeout(t *testing.T) {
	blackhole := testnet.Blackhole(t)
	stall := make(chan struct{})
	defer close(stall)
	stalling := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		zw := gzip.NewWriter(w)
		_, _ = zw.Write(make([]byte, 1024))
		_ = zw.Flush()
		w.(http.Flusher).Flush()
		select { // then nothing more
		case <-stall:
		case <-r.Context().Done():
		}
	}))
	defer stalling.Close()

	for _, url := range []string{"http://" + blackhole + "/bundle.tgz", stalling.URL + "/bundle.tgz"} {
		t.Run(url, func(t *testing.T) {
			start := time.Now()
			_, err := newUnpacker(t, unpack.Limits{FetchTimeout: 300 * time.Millisecond}).Unpack(t.Context(), bundleFor(url, "", false))
			if want := "GET " + url + ": not done within the fetch timeout of 300ms"; err == nil || err.Error() != want {
				t.Fatalf("error = %v, want %q", err, want)
			}
			if unpack.IsTerminal(err) {
				t.Errorf("a timeout is retryable, got terminal %v", err)
			}
			if elapsed := time.Since(start); elapsed > 30*time.Second {
				t.Errorf("returned after %s", elapsed)
			}
		})
	}
}

// Credentials go only to the hosts their Secret names, and never follow a
// redirect to another scheme, host or port.
func TestUnpackCredentialHosts(t *testing.T) {
	archive := tarGz(t, map[string]string{"manifests/a.yaml": "a"})
	var mu sync.Mutex
	var sawAuth []string // "server path" for every request that carried credentials
	record := func(name string, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "" {
				mu.Lock()
				sawAuth = append(sawAuth, name+" "+r.URL.Path)
				mu.Unlock()
			}
			next.ServeHTTP(w, r)
		})
	}
	other := httptest.NewServer(record("other", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(archive) })))
	defer other.Close()
	home := server(t, false, map[string][]byte{"/bundle.tgz": archive})
	homeHandler := home.Config.Handler
	mux := http.NewServeMux()
	mux.Handle("/", homeHandler)
	mux.HandleFunc("/private/moved.tgz", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/private/bundle.tgz", http.StatusFound)
	})
	mux.HandleFunc("/private/away.tgz", func(w http.ResponseWriter, r *http.Request) {
		// The same host name on another port: net/http keeps credentials.
		http.Redirect(w, r, other.URL+"/bundle.tgz", http.StatusFound)
	})
	home.Config.Handler = record("home", mux)

	for _, tc := range []struct {
		name, path, secret, wantErr string
		wantAuth                    []string
	}{
		{name: "same host", path: "/private/bundle.tgz", secret: "good", wantAuth: []string{"home /private/bundle.tgz"}},
		{name: "redirect on the same host", path: "/private/moved.tgz", secret: "good", wantAuth: []string{"home /private/moved.tgz", "home /private/bundle.tgz"}},
		{name: "redirect to another port", path: "/private/away.tgz", secret: "good", wantAuth: []string{"home /private/away.tgz"}},
		{
			name: "secret without allowed hosts", path: "/private/bundle.tgz", secret: "unannotated",
			wantErr: "GET " + home.URL + "/private/bundle.tgz: auth Secret rukpak-system/unannotated does not say which hosts its credentials are for: annotate it with core.rukpak.io/allowed-hosts (for example \"127.0.0.1\")",
		},
		{
			name: "secret for another host", path: "/private/bundle.tgz", secret: "elsewhere",
			wantErr: "GET " + home.URL + "/private/bundle.tgz: auth Secret rukpak-system/elsewhere is not for host \"" + strings.TrimPrefix(home.URL, "http://") + "\" (its core.rukpak.io/allowed-hosts annotation allows \"registry.example.com\")",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			sawAuth = nil
			mu.Unlock()
			res, err := newUnpacker(t, unpack.Limits{}).Unpack(t.Context(), bundleFor(home.URL+tc.path, tc.secret, false))
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v\nwant    %q", err, tc.wantErr)
				}
				if !unpack.IsTerminal(err) {
					t.Errorf("error %v is retryable", err)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if got := files(t, res.FS); !slices.Equal(got, []string{"manifests/a.yaml=a"}) {
					t.Errorf("files = %q", got)
				}
				_ = res.Close()
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(sawAuth, tc.wantAuth) {
				t.Errorf("credentials sent with %q, want %q", sawAuth, tc.wantAuth)
			}
		})
	}
}
