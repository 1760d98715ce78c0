package identity

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/component-helpers/auth/rbac/validation"
)

// Rule is a rule an identity needs in Namespace ("" cluster-wide).
type Rule struct {
	Namespace string
	rbacv1.PolicyRule
	// Why names what needs the rule beyond applying the bundle's objects
	// (the grant of an RBAC object of the bundle), and what would do
	// instead; empty for the verbs of ApplyVerbs.
	Why string
}

// RequiredRules are the rules that let an identity install plan without
// escalate or bind permissions (except where nothing else can do: bind on
// roles the bundle binds but does not have, escalate on a ClusterRole with
// an aggregationRule), compacted, with namespaced rules that the
// cluster-wide ones cover left out. Rules needed in namespaces the bundle
// creates are cluster-wide (Plan.Namespaces).
func RequiredRules(plan *Plan) []Rule {
	var rules []Rule
	for _, r := range plan.Resources {
		rules = append(rules, Rule{Namespace: r.Namespace, PolicyRule: rbacv1.PolicyRule{
			APIGroups: []string{r.Group}, Resources: []string{r.Resource}, Verbs: r.Verbs(),
		}})
	}
	for _, g := range plan.Grants {
		switch {
		case g.FullAuthority, g.RoleRef != nil && g.Rules == nil:
			rules = append(rules, alternativeRule(g))
		default:
			for _, pr := range g.Rules {
				rules = append(rules, Rule{Namespace: g.Namespace, PolicyRule: pr})
			}
		}
	}
	rules = plan.hoist(rules)
	var cluster []rbacv1.PolicyRule
	for _, r := range rules {
		if r.Namespace == "" {
			cluster = append(cluster, r.PolicyRule)
		}
	}
	kept := rules[:0]
	for _, r := range rules {
		if r.Namespace != "" {
			if covered, _ := validation.Covers(cluster, []rbacv1.PolicyRule{r.PolicyRule}); covered {
				continue
			}
		}
		kept = append(kept, r)
	}
	return Compact(kept)
}

// alternativeRule is the escalate or bind rule that lets g's object be
// created without holding its rules.
func alternativeRule(g Grant) Rule {
	a := g.Alternative
	return Rule{Namespace: a.Namespace, PolicyRule: rbacv1.PolicyRule{
		APIGroups: []string{a.Group}, Resources: []string{a.Resource}, Verbs: []string{a.Verb}, ResourceNames: []string{a.Name},
	}, Why: g.Object}
}

