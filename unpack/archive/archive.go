// Package archive extracts tar streams (plain or gzip-compressed) into an
// unpack.Tree, for HTTP archives and OCI image layers alike.
//
// Safety rules, applied to every entry:
//   - names are cleaned by the Tree; absolute names and names leaving the
//     root fail with a Terminal error naming the entry;
//   - only regular files and directories are materialised. A symlink or
//     hardlink whose target leaves the root (an absolute target, or one that
//     climbs out with "..") fails with a Terminal error naming the link and
//     its target; one that stays inside is skipped, except that a hardlink is
//     materialised as a copy of the file it names (a regular file). Devices,
//     FIFOs and other special entries are skipped. Nothing is ever written
//     through a link, because no link is ever created;
//   - size and file-count limits are enforced by the Tree, so a
//     decompression bomb stops with a Terminal error at the configured cap.
package archive

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/rukpak-dev/rukpak/internal/gzpool"
	"github.com/rukpak-dev/rukpak/unpack"
)

// Options tune Extract.
type Options struct {
	// Whiteouts applies OCI layer whiteouts: ".wh.<name>" deletes <name>
	// from earlier layers and ".wh..wh..opq" empties its directory of
	// earlier layers' content. Set it when extracting image layers, in
	// order, into the same Tree.
	Whiteouts bool
	// RequireGzip fails with a Terminal error unless the stream is gzip
	// compressed. Without it, gzip is detected by its magic number.
	RequireGzip bool
}

const (
	whiteoutPrefix = ".wh."
	whiteoutOpaque = ".wh..wh..opq"
)

var (
	gzipMagic = []byte{0x1f, 0x8b}
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// ErrNotGzip is wrapped by the error Extract returns when RequireGzip is set
// and the stream is not gzip.
var ErrNotGzip = errors.New("not a gzip archive")

// MaxZstdWindow is the largest zstd window (the history a decoder must
// hold in memory) Extract accepts. A frame declares its window and a
// decoder allocates it up front, so a 30 KiB layer declaring 512 MiB cost
// 512 MiB. 16 MiB is twice what the zstd format recommends every decoder
// support, and more than zstd levels up to 19 and the Go encoders that
// build images use; frames made with --long or --ultra are refused.
const MaxZstdWindow = 16 << 20

// Extract streams the tar archive in r into tree. The archive may be
// plain, gzip or zstd compressed (told apart by their magic numbers). It
// reads r only as far as the tar end-of-archive marker; callers that need
// the whole stream consumed (to verify a digest, say) drain r afterwards.
func Extract(ctx context.Context, r io.Reader, tree *unpack.Tree, opts Options) error {
	in := &readTracker{r: r}
	br := bufio.NewReader(in)
	magic, err := br.Peek(len(zstdMagic))
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading archive: %w", err)
	}
	var src io.Reader = br
	switch {
	case bytes.HasPrefix(magic, gzipMagic):
		// Pooled: a gzip reader's 32 KiB window per layer was the largest
		// allocation of unpacking a small image.
		zr, err := gzpool.NewReader(br)
		if err != nil {
			return unpack.Terminal(fmt.Errorf("reading gzip archive: %w", err))
		}
		defer gzpool.Put(zr)
		src = zr
	case opts.RequireGzip:
		return unpack.Terminal(ErrNotGzip)
	case bytes.Equal(magic, zstdMagic):
		zr, err := zstd.NewReader(br,
			zstd.WithDecoderConcurrency(1), // synchronous: no goroutines or block buffers ahead of the reader
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(MaxZstdWindow),
			// Bounds a single-segment frame's declared size, which
			// replaces the window when the frame has none.
			zstd.WithDecoderMaxMemory(MaxZstdWindow))
		if err != nil {
			return fmt.Errorf("reading zstd archive: %w", err)
		}
		defer zr.Close()
		src = zr
	}

	x := &extractor{tree: tree, opts: opts, layer: map[string]bool{}, opaqued: map[string]bool{}}
	tr := tar.NewReader(src)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return classifyRead(err, in.err)
		}
		if err := x.entry(hdr, tr, in); err != nil {
			return err
		}
	}
}

