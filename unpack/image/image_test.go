package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rukpak-dev/rukpak/internal/testfiles"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	helmregistry "helm.sh/helm/v3/pkg/registry"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testregistry"
	"github.com/rukpak-dev/rukpak/unpack"
)

const namespace = "rukpak-system"

// newUnpacker fails fast instead of retrying, with Secrets served by a
// fake client (the Secret reader is not what is under test).
func newUnpacker(t testing.TB, limits unpack.Limits, objs ...client.Object) *Unpacker {
	t.Helper()
	u := New(unpack.Config{
		Reader:    fake.NewClientBuilder().WithObjects(objs...).Build(),
		Namespace: namespace,
		BaseDir:   t.TempDir(),
		Limits:    limits,
	})
	u.backoff = &remote.Backoff{Steps: 1, Duration: time.Millisecond}
	return u
}

func bundleFor(src rukpakv1alpha1.ImageSource) *rukpakv1alpha1.Bundle {
	return &rukpakv1alpha1.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "test"},
		Spec: rukpakv1alpha1.BundleSpec{
			ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain,
			Source:               rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage, Image: &src},
		},
	}
}

// files lists a result's regular files with their contents.
func files(t *testing.T, fsys fs.FS) []string { return testfiles.List(t, fsys) }

func unpackOK(t *testing.T, u *Unpacker, b *rukpakv1alpha1.Bundle) *unpack.Result {
	t.Helper()
	res, err := u.Unpack(t.Context(), b)
	if err != nil {
		t.Fatalf("unpack: %v", err)
	}
	if res.State != unpack.StateUnpacked {
		t.Fatalf("state %s, want Unpacked", res.State)
	}
	t.Cleanup(func() { _ = res.Close() })
	return res
}

func TestUnpackLayersAndWhiteouts(t *testing.T) {
	reg := testregistry.New(t)
	img := testregistry.Image(t,
		testregistry.Layer(t, map[string]string{
			"manifests/a.yaml": "a1", "manifests/b.yaml": "b1", "old/x": "x", "metadata/m": "m1",
		}),
		testregistry.Layer(t, map[string]string{
			"manifests/a.yaml": "a2", "manifests/.wh.b.yaml": "", ".wh.old": "",
			"metadata/.wh..wh..opq": "", "metadata/n": "n2",
		}),
	)
	digestRef := reg.MustPush(t, reg.Ref("bundle:v1"), img)
	u := newUnpacker(t, unpack.Limits{})
	src := rukpakv1alpha1.ImageSource{Ref: reg.Ref("bundle:v1"), CertificateData: string(reg.CAPEM)}

	res := unpackOK(t, u, bundleFor(src))
	want := []string{"manifests/a.yaml=a2", "metadata/n=n2"}
	if got := files(t, res.FS); !slices.Equal(got, want) {
		t.Errorf("files = %q, want %q", got, want)
	}
	if got := res.ResolvedSource.Image.Ref; got != digestRef {
		t.Errorf("resolved ref = %q, want %q", got, digestRef)
	}
	if res.ResolvedSource.Image.CertificateData != src.CertificateData || res.ResolvedSource.Type != rukpakv1alpha1.SourceTypeImage {
		t.Errorf("resolved source lost the rest of the spec: %+v", res.ResolvedSource)
	}

	// The same digest, by tag or by digest, is never pulled again.
	pulls := reg.BlobPulls()
	for _, ref := range []string{src.Ref, digestRef} {
		again := src
		again.Ref = ref
		res := unpackOK(t, u, bundleFor(again))
		if got := files(t, res.FS); !slices.Equal(got, want) {
			t.Errorf("cached files = %q, want %q", got, want)
		}
	}
	if got := reg.BlobPulls(); got != pulls {
		t.Errorf("blobs pulled again: %d pulls, want %d", got, pulls)
	}
	if entries, _ := os.ReadDir(u.tmpDir()); len(entries) != 0 {
		t.Errorf("temporary trees left behind: %v", entries)
	}
}

