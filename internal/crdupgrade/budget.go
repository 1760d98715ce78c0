package crdupgrade

import (
	"cmp"
	"errors"
	"flag"
	"fmt"

	"golang.org/x/sync/semaphore"
)

// Custom resources are user input: anyone who may create objects of a kind
// an upgrade touches decides how many bytes the preflight reads and what
// decoding them costs (a 0.8 MiB object of many small fields decodes into
// tens of MiB of maps). So objects are read one at a time from a streamed
// list, each bounded in size, each charged to a process-wide memory budget
// while it is decoded and validated, and a check that would read more than
// its byte budget gives up with a BudgetError instead of growing.

// The defaults. An object stored in etcd is at most ~1.5 MiB (etcd's
// default request limit), so MaxObjectBytes refuses no object a default
// cluster holds. DefaultMemoryBytes lets one object of that size with a
// costly shape be validated at a time, or a dozen of ordinary ones.
const (
	DefaultPageSize       = 500
	DefaultPageBytes      = 4 << 20
	DefaultMaxObjectBytes = 2 << 20
	DefaultMaxBytes       = 1 << 30
	DefaultMemoryBytes    = 48 << 20
)

// The flags of the bounds, named in the messages of a check that exceeds
// one.
const (
	FlagPageBytes      = "crd-preflight-page-bytes"
	FlagMaxObjectBytes = "crd-preflight-max-object-bytes"
	FlagMaxBytes       = "crd-preflight-max-bytes"
	FlagMemoryBytes    = "crd-preflight-memory-bytes"
	FlagTimeout        = "crd-preflight-timeout"
)

// BindFlags registers the flags of the preflight's bounds into o (and a
// process-wide Budget of the memory flag's size once parsed: call Resolve
// after parsing). The values already set in o are the flags' defaults
// (the webhook's check has a shorter timeout); unset ones take the
// package's.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.Int64Var(&o.PageBytes, FlagPageBytes, cmp.Or(o.PageBytes, DefaultPageBytes), "CRD upgrade preflight: bytes of custom resources one list request asks for (the number of objects per page is this divided by the largest object seen so far, at most 500); objects are decoded one at a time, never a page at once.")
	fs.Int64Var(&o.MaxObjectBytes, FlagMaxObjectBytes, cmp.Or(o.MaxObjectBytes, DefaultMaxObjectBytes), "CRD upgrade preflight: largest custom resource (JSON) it reads; a larger object fails the preflight.")
	fs.Int64Var(&o.MaxBytes, FlagMaxBytes, cmp.Or(o.MaxBytes, DefaultMaxBytes), "CRD upgrade preflight: most bytes of custom resources read to check one CRD; more fails the preflight.")
	fs.Int64Var(&o.memoryBytes, FlagMemoryBytes, cmp.Or(o.memoryBytes, DefaultMemoryBytes), "CRD upgrade preflight: memory (estimated) that the custom resources being decoded and validated may take at once, shared by all preflights of the process; an object that alone needs more fails the preflight.")
	fs.DurationVar(&o.Timeout, FlagTimeout, cmp.Or(o.Timeout, DefaultTimeout), "CRD upgrade preflight: longest check of one CRD's objects.")
}

// Resolve creates the process-wide Budget of the size BindFlags parsed.
func (o *Options) Resolve() {
	if o.memoryBytes > 0 {
		o.Budget = NewBudget(o.memoryBytes)
	}
}

// Budget is the memory that objects being decoded and validated may take
// at once, shared by every check that uses it.
type Budget struct {
	sem  *semaphore.Weighted
	size int64
}

// NewBudget returns a budget of size bytes.
func NewBudget(size int64) *Budget {
	return &Budget{sem: semaphore.NewWeighted(size), size: size}
}

// defaultBudget is shared by the checks whose Options name no Budget.
var defaultBudget = NewBudget(DefaultMemoryBytes)

// BudgetError says that a check could not finish within one of its bounds.
// A check that exceeds a bound fails with it: trying again finds the same
// objects.
type BudgetError struct {
	// Object names the object that exceeds a per-object bound ("" for the
	// bounds of the whole check).
	Object string
	// What exceeded the bound ("": the object's size, not known), the
	// bound, and the flag that sets it.
	Exceeded string
	Limit    int64
	Flag     string
}

func (e *BudgetError) Error() string {
	subject := "the objects"
	if e.Object != "" {
		subject = "object " + e.Object
	}
	if e.Exceeded == "" {
		return fmt.Sprintf("%s is larger than the limit of %s (--%s)", subject, formatBytes(e.Limit), e.Flag)
	}
	return fmt.Sprintf("%s %s, more than the limit of %s (--%s)", subject, e.Exceeded, formatBytes(e.Limit), e.Flag)
}

// IsBudget reports whether err is a BudgetError.
func IsBudget(err error) bool {
	var b *BudgetError
	return errors.As(err, &b)
}

// cost estimates the memory an object takes at the peak of its decoding
// and validation, from its JSON. Strings are copied a few times (the
// stream's buffer, the decoder, the decoded object); every map, list, key
// and item costs hundreds of bytes more, as Go maps and interfaces and as
// the per-value validators of the API server's schema validation (garbage,
// but on the heap until it is collected). 0.8 MiB of JSON peaked at
// +3.6 MiB as one string, +53 MiB as keys of one map, +58 MiB as small
// maps in a map, +99 to +140 MiB as a list of numbers and +124 to +153 MiB
// as lists of small lists or maps; the weights are above each
// (TestCostBoundsHeap).
func cost(raw []byte) int64 {
	var maps, lists, keys, items int
	inString, escaped := false, false
	for _, c := range raw {
		switch {
		case escaped:
			escaped = false
		case inString:
			switch c {
			case '\\':
				escaped = true
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{':
			maps++
		case c == '[':
			lists++
		case c == ':':
			keys++
		case c == ',':
			items++
		}
	}
	return int64(len(raw))*costPerByte + int64(maps)*costPerMap + int64(lists)*costPerList + int64(keys)*costPerKey + int64(items)*costPerItem
}

const (
	costPerByte = 6
	costPerMap  = 1280
	costPerList = 640
	costPerKey  = 640
	costPerItem = 448
)

// formatBytes renders a limit for messages: "1 GiB", "3 MiB", "512 KiB",
// "1000 bytes"; other sizes to a tenth of a MiB or KiB.
func formatBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
