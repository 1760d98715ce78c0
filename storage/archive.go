package storage

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"sync"
	"testing/fstest"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/rukpak-dev/rukpak/internal/freelist"
	"github.com/rukpak-dev/rukpak/internal/gzpool"
	"github.com/rukpak-dev/rukpak/unpack"
)

// archiveModTime is the modification time of every archive entry. A fixed
// time (with zero owners and normalised modes) makes the archive a pure
// function of the content, so the same content always has the same digest.
var archiveModTime = time.Unix(0, 0).UTC()

const (
	dirMode  = 0o755
	fileMode = 0o644
)

// WriteArchive writes fsys to w as a deterministic tar.gz: entries in
// lexical walk order, zero uid/gid and owner names, a fixed mtime, modes
// 0755 for directories and 0644 for files. Only regular files and
// directories are allowed; anything else is an error naming the path, so
// content is never silently dropped. It streams: memory use does not depend
// on the content's size.
//
// It compresses with klauspost/compress's gzip (same format, a faster
// deflate; already a dependency through go-containerregistry) at BestSpeed:
// the standard library's default level ran at ~70 MB/s and made storing ~5x
// slower than pulling the image (docs/benchmarks.md), while bundle content
// (YAML, JSON) still compresses well at BestSpeed.
func WriteArchive(ctx context.Context, w io.Writer, fsys fs.FS) error {
	gz := gzipWriters.Get()
	gz.Reset(w)
	defer func() {
		gz.Reset(io.Discard) // let go of w
		gzipWriters.Put(gz)
	}()
	tw := tar.NewWriter(gz)
	// fs.WalkDir visits each directory's entries in lexical order.
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("reading %q: %w", name, err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if name == "." {
			return nil
		}
		switch {
		case d.IsDir():
			return tw.WriteHeader(&tar.Header{
				Typeflag: tar.TypeDir,
				Name:     name + "/",
				Mode:     dirMode,
				ModTime:  archiveModTime,
			})
		case d.Type().IsRegular():
			return writeFile(tw, fsys, name, d)
		default:
			return fmt.Errorf("%q is not a regular file or directory (type %s)", name, d.Type())
		}
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("finishing tar: %w", err)
	}
	if err := gz.Close(); err != nil {
		return fmt.Errorf("finishing gzip: %w", err)
	}
	return nil
}

// gzipWriters recycles compressors: each holds ~1 MiB of tables, which
// made every stored bundle, however small, allocate that much. Two are
// kept across garbage collections (freelist), which emptied a pool.
var gzipWriters = freelist.New(2, func() *gzip.Writer {
	gz, err := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
	if err != nil {
		panic(err) // only for an invalid level
	}
	return gz
})

var copyBuffers = sync.Pool{New: func() any {
	b := make([]byte, 32<<10)
	return &b
}}

func writeFile(tw *tar.Writer, fsys fs.FS, name string, d fs.DirEntry) error {
	info, err := d.Info()
	if err != nil {
		return fmt.Errorf("reading %q: %w", name, err)
	}
	f, err := fsys.Open(name)
	if err != nil {
		return fmt.Errorf("opening %q: %w", name, err)
	}
	defer f.Close()
	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg,
		Name:     name,
		Mode:     fileMode,
		Size:     info.Size(),
		ModTime:  archiveModTime,
	}); err != nil {
		return fmt.Errorf("writing header of %q: %w", name, err)
	}
	// The header promised info.Size() bytes: a file that changes size while
	// it is stored is an error, not a silently truncated entry. The copy
	// uses a pooled buffer (io.Copy allocates 32 KiB per file, also through
	// *os.File's WriteTo, which the wrapper hides).
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	n, err := io.CopyBuffer(tw, struct{ io.Reader }{f}, *buf)
	if err != nil {
		return fmt.Errorf("copying %q: %w", name, err)
	}
	if n != info.Size() {
		return fmt.Errorf("copying %q: read %d bytes, expected %d (file changed while stored)", name, n, info.Size())
	}
	return nil
}

// DefaultMaxLoadBytes bounds what ArchiveReader keeps in memory by default:
// twice plain.DefaultLimits.MaxTotalBytes, for converted registry+v1
// content that holds both its manifests and its source's.
const DefaultMaxLoadBytes = 64 << 20

// installDirs hold the stored files installs read: plain+v0 manifests and,
// in converted registry+v1 content, the source's manifests and metadata,
// re-rendered with a BundleDeployment's config (plain.ManifestsDir and
// registry.SourceDir); a Helm chart (helm.ChartDir). Storage imports no
// format.
var installDirs = []string{"manifests", "registry+v1/manifests", "registry+v1/metadata", "chart"}

// InstallContent reports whether name (a slash-separated path in stored
// content) is a file or directory installs read: under manifests/,
// registry+v1/manifests/, registry+v1/metadata/ or chart/, or a parent of
// those.
func InstallContent(name string) bool {
	for _, dir := range installDirs {
		if name == dir || strings.HasPrefix(name, dir+"/") || strings.HasPrefix(dir, name+"/") {
			return true
		}
	}
	return false
}

// sourceManifests are a converted registry+v1 bundle's source manifests.
const sourceManifests = "registry+v1/manifests"

