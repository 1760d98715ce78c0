package git

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/rukpak-dev/rukpak/unpack"
)

// storePack writes a fetched pack and its index into the repository at root
// (s's directory), within limits.
//
// go-git indexes a pack by inflating every object into memory, and every
// delta chain with it, and its base cache holds up to 96 MiB more: a 2 GiB
// zero blob (2 MiB packed) took the heap to 3 GiB wherever it was in the
// commit, and even within limits two interleaved 63 MiB delta chains took
// it to 500 MiB. So this package indexes packs itself: the pack is spooled
// to disk (the download budget counts it on the wire), its headers are
// checked before anything is inflated, objects are hashed as they stream,
// and deltas are applied against bases spooled to disk. Memory is a few
// buffers and some 100 bytes per object, whatever the objects' sizes.
func storePack(ctx context.Context, s *filesystem.Storage, root string, pack io.Reader, limits unpack.Limits) error {
	dir := filepath.Join(root, "objects", "pack")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating pack directory: %w", err)
	}
	f, err := os.CreateTemp(dir, "incoming-*.tmp")
	if err != nil {
		return fmt.Errorf("creating pack spool: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()

	n, err := io.CopyBuffer(f, &ctxReader{ctx: ctx, r: pack}, make([]byte, 64<<10))
	if err != nil {
		return err
	}
	if n == 0 {
		return errors.New("the server sent no pack")
	}
	ix := &indexer{ctx: ctx, pack: f, limits: limits, tmp: root}
	defer ix.cleanup()
	idx, checksum, err := ix.index()
	if err != nil {
		return err
	}

	base := filepath.Join(dir, "pack-"+checksum.String())
	idxFile, err := os.Create(base + ".idx")
	if err != nil {
		return fmt.Errorf("writing pack index: %w", err)
	}
	w := bufio.NewWriter(idxFile)
	if _, err := idxfile.NewEncoder(w).Encode(idx); err != nil {
		_ = idxFile.Close()
		return fmt.Errorf("writing pack index: %w", err)
	}
	if err := errors.Join(w.Flush(), idxFile.Close()); err != nil {
		return fmt.Errorf("writing pack index: %w", err)
	}
	if err := os.Rename(f.Name(), base+".pack"); err != nil {
		return fmt.Errorf("storing pack: %w", err)
	}
	s.Reindex()
	return nil
}

// ctxReader stops reading once ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// minPackObjects is the least number of objects a pack may hold whatever
// MaxFiles says: the commit holds more than the bundle's directory.
const minPackObjects = 10_000

// maxChainFactor bounds a delta chain's expansion at this many times
// MaxFileBytes, and maxExpansionFactor a whole pack's at this many times
// MaxFetchBytes: resolving deltas costs time (and disk for the bases) in
// proportion, and a few bytes of delta may declare megabytes of target.
const (
	maxChainFactor     = 2
	maxExpansionFactor = 8
)

// maxMetaBytes bounds commits, trees and tags, whatever MaxFileBytes says:
// go-git decodes them whole, and a tree of tiny entries decodes to about
// three times its size. The largest trees of big real repositories are a
// few hundred KiB.
const maxMetaBytes = 16 << 20

// checkSize refuses an object of type typ and size over its limit.
func (ix *indexer) checkSize(typ plumbing.ObjectType, size int64) error {
	if size > ix.limits.MaxFileBytes {
		return objectTooLarge(size, ix.limits.MaxFileBytes)
	}
	if typ != plumbing.BlobObject && size > maxMetaBytes {
		return limitErrorf("a %s object of %d bytes exceeds the limit of %d bytes for commits, trees and tags", typ, size, maxMetaBytes)
	}
	return nil
}

// packObject is what the indexer keeps of one object.
type packObject struct {
	offset int64
	size   int64 // once resolved, the object's own size
	crc    uint32
	typ    plumbing.ObjectType // the delta type until resolved
	hash   plumbing.Hash
	// base is a delta's base, by offset (OFS_DELTA) or hash (REF_DELTA).
	base     int64
	baseHash plumbing.Hash
	// children is the number of deltas on this object not yet resolved.
	children int
}

func (o *packObject) isDelta() bool {
	return o.typ == plumbing.OFSDeltaObject || o.typ == plumbing.REFDeltaObject
}

// indexer indexes a pack spooled to a file.
type indexer struct {
	ctx     context.Context
	pack    *os.File
	limits  unpack.Limits
	tmp     string
	scanner *packfile.Scanner
	objects []*packObject
	byOff   map[int64]*packObject
	// spooled holds the content of bases that still have deltas to
	// resolve, on disk, in closed files: a pack of k bases whose deltas
	// all come after them kept k files open (50,000 in 1.7 MB of pack ran
	// the process out of file descriptors, an outside review found).
	spooled map[int64]spooledObject
	buf     []byte
}

// spooledObject is an object's content in a file of its own.
type spooledObject struct {
	path string
	size int64
}

func (ix *indexer) cleanup() {
	for off, f := range ix.spooled {
		_ = os.Remove(f.path)
		delete(ix.spooled, off)
	}
}

// index checks and hashes every object and returns the pack's index and
// checksum.
func (ix *indexer) index() (*idxfile.MemoryIndex, plumbing.Hash, error) {
	if _, err := ix.pack.Seek(0, io.SeekStart); err != nil {
		return nil, plumbing.ZeroHash, fmt.Errorf("reading pack: %w", err)
	}
	ix.scanner = packfile.NewScanner(ix.pack)
	ix.spooled = map[int64]spooledObject{}
	ix.buf = make([]byte, 64<<10)
	if err := ix.scan(); err != nil {
		return nil, plumbing.ZeroHash, err
	}
	checksum, err := ix.scanner.Checksum()
	if err != nil {
		return nil, plumbing.ZeroHash, fmt.Errorf("reading pack checksum: %w", err)
	}
	for _, o := range ix.objects {
		if err := ix.ctx.Err(); err != nil {
			return nil, plumbing.ZeroHash, err
		}
		if err := ix.resolve(o); err != nil {
			return nil, plumbing.ZeroHash, err
		}
	}
	w := new(idxfile.Writer)
	if err := w.OnHeader(uint32(len(ix.objects))); err != nil {
		return nil, plumbing.ZeroHash, err
	}
	for _, o := range ix.objects {
		w.Add(o.hash, uint64(o.offset), o.crc)
	}
	if err := w.OnFooter(checksum); err != nil {
		return nil, plumbing.ZeroHash, err
	}
	idx, err := w.Index()
	if err != nil {
		return nil, plumbing.ZeroHash, fmt.Errorf("building pack index: %w", err)
	}
	return idx, checksum, nil
}

// scan reads every header, refusing a pack that declares more than the
// limits allow before anything large is inflated: an object larger than
// MaxFileBytes (a delta counts by the size it expands to, from its own
// header), more objects than twice MaxFiles, a delta chain expanding to
// more than maxChainFactor times MaxFileBytes, or a pack expanding to more
// than maxExpansionFactor times MaxFetchBytes. Objects that are not deltas
// are hashed as they stream.
func (ix *indexer) scan() error {
	s := ix.scanner
	_, count, err := s.Header()
	if err != nil {
		return fmt.Errorf("reading pack: %w", err)
	}
	maxObjects := max(2*int64(ix.limits.MaxFiles), minPackObjects)
	if int64(count) > maxObjects {
		return limitErrorf("the pack holds %d objects, more than the limit of %d (twice --max-bundle-files, at least %d)", count, maxObjects, minPackObjects)
	}
	maxChain := maxChainFactor * ix.limits.MaxFileBytes
	maxExpansion := maxExpansionFactor * ix.limits.MaxFetchBytes
	ix.objects = make([]*packObject, 0, count)
	ix.byOff = make(map[int64]*packObject, count)
	// chain is the bytes a delta chain expands to, by its last object.
	chain := make(map[int64]int64, count)
	var expansion int64
	head := &deltaHead{}
	for range count {
		if err := ix.ctx.Err(); err != nil {
			return err
		}
		h, err := s.NextObjectHeader()
		if err != nil {
			return fmt.Errorf("reading pack: %w", err)
		}
		if h.Length > ix.limits.MaxFileBytes {
			return objectTooLarge(h.Length, ix.limits.MaxFileBytes)
		}
		o := &packObject{offset: h.Offset, size: h.Length, typ: h.Type, base: -1}
		switch h.Type {
		case plumbing.OFSDeltaObject, plumbing.REFDeltaObject:
			head.reset()
			if _, o.crc, err = s.NextObject(head); err != nil {
				return fmt.Errorf("reading pack: %w", err)
			}
			if o.size, err = head.targetSize(); err != nil {
				return fmt.Errorf("reading pack: %w", err)
			}
			if o.size > ix.limits.MaxFileBytes {
				return objectTooLarge(o.size, ix.limits.MaxFileBytes)
			}
			expanded := o.size
			if h.Type == plumbing.OFSDeltaObject {
				base, ok := ix.byOff[h.OffsetReference]
				if !ok {
					return fmt.Errorf("reading pack: delta at %d has no base at %d", h.Offset, h.OffsetReference)
				}
				base.children++
				o.base = h.OffsetReference
				expanded += chain[h.OffsetReference]
			} else {
				o.baseHash = h.Reference
			}
			if expanded > maxChain {
				return limitErrorf("a delta chain expands to more than %d bytes (twice --max-file-bytes)", maxChain)
			}
			chain[h.Offset] = expanded
		default:
			if err := ix.checkSize(h.Type, h.Length); err != nil {
				return err
			}
			hasher := plumbing.NewHasher(h.Type, h.Length)
			var n int64
			if n, o.crc, err = s.NextObject(hasher); err != nil {
				return fmt.Errorf("reading pack: %w", err)
			}
			if n != h.Length {
				return fmt.Errorf("reading pack: object at %d has %d bytes, its header says %d", h.Offset, n, h.Length)
			}
			o.hash = hasher.Sum()
			chain[h.Offset] = o.size
		}
		if expansion += o.size; expansion > maxExpansion {
			return limitErrorf("the pack expands to more than %d bytes (8 times --max-fetch-bytes)", maxExpansion)
		}
		ix.objects = append(ix.objects, o)
		ix.byOff[o.offset] = o
	}
	// REF_DELTA bases are found by hash; servers send OFS_DELTA when
	// asked (we ask), so these are rare.
	var byHash map[plumbing.Hash]*packObject
	for _, o := range ix.objects {
		if o.typ != plumbing.REFDeltaObject {
			continue
		}
		if byHash == nil {
			byHash = map[plumbing.Hash]*packObject{}
			for _, b := range ix.objects {
				if !b.isDelta() {
					byHash[b.hash] = b
				}
			}
		}
		base, ok := byHash[o.baseHash]
		if !ok {
			return fmt.Errorf("reading pack: the base %s of a delta is not in the pack", o.baseHash)
		}
		base.children++
		o.base = base.offset
	}
	return nil
}

// resolve hashes a delta, by applying it to its base's content, and spools
// its own content to disk if deltas rest on it. A REF_DELTA whose base is
// itself a REF_DELTA later in the pack is resolved on demand.
func (ix *indexer) resolve(o *packObject) error {
	if !o.isDelta() {
		if o.children > 0 {
			_, err := ix.spool(o)
			return err
		}
		return nil
	}
	base := ix.byOff[o.base]
	if base.isDelta() {
		if err := ix.resolve(base); err != nil {
			return err
		}
	}
	// Only now is the type known: that of the chain's first object.
	if err := ix.checkSize(base.typ, o.size); err != nil {
		return err
	}
	content, err := ix.spool(base)
	if err != nil {
		return err
	}
	var out *os.File
	var w io.Writer
	hasher := plumbing.NewHasher(base.typ, o.size)
	w = hasher
	if o.children > 0 {
		if out, err = os.CreateTemp(ix.tmp, "object-*"); err != nil {
			return fmt.Errorf("spooling object: %w", err)
		}
		w = io.MultiWriter(hasher, out)
	}
	err = ix.apply(o, content, w)
	if out != nil {
		if cerr := out.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("spooling object: %w", cerr)
		}
		if err != nil {
			_ = os.Remove(out.Name())
		}
	}
	if err != nil {
		return err
	}
	o.typ = base.typ
	o.hash = hasher.Sum()
	if out != nil {
		ix.spooled[o.offset] = spooledObject{path: out.Name(), size: o.size}
	}
	base.children--
	if base.children == 0 {
		ix.release(base.offset)
	}
	return nil
}

