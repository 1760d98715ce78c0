package provisioner_test

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
)

// aliasBomb is 10^9 YAML nodes from under 1 KB of aliases.
func aliasBomb(head string) string {
	var b strings.Builder
	b.WriteString(head)
	b.WriteString("a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n")
	for c := 'b'; c <= 'i'; c++ {
		fmt.Fprintf(&b, "%c: &%c [*%c,*%c,*%c,*%c,*%c,*%c,*%c,*%c,*%c,*%c]\n", c, c, c-1, c-1, c-1, c-1, c-1, c-1, c-1, c-1, c-1, c-1)
	}
	return b.String()
}

// TestIntegrationHostileManifests unpacks Bundles whose YAML cost gigabytes
// to decode (issue 11: a 20 MiB flow list, 20 KB gzipped, took the heap to
// 2.3 GiB): each fails with a message naming the file and the limit, the
// provisioner's heap stays small, and a valid Bundle still unpacks.
func TestIntegrationHostileManifests(t *testing.T) {
	// Not parallel: it measures the heap of this process, which every
	// parallel test's provisioner shares.
	h := newHarness(t)
	ctx := context.Background()
	const cmHead = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: default}\n"
	annotations := "annotations:\n  operators.operatorframework.io.bundle.package.v1: p\n  operators.operatorframework.io.bundle.channels.v1: stable\n"
	cases := []struct {
		name, class string
		files       map[string]string
		wantMsg     string
	}{
		{
			name:    "flow-list-20mib",
			class:   rukpakv1alpha1.ProvisionerClassPlain,
			files:   map[string]string{"manifests/list.yaml": cmHead + "l: [" + strings.Repeat("0,", 10<<20) + "0]\n"},
			wantMsg: "decode manifests/list.yaml: file is larger than 16 MiB",
		},
		{
			name:    "flow-list-3mib",
			class:   rukpakv1alpha1.ProvisionerClassPlain,
			files:   map[string]string{"manifests/list.yaml": cmHead + "l: [" + strings.Repeat("0,", 3<<19-100) + "0]\n"},
			wantMsg: "decode manifests/list.yaml: document 0 has more than 262144 YAML nodes",
		},
		{
			name:    "string-10mib",
			class:   rukpakv1alpha1.ProvisionerClassPlain,
			files:   map[string]string{"manifests/str.yaml": cmHead + "data: {x: " + strings.Repeat("x", 10<<20) + "}\n"},
			wantMsg: "decode manifests/str.yaml: document 0 is larger than 3 MiB",
		},
		{
			name:    "alias-bomb",
			class:   rukpakv1alpha1.ProvisionerClassPlain,
			files:   map[string]string{"manifests/lol.yaml": aliasBomb(cmHead)},
			wantMsg: "decode manifests/lol.yaml: document 0 expands to more than 262144 YAML nodes through aliases",
		},
		{
			name:    "deep-nesting",
			class:   rukpakv1alpha1.ProvisionerClassPlain,
			files:   map[string]string{"manifests/deep.yaml": cmHead + "l: " + strings.Repeat("[", 64000) + strings.Repeat("]", 64000) + "\n"},
			wantMsg: "decode manifests/deep.yaml: document 0 is nested more than 256 levels deep",
		},
		{
			name:  "registry-annotations-alias-bomb",
			class: rukpakv1alpha1.ProvisionerClassRegistry,
			files: map[string]string{
				"metadata/annotations.yaml": aliasBomb(annotations),
				"manifests/cm.yaml":         configMap("cm", "1"),
			},
			wantMsg: "decode metadata/annotations.yaml: document 0 expands to more than 262144 YAML nodes through aliases",
		},
	}
	sources := make([]rukpakv1alpha1.BundleSource, len(cases))
	for i, tc := range cases {
		sources[i] = h.pushBundle(tc.name, tc.files)
	}
	peak := heapPeak(t)
	for i, tc := range cases {
		b := &rukpakv1alpha1.Bundle{
			ObjectMeta: metav1.ObjectMeta{Name: tc.name},
			Spec:       rukpakv1alpha1.BundleSpec{ProvisionerClassName: tc.class, Source: sources[i]},
		}
		if err := h.c.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := h.waitBundle(tc.name, rukpakv1alpha1.PhaseFailing, rukpakv1alpha1.ReasonUnpackFailed, "")
			if c := conditions.Get(b.Status.Conditions, rukpakv1alpha1.TypeUnpacked); c.Message != tc.wantMsg {
				t.Errorf("Unpacked message = %q, want %q", c.Message, tc.wantMsg)
			}
		})
	}
	// Everything else keeps working.
	src := h.pushBundle("valid", map[string]string{"manifests/cm.yaml": configMap("valid", "1")})
	if err := h.c.Create(ctx, &rukpakv1alpha1.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "valid"},
		Spec:       rukpakv1alpha1.BundleSpec{ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain, Source: src},
	}); err != nil {
		t.Fatal(err)
	}
	h.waitBundle("valid", rukpakv1alpha1.PhaseUnpacked, rukpakv1alpha1.ReasonUnpackSuccessful, "")
	// The whole test process (API client, registry, the bundles' own
	// text) grew by this much while the provisioner refused them all;
	// decoding the flow list alone used to take 2.3 GiB.
	grew := peak()
	t.Logf("peak heap growth while refusing: %.1f MiB", float64(grew)/(1<<20))
	if grew > 192<<20 {
		t.Errorf("heap grew by %d MiB, want < 192 MiB", grew>>20)
	}
}

// heapPeak samples the heap's live objects every millisecond until the
// returned function is called, which returns the largest growth seen.
func heapPeak(t *testing.T) func() uint64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	base := sample[0].Value.Uint64()
	var peak atomic.Uint64
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
		}
	}()
	var once atomic.Bool
	stop := func() uint64 {
		if once.CompareAndSwap(false, true) {
			close(done)
			<-stopped
		}
		if p := peak.Load(); p > base {
			return p - base
		}
		return 0
	}
	t.Cleanup(func() { stop() })
	return stop
}
