package configmaps_test

import (
	"context"
	"io/fs"
	"os"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/unpack"
	"github.com/rukpak-dev/rukpak/unpack/configmaps"
)

const namespace = "rukpak-system"

func configMap(name string, data map[string]string, binary map[string][]byte) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Data:       data,
		BinaryData: binary,
		Immutable:  ptr.To(true),
	}
}

// withDigests is src with each ConfigMap's content digest, as the resolved
// source records it.
func withDigests(src rukpakv1alpha1.BundleSource, objs ...client.Object) *rukpakv1alpha1.BundleSource {
	out := src.DeepCopy()
	for i, s := range out.ConfigMaps {
		for _, o := range objs {
			if o.GetName() == s.ConfigMap.Name {
				out.ConfigMaps[i].Digest = configmaps.Digest(o.(*corev1.ConfigMap))
			}
		}
	}
	return out
}

func source(entries ...string) rukpakv1alpha1.BundleSource {
	src := rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeConfigMaps}
	for i := 0; i+1 < len(entries); i += 2 {
		src.ConfigMaps = append(src.ConfigMaps, rukpakv1alpha1.ConfigMapSource{
			ConfigMap: rukpakv1alpha1.LocalObjectReference{Name: entries[i]}, Path: entries[i+1],
		})
	}
	return src
}

func bundle(src rukpakv1alpha1.BundleSource) *rukpakv1alpha1.Bundle {
	return &rukpakv1alpha1.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "test-bundle"},
		Spec:       rukpakv1alpha1.BundleSpec{ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain, Source: src},
	}
}

func newUnpacker(t *testing.T, limits unpack.Limits, objs ...client.Object) (unpack.Unpacker, string) {
	t.Helper()
	base := t.TempDir()
	reader := fake.NewClientBuilder().WithObjects(objs...).Build()
	return configmaps.New(unpack.Config{Reader: reader, Namespace: namespace, BaseDir: base, Limits: limits}), base
}

// files reads every regular file of fsys.
func files(t *testing.T, fsys fs.FS) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatalf("reading unpacked content: %v", err)
	}
	return out
}

func TestUnpack(t *testing.T) {
	objs := []client.Object{
		configMap("manifests", map[string]string{"deployment.yaml": "kind: Deployment\n", "service.yaml": "kind: Service\n"}, nil),
		configMap("crds", map[string]string{"crd.yaml": "kind: CustomResourceDefinition\n"}, map[string][]byte{"blob.bin": {0, 1, 2, 0xff}}),
		configMap("metadata", map[string]string{"annotations.yaml": "annotations: {}\n"}, nil),
		configMap("empty", nil, nil),
	}
	tests := []struct {
		name string
		src  rukpakv1alpha1.BundleSource
		want map[string]string
	}{
		{
			name: "paths and binaryData",
			src:  source("manifests", "manifests", "crds", "manifests/crds/", "metadata", "./metadata"),
			want: map[string]string{
				"manifests/deployment.yaml": "kind: Deployment\n",
				"manifests/service.yaml":    "kind: Service\n",
				"manifests/crds/crd.yaml":   "kind: CustomResourceDefinition\n",
				"manifests/crds/blob.bin":   "\x00\x01\x02\xff",
				"metadata/annotations.yaml": "annotations: {}\n",
			},
		},
		{
			name: "default path is the root",
			src:  source("metadata", "", "empty", "unused"),
			want: map[string]string{"annotations.yaml": "annotations: {}\n"},
		},
		{
			name: "same ConfigMap at two paths",
			src:  source("metadata", "a", "metadata", "b"),
			want: map[string]string{"a/annotations.yaml": "annotations: {}\n", "b/annotations.yaml": "annotations: {}\n"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, _ := newUnpacker(t, unpack.Limits{}, objs...)
			res, err := u.Unpack(context.Background(), bundle(tc.src))
			if err != nil {
				t.Fatalf("Unpack: %v", err)
			}
			defer res.Close()
			if res.State != unpack.StateUnpacked {
				t.Fatalf("state = %s (%s), want %s", res.State, res.Message, unpack.StateUnpacked)
			}
			if got := files(t, res.FS); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("content = %q, want %q", got, tc.want)
			}
			if want := withDigests(tc.src, objs...); !reflect.DeepEqual(res.ResolvedSource, want) {
				t.Fatalf("resolved source = %+v, want the source with digests %+v", res.ResolvedSource, want)
			}
			if err := unpack.MatchesSpec(&tc.src, res.ResolvedSource); err != nil {
				t.Fatalf("resolved source does not match the spec: %v", err)
			}
		})
	}
}