// spool returns the content of o (which is resolved), on disk.
func (ix *indexer) spool(o *packObject) (spooledObject, error) {
	if f, ok := ix.spooled[o.offset]; ok {
		return f, nil
	}
	if o.isDelta() {
		return spooledObject{}, fmt.Errorf("reading pack: delta at %d is not resolved", o.offset)
	}
	f, err := os.CreateTemp(ix.tmp, "object-*")
	if err != nil {
		return spooledObject{}, fmt.Errorf("spooling object: %w", err)
	}
	n, err := ix.spoolFrom(o, f)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("spooling object: %w", cerr)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return spooledObject{}, err
	}
	so := spooledObject{path: f.Name(), size: n}
	ix.spooled[o.offset] = so
	return so, nil
}

// spoolFrom copies o's content from the pack to f.
func (ix *indexer) spoolFrom(o *packObject, f *os.File) (int64, error) {
	if _, err := ix.scanner.SeekObjectHeader(o.offset); err != nil {
		return 0, fmt.Errorf("reading pack: %w", err)
	}
	n, _, err := ix.scanner.NextObject(f)
	if err != nil {
		return 0, fmt.Errorf("reading pack: %w", err)
	}
	return n, nil
}

func (ix *indexer) release(off int64) {
	if f, ok := ix.spooled[off]; ok {
		_ = os.Remove(f.path)
		delete(ix.spooled, off)
	}
}

