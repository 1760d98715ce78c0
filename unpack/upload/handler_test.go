package upload

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/unpack"
)

// tarGz is a gzip tar of files (name -> content), in name order.
func tarGz(t testing.TB, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(files[n]))}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, files[n]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func digestOfBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// tokens authenticates the bearer tokens of the table; the users are what
// a TokenReview would return.
type tokens map[string]string

func (tk tokens) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return nil, false, nil
	}
	name, ok := tk[tok]
	if !ok {
		return nil, false, nil
	}
	return &authenticator.Response{User: &user.DefaultInfo{Name: name}}, true, nil
}

// rights allows a user create on bundles/upload (in core.rukpak.io) for the
// listed Bundle names, "*" for all: what RBAC answers a
// SubjectAccessReview for a rule with resourceNames.
type rights map[string][]string

func (rt rights) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if !a.IsResourceRequest() || a.GetVerb() != "create" || a.GetAPIGroup() != "core.rukpak.io" || a.GetResource() != "bundles" || a.GetSubresource() != "upload" {
		return authorizer.DecisionNoOpinion, "not the upload right", nil
	}
	names := rt[a.GetUser().GetName()]
	if slices.Contains(names, "*") || slices.Contains(names, a.GetName()) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

var (
	archiveA = map[string]string{"manifests/a.yaml": "kind: ConfigMap\n"}
	archiveB = map[string]string{"manifests/b.yaml": "kind: Secret\n"}
)

func uploadBundle(name, uid, pin string) *rukpakv1alpha1.Bundle {
	return &rukpakv1alpha1.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid), Finalizers: []string{rukpakv1alpha1.FinalizerDeleteCachedBundle}},
		Spec: rukpakv1alpha1.BundleSpec{ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain, Source: rukpakv1alpha1.BundleSource{
			Type: rukpakv1alpha1.SourceTypeUpload, Upload: &rukpakv1alpha1.UploadSource{Digest: pin},
		}},
	}
}

type fixture struct {
	h       *Handler
	store   *Store
	bundles map[string]*rukpakv1alpha1.Bundle
	leader  bool
}

var testLimits = unpack.Limits{MaxFetchBytes: 64 << 10, MaxBytes: 256 << 10, MaxFileBytes: 128 << 10}

func newFixture(t *testing.T, maxConcurrent int) *fixture {
	t.Helper()
	store, err := NewStore(t.TempDir(), testLimits)
	if err != nil {
		t.Fatal(err)
	}
	deleting := uploadBundle("deleting", "00000000-0000-0000-0000-000000000004", "")
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	fresh := uploadBundle("fresh", "00000000-0000-0000-0000-000000000005", "")
	fresh.Finalizers = nil
	helm := uploadBundle("helm", "00000000-0000-0000-0000-000000000006", "")
	helm.Spec.ProvisionerClassName = rukpakv1alpha1.ProvisionerClassHelm
	image := uploadBundle("image", "00000000-0000-0000-0000-000000000003", "")
	image.Spec.Source = rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage, Image: &rukpakv1alpha1.ImageSource{Ref: "x"}}
	f := &fixture{store: store, leader: true, bundles: map[string]*rukpakv1alpha1.Bundle{
		"up":       uploadBundle("up", "00000000-0000-0000-0000-000000000001", ""),
		"pinned":   uploadBundle("pinned", "00000000-0000-0000-0000-000000000002", digestOfBytes(tarGz(t, archiveA))),
		"image":    image,
		"deleting": deleting,
		"fresh":    fresh,
		"helm":     helm,
	}}
	f.h = NewHandler(Handler{
		Store: store,
		Authn: tokens{"alice-token": "alice", "bob-token": "bob", "carol-token": "carol"},
		Authz: authorizer.AuthorizerFunc(rights{"alice": {"*"}, "carol": {"pinned"}}.Authorize),
		GetBundle: func(_ context.Context, name string) (*rukpakv1alpha1.Bundle, error) {
			b, ok := f.bundles[name]
			if !ok {
				return nil, apierrors.NewNotFound(schema.GroupResource{Group: "core.rukpak.io", Resource: "bundles"}, name)
			}
			return b.DeepCopy(), nil
		},
		Serves: func(b *rukpakv1alpha1.Bundle) bool {
			return b.Spec.ProvisionerClassName == rukpakv1alpha1.ProvisionerClassPlain
		},
		Leader:  func() bool { return f.leader },
		Scratch: t.TempDir(),
		Log:     logr.Discard(),
	}, maxConcurrent)
	return f
}

