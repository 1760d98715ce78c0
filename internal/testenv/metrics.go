package testenv

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// RequestKey is a verb and a resource ("configmaps", "bundles/status") of
// the API server's apiserver_request_total.
type RequestKey struct{ Verb, Resource string }

// RequestCounts are apiserver_request_total by verb and resource.
type RequestCounts map[RequestKey]float64

var (
	requestLine = regexp.MustCompile(`^apiserver_request_total\{(.*)\} (\S+)$`)
	labelPair   = regexp.MustCompile(`(\w+)="([^"]*)"`)
)

// ServerRequests reads the API server's own count of the requests it served
// (every client's), by verb and resource, from its /metrics; cfg must be
// allowed to read it (envtest's admin is).
func ServerRequests(ctx context.Context, cfg *rest.Config) (RequestCounts, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	out := RequestCounts{}
	for _, line := range strings.Split(string(raw), "\n") {
		m := requestLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		labels := map[string]string{}
		for _, l := range labelPair.FindAllStringSubmatch(m[1], -1) {
			labels[l[1]] = l[2]
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			continue
		}
		res := labels["resource"]
		if s := labels["subresource"]; s != "" {
			res += "/" + s
		}
		out[RequestKey{labels["verb"], res}] += v
	}
	return out, nil
}

// Writes keeps the mutating requests of c.
func (c RequestCounts) Writes() RequestCounts {
	out := RequestCounts{}
	for k, v := range c {
		switch k.Verb {
		case "POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY":
			out[k] = v
		}
	}
	return out
}

// Sub returns c minus earlier, without the keys that did not change.
func (c RequestCounts) Sub(earlier RequestCounts) RequestCounts {
	out := RequestCounts{}
	for k, v := range c {
		if d := v - earlier[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// Total adds up every count.
func (c RequestCounts) Total() float64 {
	var n float64
	for _, v := range c {
		n += v
	}
	return n
}

// String lists the counts, largest first: "PATCH configmaps=10, POST
// secrets=1".
func (c RequestCounts) String() string {
	keys := make([]RequestKey, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if c[keys[i]] != c[keys[j]] {
			return c[keys[i]] > c[keys[j]]
		}
		return keys[i].Verb+keys[i].Resource < keys[j].Verb+keys[j].Resource
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %s=%g", k.Verb, k.Resource, c[k])
	}
	return strings.Join(parts, ", ")
}
