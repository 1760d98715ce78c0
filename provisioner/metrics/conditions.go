package metrics

import (
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The condition series (rukpak_condition) are three per condition of every
// Bundle and BundleDeployment: 120,000 series at 10,000 BundleDeployments.
// A GaugeVec keeps, per series, a gauge, its label values, their label
// pairs and an entry in its hash map: ~6 KiB per BundleDeployment and its
// Bundle, measured (issue 15). Here each object keeps one entry built when
// its conditions change: one label pair of its own (its name; the kind,
// type and status pairs are shared) and, per series, the four pairs and
// the value, which a scrape hands out as they are (the registry reads them,
// never writes them). A scrape allocates what it would with a GaugeVec:
// the metric it fills per series.

var conditionDesc = prometheus.NewDesc(NameCondition,
	"Status of each condition of each Bundle and BundleDeployment: 1 for the condition's current status, 0 for the other two.",
	[]string{"kind", "name", "type", "status"}, nil)

// conditions is the collector of rukpak_condition.
var conditions = &conditionCollector{objects: map[objectKey]*conditionEntry{}}

type objectKey struct{ kind, name string }

type conditionCollector struct {
	mu      sync.Mutex
	objects map[objectKey]*conditionEntry
	// pairs are the shared label pairs: of each kind, status and
	// condition type seen (bounded: see sharedPair).
	pairs map[[2]string]*dto.LabelPair
}

// conditionEntry is one object's series; never changed once built (a
// change replaces it), so a scrape reads it without the lock.
type conditionEntry struct {
	series []conditionMetric
}

// conditionMetric is one series: its label pairs in the registry's order
// (sorted by name: kind, name, status, type) and its value.
type conditionMetric struct {
	labels []*dto.LabelPair
	value  float64
}

func (m *conditionMetric) Desc() *prometheus.Desc { return conditionDesc }

func (m *conditionMetric) Write(out *dto.Metric) error {
	out.Label = m.labels
	out.Gauge = &dto.Gauge{Value: &m.value}
	return nil
}

func (c *conditionCollector) Describe(ch chan<- *prometheus.Desc) { ch <- conditionDesc }

func (c *conditionCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	entries := make([]*conditionEntry, 0, len(c.objects))
	for _, e := range c.objects {
		entries = append(entries, e)
	}
	c.mu.Unlock()
	for _, e := range entries {
		for i := range e.series {
			ch <- &e.series[i]
		}
	}
}

// maxSharedPairs bounds the shared label pairs: condition types are
// whatever the writers of a status chose; past the bound, an entry gets
// pairs of its own.
const maxSharedPairs = 256

// sharedPair returns the label pair name=value, one for every object that
// has it. Called with c.mu held.
func (c *conditionCollector) sharedPair(name, value string) *dto.LabelPair {
	key := [2]string{name, value}
	if p, ok := c.pairs[key]; ok {
		return p
	}
	p := &dto.LabelPair{Name: &key[0], Value: &key[1]}
	if c.pairs == nil {
		c.pairs = map[[2]string]*dto.LabelPair{}
	}
	if len(c.pairs) < maxSharedPairs {
		c.pairs[key] = p
	}
	return p
}

// record replaces the series of one object with those of conds.
func (c *conditionCollector) record(kind, name string, conds []metav1.Condition) {
	// Label values must be UTF-8, or every scrape fails; a status is
	// anyone's to write.
	kind, name = strings.ToValidUTF8(kind, "\uFFFD"), strings.ToValidUTF8(name, "\uFFFD")
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(conds) == 0 {
		delete(c.objects, objectKey{kind, name})
		return
	}
	kindPair := c.sharedPair("kind", kind)
	namePair := &dto.LabelPair{Name: &nameLabel, Value: &name}
	// A type given twice is one series (the last one's status, as
	// setting a gauge twice): the registry fails a scrape that collects a
	// series twice.
	types := make([]string, 0, len(conds))
	status := make(map[string]metav1.ConditionStatus, len(conds))
	for _, cond := range conds {
		t := strings.ToValidUTF8(cond.Type, "\uFFFD")
		if _, seen := status[t]; !seen {
			types = append(types, t)
		}
		status[t] = cond.Status
	}
	e := &conditionEntry{series: make([]conditionMetric, 0, len(types)*len(statuses))}
	// One backing array for all the series' label slices.
	labels := make([]*dto.LabelPair, 0, 4*len(types)*len(statuses))
	for _, t := range types {
		typePair := c.sharedPair("type", t)
		for _, s := range statuses {
			v := 0.0
			if status[t] == s {
				v = 1
			}
			start := len(labels)
			labels = append(labels, kindPair, namePair, c.sharedPair("status", string(s)), typePair)
			e.series = append(e.series, conditionMetric{labels: labels[start:len(labels):len(labels)], value: v})
		}
	}
	c.objects[objectKey{kind, name}] = e
}

func (c *conditionCollector) forget(kind, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.objects, objectKey{kind, name})
}

// nameLabel is the name of every object's own label pair.
var nameLabel = "name"

// RecordConditions sets the condition series of one object to its
// conditions (the first maxConditions).
func RecordConditions(kind, name string, conds []metav1.Condition) {
	conditions.record(kind, name, conds[:min(len(conds), maxConditions)])
}
