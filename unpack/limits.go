package unpack

import (
	"flag"
	"time"
)

// Limits bound what one Bundle's source may cost, so that hostile or broken
// sources (decompression bombs, millions of files, endless responses,
// servers that never answer) fail with a clear error on their own Bundle
// instead of costing the provisioner its memory, disk or time. Every source
// enforces them while streaming, before anything large is held in memory.
//
// Unset (zero) fields take DefaultLimits; docs/security.md lists them.
type Limits struct {
	// MaxBytes is the total uncompressed size of all files.
	MaxBytes int64
	// MaxFiles is the number of entries: files, directories, links,
	// whiteouts.
	MaxFiles int
	// MaxFileBytes is the size of one file (or git blob, or any single
	// object a source must hold or inflate).
	MaxFileBytes int64
	// MaxPathBytes is the length of one path inside the bundle.
	MaxPathBytes int
	// MaxPathDepth is the number of directory levels of one path.
	MaxPathDepth int
	// MaxNameBytes is the total length of all the paths of one bundle,
	// implied parent directories included: an unpack keeps its names in
	// memory, so MaxFiles x MaxPathBytes alone would allow ~100 MiB.
	MaxNameBytes int64
	// MaxFetchBytes is what one fetch may download before decompression
	// (image layers and manifests, an http archive, a git pack).
	MaxFetchBytes int64
	// MaxLayers is the number of layers of one image.
	MaxLayers int
	// FetchTimeout bounds one whole fetch, connection to last byte.
	FetchTimeout time.Duration
}

// DefaultLimits are generous for any real bundle (the largest real bundles
// in the test data hold a few MiB in a few dozen files) and keep one
// unpack's memory small: contents are spooled to disk, only names are kept
// in memory.
var DefaultLimits = Limits{
	MaxBytes:      200 << 20,
	MaxFiles:      100_000,
	MaxFileBytes:  64 << 20,
	MaxPathBytes:  1024,
	MaxPathDepth:  64,
	MaxNameBytes:  8 << 20,
	MaxFetchBytes: 512 << 20,
	MaxLayers:     256,
	FetchTimeout:  5 * time.Minute,
}

// OrDefault fills unset fields from DefaultLimits.
func (l Limits) OrDefault() Limits {
	d := DefaultLimits
	if l.MaxBytes <= 0 {
		l.MaxBytes = d.MaxBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = d.MaxFiles
	}
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = d.MaxFileBytes
	}
	if l.MaxPathBytes <= 0 {
		l.MaxPathBytes = d.MaxPathBytes
	}
	if l.MaxPathDepth <= 0 {
		l.MaxPathDepth = d.MaxPathDepth
	}
	if l.MaxNameBytes <= 0 {
		l.MaxNameBytes = d.MaxNameBytes
	}
	if l.MaxFetchBytes <= 0 {
		l.MaxFetchBytes = d.MaxFetchBytes
	}
	if l.MaxLayers <= 0 {
		l.MaxLayers = d.MaxLayers
	}
	if l.FetchTimeout <= 0 {
		l.FetchTimeout = d.FetchTimeout
	}
	return l
}

// BindFlags registers a command-line flag for every limit, defaulting to
// DefaultLimits, so every binary names them the same way.
func (l *Limits) BindFlags(fs *flag.FlagSet) {
	d := DefaultLimits
	fs.Int64Var(&l.MaxBytes, "max-bundle-bytes", d.MaxBytes, "Largest total uncompressed size of one bundle.")
	fs.IntVar(&l.MaxFiles, "max-bundle-files", d.MaxFiles, "Most entries (files, directories, links) in one bundle.")
	fs.Int64Var(&l.MaxFileBytes, "max-file-bytes", d.MaxFileBytes, "Largest single file (or git object) of one bundle.")
	fs.IntVar(&l.MaxPathBytes, "max-path-bytes", d.MaxPathBytes, "Longest path inside one bundle.")
	fs.IntVar(&l.MaxPathDepth, "max-path-depth", d.MaxPathDepth, "Most directory levels of one path inside a bundle.")
	fs.Int64Var(&l.MaxNameBytes, "max-bundle-name-bytes", d.MaxNameBytes, "Largest total length of all paths of one bundle (kept in memory while unpacking).")
	fs.Int64Var(&l.MaxFetchBytes, "max-fetch-bytes", d.MaxFetchBytes, "Most bytes one fetch may download (compressed).")
	fs.IntVar(&l.MaxLayers, "max-image-layers", d.MaxLayers, "Most layers of one bundle image.")
	fs.DurationVar(&l.FetchTimeout, "fetch-timeout", d.FetchTimeout, "Deadline of one fetch of a bundle's source.")
}