// MaxTrailingBytes bounds what ExtractWhole reads after an archive's
// end-of-archive marker.
const MaxTrailingBytes = 1 << 20

// ExtractWhole is Extract followed by reading the rest of r: the gzip
// trailer and tar padding, which a digest of the archive covers. At most
// MaxTrailingBytes may follow the archive, so a sender cannot stream
// forever after a valid one.
func ExtractWhole(ctx context.Context, r io.Reader, tree *unpack.Tree, opts Options) error {
	if err := Extract(ctx, r, tree, opts); err != nil {
		return err
	}
	_, err := io.CopyN(io.Discard, r, MaxTrailingBytes)
	switch {
	case errors.Is(err, io.EOF):
		return nil
	case err != nil:
		return err // the stream's own error: a fetch limit, a dropped connection
	}
	return unpack.Terminal(fmt.Errorf("more than %d MiB of data after the end of the archive", MaxTrailingBytes>>20))
}

// classifyRead makes corrupt archives terminal; I/O errors of the
// underlying stream (a dropped connection, a fetch limit) stay as they
// are. srcErr is the error the stream itself returned, if any.
func classifyRead(err, srcErr error) error {
	switch {
	case errors.Is(err, zstd.ErrWindowSizeExceeded), errors.Is(err, zstd.ErrDecoderSizeExceeded):
		return unpack.Terminal(fmt.Errorf("reading zstd archive: it needs a decompression window of more than %d bytes (the limit)", MaxZstdWindow))
	case srcErr != nil:
		return fmt.Errorf("reading archive: %w", err)
	case errors.Is(err, tar.ErrHeader), errors.Is(err, tar.ErrFieldTooLong), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, gzip.ErrChecksum), errors.Is(err, gzip.ErrHeader), errors.As(err, new(flate.CorruptInputError)):
		return unpack.Terminal(fmt.Errorf("reading archive: %w", err))
	}
	if zstdErr(err) {
		return unpack.Terminal(fmt.Errorf("reading zstd archive: %w", err))
	}
	return fmt.Errorf("reading archive: %w", err)
}