func TestMissingConfigMapIsPending(t *testing.T) {
	u, base := newUnpacker(t, unpack.Limits{}, configMap("present", map[string]string{"a": "a"}, nil))
	res, err := u.Unpack(context.Background(), bundle(source("present", "", "absent", "x")))
	if err != nil {
		t.Fatalf("Unpack: %v", err)
	}
	if res.State != unpack.StatePending || res.FS != nil {
		t.Fatalf("state = %s with FS %v, want %s without content", res.State, res.FS, unpack.StatePending)
	}
	if want := "get configmap " + namespace + "/absent: ConfigMap \"absent\" not found"; res.Message != want {
		t.Fatalf("message = %q, want %q", res.Message, want)
	}
	if left, _ := os.ReadDir(base); len(left) != 0 {
		t.Fatalf("a pending unpack left %v in BaseDir", left)
	}
}

func TestErrors(t *testing.T) {
	objs := []client.Object{
		configMap("one", map[string]string{"a.yaml": "one"}, nil),
		configMap("two", map[string]string{"a.yaml": "two"}, nil),
		configMap("binary", nil, map[string][]byte{"a.yaml": []byte("bin")}),
		configMap("dir", map[string]string{"x": "file named like a directory"}, nil),
		configMap("big", map[string]string{"big.yaml": strings.Repeat("x", 100)}, nil),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mutable", Namespace: namespace}, Data: map[string]string{"a": "a"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "unset", Namespace: namespace}, Immutable: ptr.To(false)},
	}
	tooMany := source()
	for i := 0; i <= 1000; i++ {
		tooMany.ConfigMaps = append(tooMany.ConfigMaps, rukpakv1alpha1.ConfigMapSource{ConfigMap: rukpakv1alpha1.LocalObjectReference{Name: "one"}, Path: strconv.Itoa(i)})
	}
	tests := []struct {
		name    string
		src     rukpakv1alpha1.BundleSource
		limits  unpack.Limits
		wantErr string
	}{
		{name: "same file from two ConfigMaps", src: source("one", "m", "two", "m/"),
			wantErr: "ConfigMaps one and two both write file m/a.yaml"},
		{name: "data and binaryData collide", src: source("one", "", "binary", "."),
			wantErr: "ConfigMaps one and binary both write file a.yaml"},
		{name: "same ConfigMap twice at one path", src: source("one", "", "one", ""),
			wantErr: "ConfigMap one writes file a.yaml twice"},
		{name: "file where a directory is needed", src: source("dir", "", "one", "x"),
			wantErr: "ConfigMaps dir and one collide: x is a file of dir and a directory of one"},
		{name: "directory where a file is needed", src: source("one", "x", "dir", ""),
			wantErr: "ConfigMaps one and dir collide: x is a file of dir and a directory of one"},
		{name: "path escaping", src: source("one", "../x"),
			wantErr: `invalid source.configMaps[0].path "../x": path "../x" escapes the bundle root`},
		{name: "path escaping after clean", src: source("one", "", "two", "a/../../.."),
			wantErr: `invalid source.configMaps[1].path "a/../../.."`},
		{name: "absolute path", src: source("one", "/etc"),
			wantErr: `invalid source.configMaps[0].path "/etc": path "/etc" is absolute`},
		{name: "empty name", src: source("", "x"),
			wantErr: "source.configMaps[0].configMap.name is empty"},
		{name: "no ConfigMaps", src: rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeConfigMaps},
			wantErr: "source.configMaps is empty"},
		{name: "over the size limit", src: source("big", ""), limits: unpack.Limits{MaxBytes: 10},
			wantErr: "writing ConfigMap big: bundle content exceeds the limit of 10 bytes (at big.yaml)"},
		{name: "mutable ConfigMap", src: source("one", "a", "mutable", "b"),
			wantErr: "ConfigMap rukpak-system/mutable (source.configMaps[1]) must be immutable (set immutable: true)"},
		{name: "immutable: false", src: source("unset", ""),
			wantErr: "ConfigMap rukpak-system/unset (source.configMaps[0]) must be immutable (set immutable: true)"},
		{name: "too many ConfigMaps", src: tooMany,
			wantErr: "source.configMaps lists 1001 ConfigMaps, more than the limit of 1000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, base := newUnpacker(t, tc.limits, objs...)
			res, err := u.Unpack(context.Background(), bundle(tc.src))
			if err == nil {
				_ = res.Close()
				t.Fatalf("Unpack succeeded (state %v), want an error containing %q", res.State, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %q, want it to contain %q", err, tc.wantErr)
			}
			if !unpack.IsTerminal(err) {
				t.Fatalf("error %q is retryable, want terminal", err)
			}
			if left, _ := os.ReadDir(base); len(left) != 0 {
				t.Fatalf("a failed unpack left %v in BaseDir", left)
			}
		})
	}
}

