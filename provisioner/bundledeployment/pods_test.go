package bundledeployment

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestPodProblem(t *testing.T) {
	waiting := func(reason, msg string) corev1.ContainerState {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
	}
	cases := []struct {
		name string
		pod  corev1.PodStatus
		want string
	}{
		{"running", corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}, ""},
		{"starting", corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "main", State: waiting("ContainerCreating", "")}}}, ""},
		{"crash loop with a termination message", corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name: "main", State: waiting("CrashLoopBackOff", "back-off 10s restarting failed container"),
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error", Message: "no database"}},
		}}}, "CrashLoopBackOff: container main exited with code 3: no database"},
		{"crash loop killed for memory", corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name: "main", State: waiting("CrashLoopBackOff", ""),
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}},
		}}}, "CrashLoopBackOff: container main exited with code 137 (OOMKilled)"},
		{"between restarts", corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name: "main", RestartCount: 4,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error", Message: "no database"}},
		}}}, "container main exited with code 3 and was restarted 4 times: no database"},
		{"image pull", corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "main", State: waiting("ImagePullBackOff", `Back-off pulling image "x"`)}}}, `ImagePullBackOff: Back-off pulling image "x"`},
		{"init container first", corev1.PodStatus{
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "init", State: waiting("CreateContainerConfigError", `secret "s" not found`)}},
			ContainerStatuses:     []corev1.ContainerStatus{{Name: "main", State: waiting("PodInitializing", "")}},
		}, `CreateContainerConfigError: secret "s" not found`},
		{"unschedulable", corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available"}}}, "Unschedulable: 0/1 nodes are available"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := podProblem(&corev1.Pod{Status: tc.pod}); got != tc.want {
				t.Errorf("podProblem = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestBoundKeepsUTF8(t *testing.T) {
	got := bound(strings.Repeat("é", 10), 5)
	if got != "éé..." {
		t.Errorf("bound = %q", got)
	}
}
