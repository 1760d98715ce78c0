package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/discovery"
)

// The wrappers run the real binary with GOGC set, pass every argument
// through unchanged (quotes included), and are reused, not rewritten.
func TestGOGCWrappers(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	assets := filepath.Join(t.TempDir(), "it's assets")
	if err := os.MkdirAll(assets, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"etcd", "kube-apiserver"} {
		fake := "#!/bin/sh\necho \"" + name + " GOGC=$GOGC\"; for a in \"$@\"; do echo \"[$a]\"; done\n"
		if err := os.WriteFile(filepath.Join(assets, name), []byte(fake), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	first, err := gogcWrappers(assets)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"etcd", "kube-apiserver"} {
		out, err := exec.Command(first[name], "--a=b c", "it's").CombinedOutput()
		if err != nil {
			t.Fatalf("%s wrapper: %v: %s", name, err, out)
		}
		want := name + " GOGC=" + apiServerGOGC + "\n[--a=b c]\n[it's]\n"
		if string(out) != want {
			t.Errorf("%s wrapper printed %q, want %q", name, out, want)
		}
	}
	st, err := os.Stat(first["etcd"])
	if err != nil {
		t.Fatal(err)
	}
	again, err := gogcWrappers(assets)
	if err != nil {
		t.Fatal(err)
	}
	st2, err := os.Stat(again["etcd"])
	if err != nil {
		t.Fatal(err)
	}
	if again["etcd"] != first["etcd"] || !os.SameFile(st, st2) {
		t.Errorf("the second call rewrote the wrapper: %s then %s", first["etcd"], again["etcd"])
	}
	if _, err := gogcWrappers(t.TempDir()); err == nil || !strings.Contains(err.Error(), "make test-deps") {
		t.Errorf("assets without binaries: %v, want an error naming make test-deps", err)
	}
}

// The shared API server starts without the API groups the tests leave out.
func TestUnusedAPIsAreOff(t *testing.T) {
	env := Shared(t)
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := dc.ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups.Groups {
		for _, off := range unusedAPIs {
			if strings.HasPrefix(off, g.Name+"/") {
				t.Errorf("API group %s is served", g.Name)
			}
		}
	}
}