func (f *fixture) put(path, token string, body io.Reader, declared int64) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPut, path, body)
	req.ContentLength = declared
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	return rec
}

// incompressible is a gzip tar of one file of n random bytes.
func incompressible(t *testing.T, n int) []byte {
	buf := make([]byte, n)
	rng := rand.NewChaCha8([32]byte{})
	_, _ = rng.Read(buf)
	return tarGz(t, map[string]string{"manifests/big": string(buf)})
}

func TestHandler(t *testing.T) {
	a, b := tarGz(t, archiveA), tarGz(t, archiveB)
	escape := tarGz(t, map[string]string{"../evil.yaml": "x"})
	bomb := tarGz(t, map[string]string{"manifests/zeros": strings.Repeat("\x00", 1<<20)})
	big := incompressible(t, 100<<10)
	cases := []struct {
		name, method, path, token string
		body                      []byte
		declared                  int64 // -1: unknown (chunked)
		notLeader                 bool
		want                      int
		wantBody                  []string
	}{
		{name: "GET", method: http.MethodGet, path: "/uploads/up.tgz", token: "alice-token", want: http.StatusMethodNotAllowed},
		{name: "no suffix", path: "/uploads/up", token: "alice-token", body: a, want: http.StatusNotFound},
		{name: "invalid name", path: "/uploads/Up_1.tgz", token: "alice-token", body: a, want: http.StatusNotFound},
		{name: "encoded slash", path: "/uploads/a%2Fb.tgz", token: "alice-token", body: a, want: http.StatusNotFound},
		{name: "dot-dot", path: "/uploads/../bundles/up.tgz", token: "alice-token", body: a, want: http.StatusNotFound},
		{name: "nested", path: "/uploads/x/up.tgz", token: "alice-token", body: a, want: http.StatusNotFound},
		{name: "not the leader", path: "/uploads/up.tgz", token: "alice-token", body: a, notLeader: true, want: http.StatusServiceUnavailable, wantBody: []string{"not the leader"}},
		{name: "no token", path: "/uploads/up.tgz", body: a, want: http.StatusUnauthorized},
		{name: "unknown token", path: "/uploads/up.tgz", token: "forged", body: a, want: http.StatusUnauthorized},
		{name: "no right", path: "/uploads/up.tgz", token: "bob-token", body: a, want: http.StatusForbidden,
			wantBody: []string{`user "bob" cannot create resource "bundles/upload" in API group "core.rukpak.io" for bundle "up"`, "bundle-uploader"}},
		{name: "right for another bundle", path: "/uploads/up.tgz", token: "carol-token", body: a, want: http.StatusForbidden},
		{name: "no right, oversized declared", path: "/uploads/up.tgz", token: "bob-token", body: a, declared: 1 << 40, want: http.StatusForbidden},
		{name: "missing bundle", path: "/uploads/nothing.tgz", token: "alice-token", body: a, want: http.StatusNotFound, wantBody: []string{`bundle "nothing" not found`}},
		{name: "image bundle", path: "/uploads/image.tgz", token: "alice-token", body: a, want: http.StatusConflict, wantBody: []string{`source type "image"`}},
		{name: "deleting bundle", path: "/uploads/deleting.tgz", token: "alice-token", body: a, want: http.StatusConflict, wantBody: []string{"being deleted"}},
		{name: "not reconciled yet", path: "/uploads/fresh.tgz", token: "alice-token", body: a, want: http.StatusServiceUnavailable},
		{name: "class not served", path: "/uploads/helm.tgz", token: "alice-token", body: a, want: http.StatusNotFound, wantBody: []string{"not reconciled by this provisioner"}},
		{name: "oversized declared", path: "/uploads/up.tgz", token: "alice-token", body: a, declared: 2560 << 20, want: http.StatusRequestEntityTooLarge, wantBody: []string{"declares 2684354560 bytes, more than the limit of 65536"}},
		{name: "oversized streamed", path: "/uploads/up.tgz", token: "alice-token", body: big, declared: -1, want: http.StatusRequestEntityTooLarge, wantBody: []string{"more than the limit of 65536 bytes"}},
		{name: "not gzip", path: "/uploads/up.tgz", token: "alice-token", body: []byte("PK\x03\x04 a zip"), want: http.StatusUnprocessableEntity, wantBody: []string{"gzip: invalid header"}},
		{name: "entry escaping the root", path: "/uploads/up.tgz", token: "alice-token", body: escape, want: http.StatusUnprocessableEntity, wantBody: []string{"evil.yaml"}},
		{name: "decompression bomb", path: "/uploads/up.tgz", token: "alice-token", body: bomb, want: http.StatusUnprocessableEntity, wantBody: []string{"larger than the limit of 131072 bytes"}},
		{name: "trailing data", path: "/uploads/up.tgz", token: "alice-token", body: append(slices.Clone(a), make([]byte, 60<<10)...), want: http.StatusCreated},
		{name: "wrong digest for the pin", path: "/uploads/pinned.tgz", token: "alice-token", body: b, want: http.StatusConflict, wantBody: []string{"pins " + digestOfBytes(a)}},
		{name: "narrow right, pinned content", path: "/uploads/pinned.tgz", token: "carol-token", body: a, want: http.StatusCreated},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 4)
			f.leader = !tc.notLeader
			method := tc.method
			if method == "" {
				method = http.MethodPut
			}
			declared := tc.declared
			if declared == 0 {
				declared = int64(len(tc.body))
			}
			req := httptest.NewRequest(method, tc.path, bytes.NewReader(tc.body))
			req.ContentLength = declared
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			rec := httptest.NewRecorder()
			f.h.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.want, rec.Body)
			}
			for _, w := range tc.wantBody {
				if !strings.Contains(rec.Body.String(), w) {
					t.Errorf("body %q does not say %q", rec.Body, w)
				}
			}
			if rec.Code == http.StatusServiceUnavailable && rec.Header().Get("Retry-After") == "" {
				t.Error("503 without Retry-After")
			}
			if rec.Code != http.StatusCreated {
				for _, bn := range f.bundles {
					if f.store.Has(bn.UID) {
						t.Errorf("refused upload stored for %s", bn.Name)
					}
				}
			}
		})
	}
}

