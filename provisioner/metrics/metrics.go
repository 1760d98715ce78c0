// Package metrics defines the provisioner's Prometheus metrics, registered
// with controller-runtime's registry (served on the manager's metrics
// endpoint beside controller-runtime's own). Series labelled with an object's
// name are deleted with the object (Forget), so the number of series follows
// the objects that exist, not every object that ever did.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metric names, as documented in docs/operations.md.
const (
	NameCondition         = "rukpak_condition"
	NameReconcileDuration = "rukpak_reconcile_duration_seconds"
	NameUnpackDuration    = "rukpak_unpack_duration_seconds"
	NameUnpackedBytes     = "rukpak_unpacked_bytes_total"
	NameObjectsApplied    = "rukpak_objects_applied_total"
	NameDriftCorrections  = "rukpak_drift_corrections_total"
	NameReleaseSize       = "rukpak_release_size_bytes"
	NameReleaseObjects    = "rukpak_release_objects"
	NameReconcileSteps    = "rukpak_reconcile_steps_total"
)

// Steps of a BundleDeployment reconcile that an unchanged reconcile skips,
// for the reconcile steps counter's step label.
const (
	// StepLoad reads a Bundle's stored content.
	StepLoad = "load"
	// StepDecode decodes (and for registry+v1 with a config, converts) the
	// content's objects.
	StepDecode = "decode"
	// StepRender renders a release manifest.
	StepRender = "render"
	// StepHistory reads a release's records.
	StepHistory = "history"
	// StepPreflight compares a CRD with the one on the cluster.
	StepPreflight = "preflight"
	// StepCached takes the content's objects from the object cache, which
	// keeps them compact: decoded from there. A settled BundleDeployment's
	// reconcile does not even do this.
	StepCached = "cached"
)

// Controller names for the reconcile duration's controller label.
const (
	ControllerBundle           = "bundle"
	ControllerBundleDeployment = "bundledeployment"
)

// Outcomes of an unpack, for the unpack duration's result label.
const (
	ResultSuccess = "success"
	ResultFailure = "failure"
)

var (
	reconcileDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    NameReconcileDuration,
		Help:    "Duration of one reconcile, by controller and provisioner class.",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"controller", "class"})
	unpackDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    NameUnpackDuration,
		Help:    "Duration of fetching and unpacking one Bundle's source, by class, source type and result.",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300},
	}, []string{"class", "source_type", "result"})
	unpackedBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: NameUnpackedBytes,
		Help: "Bytes of regular files in unpacked Bundle sources, by class and source type.",
	}, []string{"class", "source_type"})
	objectsApplied = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: NameObjectsApplied,
		Help: "Objects applied by installs and upgrades of a release, by class.",
	}, []string{"class"})
	driftCorrections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: NameDriftCorrections,
		Help: "Installed objects restored after they were edited or deleted, by class and BundleDeployment.",
	}, []string{"class", "name"})
	releaseSize = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: NameReleaseSize,
		Help: "Size of the manifest of a BundleDeployment's installed release revision.",
	}, []string{"name"})
	releaseObjects = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: NameReleaseObjects,
		Help: "Objects in a BundleDeployment's installed release revision.",
	}, []string{"name"})
	reconcileSteps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: NameReconcileSteps,
		Help: "Runs of the steps a BundleDeployment reconcile skips when its inputs did not change (load, decode, render, history, preflight), by step.",
	}, []string{"step"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(conditions, reconcileDuration, unpackDuration, unpackedBytes,
		objectsApplied, driftCorrections, releaseSize, releaseObjects, reconcileSteps)
	for _, s := range []string{StepLoad, StepDecode, StepRender, StepHistory, StepPreflight, StepCached} {
		reconcileSteps.WithLabelValues(s)
	}
}

// Step counts one run of a reconcile step (StepLoad and the others).
func Step(step string) {
	reconcileSteps.WithLabelValues(step).Inc()
}

// Steps returns how many times each step has run in this process.
func Steps() map[string]float64 {
	out := map[string]float64{}
	for _, s := range []string{StepLoad, StepDecode, StepRender, StepHistory, StepPreflight, StepCached} {
		m := &dto.Metric{}
		if err := reconcileSteps.WithLabelValues(s).Write(m); err == nil {
			out[s] = m.GetCounter().GetValue()
		}
	}
	return out
}

// statuses are the values of a condition's status label.
var statuses = []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown}

// maxConditions bounds the condition types recorded per object: whoever
// may write an object's status can add conditions, and each costs three
// series.
const maxConditions = 16

// Forget deletes every series of a deleted object.
func Forget(kind, name string) {
	conditions.forget(kind, name)
	if kind == "BundleDeployment" {
		driftCorrections.DeletePartialMatch(prometheus.Labels{"name": name})
		releaseSize.DeleteLabelValues(name)
		releaseObjects.DeleteLabelValues(name)
	}
}

// ObserveReconcile records a reconcile that started at start.
func ObserveReconcile(controller, class string, start time.Time) {
	reconcileDuration.WithLabelValues(controller, class).Observe(time.Since(start).Seconds())
}

// ObserveUnpack records one finished fetch of a Bundle's source, and on
// success the bytes it unpacked.
func ObserveUnpack(class, sourceType string, d time.Duration, bytes int64, err error) {
	result := ResultSuccess
	if err != nil {
		result = ResultFailure
	}
	unpackDuration.WithLabelValues(class, sourceType, result).Observe(d.Seconds())
	if err == nil {
		unpackedBytes.WithLabelValues(class, sourceType).Add(float64(bytes))
	}
}

// ObjectsApplied counts the objects an install or upgrade applied.
func ObjectsApplied(class string, n int) {
	objectsApplied.WithLabelValues(class).Add(float64(n))
}

// DriftCorrected counts objects of a BundleDeployment restored by drift
// correction.
func DriftCorrected(class, name string, n int) {
	if n > 0 {
		driftCorrections.WithLabelValues(class, name).Add(float64(n))
	}
}

// Release records the size of a BundleDeployment's installed release.
func Release(name string, manifestBytes, objects int) {
	releaseSize.WithLabelValues(name).Set(float64(manifestBytes))
	releaseObjects.WithLabelValues(name).Set(float64(objects))
}