// InstallContentWithoutSource is InstallContent without the source
// manifests of converted registry+v1 content, which only a re-render with
// a BundleDeployment's config reads: most of such content's bytes (the
// converted objects are written compactly, the source is the bundle's
// YAML).
func InstallContentWithoutSource(name string) bool {
	if name == sourceManifests || strings.HasPrefix(name, sourceManifests+"/") {
		return false
	}
	return InstallContent(name)
}

// ArchiveReader reads a tar.gz written by WriteArchive back into memory,
// keeping only some of its files. Paths that leave the root and entries
// other than regular files and directories are rejected anywhere in the
// archive, so a hostile archive (from a content URL, say) cannot smuggle
// anything in; the others are read through without being held.
type ArchiveReader struct {
	// Limits bound the whole archive: entries and uncompressed bytes (unset
	// fields take unpack.DefaultLimits).
	Limits unpack.Limits
	// Keep selects the files and directories to hold; nil means
	// InstallContent.
	Keep func(name string) bool
	// MaxKeptBytes bounds the bytes of the files kept; zero means
	// DefaultMaxLoadBytes.
	MaxKeptBytes int64
}

// ReadArchive reads what installs need (InstallContent) from a tar.gz
// written by WriteArchive, within limits and DefaultMaxLoadBytes.
func ReadArchive(r io.Reader, limits unpack.Limits) (fs.FS, error) {
	return ArchiveReader{Limits: limits}.Read(r)
}

// archiveBuffers are the read buffers of stored archives: a new one for
// every load was 64 KiB allocated per reconcile that decodes a bundle
// (a tenth of what a restart at 10,000 BundleDeployments allocated).
var archiveBuffers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

// readBuffered is Read of a file, through a pooled buffer: Read keeps no
// reference to its reader.
func (a ArchiveReader) readBuffered(r io.Reader) (fs.FS, error) {
	br := archiveBuffers.Get().(*bufio.Reader)
	br.Reset(r)
	defer func() {
		br.Reset(nil)
		archiveBuffers.Put(br)
	}()
	return a.Read(br)
}

// Read reads the archive from r.
func (a ArchiveReader) Read(r io.Reader) (fs.FS, error) {
	limits := a.Limits.OrDefault()
	keep := a.Keep
	if keep == nil {
		keep = InstallContent
	}
	maxKept := a.MaxKeptBytes
	if maxKept <= 0 {
		maxKept = DefaultMaxLoadBytes
	}
	gz, err := gzpool.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("reading gzip: %w", err)
	}
	defer gzpool.Put(gz)
	tr := tar.NewReader(gz)
	out := fstest.MapFS{}
	var total, kept int64
	entries := 0
	// hasChildren holds every directory implied by a kept entry's path.
	hasChildren := map[string]bool{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading tar: %w", err)
		}
		name, err := unpack.CleanName(hdr.Name)
		if err != nil {
			return nil, fmt.Errorf("reading tar: %w", err)
		}
		if name == "." {
			continue
		}
		if hdr.Typeflag != tar.TypeDir && hdr.Typeflag != tar.TypeReg {
			return nil, fmt.Errorf("reading tar: %q is not a regular file or directory (type %q)", name, hdr.Typeflag)
		}
		if entries++; entries > limits.MaxFiles {
			return nil, fmt.Errorf("reading tar: content has more than %d files and directories", limits.MaxFiles)
		}
		// The tar reader yields exactly the header's size (or fails), so
		// the bounds are checked before anything is read or allocated
		// (compared before adding: a header's size may be near 2^63).
		if hdr.Size > limits.MaxBytes-total {
			return nil, fmt.Errorf("reading tar: content is larger than %d bytes", limits.MaxBytes)
		}
		total += hdr.Size
		if !keep(name) {
			// Read through (the gzip checksum covers it), never held.
			if _, err := io.Copy(io.Discard, tr); err != nil {
				return nil, fmt.Errorf("reading %q: %w", name, err)
			}
			continue
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("reading tar: %q appears more than once", name)
		}
		if parent := fileParent(out, name); parent != "" {
			return nil, fmt.Errorf("reading tar: %q is inside %q, which is a file", name, parent)
		}
		for dir := path.Dir(name); dir != "." && !hasChildren[dir]; dir = path.Dir(dir) {
			hasChildren[dir] = true
		}
		if hdr.Typeflag == tar.TypeDir {
			out[name] = &fstest.MapFile{Mode: fs.ModeDir | dirMode, ModTime: archiveModTime}
			continue
		}
		if hdr.Size > maxKept-kept {
			return nil, fmt.Errorf("reading tar: the files installs read are larger than %d bytes together", maxKept)
		}
		kept += hdr.Size
		data := make([]byte, hdr.Size)
		if _, err := io.ReadFull(tr, data); err != nil {
			return nil, fmt.Errorf("reading %q: %w", name, err)
		}
		if hasChildren[name] {
			return nil, fmt.Errorf("reading tar: %q is both a file and a directory", name)
		}
		out[name] = &fstest.MapFile{Data: data, Mode: fileMode, ModTime: archiveModTime}
	}
	return out, nil
}

// fileParent returns the first ancestor of name that fsys holds as a file,
// or "" when there is none.
func fileParent(fsys fstest.MapFS, name string) string {
	for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
		if f, ok := fsys[dir]; ok && !f.Mode.IsDir() {
			return dir
		}
	}
	return ""
}
