package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testregistry"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"sigs.k8s.io/yaml"
)

const testdata = "../../../shared/testdata"

// TestMain lets tests run the real binary's main (exit code and stderr
// included) by re-executing the test binary.
func TestMain(m *testing.M) {
	if os.Getenv("RUKPAKCTL_RUN_MAIN") == "1" {
		os.Args = append([]string{"rukpakctl"}, strings.Fields(os.Getenv("RUKPAKCTL_ARGS"))...)
		main()
		os.Exit(0)
	}
	os.Exit(testenv.RunShared(m))
}

func shared(t *testing.T, rel string) string {
	t.Helper()
	p := filepath.Join(testdata, rel)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared test data not available: %v", err)
	}
	return p
}

func render(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := newRootCmd(&out)
	cmd.SetArgs(append([]string{"render"}, args...))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// docs returns "Kind namespace/name" for every YAML document of output.
func docs(t *testing.T, output string) []string {
	t.Helper()
	var got []string
	for _, d := range strings.Split(output, "---\n")[1:] {
		var obj struct {
			Kind     string
			Metadata struct{ Name, Namespace string }
		}
		if err := yaml.Unmarshal([]byte(d), &obj); err != nil {
			t.Fatalf("output document is not YAML: %v\n%s", err, d)
		}
		got = append(got, obj.Kind+" "+obj.Metadata.Namespace+"/"+obj.Metadata.Name)
	}
	return got
}

func TestRender(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    []string // subset that must appear, in this order
		count   int
		wantErr string
	}{
		{
			name:  "plain+v0 detected",
			args:  []string{shared(t, "plain/combo-v0.0.2")},
			count: 7,
			want:  []string{"CustomResourceDefinition /templates.combo.io", "Namespace /combo", "Deployment combo/combo-operator"},
		},
		{
			name:  "registry+v1 detected, own namespace",
			args:  []string{shared(t, "registry-v1/etcd-0.9.4"), "--install-namespace", "etcd", "--watch-namespaces", "etcd"},
			count: 8,
			want:  []string{"Namespace /etcd", "ServiceAccount etcd/etcd-operator", "Role etcd/etcdoperator.v0.9.4-etcd-operator", "Deployment etcd/etcd-operator"},
		},
		{
			// etcd supports OwnNamespace and SingleNamespace, not
			// AllNamespaces: the default is OwnNamespace in <package>-system.
			name:  "registry+v1 default mode without AllNamespaces",
			args:  []string{shared(t, "registry-v1/etcd-0.9.4")},
			count: 8,
			want:  []string{"Namespace /etcd-system", "ServiceAccount etcd-system/etcd-operator", "Role etcd-system/etcdoperator.v0.9.4-etcd-operator", "RoleBinding etcd-system/etcdoperator.v0.9.4-etcd-operator", "Deployment etcd-system/etcd-operator"},
		},
		{
			// `""` is the CSV spelling of a single empty namespace: [""],
			// all namespaces explicitly.
			name:    "registry+v1 explicit all namespaces unsupported",
			args:    []string{shared(t, "registry-v1/etcd-0.9.4"), "--watch-namespaces", `""`},
			wantErr: `ClusterServiceVersion "etcdoperator.v0.9.4" does not support install mode AllNamespaces, which watchNamespaces [""] selects (supported install modes: OwnNamespace, SingleNamespace)`,
		},
		{
			name:    "registry+v1 forced on a plain bundle",
			args:    []string{shared(t, "plain/combo-v0.0.2"), "--format", "registry+v1"},
			wantErr: "read bundle annotations: open metadata/annotations.yaml: file does not exist",
		},
		{
			name:    "invalid plain bundle",
			args:    []string{shared(t, "plain/combo-4567031-pre-deflate")},
			wantErr: `subdirectories are not allowed within the "manifests" directory of the bundle image filesystem: found "manifests/crds"`,
		},
		{
			name:    "namespaces on a plain bundle",
			args:    []string{shared(t, "plain/combo-v0.0.2"), "--watch-namespaces", "a"},
			wantErr: "--install-namespace and --watch-namespaces only apply to registry+v1 bundles",
		},
		{
			name:    "unknown format",
			args:    []string{shared(t, "plain/combo-v0.0.2"), "--format", "bundle+v2"},
			wantErr: `unknown format "bundle+v2": use plain+v0, registry+v1 or helm`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := render(t, tc.args...)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("got error %v, want %q", err, tc.wantErr)
				}
				if out != "" {
					t.Fatalf("printed objects for an invalid bundle:\n%s", out)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := docs(t, out)
			if len(got) != tc.count {
				t.Fatalf("rendered %d objects, want %d: %q", len(got), tc.count, got)
			}
			i := 0
			for _, g := range got {
				if i < len(tc.want) && g == tc.want[i] {
					i++
				}
			}
			if i != len(tc.want) {
				t.Fatalf("output %q lacks %q in order", got, tc.want[i:])
			}
			again, _ := render(t, tc.args...)
			if again != out {
				t.Fatal("render is not deterministic")
			}
		})
	}
}

// TestMainExitCode runs the command as a user would: invalid bundles exit 1
// with the bare message on stderr.
func TestMainExitCode(t *testing.T) {
	dir := shared(t, "plain/combo-4567031-pre-deflate")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "RUKPAKCTL_RUN_MAIN=1", "RUKPAKCTL_ARGS=render "+dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit: %v, want status 1 (stderr %q)", err, stderr.String())
	}
	want := `subdirectories are not allowed within the "manifests" directory of the bundle image filesystem: found "manifests/crds"` + "\n"
	if stderr.String() != want || stdout.Len() != 0 {
		t.Fatalf("stdout %q stderr %q, want stderr %q", stdout.String(), stderr.String(), want)
	}
}

func TestRenderOCILayout(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	files := map[string]string{
		"manifests/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-image}\n",
	}
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	out, err := render(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := docs(t, out); len(got) != 1 || got[0] != "ConfigMap /from-image" {
		t.Fatalf("rendered %q", got)
	}
}

// TestRenderImage renders a registry+v1 bundle straight from an image in a
// real TLS registry, trusted through --ca-file, and fails clearly without it.
func TestRenderImage(t *testing.T) {
	dir := filepath.Join(testenv.RepoRoot(), "test/testdata/bundles/registry-v1/etcd-0.9.4")
	reg := testregistry.New(t)
	ref := reg.MustPush(t, reg.Ref("etcd:v0.9.4"), testregistry.Image(t, testregistry.LayerFromDir(t, dir, "")))
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, reg.CAPEM, 0o600); err != nil {
		t.Fatal(err)
	}

	out, err := render(t, ref, "--ca-file", ca)
	if err != nil {
		t.Fatal(err)
	}
	fromDir, err := render(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	if out != fromDir {
		t.Errorf("rendering the image differs from rendering its directory")
	}
	if !strings.Contains(out, "kind: ClusterServiceVersion") && !strings.Contains(out, "name: etcd-operator") {
		t.Errorf("unexpected output:\n%s", out)
	}

	if _, err := render(t, ref); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("pulling from an untrusted registry: %v", err)
	}
}
