package install

import (
	"context"
	"fmt"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/kube"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/resource"
	cachetools "k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// WatchUntilReady waits for a hook's objects as Helm's client does (a Job
// until it completes or fails, a Pod until it succeeds or fails, other
// kinds not at all), within timeout, also ending when stop is closed (the
// release is uninstalled meanwhile: the hook fails, and with it the
// revision). waiting, when set, is told which hook objects are waited for.
func (k *guardedKube) WatchUntilReady(resources kube.ResourceList, timeout time.Duration) error {
	if len(resources) == 0 {
		return kube.ErrNoObjectsVisited
	}
	var names []string
	for _, info := range resources {
		if kind := info.Mapping.GroupVersionKind.Kind; kind == "Job" || kind == "Pod" {
			names = append(names, fmt.Sprintf("%s %s/%s", kind, info.Namespace, info.Name))
		}
	}
	if len(names) == 0 {
		return nil
	}
	if k.waiting != nil {
		k.waiting("waiting for hook " + strings.Join(names, ", "))
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if k.stop != nil {
		go func() {
			select {
			case <-k.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	// Each object at once, errors as Helm's client joins them.
	errs := make(chan error, len(resources))
	for _, info := range resources {
		go func() { errs <- waitHook(ctx, info) }()
	}
	var failed []error
	for range resources {
		if err := <-errs; err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	if k.stop != nil {
		select {
		case <-k.stop:
			return fmt.Errorf("stopped waiting for hook %s: the release is being uninstalled", strings.Join(names, ", "))
		default:
		}
	}
	return hookErrors(failed)
}

// hookErrors are errs as Helm's client reports them (go-multierror's
// list), so a failed hook's message is Helm's own.
type hookErrors []error

func (es hookErrors) Error() string {
	if len(es) == 1 {
		return fmt.Sprintf("1 error occurred:\n\t* %s\n\n", es[0])
	}
	points := make([]string, len(es))
	for i, err := range es {
		points[i] = fmt.Sprintf("* %s", err)
	}
	return fmt.Sprintf("%d errors occurred:\n\t%s\n\n", len(es), strings.Join(points, "\n\t"))
}

func (es hookErrors) Unwrap() []error { return es }

// waitHook is Helm's kube.Client watchUntilReady, ending with ctx.
func waitHook(ctx context.Context, info *resource.Info) error {
	kind := info.Mapping.GroupVersionKind.Kind
	if kind != "Job" && kind != "Pod" {
		return nil
	}
	selector, err := fields.ParseSelector("metadata.name=" + info.Name)
	if err != nil {
		return err
	}
	lw := cachetools.NewListWatchFromClient(info.Client, info.Mapping.Resource.Resource, info.Namespace, selector)
	_, err = watchtools.UntilWithSync(ctx, lw, &unstructured.Unstructured{}, nil, func(e watch.Event) (bool, error) {
		switch e.Type {
		case watch.Added, watch.Modified:
			u, ok := e.Object.(*unstructured.Unstructured)
			if !ok {
				return true, fmt.Errorf("expected %s to be an object, got %T", info.Name, e.Object)
			}
			if kind == "Job" {
				return jobDone(u, info.Name)
			}
			return podDone(u, info.Name)
		case watch.Deleted:
			return true, nil
		case watch.Error:
			return true, fmt.Errorf("failed to deploy %s", info.Name)
		}
		return false, nil
	})
	return err
}

// jobDone is Helm's waitForJob.
func jobDone(u *unstructured.Unstructured, name string) (bool, error) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["status"] != "True" {
			continue
		}
		switch m["type"] {
		case "Complete":
			return true, nil
		case "Failed":
			reason, _ := m["reason"].(string)
			return true, fmt.Errorf("job %s failed: %s", name, reason)
		}
	}
	return false, nil
}

// podDone is Helm's waitForPodSuccess.
func podDone(u *unstructured.Unstructured, name string) (bool, error) {
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	switch phase {
	case "Succeeded":
		return true, nil
	case "Failed":
		return true, fmt.Errorf("pod %s failed", name)
	}
	return false, nil
}