// Compact merges rules of one namespace and reason: first the verbs of one
// resource (and resource names; "*" absorbs the others), then the
// resources with the same verbs, in a stable order.
func Compact(rules []Rule) []Rule {
	type resKey struct{ ns, why, group, resource, names string }
	type urlKey struct{ ns, why, url string }
	verbsOf := map[resKey]map[string]bool{}
	urlVerbs := map[urlKey]map[string]bool{}
	add := func(m map[string]bool, verbs []string) map[string]bool {
		if m == nil {
			m = map[string]bool{}
		}
		for _, v := range verbs {
			m[v] = true
		}
		return m
	}
	for _, r := range rules {
		names := strings.Join(sorted(r.ResourceNames), "\x00")
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				k := resKey{r.Namespace, r.Why, g, res, names}
				verbsOf[k] = add(verbsOf[k], r.Verbs)
			}
		}
		for _, u := range r.NonResourceURLs {
			k := urlKey{r.Namespace, r.Why, u}
			urlVerbs[k] = add(urlVerbs[k], r.Verbs)
		}
	}
	type groupKey struct{ ns, why, group, names, verbs string }
	resources := map[groupKey][]string{}
	for k, verbs := range verbsOf {
		if verbs["*"] {
			verbs = map[string]bool{"*": true}
		}
		g := groupKey{k.ns, k.why, k.group, k.names, strings.Join(keys(verbs), "\x00")}
		resources[g] = append(resources[g], k.resource)
	}
	type urlGroup struct{ ns, why, verbs string }
	urls := map[urlGroup][]string{}
	for k, verbs := range urlVerbs {
		if verbs["*"] {
			verbs = map[string]bool{"*": true}
		}
		g := urlGroup{k.ns, k.why, strings.Join(keys(verbs), "\x00")}
		urls[g] = append(urls[g], k.url)
	}
	out := make([]Rule, 0, len(resources)+len(urls))
	split := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, "\x00")
	}
	for g, res := range resources {
		out = append(out, Rule{Namespace: g.ns, Why: g.why, PolicyRule: rbacv1.PolicyRule{
			APIGroups: []string{g.group}, Resources: sorted(res), ResourceNames: split(g.names), Verbs: split(g.verbs),
		}})
	}
	for g, u := range urls {
		out = append(out, Rule{Namespace: g.ns, Why: g.why, PolicyRule: rbacv1.PolicyRule{
			NonResourceURLs: sorted(u), Verbs: split(g.verbs),
		}})
	}
	// The same rule needed for several reasons is listed once.
	type lineKey struct{ ns, line string }
	merged := map[lineKey]int{}
	uniq := out[:0]
	for _, r := range out {
		k := lineKey{r.Namespace, ruleLine(r.PolicyRule)}
		if i, ok := merged[k]; ok {
			uniq[i].Why = joinWhy(uniq[i].Why, r.Why)
			continue
		}
		merged[k] = len(uniq)
		uniq = append(uniq, r)
	}
	out = uniq
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Why != b.Why {
			return a.Why < b.Why
		}
		return ruleLine(a.PolicyRule) < ruleLine(b.PolicyRule)
	})
	return out
}

// joinWhy lists the reasons for one rule, sorted; a rule the objects
// themselves need (no reason) needs no other.
func joinWhy(a, b string) string {
	if a == "" || b == "" {
		return ""
	}
	whys := sorted(append(strings.Split(a, "; "), b))
	return strings.Join(whys, "; ")
}

// Format renders rules for an admin to paste under the rules: of a
// ClusterRole (cluster-wide) or of a Role in each namespace, one rule a
// line, within limit bytes; rules past it are counted, not shown.
// Each rule's Why follows it as a YAML comment.
func Format(rules []Rule, limit int) string {
	var b strings.Builder
	section := "\x00"
	for i, r := range rules {
		var next strings.Builder
		if r.Namespace != section {
			if r.Namespace == "" {
				next.WriteString("\ncluster-wide (ClusterRole):")
			} else {
				fmt.Fprintf(&next, "\nin namespace %q (Role):", r.Namespace)
			}
		}
		next.WriteString("\n- " + ruleLine(r.PolicyRule))
		if r.Why != "" {
			next.WriteString("  # " + r.Why)
		}
		// Room for the count of what is left out, so all stays in limit.
		if b.Len()+next.Len() > limit-len("\n(and 1000000 more rules)") {
			fmt.Fprintf(&b, "\n(and %d more rules)", len(rules)-i)
			break
		}
		section = r.Namespace
		b.WriteString(next.String())
	}
	return b.String()
}

// ruleLine is r as one YAML flow mapping (JSON quoting is YAML's too).
func ruleLine(r rbacv1.PolicyRule) string {
	list := func(s []string) string {
		b, _ := json.Marshal(s)
		return strings.ReplaceAll(string(b), `","`, `", "`)
	}
	var parts []string
	if len(r.NonResourceURLs) > 0 {
		parts = append(parts, "nonResourceURLs: "+list(r.NonResourceURLs))
	} else {
		parts = append(parts, "apiGroups: "+list(r.APIGroups), "resources: "+list(r.Resources))
		if len(r.ResourceNames) > 0 {
			parts = append(parts, "resourceNames: "+list(r.ResourceNames))
		}
	}
	parts = append(parts, "verbs: "+list(r.Verbs))
	return "{" + strings.Join(parts, ", ") + "}"
}

func sorted(s []string) []string {
	s = append([]string(nil), s...)
	sort.Strings(s)
	return s
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
