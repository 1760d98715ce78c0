// Package gzpool reuses gzip readers. A reader's inflate window is 32 KiB
// allocated anew by every gzip.NewReader; a provisioner that re-verifies
// 10,000 installs after a restart opens 20,000 gzip streams (each stored
// archive and each release record), which made that window a tenth of all
// it allocated.
package gzpool

import (
	"bytes"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
)

var readers sync.Pool

// NewReader returns a gzip reader of r, reused if one is free. Give it
// back with Put once done with it (not required: one not put back is
// collected).
func NewReader(r io.Reader) (*gzip.Reader, error) {
	if zr, ok := readers.Get().(*gzip.Reader); ok {
		if err := zr.Reset(r); err != nil {
			Put(zr) // let go of r
			return nil, err
		}
		return zr, nil
	}
	return gzip.NewReader(r)
}

// Put makes zr free for reuse. zr must not be used afterwards. It is reset
// onto an empty stream first, so that neither it nor its inflater keeps a
// reference to the stream it read (a release record's bytes, a file). The
// empty stream is hidden behind a plain io.Reader so that the reader's own
// read buffer, which it keeps for streams that cannot be read byte by
// byte, is reset onto it too.
func Put(zr *gzip.Reader) {
	if zr == nil {
		return
	}
	_ = zr.Close()
	if err := zr.Reset(struct{ io.Reader }{bytes.NewReader(empty)}); err != nil {
		return
	}
	readers.Put(zr)
}

// empty is the gzip stream of no bytes.
var empty = func() []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if err := w.Close(); err != nil {
		panic(err)
	}
	return b.Bytes()
}()
