// Package fbc reads, validates and stores file-based catalogs (FBC): the
// olm.package, olm.channel, olm.bundle and olm.deprecations blobs of a
// catalog directory, and any other schema carried through unchanged.
//
// It is a format package: it knows neither the API types nor controllers.
// A catalog is hostile input, so it is read one blob at a time, every bound
// is checked while streaming before a blob is decoded, and only the names
// and edges validation needs are kept in memory; the blobs themselves are
// spooled to disk and written out as one document grouped by package.
package fbc

import (
	"flag"
)

// Limits bound what reading one catalog may cost. Unset (zero) fields take
// DefaultLimits.
type Limits struct {
	// MaxTotalBytes is the size of all catalog files together.
	MaxTotalBytes int64
	// MaxBlobBytes is the size of one blob's text (a JSON value or a YAML
	// document).
	MaxBlobBytes int64
	// MaxBlobs is the number of blobs of the whole catalog.
	MaxBlobs int
	// MaxEntries is the number of channel entries, skips and deprecation
	// entries of the whole catalog: they are kept in memory for validation.
	MaxEntries int
	// MaxDepth is how deeply one blob may nest.
	MaxDepth int
	// MaxNodes bounds the YAML nodes of one YAML blob, aliases expanded.
	MaxNodes int
	// MaxNameBytes is the length of one name, replaces, skips or skipRange
	// value (every one of them is kept in memory).
	MaxNameBytes int
}

// DefaultLimits fit the largest published catalogs with room to spare: the
// community catalog is ~20 MB in ~5,000 blobs, OpenShift's largest index
// ~31 MB; the largest real blob in the shared test data (an infinispan
// bundle with its CSV metadata) is under 200 KB.
var DefaultLimits = Limits{
	MaxTotalBytes: 128 << 20,
	MaxBlobBytes:  8 << 20,
	MaxBlobs:      100_000,
	MaxEntries:    100_000,
	MaxDepth:      64,
	MaxNodes:      256 << 10,
	MaxNameBytes:  1024,
}

// OrDefault fills unset fields from DefaultLimits.
func (l Limits) OrDefault() Limits {
	d := DefaultLimits
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = d.MaxTotalBytes
	}
	if l.MaxBlobBytes <= 0 {
		l.MaxBlobBytes = d.MaxBlobBytes
	}
	if l.MaxBlobs <= 0 {
		l.MaxBlobs = d.MaxBlobs
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = d.MaxEntries
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = d.MaxDepth
	}
	if l.MaxNodes <= 0 {
		l.MaxNodes = d.MaxNodes
	}
	if l.MaxNameBytes <= 0 {
		l.MaxNameBytes = d.MaxNameBytes
	}
	return l
}

// BindFlags registers a command-line flag for every limit, defaulting to
// DefaultLimits.
func (l *Limits) BindFlags(fs *flag.FlagSet) {
	d := DefaultLimits
	fs.Int64Var(&l.MaxTotalBytes, "max-catalog-bytes", d.MaxTotalBytes, "Largest total size of a catalog's files.")
	fs.Int64Var(&l.MaxBlobBytes, "max-catalog-blob-bytes", d.MaxBlobBytes, "Largest single blob of a catalog.")
	fs.IntVar(&l.MaxBlobs, "max-catalog-blobs", d.MaxBlobs, "Most blobs in one catalog.")
	fs.IntVar(&l.MaxEntries, "max-catalog-entries", d.MaxEntries, "Most channel entries, skips and deprecation entries in one catalog.")
	fs.IntVar(&l.MaxDepth, "max-catalog-depth", d.MaxDepth, "Deepest nesting of one catalog blob.")
}