// TestHandlerRepeat: the same content again is 204, other content 409, and
// nothing is left behind in the store's directory.
func TestHandlerRepeat(t *testing.T) {
	f := newFixture(t, 4)
	a, b := tarGz(t, archiveA), tarGz(t, archiveB)
	for i, step := range []struct {
		body []byte
		want int
	}{{a, http.StatusCreated}, {a, http.StatusNoContent}, {b, http.StatusConflict}, {a, http.StatusNoContent}} {
		rec := f.put("/uploads/up.tgz", "alice-token", bytes.NewReader(step.body), int64(len(step.body)))
		if rec.Code != step.want {
			t.Fatalf("step %d: status %d, want %d: %s", i, rec.Code, step.want, rec.Body)
		}
	}
	if got, err := digestOf(f.store.dir + "/" + string(f.bundles["up"].UID) + ".tgz"); err != nil || got != digestOfBytes(a) {
		t.Fatalf("stored %s (%v), want the first upload's %s", got, err, digestOfBytes(a))
	}
	// Content recorded as unpacked (status.resolvedSource) but whose
	// archive was lost: only that content is taken again.
	if err := f.store.Release(f.bundles["up"].UID); err != nil {
		t.Fatal(err)
	}
	f.bundles["up"].Status.ResolvedSource = &rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeUpload, Upload: &rukpakv1alpha1.UploadSource{Digest: digestOfBytes(a)}}
	if rec := f.put("/uploads/up.tgz", "alice-token", bytes.NewReader(b), int64(len(b))); rec.Code != http.StatusConflict {
		t.Fatalf("other content for an unpacked Bundle: %d, want 409", rec.Code)
	}
	if rec := f.put("/uploads/up.tgz", "alice-token", bytes.NewReader(a), int64(len(a))); rec.Code != http.StatusNoContent || !f.store.Has(f.bundles["up"].UID) {
		t.Fatalf("recorded content again: %d (stored %v), want 204 and stored", rec.Code, f.store.Has(f.bundles["up"].UID))
	}
	assertNoTemp(t, f.store.dir)
}

