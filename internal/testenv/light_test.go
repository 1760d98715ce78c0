package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
		fake := "#!/bin/sh\necho run >> \"$0.runs\"; echo \"" + name + " GOGC=$GOGC\"; for a in \"$@\"; do echo \"[$a]\"; done\n"
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
	// --help is answered from a copy made when the wrapper was written
	// (envtest asks before every start), the binary run once for it.
	for _, name := range []string{"etcd", "kube-apiserver"} {
		for range 2 {
			out, err := exec.Command(again[name], "--help").CombinedOutput()
			if err != nil {
				t.Fatalf("%s wrapper --help: %v: %s", name, err, out)
			}
			if want := name + " GOGC=" + os.Getenv("GOGC") + "\n[--help]\n"; string(out) != want {
				t.Errorf("%s wrapper --help printed %q, want %q", name, out, want)
			}
		}
		runs, err := os.ReadFile(filepath.Join(assets, name+".runs"))
		if err != nil {
			t.Fatal(err)
		}
		// Once for --help, once for the arguments above.
		if n := strings.Count(string(runs), "run\n"); n != 2 {
			t.Errorf("%s ran %d times, want twice", name, n)
		}
	}
	// A rebuilt binary gets a new copy.
	rebuilt := "#!/bin/sh\necho rebuilt\n"
	if err := os.WriteFile(filepath.Join(assets, "etcd"), []byte(rebuilt), 0o755); err != nil {
		t.Fatal(err)
	}
	third, err := gogcWrappers(assets)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(third["etcd"], "--help").CombinedOutput(); err != nil || string(out) != "rebuilt\n" {
		t.Errorf("the rebuilt etcd's wrapper --help printed %q (%v), want the new binary's help", out, err)
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

// A wrapped server dies with the process that started it: the kernel
// sends it SIGTERM, so a test binary killed by its -timeout leaves no API
// server or etcd behind.
func TestWrappedServerDiesWithItsParent(t *testing.T) {
	if pdeathsig() == "" {
		t.Skip("setpriv with --pdeathsig (util-linux) is not installed")
	}
	t.Setenv("TMPDIR", t.TempDir())
	assets := t.TempDir()
	fake := "#!/bin/sh\nif [ \"$1\" = --help ]; then echo help; exit 0; fi\nexec sleep 300\n"
	for _, name := range []string{"etcd", "kube-apiserver"} {
		if err := os.WriteFile(filepath.Join(assets, name), []byte(fake), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	wrappers, err := gogcWrappers(assets)
	if err != nil {
		t.Fatal(err)
	}
	// The parent: a shell that starts the server and exits a second later
	// (the server sets its parent-death signal as it starts).
	out, err := exec.Command("sh", "-c", `"$0" >/dev/null 2>&1 & echo $!; sleep 1`, wrappers["etcd"]).Output()
	if err != nil {
		t.Fatal(err)
	}
	pid := strings.TrimSpace(string(out))
	deadline := time.Now().Add(30 * time.Second)
	for {
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		// Gone, or a zombie its new parent has not reaped yet.
		if err != nil || strings.Contains(string(stat), ") Z ") {
			return
		}
		if time.Now().After(deadline) {
			_ = exec.Command("kill", pid).Run()
			t.Fatalf("the server (pid %s) outlived its parent by 30 s: %s", pid, stat)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
