package plain

import (
	"flag"
	"fmt"
	"runtime"

	"golang.org/x/sync/semaphore"
)

// Limits bound what decoding a bundle's manifests may cost. Decoding YAML
// into objects costs a hundred times or more the size of the text for some
// shapes (a flow list of 20 MiB of "0," took 2.3 GiB), so every bound is
// checked before the expensive decode: file sizes from the directory and
// while streaming, document size while splitting a file into documents, and
// a document's node count and depth with a scan that allocates nothing.
//
// Unset (zero) fields take DefaultLimits.
type Limits struct {
	// MaxTotalBytes is the size of all manifest files of a bundle together.
	MaxTotalBytes int64
	// MaxFileBytes is the size of one manifest file.
	MaxFileBytes int64
	// MaxDocumentBytes is the size of one YAML document (or of the JSON
	// values between two "---" lines) of a manifest file.
	MaxDocumentBytes int64
	// MaxNodes bounds the YAML nodes (scalars, lists, maps) of one
	// document, aliases expanded. It is checked against an estimate that is
	// never lower than the real count and at most a few times higher.
	MaxNodes int
	// MaxTotalNodes bounds the YAML nodes of all documents of a bundle
	// together (the same estimate): decoded objects are kept, and small
	// documents add up.
	MaxTotalNodes int
	// MaxDepth is how deeply one document may nest (estimated from
	// indentation, block indicators and brackets).
	MaxDepth int
}

// DefaultLimits fit every real bundle in the shared test data with room to
// spare: the largest document there is an 833 KB CRD, the highest node
// bound of a document 61,214 (aerospike-kubernetes-operator's cluster
// CRD), the deepest nests 38 levels, and the largest bundle
// (prometheus-operator's 10 CRDs, 4.5 MB) is bounded at 240,992 nodes.
// The API server refuses requests over 3 MiB, so
// no larger document could be installed anyway. A node costs up to ~260
// bytes at the conversion's peak, so a document at MaxNodes peaks at
// ~65 MiB.
var DefaultLimits = Limits{
	MaxTotalBytes:    32 << 20,
	MaxFileBytes:     16 << 20,
	MaxDocumentBytes: 3 << 20,
	MaxNodes:         256 << 10,
	MaxTotalNodes:    1 << 20,
	MaxDepth:         256,
}

// BindFlags registers a command-line flag for every limit, defaulting to
// DefaultLimits; a binary then sets DefaultLimits (which Validate, Files
// and Objects use) to the parsed values.
func (l *Limits) BindFlags(fs *flag.FlagSet) {
	d := DefaultLimits
	fs.Int64Var(&l.MaxTotalBytes, "max-manifests-bytes", d.MaxTotalBytes, "Largest total size of a bundle's manifest files.")
	fs.Int64Var(&l.MaxFileBytes, "max-manifest-file-bytes", d.MaxFileBytes, "Largest manifest file.")
	fs.Int64Var(&l.MaxDocumentBytes, "max-manifest-document-bytes", d.MaxDocumentBytes, "Largest YAML document of a manifest file.")
	fs.IntVar(&l.MaxNodes, "max-manifest-document-nodes", d.MaxNodes, "Most YAML nodes (estimated, aliases expanded) of one document.")
	fs.IntVar(&l.MaxTotalNodes, "max-manifests-nodes", d.MaxTotalNodes, "Most YAML nodes (estimated) of all of a bundle's manifests.")
	fs.IntVar(&l.MaxDepth, "max-manifest-depth", d.MaxDepth, "Deepest nesting (estimated) of one YAML document.")
}

// OrDefault fills unset fields from DefaultLimits.
func (l Limits) OrDefault() Limits {
	d := DefaultLimits
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = d.MaxTotalBytes
	}
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = d.MaxFileBytes
	}
	if l.MaxDocumentBytes <= 0 {
		l.MaxDocumentBytes = d.MaxDocumentBytes
	}
	if l.MaxNodes <= 0 {
		l.MaxNodes = d.MaxNodes
	}
	if l.MaxTotalNodes <= 0 {
		l.MaxTotalNodes = d.MaxTotalNodes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = d.MaxDepth
	}
	return l
}

// decoding bounds the documents being converted at once in this process,
// whatever the number of bundles and files decoded concurrently: a document
// holds its weight of the budget while it is converted, so conversions peak
// at ~65 MiB together, while documents of real sizes (a tenth of the budget
// at most) convert on every core.
var decoding = semaphore.NewWeighted(decodeBudget)

// decodeBudget is DefaultLimits.MaxNodes: a document at that limit (or
// over it, with larger Limits) converts alone.
const decodeBudget = 256 << 10

// weight is a document's share of the decoding budget: its node bound
// (~260 bytes each at the conversion's peak), or for text made of long
// scalars its size (converting a 3 MiB string peaked at ~34 MiB: ~11 bytes
// per byte of text, a node's worth per 20 bytes with margin).
func weight(cost int, text []byte) int64 {
	return int64(min(max(cost, len(text)/20), decodeBudget))
}

// reading bounds the files being read at once in this process: each holds
// up to a document's text (MaxDocumentBytes) while it waits for the
// decoding budget, so that must not scale with the cores of a large node.
var reading = semaphore.NewWeighted(int64(min(runtime.GOMAXPROCS(0), 8)))

// formatBytes renders a limit for messages: "3 MiB", "512 KiB", "1000 bytes".
func formatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
