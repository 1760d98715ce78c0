package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// The provisioner process runs with the GOMEMLIMIT its Deployment gives it
// (manifests/base/provisioner/deployment.yaml: the container's
// limits.memory, through a resourceFieldRef, or a literal value), so its
// memory figures are those of what an admin runs: the Go collector works
// harder as the heap nears that limit. RUKPAK_BENCH_GOMEMLIMIT overrides it
// (e.g. "off", the runtime's default, for an A/B).

const deploymentManifest = "manifests/base/provisioner/deployment.yaml"

var manifestMemLimit struct {
	sync.Once
	value, from string
}

// provisionerMemLimit is the GOMEMLIMIT value for the provisioner process
// and where it comes from; printed once.
func provisionerMemLimit(t *testing.T) string {
	t.Helper()
	manifestMemLimit.Do(func() {
		if v, ok := os.LookupEnv("RUKPAK_BENCH_GOMEMLIMIT"); ok {
			manifestMemLimit.value, manifestMemLimit.from = v, "RUKPAK_BENCH_GOMEMLIMIT"
		} else {
			v, err := memLimitOf(filepath.Join(testenv.RepoRoot(), deploymentManifest))
			if err != nil {
				t.Fatalf("GOMEMLIMIT of the provisioner's Deployment: %v", err)
			}
			manifestMemLimit.value, manifestMemLimit.from = v, deploymentManifest
		}
		fmt.Printf("provisioner process: GOMEMLIMIT=%s (from %s)\n", manifestMemLimit.value, manifestMemLimit.from)
	})
	return manifestMemLimit.value
}

// memLimitOf reads the GOMEMLIMIT the provisioner container of the
// Deployment in path is given, in bytes (or as written, for a literal).
func memLimitOf(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict(data, &d); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != "provisioner" {
			continue
		}
		for _, e := range c.Env {
			if e.Name != "GOMEMLIMIT" {
				continue
			}
			if e.ValueFrom == nil {
				return e.Value, nil
			}
			ref := e.ValueFrom.ResourceFieldRef
			if ref == nil || ref.Resource != "limits.memory" {
				return "", fmt.Errorf("%s: GOMEMLIMIT comes from %v, not the container's limits.memory", path, e.ValueFrom)
			}
			limit, ok := c.Resources.Limits["memory"]
			if !ok {
				return "", fmt.Errorf("%s: GOMEMLIMIT is limits.memory, which the container does not set", path)
			}
			divisor := int64(1)
			if !ref.Divisor.IsZero() {
				divisor = ref.Divisor.Value()
			}
			// As the kubelet does: the limit in units of the divisor,
			// rounded up; GOMEMLIMIT reads a bare number as bytes.
			return strconv.FormatInt((limit.Value()+divisor-1)/divisor, 10), nil
		}
		return "off", nil // none set: the runtime's default
	}
	return "", fmt.Errorf("%s: no container named provisioner", path)
}

func TestMemLimitOfTheManifest(t *testing.T) {
	v, err := memLimitOf(filepath.Join(testenv.RepoRoot(), deploymentManifest))
	if err != nil {
		t.Fatal(err)
	}
	if v == "" {
		t.Fatal("empty GOMEMLIMIT")
	}
	t.Logf("GOMEMLIMIT=%s", v)
}
