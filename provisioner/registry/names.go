package registry

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxNameLength keeps generated names valid for every kind we emit (the
// strictest, DNS labels, allow 63 characters).
const maxNameLength = 63

// truncateName shortens name to maxNameLength, replacing the tail with a hash
// of the whole name so that distinct long names stay distinct and stable.
func truncateName(name string) string {
	if len(name) <= maxNameLength {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	suffix := hex.EncodeToString(sum[:])[:8]
	// Cut between characters, or the half of one left would be replaced
	// as the name is encoded.
	cut := maxNameLength - len(suffix) - 1
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	prefix := strings.TrimRight(name[:cut], "-.")
	return prefix + "-" + suffix
}

// nameSet hands out names unique per kind and namespace, in the order asked,
// so the same bundle always gets the same names.
type nameSet map[string]bool

func nameKey(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

// reserve records a name taken by the bundle itself; it reports false if the
// name was already taken.
func (s nameSet) reserve(kind, namespace, name string) bool {
	k := nameKey(kind, namespace, name)
	if s[k] {
		return false
	}
	s[k] = true
	return true
}

// allocate returns base, truncated, or base-2, base-3... if that is taken.
func (s nameSet) allocate(kind, namespace, base string) string {
	name := truncateName(base)
	for i := 2; s[nameKey(kind, namespace, name)]; i++ {
		name = truncateName(fmt.Sprintf("%s-%d", base, i))
	}
	s[nameKey(kind, namespace, name)] = true
	return name
}
