package jsonmap

import (
	"hash/maphash"
	"math"
	"unsafe"
)

// SharedKey names the subtrees a decode shares: under it, a map or slice
// equal to one decoded before in the same document is that one, not a
// copy. A CRD's schema (openAPIV3Schema) repeats itself: the same
// property schemas ({"type": "string"}, a condition's, an object
// reference's) under many fields and in every version. In the fleet's
// sixty operators two of every three maps under the key equal one before
// them in their document, and a small map costs ~300 bytes however few its
// members, so decoding them apart was most of what decoding a bundle
// allocated.
//
// What is under the key is read only: nothing here changes a CRD's schema
// in place (an object is copied before fields are dropped from it), and
// code that would must copy the object first (unstructured's DeepCopy
// shares nothing); registry+v1 conversion rewrites a decoded object's
// values in place only with equal ones (decodedForm), which a shared part
// bears. Owned lets parts under the key be reached twice. Nothing is
// shared between documents, nor outside the key; the objects of one
// document (a List's items) may share.
const SharedKey = "openAPIV3Schema"

// maxShared bounds the maps and slices one decode remembers to share:
// a document of unique subtrees keeps no more.
const maxShared = 1 << 14

// maxSharedKeep bounds the tables an idle decoder keeps (emptied).
const maxSharedKeep = 1 << 12

// shareSeed is the hash seed of every decode: the tables live only while
// a document is decoded, so one seed for the process is enough.
var shareSeed = maphash.MakeSeed()

// sharing says whether the value being decoded is under SharedKey.
func (d *decoder) sharing() bool { return d.shared > 0 }

// sharedMap is the map of members decoded before in this document, if
// any.
func (d *decoder) sharedMap(members []member) (map[string]any, uint64, bool) {
	var h uint64
	for _, e := range members {
		vh, ok := valueHash(e.value)
		if !ok {
			return nil, 0, false
		}
		// In any order: the members' order does not make another map. A
		// key and a value are hashed apart ({a: b} is not {b: a}).
		h += mix(maphash.String(shareSeed, e.key) ^ mix(vh+memberValue))
	}
	if c, ok := d.shares[h].(map[string]any); ok && len(c) == len(members) {
		for _, e := range members {
			if v, ok := c[e.key]; !ok || !sameValue(v, e.value) {
				return nil, h, true
			}
		}
		// As many members as c has keys, each in c: c is their map only
		// if no key repeats (a repeated key's members make one entry, and
		// c would hold a key the document does not have there).
		if !distinctKeys(members) {
			return nil, h, true
		}
		return c, h, true
	}
	return nil, h, true
}

// memberValue sets a member's value hash apart from its key's.
const memberValue = 0x5851f42d4c957f2d

// distinctKeys says whether no two members have one key.
func distinctKeys(members []member) bool {
	if len(members) <= 16 {
		for i := 1; i < len(members); i++ {
			for j := range i {
				if members[i].key == members[j].key {
					return false
				}
			}
		}
		return true
	}
	seen := make(map[string]struct{}, len(members))
	for _, e := range members {
		if _, ok := seen[e.key]; ok {
			return false
		}
		seen[e.key] = struct{}{}
	}
	return true
}

// sharedSlice is the slice of elements decoded before in this document,
// if any.
func (d *decoder) sharedSlice(elements []any) ([]any, uint64, bool) {
	h := uint64(len(elements)) + 1
	for _, v := range elements {
		vh, ok := valueHash(v)
		if !ok {
			return nil, 0, false
		}
		h = mix(h ^ vh)
	}
	h = ^h // apart from maps of the same hash
	if c, ok := d.shares[h].([]any); ok && len(c) == len(elements) {
		for i, v := range elements {
			if !sameValue(c[i], v) {
				return nil, h, true
			}
		}
		return c, h, true
	}
	return nil, h, true
}

// remember keeps v, decoded under hash h, for the rest of the document
// (the first of a hash stays).
func (d *decoder) remember(h uint64, v any) {
	if d.shares == nil {
		d.shares = make(map[uint64]any, 256)
	}
	if len(d.shares) >= maxShared {
		return
	}
	if _, ok := d.shares[h]; !ok {
		d.shares[h] = v
	}
}

// valueHash hashes a decoded value: scalars by value, maps and slices by
// identity (their own members were shared first, so equal ones are the
// same). Other types are not shared.
func valueHash(v any) (uint64, bool) {
	switch x := v.(type) {
	case string:
		return maphash.String(shareSeed, x), true
	case int64:
		return mix(uint64(x) ^ 0x1b873593), true
	case float64:
		return mix(math.Float64bits(x) ^ 0xcc9e2d51), true
	case bool:
		if x {
			return 0x2545f4914f6cdd1d, true
		}
		return 0x9e3779b97f4a7c15, true
	case nil:
		return 0x94d049bb133111eb, true
	case map[string]any:
		return mix(uint64(uintptr(mapPointer(x)))), true
	case []any:
		return mix(uint64(uintptr(unsafe.Pointer(unsafe.SliceData(x)))) ^ uint64(len(x))), true
	}
	return 0, false
}

// sameValue says whether a and b are the same decoded value: equal scalars of
// one type, or the same map or slice.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case int64:
		y, ok := b.(int64)
		return ok && x == y
	case float64:
		y, ok := b.(float64)
		return ok && math.Float64bits(x) == math.Float64bits(y)
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case nil:
		return b == nil
	case map[string]any:
		y, ok := b.(map[string]any)
		return ok && mapPointer(x) == mapPointer(y)
	case []any:
		y, ok := b.([]any)
		return ok && len(x) == len(y) && unsafe.SliceData(x) == unsafe.SliceData(y)
	}
	return false
}

// mapPointer is m's identity: the map it refers to.
func mapPointer(m map[string]any) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&m))
}

// mix is splitmix64's finalizer.
func mix(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// str is raw as a string value: under SharedKey, the one made for an
// equal string before in the document (a shared schema's descriptions
// are decoded before the schema is found to repeat another).
func (d *decoder) str(raw []byte) any {
	if !d.sharing() {
		return string(raw)
	}
	if v, ok := d.strs[string(raw)]; ok {
		return v
	}
	var v any = string(raw)
	if d.strs == nil {
		d.strs = make(map[string]any, 256)
	}
	if len(d.strs) < maxShared {
		d.strs[v.(string)] = v
	}
	return v
}
