package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// apiServerGOGC is the GOGC the test API servers and etcds run with. About
// a hundred of them start in one make test, and most of each one's CPU
// until its CRDs are served is garbage collection of a heap that lives for
// seconds: 300 cut a start-and-install by a fifth in interleaved
// measurements, for ~50 MiB more peak RSS each (24 GiB machines hold that).
const apiServerGOGC = "300"

// unusedAPIs are the API groups no test here serves objects of; an API
// server that leaves them out installs fewer storages and controllers at
// start. Tests that need one of them need their own Environment.
var unusedAPIs = []string{
	"flowcontrol.apiserver.k8s.io/v1=false",
	"resource.k8s.io/v1=false",
	"certificates.k8s.io/v1=false",
	"node.k8s.io/v1=false",
}

// lighten makes env's API server and etcd cheaper to start: no API
// priority and fairness (nothing here competes for the server, and its
// bookkeeping is most of an idle server's CPU), fewer API groups, and a
// higher GOGC, set by a wrapper script since envtest hands its processes
// the test's own environment, which must stay the test's.
func lighten(env *envtest.Environment, assets string) error {
	wrappers, err := gogcWrappers(assets)
	if err != nil {
		return err
	}
	api := env.ControlPlane.GetAPIServer()
	api.Path = wrappers["kube-apiserver"]
	api.Configure().
		Set("enable-priority-and-fairness", "false").
		Set("runtime-config", strings.Join(unusedAPIs, ","))
	if env.ControlPlane.Etcd == nil {
		env.ControlPlane.Etcd = &envtest.Etcd{}
	}
	env.ControlPlane.Etcd.Path = wrappers["etcd"]
	return nil
}

// gogcWrappers writes (once per assets directory, shared by every test
// process of the machine) scripts that exec etcd and kube-apiserver of
// assets with GOGC set, and returns their paths by binary name. Each is
// written aside and renamed into place, so a concurrent test never runs a
// half-written one.
//
// A wrapper answers --help from a copy of the binary's own help: envtest
// runs `etcd --help` and `kube-apiserver --help` before every start to
// look for flags, and the API server's costs a fifth of a second of CPU,
// a hundred times per make test. The copy is named after the binary's size
// and modification time, so a rebuilt binary gets a new one.
func gogcWrappers(assets string) (map[string]string, error) {
	sum := sha256.Sum256([]byte(assets + "\x00" + apiServerGOGC))
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("rukpak-testenv-%d", os.Getuid()), "gogc-"+hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the API server wrappers' directory: %w", err)
	}
	paths := map[string]string{}
	for _, name := range []string{"etcd", "kube-apiserver"} {
		real := filepath.Join(assets, name)
		if _, err := os.Stat(real); err != nil {
			return nil, fmt.Errorf("%s is not among the control-plane binaries in %s (run make test-deps): %w", name, assets, err)
		}
		help, err := helpCopy(dir, name, real)
		if err != nil {
			return nil, err
		}
		script := fmt.Sprintf("#!/bin/sh\nif [ \"$#\" = 1 ] && [ \"$1\" = --help ]; then exec cat %s; fi\nGOGC=%s exec %s%s \"$@\"\n",
			shellQuote(help), apiServerGOGC, pdeathsig(), shellQuote(real))
		p := filepath.Join(dir, name)
		if b, err := os.ReadFile(p); err == nil && string(b) == script {
			paths[name] = p
			continue
		}
		if err := writeAtomically(dir, p, []byte(script), 0o700); err != nil {
			return nil, fmt.Errorf("writing the %s wrapper: %w", name, err)
		}
		paths[name] = p
	}
	return paths, nil
}

// pdeathsig is the command prefix that has the kernel send a wrapped
// server SIGTERM when the test process that started it dies, however it
// dies (a -timeout panic, Ctrl-C, a kill): envtest starts each server in a
// process group of its own, so nothing else stops it then, and an orphaned
// API server and etcd kept a core busy through the rest of make test. It
// is util-linux's setpriv, "" where it is missing or too old.
var pdeathsig = sync.OnceValue(func() string {
	p, err := exec.LookPath("setpriv")
	if err != nil {
		return ""
	}
	if out, err := exec.Command(p, "--help").CombinedOutput(); err != nil || !strings.Contains(string(out), "--pdeathsig") {
		return ""
	}
	return shellQuote(p) + " --pdeathsig TERM -- "
})

// helpCopy returns the path of a copy of `real --help`'s output (its
// standard output and error, as envtest reads them), written once per
// build of real.
func helpCopy(dir, name, real string) (string, error) {
	st, err := os.Stat(real)
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, fmt.Sprintf("%s.help-%d-%d", name, st.Size(), st.ModTime().UnixNano()))
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	out, err := exec.Command(real, "--help").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s --help: %w: %s", real, err, out)
	}
	if err := writeAtomically(dir, p, out, 0o600); err != nil {
		return "", fmt.Errorf("writing %s --help's output: %w", name, err)
	}
	return p, nil
}

// writeAtomically writes data to p through a file aside, renamed into
// place, so that a concurrent reader never sees half of it.
func writeAtomically(dir, p string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(dir, filepath.Base(p)+".*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp.Name(), mode)
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), p)
	}
	if werr != nil {
		_ = os.Remove(tmp.Name())
	}
	return werr
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