func TestUnpackUsesResolvedSource(t *testing.T) {
	reg := testregistry.New(t)
	tag := reg.Ref("bundle:latest")
	reg.MustPush(t, tag, testregistry.Image(t, testregistry.Layer(t, map[string]string{"manifests/a.yaml": "old"})))
	u := newUnpacker(t, unpack.Limits{})
	src := rukpakv1alpha1.ImageSource{Ref: tag, CertificateData: string(reg.CAPEM)}

	first := bundleFor(src)
	res := unpackOK(t, u, first)
	first.Status.ResolvedSource = res.ResolvedSource

	// The tag moves.
	reg.MustPush(t, tag, testregistry.Image(t, testregistry.Layer(t, map[string]string{"manifests/a.yaml": "new"})))

	if got := files(t, unpackOK(t, u, first).FS); !slices.Equal(got, []string{"manifests/a.yaml=old"}) {
		t.Errorf("pinned bundle got %q, want the old content", got)
	}
	if got := files(t, unpackOK(t, u, bundleFor(src)).FS); !slices.Equal(got, []string{"manifests/a.yaml=new"}) {
		t.Errorf("new bundle got %q, want the new content", got)
	}
}

func TestUnpackPullSecret(t *testing.T) {
	reg := testregistry.New(t, testregistry.WithBasicAuth("puller", "s3cret"))
	ref := reg.Ref("private:v1")
	reg.MustPush(t, ref, testregistry.Image(t, testregistry.Layer(t, map[string]string{"manifests/a.yaml": "a"})))

	secret := func(name string, typ corev1.SecretType, data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Type: typ, Data: data}
	}
	u := newUnpacker(t, unpack.Limits{},
		secret("good", corev1.SecretTypeDockerConfigJson, map[string][]byte{corev1.DockerConfigJsonKey: reg.DockerConfigJSON("puller", "s3cret")}),
		secret("wrong", corev1.SecretTypeDockerConfigJson, map[string][]byte{corev1.DockerConfigJsonKey: reg.DockerConfigJSON("puller", "nope")}),
		secret("opaque", corev1.SecretTypeOpaque, map[string][]byte{"password": []byte("x")}),
		secret("garbled", corev1.SecretTypeDockerConfigJson, map[string][]byte{corev1.DockerConfigJsonKey: []byte("{")}),
	)

	for _, tc := range []struct {
		secret       string
		wantErr      string
		wantTerminal bool
	}{
		{secret: "good"},
		{secret: "", wantErr: `pulling image "` + ref + `": access denied`, wantTerminal: true},
		{secret: "wrong", wantErr: `pulling image "` + ref + `": access denied`, wantTerminal: true},
		{secret: "missing", wantErr: `pull secret "missing" not found in namespace "rukpak-system"`},
		{secret: "opaque", wantErr: `pull secret rukpak-system/opaque: type "Opaque" has neither a .dockerconfigjson nor a .dockercfg key`, wantTerminal: true},
		{secret: "garbled", wantErr: "pull secret rukpak-system/garbled: key .dockerconfigjson is not valid JSON", wantTerminal: true},
	} {
		t.Run("secret "+tc.secret, func(t *testing.T) {
			b := bundleFor(rukpakv1alpha1.ImageSource{Ref: ref, ImagePullSecretName: tc.secret, CertificateData: string(reg.CAPEM)})
			res, err := u.Unpack(t.Context(), b)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got := files(t, res.FS); !slices.Equal(got, []string{"manifests/a.yaml=a"}) {
					t.Errorf("files = %q", got)
				}
				return
			}
			assertErr(t, err, tc.wantErr, tc.wantTerminal)
		})
	}
}

