package bundledeployment

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// podsInspected bounds the pods read to explain one unready workload.
const podsInspected = 20

// maxPodReason bounds what a pod's status contributes to a message: a
// container's termination message is written by the workload.
const maxPodReason = 256

// workloadKinds own pods through spec.selector; their rollout status says
// how many pods are unavailable, their pods say why.
var workloadKinds = map[string]bool{"Deployment": true, "StatefulSet": true, "DaemonSet": true}

// podReason explains an unready workload by the first of its pods whose
// container is waiting or failing (e.g. "pod x: CrashLoopBackOff: container
// main exited with code 3: ..."); empty when nothing is found. Pods are read
// from the API server on demand, a page at most: caching every pod of the
// cluster costs far more than an occasional read of an unhealthy workload.
func (r *Reconciler) podReason(ctx context.Context, live *unstructured.Unstructured) string {
	if r.PodReader == nil || live.GroupVersionKind().Group != "apps" || !workloadKinds[live.GetKind()] {
		return ""
	}
	raw, found, err := unstructured.NestedMap(live.Object, "spec", "selector")
	if err != nil || !found {
		return ""
	}
	var ls metav1.LabelSelector
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &ls); err != nil {
		return ""
	}
	sel, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil || sel.Empty() {
		return ""
	}
	var pods corev1.PodList
	if err := r.PodReader.List(ctx, &pods, client.InNamespace(live.GetNamespace()), client.MatchingLabelsSelector{Selector: sel}, client.Limit(podsInspected)); err != nil {
		return ""
	}
	for i := range pods.Items {
		if why := podProblem(&pods.Items[i]); why != "" {
			return bound("pod "+pods.Items[i].Name+": "+why, maxPodReason)
		}
	}
	return ""
}

// podProblem is why a pod is not running well: a container waiting for a
// reason other than starting up (CrashLoopBackOff, ImagePullBackOff,
// CreateContainerConfigError...), with how its last run ended; or a pod
// the scheduler could not place.
func podProblem(p *corev1.Pod) string {
	statuses := append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, cs := range statuses {
		// Between restarts the kubelet may show the last run as the
		// current state instead of a CrashLoopBackOff wait.
		if t := cs.State.Terminated; t != nil && cs.RestartCount > 0 && t.ExitCode != 0 {
			why := fmt.Sprintf("container %s exited with code %d and was restarted %d times", cs.Name, t.ExitCode, cs.RestartCount)
			if t.Message != "" {
				why += ": " + strings.TrimSpace(t.Message)
			}
			return why
		}
		w := cs.State.Waiting
		if w == nil || w.Reason == "" || w.Reason == "ContainerCreating" || w.Reason == "PodInitializing" {
			continue
		}
		why := w.Reason
		if t := cs.LastTerminationState.Terminated; t != nil {
			why += fmt.Sprintf(": container %s exited with code %d", cs.Name, t.ExitCode)
			if t.Message != "" {
				why += ": " + strings.TrimSpace(t.Message)
			} else if t.Reason != "" && t.Reason != "Error" {
				why += " (" + t.Reason + ")"
			}
		} else if w.Message != "" {
			why += ": " + w.Message
		}
		return why
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason != "" {
			return c.Reason + ": " + c.Message
		}
	}
	return ""
}

func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}
