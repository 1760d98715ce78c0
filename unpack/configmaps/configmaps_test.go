package configmaps_test

import (
	"context"
	"io/fs"
	"os"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	}
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
			if !reflect.DeepEqual(res.ResolvedSource, &tc.src) {
				t.Fatalf("resolved source = %+v, want the source %+v", res.ResolvedSource, tc.src)
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
	if want := "ConfigMap " + namespace + "/absent (source.configMaps[1]) not found"; !strings.Contains(res.Message, want) {
		t.Fatalf("message = %q, want it to contain %q", res.Message, want)
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

// The resolved source of an unpacked Bundle is what is unpacked again.
func TestResolvedSourceIsUsed(t *testing.T) {
	u, _ := newUnpacker(t, unpack.Limits{}, configMap("v1", map[string]string{"v": "1"}, nil), configMap("v2", map[string]string{"v": "2"}, nil))
	b := bundle(source("v2", ""))
	resolved := source("v1", "")
	b.Status.ResolvedSource = &resolved
	res, err := u.Unpack(context.Background(), b)
	if err != nil {
		t.Fatalf("Unpack: %v", err)
	}
	defer res.Close()
	if got := files(t, res.FS); got["v"] != "1" {
		t.Fatalf("content = %v, want the resolved source's", got)
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
