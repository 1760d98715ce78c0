package crdupgrade

import (
	"fmt"
	"strings"
)

// ShownObjects is how many offending objects a message names per finding.
const ShownObjects = 5

// maxMessage bounds Message, far below the API's 32 KiB limit on a
// condition message (an overflow there lost the whole status write in
// OLM v1).
const maxMessage = 8 * 1024

// shownFindings is how many failing findings a message describes per CRD.
const shownFindings = 3

// String describes the finding with up to ShownObjects offending objects.
func (f *Finding) String() string {
	var b strings.Builder
	b.WriteString(string(f.Check))
	if f.Version != "" {
		b.WriteString(" in " + f.Version)
		if f.Path != nil {
			b.WriteString(" " + f.Path.String())
		}
	}
	b.WriteString(": " + f.Detail)
	if f.Count == 0 {
		return b.String()
	}
	fmt.Fprintf(&b, "; %d existing %s affected: ", f.Count, plural(f.Count, "object", "objects"))
	for i, o := range f.Objects[:min(len(f.Objects), ShownObjects)] {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(o.String())
	}
	if more := f.Count - min(len(f.Objects), ShownObjects); more > 0 {
		fmt.Fprintf(&b, " and %d more", more)
	}
	return b.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Message describes the failing findings of reports for a condition: each
// CRD, its first failing checks and their first offending objects, at most
// 8 KiB.
func Message(reports []*Report) string {
	var parts []string
	for _, r := range reports {
		failed := r.Failed()
		if len(failed) == 0 {
			continue
		}
		var fs []string
		for _, f := range failed[:min(len(failed), shownFindings)] {
			fs = append(fs, f.String())
		}
		if more := len(failed) - shownFindings; more > 0 {
			fs = append(fs, fmt.Sprintf("and %d more failing %s", more, plural(more, "check", "checks")))
		}
		parts = append(parts, fmt.Sprintf("CRD %s: %s", r.CRD, strings.Join(fs, "; ")))
	}
	if len(parts) == 0 {
		return ""
	}
	return truncate("CRD upgrade preflight failed: "+strings.Join(parts, ". "), maxMessage)
}

// Offender is an object some failing findings break, with all of them.
type Offender struct {
	CRD              string
	APIVersion, Kind string
	Object           Object
	// Findings describe the failing checks, one line each.
	Findings []string
}

// Offenders lists the objects the failing findings of reports name (at
// most limit, in order of first mention), each with every failing check
// that names it: the full list behind Message. unlisted counts the
// offending objects left out, once per check they fail.
func Offenders(reports []*Report, limit int) (list []*Offender, unlisted int) {
	seen := map[string]*Offender{}
	for _, r := range reports {
		for _, f := range r.Failed() {
			unlisted += f.Count - len(f.Objects)
			where := string(f.Check)
			if f.Version != "" {
				where += " in " + f.Version
				if f.Path != nil {
					where += " " + f.Path.String()
				}
			}
			for _, o := range f.Objects {
				key := r.CRD + "\x00" + o.Namespace + "\x00" + o.Name
				line := where + ": " + f.Detail
				if o.Reason != "" {
					line += " (" + o.Reason + ")"
				}
				if off, ok := seen[key]; ok {
					off.Findings = append(off.Findings, line)
					continue
				}
				if len(list) >= limit {
					unlisted++
					continue
				}
				off := &Offender{CRD: r.CRD, APIVersion: r.APIVersion, Kind: r.Kind, Object: Object{Namespace: o.Namespace, Name: o.Name}, Findings: []string{line}}
				seen[key] = off
				list = append(list, off)
			}
		}
	}
	return list, unlisted
}