func TestUnpackTLS(t *testing.T) {
	reg := testregistry.New(t)
	ref := reg.Ref("bundle:v1")
	reg.MustPush(t, ref, testregistry.Image(t, testregistry.Layer(t, map[string]string{"manifests/a.yaml": "a"})))
	other := testregistry.New(t) // a CA that did not sign the registry's certificate

	for _, tc := range []struct {
		name    string
		src     rukpakv1alpha1.ImageSource
		wantErr string
	}{
		{name: "trusted with certificateData", src: rukpakv1alpha1.ImageSource{CertificateData: string(reg.CAPEM)}},
		{name: "insecureSkipTLSVerify", src: rukpakv1alpha1.ImageSource{InsecureSkipTLSVerify: true}},
		{name: "system roots only", wantErr: `pulling image "` + ref + `": registry certificate is not trusted`},
		{name: "another CA", src: rukpakv1alpha1.ImageSource{CertificateData: string(other.CAPEM)}, wantErr: "registry certificate is not trusted"},
		{name: "not PEM", src: rukpakv1alpha1.ImageSource{CertificateData: "hello"}, wantErr: `image "` + ref + `": certificateData holds no PEM certificate`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.src.Ref = ref
			res, err := newUnpacker(t, unpack.Limits{}).Unpack(t.Context(), bundleFor(tc.src))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got := files(t, res.FS); !slices.Equal(got, []string{"manifests/a.yaml=a"}) {
					t.Errorf("files = %q", got)
				}
				return
			}
			assertErr(t, err, tc.wantErr, true)
		})
	}
}

func TestUnpackErrors(t *testing.T) {
	reg := testregistry.New(t)
	ca := string(reg.CAPEM)
	reg.MustPush(t, reg.Ref("bundle:v1"), testregistry.Image(t, testregistry.Layer(t, map[string]string{"manifests/a.yaml": "a"})))
	unknownDigest := reg.Ref("bundle@sha256:" + strings.Repeat("ab", 32))

	var evil bytes.Buffer
	tw := tar.NewWriter(&evil)
	_ = tw.WriteHeader(&tar.Header{Name: "manifests/passwd", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"})
	_ = tw.Close()
	reg.MustPush(t, reg.Ref("evil:v1"), testregistry.Image(t,
		testregistry.Layer(t, map[string]string{"manifests/a.yaml": "a"}),
		testregistry.LayerFromTar(t, evil.Bytes())))
	reg.MustPush(t, reg.Ref("bomb:v1"), testregistry.Image(t,
		testregistry.Layer(t, map[string]string{"manifests/bomb.yaml": string(make([]byte, 4<<20))})))

	for _, tc := range []struct {
		name, ref, wantErr string
		limits             unpack.Limits
	}{
		{name: "missing tag", ref: reg.Ref("bundle:v9"), wantErr: `image "` + reg.Ref("bundle:v9") + `" not found`},
		{name: "missing repository", ref: reg.Ref("nothing:v1"), wantErr: `image "` + reg.Ref("nothing:v1") + `" not found`},
		{name: "unknown digest", ref: unknownDigest, wantErr: `image "` + unknownDigest + `" not found`},
		{name: "bad reference", ref: "Not A Ref!", wantErr: `invalid image reference "Not A Ref!"`},
		{name: "symlink to /etc/passwd", ref: reg.Ref("evil:v1"),
			wantErr: `": layer 1: symlink "manifests/passwd" points outside the bundle root ("/etc/passwd")`},
		{name: "decompression bomb", ref: reg.Ref("bomb:v1"), limits: unpack.Limits{MaxBytes: 1 << 20},
			wantErr: "layer 0: bundle content exceeds the limit of 1048576 bytes (at manifests/bomb.yaml)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newUnpacker(t, tc.limits)
			_, err := u.Unpack(t.Context(), bundleFor(rukpakv1alpha1.ImageSource{Ref: tc.ref, CertificateData: ca}))
			assertErr(t, err, tc.wantErr, true)
			// A failed pull leaves nothing behind, least of all a cache entry.
			var left []string
			_ = filepath.WalkDir(u.cfg.BaseDir, func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					left = append(left, p)
				}
				return nil
			})
			if len(left) != 0 {
				t.Errorf("left files behind: %q", left)
			}
		})
	}
}

