package memo

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"math"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/rukpak-dev/rukpak/internal/sortedkeys"
)

// Digest is the SHA-256 of objs' content, in order: equal for equal objects
// (map keys are hashed sorted), different for any change of a key, a value,
// a type or the order of objs. It writes the objects straight into the
// hash, with none of the allocation of rendering them as JSON or YAML.
func Digest(objs []*unstructured.Unstructured) [sha256.Size]byte {
	d := digesters.Get().(*digester)
	defer d.release()
	d.h.Reset()
	d.out = d.out[:0]
	d.int(tagList, int64(len(objs)))
	for _, o := range objs {
		if o == nil {
			d.tag(tagNil)
			continue
		}
		d.value(o.Object)
	}
	d.h.Write(d.out)
	var sum [sha256.Size]byte
	d.h.Sum(sum[:0])
	return sum
}

// Type tags: every value is written as its tag and then its length or
// bytes, so no two different values write the same stream.
const (
	tagNil byte = iota
	tagMap
	tagList
	tagString
	tagInt
	tagFloat
	tagTrue
	tagFalse
	tagOther
)

type digester struct {
	h    hash.Hash
	out  []byte
	keys sortedkeys.Stack
}

// otherSeed and otherCount make every value of a type decoding never
// produces digest uniquely (value).
var (
	otherSeed  = func() (b [32]byte) { _, _ = rand.Read(b[:]); return b }()
	otherCount atomic.Int64
)

// digesters are reused: a digest of one release's objects allocated its
// buffer and hasher anew, ~15 KB per reconcile.
var digesters = sync.Pool{New: func() any { return &digester{h: sha256.New(), out: make([]byte, 0, 2*outBuffer)} }}

// release pools d unless it holds more than a small digester should (a
// long string grew its buffer).
func (d *digester) release() {
	if cap(d.out) > maxPooledBuffer || d.keys.Largest() > maxPooledKeys {
		return
	}
	d.out = d.out[:0]
	d.keys.Reset()
	digesters.Put(d)
}

// write buffers the stream: many small writes to the hash cost more than
// the hashing.
func (d *digester) write(p ...byte) {
	d.out = append(d.out, p...)
	d.flushFull()
}

func (d *digester) flushFull() {
	if len(d.out) >= outBuffer {
		d.h.Write(d.out)
		d.out = d.out[:0]
	}
}

const outBuffer = 8 << 10

func (d *digester) tag(t byte) { d.write(t) }

func (d *digester) int(t byte, v int64) {
	d.out = append(d.out, t)
	d.out = binary.BigEndian.AppendUint64(d.out, uint64(v))
	d.flushFull()
}

func (d *digester) string(t byte, s string) {
	d.int(t, int64(len(s)))
	d.out = append(d.out, s...)
	d.flushFull()
}

func (d *digester) value(v any) {
	switch v := v.(type) {
	case nil:
		d.tag(tagNil)
	case map[string]any:
		if v == nil { // as JSON writes it
			d.tag(tagNil)
			return
		}
		d.mapValue(v)
	case []any:
		if v == nil {
			d.tag(tagNil)
			return
		}
		d.int(tagList, int64(len(v)))
		for _, e := range v {
			d.value(e)
		}
	case string:
		d.string(tagString, v)
	case int64:
		d.int(tagInt, v)
	case int:
		d.int(tagInt, int64(v))
	case int32:
		d.int(tagInt, int64(v))
	case float64:
		d.int(tagFloat, int64(math.Float64bits(v)))
	case bool:
		if v {
			d.tag(tagTrue)
		} else {
			d.tag(tagFalse)
		}
	default:
		// Not produced by decoding JSON or YAML, and no printed form tells
		// every value apart (map[a:b c:d] is two maps): such objects digest
		// as no other objects, not even themselves, so nothing is ever
		// taken as unchanged because of them (the digest names what a
		// release holds in its record's labels too).
		d.string(tagOther, fmt.Sprintf("%T", v))
		d.int(tagOther, otherCount.Add(1))
		d.out = append(d.out, otherSeed[:]...)
	}
}

func (d *digester) mapValue(m map[string]any) {
	keys := d.keys.Enter(m)
	defer d.keys.Leave()
	d.int(tagMap, int64(len(keys)))
	for _, k := range keys {
		d.string(tagString, k)
		d.value(m[k])
	}
}
