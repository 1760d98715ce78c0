package configmaps_test

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/heapwatch"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/unpack"
	"github.com/rukpak-dev/rukpak/unpack/configmaps"
)

func heapInuse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// TestHostileConfigMaps10x measures, against a real API server, a
// ConfigMap source at the default content limit (200 ConfigMaps of 1 MiB,
// 200 MiB) and one ConfigMap over it, and what the provisioner's
// ConfigMap informer holds for them with and without StripContent.
// Figures for docs/security.md; nothing is asserted on time.
//
//	RUKPAK_HOSTILE_10X=1 go test -count=1 -run TestHostileConfigMaps10x -v ./unpack/configmaps/
func TestHostileConfigMaps10x(t *testing.T) {
	if testing.Short() || os.Getenv("RUKPAK_HOSTILE_10X") == "" {
		t.Skip("set RUKPAK_HOSTILE_10X=1 to measure")
	}
	env := testenv.Start(t)
	ctx := context.Background()
	testenv.MustNotError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}), "creating namespace")
	const n = 201
	body := strings.Repeat("x", 1<<20-64)
	src := source()
	for i := 0; i < n; i++ {
		name := "big-" + strconv.Itoa(i)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Immutable: ptr.To(true),
			Data: map[string]string{"f.yaml": body}}
		testenv.MustNotError(t, env.Client.Create(ctx, cm), "creating %s", name)
		src.ConfigMaps = append(src.ConfigMaps, rukpakv1alpha1.ConfigMapSource{ConfigMap: rukpakv1alpha1.LocalObjectReference{Name: name}, Path: name})
	}
	reader, err := client.New(env.Config, client.Options{Scheme: env.Env.Scheme})
	testenv.MustNotError(t, err, "creating client")

	for _, tc := range []struct {
		name  string
		count int
	}{{"200 ConfigMaps of 1 MiB (200 MiB, at the limit)", 200}, {"201 ConfigMaps of 1 MiB (over the limit)", 201}} {
		s := src.DeepCopy()
		s.ConfigMaps = s.ConfigMaps[:tc.count]
		u := configmaps.New(unpack.Config{Reader: reader, Namespace: namespace, BaseDir: t.TempDir(), Limits: unpack.Limits{MaxBytes: 200 << 20}})
		base := heapInuse()
		stop := heapwatch.Start()
		start := time.Now()
		res, err := u.Unpack(ctx, bundle(*s))
		took := time.Since(start)
		peak := stop()
		msg := "unpacked"
		if err != nil {
			msg = err.Error()
		} else {
			_ = res.Close()
		}
		t.Logf("%s: %s; heap in use peaked %.1f MiB above the %.1f MiB before; %s", tc.name, msg,
			float64(peak)/(1<<20), float64(base)/(1<<20), took.Round(time.Millisecond))
	}

	for _, strip := range []bool{false, true} {
		base := heapInuse()
		opts := cache.Options{Scheme: env.Env.Scheme, DefaultNamespaces: map[string]cache.Config{namespace: {}}, DefaultTransform: cache.TransformStripManagedFields()}
		if strip {
			opts.ByObject = map[client.Object]cache.ByObject{&corev1.ConfigMap{}: {Transform: configmaps.StripContent}}
		}
		c, err := cache.New(env.Config, opts)
		testenv.MustNotError(t, err, "creating cache")
		cctx, cancel := context.WithCancel(ctx)
		go func() { _ = c.Start(cctx) }()
		if _, err := c.GetInformer(cctx, &corev1.ConfigMap{}); err != nil {
			t.Fatal(err)
		}
		c.WaitForCacheSync(cctx)
		held := heapInuse()
		var list corev1.ConfigMapList
		testenv.MustNotError(t, c.List(cctx, &list), "listing")
		t.Logf("informer of %d ConfigMaps of 1 MiB, StripContent %v: %.1f MiB held", len(list.Items), strip, float64(int64(held)-int64(base))/(1<<20))
		cancel()
	}
}