func TestUnpackRetryable(t *testing.T) {
	unavailable := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "try later", http.StatusServiceUnavailable)
	}))
	defer unavailable.Close()
	closed := httptest.NewTLSServer(http.NotFoundHandler())
	closedHost := strings.TrimPrefix(closed.URL, "https://")
	closed.Close()

	for _, tc := range []struct{ name, ref, wantErr string }{
		{"5xx", strings.TrimPrefix(unavailable.URL, "https://") + "/bundle:v1", "503 Service Unavailable"},
		{"connection refused", closedHost + "/bundle:v1", "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newUnpacker(t, unpack.Limits{}).Unpack(t.Context(), bundleFor(rukpakv1alpha1.ImageSource{Ref: tc.ref, InsecureSkipTLSVerify: true}))
			assertErr(t, err, `pulling image "`+tc.ref+`"`, false)
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestUnpackNotImage(t *testing.T) {
	b := bundleFor(rukpakv1alpha1.ImageSource{})
	b.Spec.Source = rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeHTTP, HTTP: &rukpakv1alpha1.HTTPSource{URL: "https://x"}}
	_, err := newUnpacker(t, unpack.Limits{}).Unpack(t.Context(), b)
	assertErr(t, err, `bundle "test" has no image source`, true)
}

func assertErr(t *testing.T, err error, want string, terminal bool) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one containing %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not contain %q", err, want)
	}
	if unpack.IsTerminal(err) != terminal {
		t.Errorf("terminal = %v, want %v for %v", unpack.IsTerminal(err), terminal, err)
	}
	t.Logf("error: %v", err)
}

