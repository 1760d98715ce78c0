package plain

import (
	"fmt"

	"github.com/rukpak-dev/rukpak/internal/yamlcost"
)

// check estimates what converting one document's text costs and refuses it
// when over l, before any conversion allocates. It returns the estimated
// node count (aliases expanded). Error messages continue "document N ".
func (l Limits) check(text []byte) (int, error) {
	return yamlcost.Check(text, l.MaxNodes, l.MaxDepth)
}

// checkJSON is check for a document of a JSON file, which is decoded as
// JSON (no aliases, and strings may hold anything).
func (l Limits) checkJSON(text []byte) (int, error) {
	return yamlcost.CheckJSON(text, l.MaxNodes, l.MaxDepth)
}

// CheckYAML estimates what decoding YAML text (JSON included) costs and
// refuses it when over l (MaxDocumentBytes, MaxNodes with aliases expanded,
// MaxDepth), before any decoder allocates: for YAML that other formats hand
// whole to libraries that do not bound it (Helm's chart loader decodes
// Chart.yaml and values.yaml). It returns the estimated node count, to be
// held to MaxTotalNodes across files. Messages continue a subject ("values.yaml ").
func (l Limits) CheckYAML(text []byte) (int, error) {
	l = l.OrDefault()
	if int64(len(text)) > l.MaxDocumentBytes {
		return 0, fmt.Errorf("is larger than %s", formatBytes(l.MaxDocumentBytes))
	}
	return l.check(text)
}