func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	entries, err := filepath.Glob(filepath.Join(dir, tempPrefix+"*"))
	if err != nil || len(entries) > 0 {
		t.Fatalf("temporary files left: %v %v", entries, err)
	}
}

// TestHandlerConcurrency: with every slot taken by a slow upload, the next
// is answered 503 with Retry-After, and a slot frees when an upload ends.
func TestHandlerConcurrency(t *testing.T) {
	f := newFixture(t, 1)
	pr, pw := io.Pipe()
	done := make(chan int)
	go func() {
		done <- f.put("/uploads/up.tgz", "alice-token", pr, -1).Code
	}()
	a := tarGz(t, archiveA)
	// The slow upload holds the slot once it sent its first bytes.
	if _, err := pw.Write(a[:10]); err != nil {
		t.Fatal(err)
	}
	rec := f.put("/uploads/pinned.tgz", "alice-token", bytes.NewReader(a), int64(len(a)))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), "1 uploads are in progress") {
		t.Fatalf("second upload: %d %q (Retry-After %q), want 503 with Retry-After", rec.Code, rec.Body, rec.Header().Get("Retry-After"))
	}
	if _, err := pw.Write(a[10:]); err != nil {
		t.Fatal(err)
	}
	_ = pw.Close()
	if code := <-done; code != http.StatusCreated {
		t.Fatalf("slow upload: %d", code)
	}
	if rec := f.put("/uploads/pinned.tgz", "alice-token", bytes.NewReader(a), int64(len(a))); rec.Code != http.StatusCreated {
		t.Fatalf("after the slot freed: %d %s", rec.Code, rec.Body)
	}
}

// TestHandlerTimeout: a client that stops sending is answered 408 at the
// deadline, over a real connection (the read deadline ends the read).
func TestHandlerTimeout(t *testing.T) {
	f := newFixture(t, 1)
	f.h.Timeout = 300 * time.Millisecond
	srv := httptest.NewServer(f.h)
	defer srv.Close()
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = pw.Write(tarGz(t, archiveA)[:10]) }()
	req, err := http.NewRequest(http.MethodPut, srv.URL+"/uploads/up.tgz", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer alice-token")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "not complete within 300ms") {
		t.Fatalf("status %d %q, want 408", resp.StatusCode, body)
	}
	if f.store.Has(f.bundles["up"].UID) {
		t.Fatal("a timed-out upload was stored")
	}
	// The slot is free again.
	a := tarGz(t, archiveA)
	if rec := f.put("/uploads/up.tgz", "alice-token", bytes.NewReader(a), int64(len(a))); rec.Code != http.StatusCreated {
		t.Fatalf("after the timeout: %d %s", rec.Code, rec.Body)
	}
}

// TestHandlerBundleDeletedDuringUpload: an upload whose Bundle is deleted
// (or replaced) while it is read is not kept.
func TestHandlerBundleDeletedDuringUpload(t *testing.T) {
	f := newFixture(t, 1)
	pr, pw := io.Pipe()
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- f.put("/uploads/up.tgz", "alice-token", pr, -1) }()
	a := tarGz(t, archiveA)
	if _, err := pw.Write(a[:10]); err != nil {
		t.Fatal(err)
	}
	uid := f.bundles["up"].UID
	f.bundles["up"] = uploadBundle("up", "00000000-0000-0000-0000-0000000000ff", "")
	_, _ = pw.Write(a[10:])
	_ = pw.Close()
	if rec := <-done; rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), "deleted during the upload") {
		t.Fatalf("status %d %q, want 409", rec.Code, rec.Body)
	}
	if f.store.Has(uid) || f.store.Has(f.bundles["up"].UID) {
		t.Fatal("an upload for a deleted Bundle was kept")
	}
}
