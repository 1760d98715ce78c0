package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// NameHelmRenders counts renders of helm-class charts (docs/operations.md).
const NameHelmRenders = "rukpak_helm_renders_total"

var helmRenders = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: NameHelmRenders,
	Help: "Renders of a helm-class BundleDeployment's chart in the bounded child process, by BundleDeployment and result (success, or failure: over a limit or refused by Helm). One per install or upgrade: the checks before it and the action use the same render.",
}, []string{"name", "result"})

func init() {
	ctrlmetrics.Registry.MustRegister(helmRenders)
}

// HelmRendered counts a render of BundleDeployment name's chart in the
// child process; ok is false when the render was refused.
func HelmRendered(name string, ok bool) {
	result := ResultSuccess
	if !ok {
		result = ResultFailure
	}
	helmRenders.WithLabelValues(name, result).Inc()
}

// ForgetHelmRenders deletes the render series of BundleDeployment name,
// uninstalled.
func ForgetHelmRenders(name string) {
	helmRenders.DeletePartialMatch(prometheus.Labels{"name": name})
}