func TestUnpackConcurrentPullsOnce(t *testing.T) {
	reg := testregistry.New(t)
	ref := reg.Ref("bundle:v1")
	reg.MustPush(t, ref, testregistry.Image(t,
		testregistry.Layer(t, map[string]string{"manifests/a.yaml": "a"}),
		testregistry.Layer(t, map[string]string{"manifests/b.yaml": "b"})))
	src := rukpakv1alpha1.ImageSource{Ref: ref, CertificateData: string(reg.CAPEM)}

	before := reg.BlobPulls()
	unpackOK(t, newUnpacker(t, unpack.Limits{}), bundleFor(src))
	onePull := reg.BlobPulls() - before

	u := newUnpacker(t, unpack.Limits{})
	before = reg.BlobPulls()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			res, err := u.Unpack(t.Context(), bundleFor(src))
			if err == nil && !slices.Equal(files(t, res.FS), []string{"manifests/a.yaml=a", "manifests/b.yaml=b"}) {
				err = errors.New("wrong content")
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if got := reg.BlobPulls() - before; got != onePull {
		t.Errorf("8 concurrent unpacks pulled %d blobs, one unpack pulls %d", got, onePull)
	}
}

// miniChart is a chart archive as `helm package` lays it out: one
// top-level directory named after the chart.
func miniChart(t *testing.T) []byte {
	return testfiles.TarGz(t,
		[2]string{"mini/Chart.yaml", "apiVersion: v2\nname: mini\nversion: 1.2.3\n"},
		[2]string{"mini/templates/cm.yaml", "kind: ConfigMap"})
}

// TestUnpackHelmChartArtifact: a chart pushed by Helm's own client (`helm
// push`) unpacks to the chart's directory; its provenance layer is no
// content.
func TestUnpackHelmChartArtifact(t *testing.T) {
	reg := testregistry.New(t)
	u := newUnpacker(t, unpack.Limits{})
	want := []string{"mini/Chart.yaml=apiVersion: v2\nname: mini\nversion: 1.2.3\n", "mini/templates/cm.yaml=kind: ConfigMap"}
	for name, prov := range map[string][]byte{"charts": nil, "signed": []byte("-----BEGIN PGP SIGNED MESSAGE-----\n")} {
		t.Run(name, func(t *testing.T) {
			ref := reg.PushChart(t, name, miniChart(t), prov)
			res := unpackOK(t, u, bundleFor(rukpakv1alpha1.ImageSource{Ref: ref, CertificateData: string(reg.CAPEM)}))
			if got := files(t, res.FS); !slices.Equal(got, want) {
				t.Errorf("files = %q, want %q", got, want)
			}
		})
	}
}

func TestUnpackHelmChartArtifactWithoutChart(t *testing.T) {
	reg := testregistry.New(t)
	prov := static.NewLayer([]byte("signature"), "application/vnd.cncf.helm.chart.provenance.v1.prov")
	img, err := mutate.AppendLayers(empty.Image, prov)
	if err != nil {
		t.Fatal(err)
	}
	img = mutate.ConfigMediaType(mutate.MediaType(img, types.OCIManifestSchema1), "application/vnd.cncf.helm.config.v1+json")
	reg.MustPush(t, reg.Ref("charts/none:1.0.0"), img)
	_, err = newUnpacker(t, unpack.Limits{}).Unpack(t.Context(), bundleFor(rukpakv1alpha1.ImageSource{Ref: reg.Ref("charts/none:1.0.0"), CertificateData: string(reg.CAPEM)}))
	assertErr(t, err, "the Helm chart artifact has 0 layers of media type application/vnd.cncf.helm.chart.content.v1.tar+gzip, want one", true)
}

// TestHelmMediaTypes: the media types are Helm's.
func TestHelmMediaTypes(t *testing.T) {
	for got, want := range map[string]string{
		helmConfigMediaType:      helmregistry.ConfigMediaType,
		helmChartLayerMediaType:  helmregistry.ChartLayerMediaType,
		helmLegacyChartMediaType: helmregistry.LegacyChartLayerMediaType,
	} {
		if got != want {
			t.Errorf("media type %q, Helm's is %q", got, want)
		}
	}
}

// TestCachedImageNeedsAccess: a private image pulled once with a pull
// secret is not served from the tree cache to a Bundle that names its
// digest without credentials: in its own repository (asked of the
// registry with the Bundle's credentials), in one that does not exist, or
// in a registry that claims every digest (the cache is keyed by
// repository too). Outside reviews: the digest is in the first Bundle's
// status, which every viewer reads.
func TestCachedImageNeedsAccess(t *testing.T) {
	reg := testregistry.New(t, testregistry.WithBasicAuth("puller", "s3cret"))
	ref := reg.Ref("private:v1")
	digestRef := reg.MustPush(t, ref, testregistry.Image(t, testregistry.Layer(t, map[string]string{"manifests/secret.yaml": "top secret"})))
	u := newUnpacker(t, unpack.Limits{}, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant-a-pull", Namespace: namespace},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: reg.DockerConfigJSON("puller", "s3cret")},
	})
	unpackOK(t, u, bundleFor(rukpakv1alpha1.ImageSource{Ref: ref, ImagePullSecretName: "tenant-a-pull", CertificateData: string(reg.CAPEM)}))

	_, dgst, _ := strings.Cut(digestRef, "@")
	// A registry of the attacker's that claims every digest (a HEAD
	// answer has no body to check it by).
	liar := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead && strings.Contains(r.URL.Path, "/manifests/") {
			w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
			w.Header().Set("Docker-Content-Digest", r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:])
			w.Header().Set("Content-Length", "100")
			return
		}
		if r.URL.Path == "/v2/" {
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(liar.Close)
	for _, tc := range []struct {
		name, ref, wantErr string
		insecure           bool
	}{
		{name: "its repository, no secret", ref: digestRef, wantErr: "access denied"},
		{name: "a repository that does not exist", ref: "nonexistent.invalid/whatever@" + dgst, wantErr: "nonexistent.invalid"},
		{name: "a registry claiming every digest", ref: strings.TrimPrefix(liar.URL, "https://") + "/anything@" + dgst, wantErr: "not found", insecure: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := u.Unpack(t.Context(), bundleFor(rukpakv1alpha1.ImageSource{Ref: tc.ref, CertificateData: string(reg.CAPEM), InsecureSkipTLSVerify: tc.insecure}))
			if err == nil {
				_ = res.Close()
				t.Fatalf("unpacked the private image's cached tree without credentials")
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want it to mention %q", err, tc.wantErr)
			}
		})
	}
}
