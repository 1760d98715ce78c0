package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/rukpak-dev/rukpak/internal/memlimit"
	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// The provisioner process runs with the memory settings its Deployment
// gives it (manifests/base/provisioner/deployment.yaml: RUKPAK_MEMORY_LIMIT,
// the container's limits.memory, from which it sets its Go memory limit, see
// internal/memlimit; or a GOMEMLIMIT, from limits.memory or literal), so its
// memory figures are those of what an admin runs. Inherited GOMEMLIMIT is
// not passed on. RUKPAK_BENCH_GOMEMLIMIT overrides it all (e.g. "off", the
// runtime's default, for an A/B).

const deploymentManifest = "manifests/base/provisioner/deployment.yaml"

var manifestMemLimit struct {
	sync.Once
	env string
}

// provisionerMemEnv is the environment entry (NAME=value) the provisioner
// process gets, bin its executable; printed once.
func provisionerMemEnv(t *testing.T, bin string) string {
	t.Helper()
	manifestMemLimit.Do(func() {
		if v, ok := os.LookupEnv("RUKPAK_BENCH_GOMEMLIMIT"); ok {
			manifestMemLimit.env = "GOMEMLIMIT=" + v
			fmt.Printf("provisioner process: GOMEMLIMIT=%s (RUKPAK_BENCH_GOMEMLIMIT)\n", v)
			return
		}
		name, v, err := memEnvOf(filepath.Join(testenv.RepoRoot(), deploymentManifest))
		if err != nil {
			t.Fatalf("memory settings of the provisioner's Deployment: %v", err)
		}
		manifestMemLimit.env = name + "=" + v
		note := ""
		if name == memlimit.EnvContainerLimit {
			limit, _ := strconv.ParseInt(v, 10, 64)
			var exe int64
			if fi, err := os.Stat(bin); err == nil {
				exe = fi.Size()
			}
			note = fmt.Sprintf(": its Go memory limit %d MiB", memlimit.For(limit, exe)>>20)
		}
		fmt.Printf("provisioner process: %s (from %s)%s\n", manifestMemLimit.env, deploymentManifest, note)
	})
	return manifestMemLimit.env
}

// withoutEnv drops name's entries from env.
func withoutEnv(env []string, name string) []string {
	out := env[:0:0]
	for _, e := range env {
		if !strings.HasPrefix(e, name+"=") {
			out = append(out, e)
		}
	}
	return out
}

// memEnvOf reads the memory setting the provisioner container of the
// Deployment in path is given: RUKPAK_MEMORY_LIMIT or GOMEMLIMIT, in bytes
// for a resourceFieldRef to limits.memory (as the kubelet gives it), else
// as written; GOMEMLIMIT=off if neither is set.
func memEnvOf(path string) (name, value string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", "", err
	}
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict(data, &d); err != nil {
		return "", "", fmt.Errorf("%s: %w", path, err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != "provisioner" {
			continue
		}
		for _, e := range c.Env {
			if e.Name != "GOMEMLIMIT" && e.Name != memlimit.EnvContainerLimit {
				continue
			}
			if e.ValueFrom == nil {
				return e.Name, e.Value, nil
			}
			ref := e.ValueFrom.ResourceFieldRef
			if ref == nil || ref.Resource != "limits.memory" {
				return "", "", fmt.Errorf("%s: %s comes from %v, not the container's limits.memory", path, e.Name, e.ValueFrom)
			}
			limit, ok := c.Resources.Limits["memory"]
			if !ok {
				return "", "", fmt.Errorf("%s: %s is limits.memory, which the container does not set", path, e.Name)
			}
			divisor := int64(1)
			if !ref.Divisor.IsZero() {
				divisor = ref.Divisor.Value()
			}
			// As the kubelet does: the limit in units of the divisor,
			// rounded up.
			return e.Name, strconv.FormatInt((limit.Value()+divisor-1)/divisor, 10), nil
		}
		return "GOMEMLIMIT", "off", nil // none set: the runtime's default
	}
	return "", "", fmt.Errorf("%s: no container named provisioner", path)
}

func TestMemEnvOfTheManifest(t *testing.T) {
	name, v, err := memEnvOf(filepath.Join(testenv.RepoRoot(), deploymentManifest))
	if err != nil {
		t.Fatal(err)
	}
	if name == "" || v == "" {
		t.Fatalf("empty setting %q=%q", name, v)
	}
	t.Logf("%s=%s", name, v)
}
