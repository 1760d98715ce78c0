package git

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"github.com/rukpak-dev/rukpak/unpack"
)

// storePack writes a fetched pack into s, within limits.
//
// go-git indexes a pack by inflating every object into memory, deltas
// against their bases (a 2 GiB zero blob, 2 MiB packed, took the heap to
// 3 GiB, wherever it was in the commit). So the pack is first spooled to
// disk (the download budget counts it on the wire), then its object headers
// are checked, reading nothing but headers and the first bytes of each
// delta, and only a pack whose every object is within MaxFileBytes reaches
// go-git. Objects outside the requested directory cost the same check: an
// oversized one fails the fetch before it is inflated.
func storePack(ctx context.Context, s storer.Storer, pack io.Reader, spoolDir string, limits unpack.Limits) error {
	f, err := os.CreateTemp(spoolDir, "incoming-*.pack")
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
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("reading pack spool: %w", err)
	}
	if err := checkPack(ctx, f, limits); err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("reading pack spool: %w", err)
	}
	if err := packfile.UpdateObjectStorage(s, &ctxReader{ctx: ctx, r: f}); err != nil {
		return fmt.Errorf("storing pack: %w", err)
	}
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

// maxChainFactor bounds a delta chain's expansion at this many times
// MaxFileBytes: go-git holds every object of a chain in memory while it
// resolves the chain's last delta when its base cache misses.
const maxChainFactor = 2

// minPackObjects is the least number of objects a pack may hold whatever
// MaxFiles says: the commit holds more than the bundle's directory.
const minPackObjects = 10_000

// checkPack refuses a pack holding an object larger than MaxFileBytes (a
// delta counts by the size it expands to, read from its own header), more
// objects than twice MaxFiles (go-git keeps some 250 bytes per object while
// indexing), or a delta chain that expands to more than
// maxChainFactor times MaxFileBytes. Only headers are kept; objects are
// inflated to nowhere, to find where the next one starts.
func checkPack(ctx context.Context, r io.ReadSeeker, limits unpack.Limits) error {
	s := packfile.NewScanner(r)
	_, count, err := s.Header()
	if err != nil {
		return fmt.Errorf("reading pack: %w", err)
	}
	maxObjects := max(2*int64(limits.MaxFiles), minPackObjects)
	if int64(count) > maxObjects {
		return limitErrorf("the pack holds %d objects, more than the limit of %d (twice --max-bundle-files, at least 10000)", count, maxObjects)
	}
	maxChain := maxChainFactor * limits.MaxFileBytes
	// chain is the bytes a delta chain expands to, by the offset of its
	// last object; only objects with a delta on them matter, but which do
	// is not known yet.
	chain := make(map[int64]int64, min(count, 1<<16))
	head := &deltaHead{}
	for range count {
		if err := ctx.Err(); err != nil {
			return err
		}
		h, err := s.NextObjectHeader()
		if err != nil {
			return fmt.Errorf("reading pack: %w", err)
		}
		if h.Length > limits.MaxFileBytes {
			return objectTooLarge(h.Length, limits.MaxFileBytes)
		}
		size := h.Length
		if h.Type == plumbing.OFSDeltaObject || h.Type == plumbing.REFDeltaObject {
			head.reset()
			if _, _, err := s.NextObject(head); err != nil {
				return fmt.Errorf("reading pack: %w", err)
			}
			if size, err = head.targetSize(); err != nil {
				return fmt.Errorf("reading pack: %w", err)
			}
			if size > limits.MaxFileBytes {
				return objectTooLarge(size, limits.MaxFileBytes)
			}
			// A base by hash (REF_DELTA) is counted as its own
			// object; servers send OFS_DELTA when asked (we ask).
			expanded := size + chain[h.OffsetReference]
			if h.Type == plumbing.REFDeltaObject {
				expanded = size
			}
			if expanded > maxChain {
				return limitErrorf("a delta chain expands to more than %d bytes (twice --max-file-bytes)", maxChain)
			}
			chain[h.Offset] = expanded
			continue
		}
		chain[h.Offset] = size
	}
	return nil
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

// targetSize decodes the second of the delta's two size varints.
func (d *deltaHead) targetSize() (int64, error) {
	b := d.buf[:d.n]
	var sizes [2]int64
	for i := range sizes {
		var v int64
		var shift uint
		for {
			if len(b) == 0 {
				return 0, errors.New("truncated delta header")
			}
			c := b[0]
			b = b[1:]
			if shift > 56 {
				return 0, errors.New("delta size overflows")
			}
			v |= int64(c&0x7f) << shift
			shift += 7
			if c&0x80 == 0 {
				break
			}
		}
		sizes[i] = v
	}
	return sizes[1], nil
}