func TestDigest(t *testing.T) {
	cases := []struct {
		name string
		cm   *corev1.ConfigMap
		want string
	}{
		// sha256 of "a.yaml\x001\x00x" + "b.bin\x002\x00\x00\x01", computed apart.
		{"data and binaryData in key order", configMap("x", map[string]string{"a.yaml": "x"}, map[string][]byte{"b.bin": {0, 1}}),
			"sha256:7b5d58db98fac5e7642c8e1e329dc40d663a8a5d1091bac04679ad6afe811aa4"},
		{"binaryData or data: the same files", configMap("x", map[string]string{"b.bin": "\x00\x01"}, map[string][]byte{"a.yaml": []byte("x")}),
			"sha256:7b5d58db98fac5e7642c8e1e329dc40d663a8a5d1091bac04679ad6afe811aa4"},
		{"empty", configMap("x", nil, nil),
			"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := configmaps.Digest(tc.cm); got != tc.want {
				t.Fatalf("Digest = %s, want %s", got, tc.want)
			}
		})
	}
	// Moving bytes between a key and its content changes the digest.
	a := configmaps.Digest(configMap("x", map[string]string{"ab": "c"}, nil))
	b := configmaps.Digest(configMap("x", map[string]string{"a": "bc"}, nil))
	if a == b {
		t.Fatal("different files, same digest")
	}
}

// A re-unpack uses the digests of status.resolvedSource (and a spec's own)
// as pins: a ConfigMap deleted and re-created with other content fails, with
// a message naming it and both digests.
func TestPins(t *testing.T) {
	v1 := configMap("cm", map[string]string{"v": "1"}, nil)
	v2 := configMap("cm", map[string]string{"v": "2"}, nil)
	other := configMap("other", map[string]string{"v": "other"}, nil)
	d1, d2 := configmaps.Digest(v1), configmaps.Digest(v2)
	pinned := func(name, digest string) rukpakv1alpha1.BundleSource {
		s := source(name, "")
		s.ConfigMaps[0].Digest = digest
		return s
	}
	cases := []struct {
		name     string
		live     []client.Object
		spec     rukpakv1alpha1.BundleSource
		resolved *rukpakv1alpha1.BundleSource
		want     string // content of v, or the error
	}{
		{"resolved digest matches", []client.Object{v1}, source("cm", ""), ptr.To(pinned("cm", d1)), "1"},
		{"re-created with other content", []client.Object{v2}, source("cm", ""), ptr.To(pinned("cm", d1)),
			"ConfigMap rukpak-system/cm (source.configMaps[0]) holds content " + d2 + ", not the " + d1 + " this Bundle pins"},
		{"resolved source naming another ConfigMap is not used", []client.Object{v2, other}, source("cm", ""), ptr.To(pinned("other", configmaps.Digest(other))), "2"},
		{"spec pin matches", []client.Object{v2}, pinned("cm", d2), nil, "2"},
		{"spec pin differs", []client.Object{v2}, pinned("cm", d1), nil,
			"ConfigMap rukpak-system/cm (source.configMaps[0]) holds content " + d2 + ", not the " + d1 + " this Bundle pins"},
		{"resolved cannot override the spec's pin", []client.Object{v2}, pinned("cm", d1), ptr.To(pinned("cm", d2)),
			"ConfigMap rukpak-system/cm (source.configMaps[0]) holds content " + d2 + ", not the " + d1 + " this Bundle pins"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u, base := newUnpacker(t, unpack.Limits{}, tc.live...)
			b := bundle(tc.spec)
			b.Status.ResolvedSource = tc.resolved
			res, err := u.Unpack(context.Background(), b)
			if len(tc.want) > 1 {
				if err == nil || err.Error() != tc.want || !unpack.IsTerminal(err) {
					t.Fatalf("got %v, want the terminal error %q", err, tc.want)
				}
				if left, _ := os.ReadDir(base); len(left) != 0 {
					t.Fatalf("a failed unpack left %v in BaseDir", left)
				}
				return
			}
			if err != nil {
				t.Fatalf("Unpack: %v", err)
			}
			defer res.Close()
			if got := files(t, res.FS); got["v"] != tc.want {
				t.Fatalf("content = %v, want v=%s", got, tc.want)
			}
		})
	}
}

