package plain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/rukpak-dev/rukpak/internal/jsonmap"
)

// Encoded is a manifest file that holds one object as one line of JSON,
// and the object as decoding that JSON gives it: what registry+v1
// conversion writes.
type Encoded struct {
	// Name is the file's name within ManifestsDir.
	Name string
	// Data is the file: the object's compact JSON and a newline.
	Data []byte
	// Object is what jsonmap.Unmarshal makes of Data.
	Object map[string]any
}

// Decoded is content that can hand over its manifests as Encoded files
// whose objects are what Objects decodes from them: the converted content
// registry+v1 conversion produces. An install of the same stored content
// may take them rather than load and decode the files again.
type Decoded interface {
	// TakeDecoded returns the manifests, every one, in name order, once
	// (nil afterwards, or if they cannot be handed over), and an estimate
	// of the heap their objects hold; the caller owns the objects.
	TakeDecoded() (files []Encoded, heap int64)
}

// CheckEncoded tells whether Objects, within l, reads a bundle whose
// manifests directory holds exactly files back as exactly their objects,
// one per file in name order, without decoding them: the same limits on
// sizes, nodes and nesting, checked by the same code, with the decoder's
// messages; and each object one that the decoder keeps as it is (not
// shaped like a List, which it would replace with the list's items, and
// with the fields every object needs). Files not as Encoded describes are
// refused.
func (l Limits) CheckEncoded(files []Encoded) error {
	l = l.OrDefault()
	if !slices.IsSortedFunc(files, func(a, b Encoded) int { return strings.Compare(a.Name, b.Name) }) {
		return fmt.Errorf("the files of %s/ are not in name order", ManifestsDir)
	}
	var size int64
	for _, f := range files {
		name := path.Join(ManifestsDir, f.Name)
		if int64(len(f.Data)) > l.MaxFileBytes {
			return l.fileTooLarge(name)
		}
		if size += int64(len(f.Data)); size > l.MaxTotalBytes {
			return l.filesTooLarge()
		}
	}
	var nodes int64
	for _, f := range files {
		name := path.Join(ManifestsDir, f.Name)
		text, ok := bytes.CutSuffix(f.Data, []byte("\n"))
		if !ok || len(text) == 0 || text[0] != '{' || bytes.ContainsAny(text, "\r\n") || !json.Valid(text) {
			return fmt.Errorf("decode %s: not one JSON object on one line", name)
		}
		// The splitter's document is the line and its newline.
		if int64(len(f.Data)) > l.MaxDocumentBytes {
			return l.documentTooLarge(name, 0)
		}
		cost, err := l.checkJSON(f.Data)
		if err != nil {
			return fmt.Errorf("decode %s: document 0 %w", name, err)
		}
		if nodes += int64(cost); nodes > int64(l.MaxTotalNodes) {
			return l.tooManyNodes()
		}
		if jsonmap.Nesting(f.Object, l.MaxDepth) > l.MaxDepth {
			return l.nestedTooDeep(name, 0)
		}
		obj := &unstructured.Unstructured{Object: f.Object}
		if obj.IsList() {
			return fmt.Errorf("decode %s: document 0: %s %q has a top-level items list, so it would be read as a List of its items", name, obj.GetKind(), obj.GetName())
		}
		if err := checkObject(obj); err != nil {
			return fmt.Errorf("decode %s: document 0: %w", name, err)
		}
	}
	return nil
}