// zstdErr reports whether err is the zstd decoder's: corrupt data.
func zstdErr(err error) bool {
	for _, e := range []error{zstd.ErrReservedBlockType, zstd.ErrCompressedSizeTooBig, zstd.ErrBlockTooSmall,
		zstd.ErrUnexpectedBlockSize, zstd.ErrMagicMismatch, zstd.ErrWindowSizeTooSmall, zstd.ErrFrameSizeExceeded,
		zstd.ErrFrameSizeMismatch, zstd.ErrCRCMismatch, zstd.ErrUnknownDictionary} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

type extractor struct {
	tree *unpack.Tree
	opts Options
	// layer holds the paths (and their parents) written by this archive,
	// which an opaque whiteout in the same archive must keep.
	layer map[string]bool
	// opaqued holds the directories this archive already emptied of
	// earlier layers' content: another opaque marker in them has nothing
	// left to remove.
	opaqued map[string]bool
}

func (x *extractor) entry(hdr *tar.Header, r io.Reader, in *readTracker) error {
	// The tree checks the name's length and depth before anything else
	// looks at it: a 64,000-level name cost minutes of work in every
	// step that walks a path's parents.
	name, err := x.tree.Name(hdr.Name)
	if err != nil {
		return unpack.Terminal(fmt.Errorf("archive entry: %w", err))
	}
	if limit := x.tree.Limits().MaxPathBytes; len(hdr.Linkname) > limit {
		return unpack.Terminal(fmt.Errorf("archive entry %q: link target is %d bytes long, more than the limit of %d", name, len(hdr.Linkname), limit))
	}
	if x.opts.Whiteouts {
		base := path.Base(name)
		if base == whiteoutOpaque {
			return x.opaque(path.Dir(name))
		}
		if strings.HasPrefix(base, whiteoutPrefix) {
			target := path.Join(path.Dir(name), strings.TrimPrefix(base, whiteoutPrefix))
			if err := x.tree.Remove(target); err != nil {
				return fmt.Errorf("applying whiteout %q: %w", hdr.Name, err)
			}
			return nil
		}
	}

	switch hdr.Typeflag {
	case tar.TypeDir:
		if name == "." {
			return x.tree.Count()
		}
		if err := x.replaceNonDir(name); err != nil {
			return err
		}
		x.mark(name)
		return x.tree.Mkdir(name)
	case tar.TypeReg: // tar.Reader reports the legacy TypeRegA as TypeReg
		x.mark(name)
		body := &readTracker{r: r}
		if err := x.tree.WriteFile(name, body, fs.FileMode(hdr.Mode)); err != nil {
			if body.err != nil {
				// The archive broke, not the disk: say so, and how.
				return classifyRead(fmt.Errorf("entry %q: %w", name, body.err), in.err)
			}
			return err
		}
		return nil
	case tar.TypeSymlink:
		// Symlinks are relative to the link's directory.
		target := hdr.Linkname
		if !strings.HasPrefix(target, "/") {
			target = path.Join(path.Dir(name), target)
		}
		if _, err := inside(target); err != nil {
			return unpack.Terminal(fmt.Errorf("symlink %q points outside the bundle root (%q)", hdr.Name, hdr.Linkname))
		}
		return x.tree.Count() // kept out: only regular files and directories are materialised
	case tar.TypeLink:
		// Hardlink targets are archive paths, relative to the root.
		target, err := inside(hdr.Linkname)
		if err != nil {
			return unpack.Terminal(fmt.Errorf("hardlink %q points outside the bundle root (%q)", hdr.Name, hdr.Linkname))
		}
		return x.copyLink(name, target)
	default:
		return x.tree.Count() // devices, FIFOs and the like have no place in a bundle
	}
}

// inside cleans a link target, refusing one that leaves the root.
func inside(target string) (string, error) {
	if strings.HasPrefix(target, "/") {
		return "", fmt.Errorf("absolute target %q", target)
	}
	return unpack.CleanName(target)
}

// copyLink materialises a hardlink as a copy of its (already extracted)
// target.
func (x *extractor) copyLink(name, target string) error {
	if isDir, ok := x.tree.IsDir(target); !ok {
		return unpack.Terminal(fmt.Errorf("hardlink %q: target %q is not in the archive before it", name, target))
	} else if isDir {
		return unpack.Terminal(fmt.Errorf("hardlink %q: target %q is not a regular file", name, target))
	}
	r, mode, err := x.tree.Open(target)
	if err != nil {
		return err
	}
	x.mark(name)
	return x.tree.WriteFile(name, r, mode)
}

// replaceNonDir removes a file an earlier layer left where this entry
// needs a directory.
func (x *extractor) replaceNonDir(name string) error {
	if isDir, ok := x.tree.IsDir(name); ok && !isDir {
		return x.tree.Remove(name)
	}
	return nil
}

func (x *extractor) mark(name string) {
	for p := name; p != "." && !x.layer[p]; p = path.Dir(p) {
		x.layer[p] = true
	}
}

// opaque empties dir of everything earlier layers put there, keeping what
// this layer has already written (mark keeps their parents too).
func (x *extractor) opaque(dir string) error {
	x.mark(dir)
	for p := dir; ; p = path.Dir(p) {
		if x.opaqued[p] {
			return x.tree.Count()
		}
		if p == "." {
			break
		}
	}
	x.opaqued[dir] = true
	if err := x.tree.RemoveUnder(dir, func(name string) bool { return x.layer[name] }); err != nil {
		return fmt.Errorf("applying opaque whiteout in %q: %w", dir, err)
	}
	return nil
}

// readTracker remembers the error of the archive stream, so a failed write
// can be told apart from a failed read.
type readTracker struct {
	r   io.Reader
	err error
}

func (t *readTracker) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF {
		t.err = err
	}
	return n, err
}