// heapReader runs a GC before each Get and records the live heap, so the
// test sees what the unpacker keeps across ConfigMaps.
type heapReader struct {
	client.Reader
	peak uint64
}

func (r *heapReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r.peak = max(r.peak, ms.HeapAlloc)
	return r.Reader.Get(ctx, key, obj, opts...)
}

// ConfigMaps are held one at a time: unpacking 48 ConfigMaps of 1 MiB keeps
// well under 16 MiB live (holding them all, as before, kept 48 MiB).
func TestMemoryOneConfigMapAtATime(t *testing.T) {
	const n = 48
	var objs []client.Object
	src := source()
	for i := 0; i < n; i++ {
		name := "big-" + strconv.Itoa(i)
		objs = append(objs, configMap(name, map[string]string{"f": strings.Repeat(strconv.Itoa(i%10), 1<<20)}, nil))
		src.ConfigMaps = append(src.ConfigMaps, rukpakv1alpha1.ConfigMapSource{ConfigMap: rukpakv1alpha1.LocalObjectReference{Name: name}, Path: name})
	}
	r := &heapReader{Reader: fake.NewClientBuilder().WithObjects(objs...).Build()}
	u := configmaps.New(unpack.Config{Reader: r, Namespace: namespace, BaseDir: t.TempDir()})
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseline := ms.HeapAlloc
	res, err := u.Unpack(context.Background(), bundle(src))
	if err != nil {
		t.Fatalf("Unpack: %v", err)
	}
	defer res.Close()
	grown := int64(r.peak) - int64(baseline)
	t.Logf("live heap grew by at most %.1f MiB while unpacking %d MiB of ConfigMaps", float64(grown)/(1<<20), n)
	if grown > 16<<20 {
		t.Fatalf("live heap grew by %d MiB across ConfigMaps, want < 16 MiB", grown>>20)
	}
}

func TestCloseRemovesContent(t *testing.T) {
	u, base := newUnpacker(t, unpack.Limits{}, configMap("one", map[string]string{"a": "a"}, nil))
	res, err := u.Unpack(context.Background(), bundle(source("one", "")))
	if err != nil {
		t.Fatalf("Unpack: %v", err)
	}
	if err := res.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if left, _ := os.ReadDir(base); len(left) != 0 {
		t.Fatalf("BaseDir still holds %v after Close", left)
	}
}

func TestStripContent(t *testing.T) {
	cm := configMap("x", map[string]string{"a": strings.Repeat("a", 1<<20)}, map[string][]byte{"b": {1}})
	cm.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m"}}
	cm.Labels = map[string]string{"keep": "me"}
	out, err := configmaps.StripContent(cm)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.ConfigMap)
	if got.Data != nil || got.BinaryData != nil || got.ManagedFields != nil {
		t.Fatalf("content kept: %d data, %d binaryData, %d managed fields", len(got.Data), len(got.BinaryData), len(got.ManagedFields))
	}
	if got.Name != "x" || got.Namespace != namespace || got.Labels["keep"] != "me" || got.Immutable == nil {
		t.Fatalf("metadata lost: %+v", got.ObjectMeta)
	}
	if other, _ := configmaps.StripContent("not a ConfigMap"); other != "not a ConfigMap" {
		t.Fatalf("other objects changed: %v", other)
	}
}