// apply writes delta o applied to base to w, streaming: the delta is
// inflated as it is read, and copies read the base from disk.
func (ix *indexer) apply(o *packObject, spooled spooledObject, w io.Writer) error {
	base, err := os.Open(spooled.path)
	if err != nil {
		return fmt.Errorf("reading spooled object: %w", err)
	}
	defer base.Close()
	if _, err := ix.scanner.SeekObjectHeader(o.offset); err != nil {
		return fmt.Errorf("reading pack: %w", err)
	}
	rc, err := ix.scanner.ReadObject()
	if err != nil {
		return fmt.Errorf("reading pack: %w", err)
	}
	defer rc.Close()
	r := bufio.NewReaderSize(rc, 32<<10)
	baseSize, err := readVarint(r)
	if err != nil {
		return badDelta(o, err)
	}
	if baseSize != spooled.size {
		return badDelta(o, fmt.Errorf("base has %d bytes, the delta expects %d", spooled.size, baseSize))
	}
	target, err := readVarint(r)
	if err != nil {
		return badDelta(o, err)
	}
	var written int64
	for written < target {
		cmd, err := r.ReadByte()
		if err != nil {
			return badDelta(o, err)
		}
		var n int64
		switch {
		case cmd&0x80 != 0:
			var offset, size int64
			for i := range 4 {
				if cmd&(1<<i) != 0 {
					b, err := r.ReadByte()
					if err != nil {
						return badDelta(o, err)
					}
					offset |= int64(b) << (8 * i)
				}
			}
			for i := range 3 {
				if cmd&(0x10<<i) != 0 {
					b, err := r.ReadByte()
					if err != nil {
						return badDelta(o, err)
					}
					size |= int64(b) << (8 * i)
				}
			}
			if size == 0 {
				size = 0x10000
			}
			if offset+size > baseSize || written+size > target {
				return badDelta(o, errors.New("copy out of bounds"))
			}
			n, err = io.CopyBuffer(w, io.NewSectionReader(base, offset, size), ix.buf)
			if err == nil && n != size {
				err = io.ErrUnexpectedEOF
			}
		case cmd != 0:
			size := int64(cmd)
			if written+size > target {
				return badDelta(o, errors.New("insert out of bounds"))
			}
			n, err = io.CopyN(w, r, size)
		default:
			return badDelta(o, errors.New("reserved instruction 0"))
		}
		if err != nil {
			return badDelta(o, err)
		}
		written += n
	}
	return nil
}

