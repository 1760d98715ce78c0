package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// ---------------------------------------------------------------- floors

// The floors of many and crds: the same API work as the provisioner's, sent
// by a bare client with no logic between requests, at the provisioner's
// concurrency (its BundleDeployment controller's workers), on the same API
// server, before the provisioner starts; what the floor wrote is deleted
// before the provisioner runs. The ratio of the provisioner's time to its
// floor is what the provisioner adds.

// floorWorkers is the provisioner's BundleDeployment workers
// (provisioner/bundledeployment: MaxConcurrentReconciles).
const floorWorkers = 4

const (
	floorClass     = "bench-floor" // no provisioner serves it
	floorNamespace = "bench-many-floor"
	floorOwner     = "bench-floor"
	floorLabel     = "bench-floor"
)

// manyFloor sends, for each of n installs, the 15 writes the provisioner
// sends for a BundleDeployment of manyObjects ConfigMaps
// (TestIntegrationWritesPerInstall), after the harness's create of the
// BundleDeployment: its metadata PATCH, the Bundle's create and status, the
// release record's create, the ConfigMaps' server-side applies and the
// BundleDeployment's status; floorWorkers installs at a time. It returns
// the time from the first create to the last write, then deletes it all.
func (c *cluster) manyFloor(t *testing.T, n int) time.Duration {
	t.Helper()
	ctx := context.Background()
	if err := c.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: floorNamespace}}); err != nil {
		t.Fatal(err)
	}
	record := strings.Repeat("r", 2048) // a release record of 10 ConfigMaps, gzipped, is ~2 KiB
	install := func(i int) error {
		name := fmt.Sprintf("floor-%05d", i)
		labels := map[string]string{floorLabel: "true"}
		src := rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage, Image: &rukpakv1alpha1.ImageSource{Ref: "registry.invalid/floor@sha256:" + strings.Repeat("0", 64)}}
		bd := newBD(name, floorClass, src)
		bd.Spec.ProvisionerClassName, bd.Labels = floorClass, labels
		if err := c.c.Create(ctx, bd); err != nil {
			return err
		}
		if err := c.c.Patch(ctx, bd, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"core.rukpak.io/creating-bundle":"`+name+`-b"}}}`))); err != nil {
			return err
		}
		b := &rukpakv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: name + "-b", Labels: labels},
			Spec: rukpakv1alpha1.BundleSpec{ProvisionerClassName: floorClass, Source: src}}
		if err := c.c.Create(ctx, b); err != nil {
			return err
		}
		b.Status = rukpakv1alpha1.BundleStatus{Phase: rukpakv1alpha1.PhaseUnpacked, ContentURL: "https://127.0.0.1:8443/bundles/" + b.Name + ".tgz",
			ResolvedSource: &src, ObservedGeneration: 1}
		meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: rukpakv1alpha1.TypeUnpacked, Status: metav1.ConditionTrue, Reason: "UnpackSuccessful", Message: "floor"})
		if err := c.c.Status().Update(ctx, b); err != nil {
			return err
		}
		for j := range manyObjects {
			cm := configMap(floorNamespace, fmt.Sprintf("cm-%05d-%02d", i, j), i*manyObjects+j)
			cm.APIVersion, cm.Kind = "v1", "ConfigMap"
			data, err := json.Marshal(cm)
			if err != nil {
				return err
			}
			if _, err := c.cs.CoreV1().ConfigMaps(floorNamespace).Patch(ctx, cm.Name, types.ApplyPatchType, data,
				metav1.PatchOptions{FieldManager: floorOwner, Force: ptr.To(true)}); err != nil {
				return err
			}
		}
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1." + name + ".v1", Namespace: floorNamespace, Labels: labels},
			Type: "helm.sh/release.v1", Data: map[string][]byte{"release": []byte(record)}}
		if _, err := c.cs.CoreV1().Secrets(floorNamespace).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			return err
		}
		bd.Status.ActiveBundle, bd.Status.ObservedGeneration = b.Name, bd.Generation
		for _, typ := range []string{rukpakv1alpha1.TypeHasValidBundle, rukpakv1alpha1.TypeInstalled, rukpakv1alpha1.TypeHealthy} {
			meta.SetStatusCondition(&bd.Status.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: "Floor", Message: "floor", ObservedGeneration: bd.Generation})
		}
		return c.c.Status().Update(ctx, bd)
	}
	start := time.Now()
	if err := parallel(n, floorWorkers, install); err != nil {
		t.Fatalf("many floor: %v", err)
	}
	took := time.Since(start)

	// Gone before the provisioner starts.
	c.deleteAll(t, &rukpakv1alpha1.BundleDeploymentList{}, client.MatchingLabels{floorLabel: "true"})
	c.deleteAll(t, &rukpakv1alpha1.BundleList{}, client.MatchingLabels{floorLabel: "true"})
	c.deleteAll(t, &corev1.ConfigMapList{}, client.InNamespace(floorNamespace))
	c.deleteAll(t, &corev1.SecretList{}, client.InNamespace(floorNamespace))
	return took
}

// deleteAll deletes every object list's kind selects until none is left. A
// collection of 100,000 takes the API server longer than a request may
// last: it answers with a timeout (or resets the stream) and goes on
// deleting, so the delete is sent again until a list finds nothing.
func (c *cluster) deleteAll(t *testing.T, list client.ObjectList, opts ...client.ListOption) {
	t.Helper()
	ctx := context.Background()
	gvk, err := c.c.GroupVersionKindFor(list)
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk.GroupVersion().WithKind(strings.TrimSuffix(gvk.Kind, "List")))
	var del []client.DeleteAllOfOption
	for _, o := range opts {
		if d, ok := o.(client.DeleteAllOfOption); ok {
			del = append(del, d)
		}
	}
	deadline := time.Now().Add(30 * time.Minute)
	for {
		// A timeout comes back as a timeout status or as the HTTP/2 stream
		// reset under it: either way the list below says what is left.
		if err := c.c.DeleteAllOf(ctx, obj, del...); err != nil {
			t.Logf("deleting %s (sent again until none is left): %v", obj.GetKind(), err)
		}
		if err := c.c.List(ctx, list, append(opts, client.Limit(1))...); err != nil {
			t.Fatalf("listing %s: %v", obj.GetKind(), err)
		}
		if meta.LenList(list) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s left after deleting them for 30 minutes", obj.GetKind())
		}
		time.Sleep(time.Second)
	}
}

// crdsFloor applies each BundleDeployment's CRDs (server-side, all of one
// at once) and waits until they are Established, floorWorkers
// BundleDeployments at a time, as the provisioner applies and waits for a
// bundle's CRDs before its other objects; it returns the time from the
// first apply to the last Established, then deletes the CRDs and waits
// until they are gone.
func (c *cluster) crdsFloor(t *testing.T, sets [][][]byte) time.Duration {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	var names []string
	install := func(i int) error {
		var wg sync.WaitGroup
		errs := make([]error, len(sets[i]))
		set := make([]string, len(sets[i]))
		for k, y := range sets[i] {
			wg.Go(func() {
				u := &unstructured.Unstructured{}
				if err := yaml.Unmarshal(y, &u.Object); err != nil {
					errs[k] = err
					return
				}
				set[k] = u.GetName()
				data, err := json.Marshal(u.Object)
				if err != nil {
					errs[k] = err
					return
				}
				errs[k] = c.c.Patch(ctx, u, client.RawPatch(types.ApplyPatchType, data), client.FieldOwner(floorOwner), client.ForceOwnership)
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		mu.Lock()
		names = append(names, set...)
		mu.Unlock()
		for _, n := range set {
			if err := c.waitCRD(ctx, n, true); err != nil {
				return err
			}
		}
		return nil
	}
	start := time.Now()
	if err := parallel(len(sets), floorWorkers, install); err != nil {
		t.Fatalf("crds floor: %v", err)
	}
	took := time.Since(start)
	for _, n := range names {
		if err := c.c.Delete(ctx, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range names {
		if err := c.waitCRD(ctx, n, false); err != nil {
			t.Fatal(err)
		}
	}
	return took
}

// waitCRD polls CRD name until it is Established (or, with !established,
// gone).
func (c *cluster) waitCRD(ctx context.Context, name string, established bool) error {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		var crd apiextensionsv1.CustomResourceDefinition
		err := c.c.Get(ctx, client.ObjectKey{Name: name}, &crd)
		switch {
		case !established && client.IgnoreNotFound(err) == nil && err != nil:
			return nil
		case err != nil && established:
			return err
		case established:
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CRD %s not %s after 10 minutes", name, map[bool]string{true: "Established", false: "gone"}[established])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// parallel runs f(0..n-1), workers at a time, and returns the first error.
func parallel(n, workers int, f func(int) error) error {
	next := make(chan int)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}