func badDelta(o *packObject, err error) error {
	return fmt.Errorf("reading pack: invalid delta at %d: %w", o.offset, err)
}

func readVarint(r io.ByteReader) (int64, error) {
	var v int64
	for shift := uint(0); shift <= 56; shift += 7 {
		c, err := r.ReadByte()
		if err != nil {
			return 0, err
		}
		v |= int64(c&0x7f) << shift
		if c&0x80 == 0 {
			return v, nil
		}
	}
	return 0, errors.New("size overflows")
}

func objectTooLarge(size, limit int64) error {
	return limitErrorf("an object of %d bytes exceeds the limit of %d bytes per file (--max-file-bytes)", size, limit)
}

// deltaHead keeps the first bytes of a delta, which hold the base and target
// sizes, and discards the rest.
type deltaHead struct {
	buf [32]byte
	n   int
}

func (d *deltaHead) reset() { d.n = 0 }

func (d *deltaHead) Write(p []byte) (int, error) {
	d.n += copy(d.buf[d.n:], p)
	return len(p), nil
}

func (d *deltaHead) ReadByte() (byte, error) {
	if d.n == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	c := d.buf[0]
	copy(d.buf[:], d.buf[1:d.n])
	d.n--
	return c, nil
}

// targetSize decodes the second of the delta's two size varints.
func (d *deltaHead) targetSize() (int64, error) {
	if _, err := readVarint(d); err != nil {
		return 0, fmt.Errorf("delta header: %w", err)
	}
	size, err := readVarint(d)
	if err != nil {
		return 0, fmt.Errorf("delta header: %w", err)
	}
	return size, nil
}
