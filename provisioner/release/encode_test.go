package release

import (
	"bytes"
	"encoding/json"
	"reflect"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
)

// writeReleaseJSON reads back as the release json.Marshal encodes, whatever
// the manifest holds and wherever its pieces are cut.
func TestWriteReleaseJSON(t *testing.T) {
	long := func(unit string, shift int) string {
		return strings.Repeat("x", shift) + strings.Repeat(unit, 3*manifestPiece/len(unit))
	}
	manifests := map[string]string{
		"empty":                  "",
		"yaml":                   "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: \"v\\\\w\"\n",
		"escapes":                "quote \" backslash \\ tab \t cr \r nul \x00 html <a>&amp; seps \u2028\u2029",
		"invalid utf-8":          "ok \xff\xfe half \xe2\x82 end",
		"2-byte across pieces":   long("é", 1),
		"3-byte across pieces":   long("€", 2),
		"4-byte across pieces":   long("𝄞", 3),
		"4-byte shifted":         long("𝄞", 1),
		"invalid across pieces":  long("\xff", 0),
		"truncated runes":        long("\xf0\x9d\x84", 1),
		"exactly one piece":      strings.Repeat("a", manifestPiece),
		"one piece and one byte": strings.Repeat("a", manifestPiece) + "é",
	}
	for name, m := range manifests {
		t.Run(name, func(t *testing.T) {
			rls := &helmrelease.Release{
				Name: "r", Namespace: "ns", Version: 3, Manifest: m,
				Info:   &helmrelease.Info{Status: helmrelease.StatusDeployed, Description: "<done> & \"ok\""},
				Chart:  &chart.Chart{Metadata: &chart.Metadata{Name: "c", Version: "0.0.0"}},
				Config: map[string]any{"k": "v"},
			}
			var buf bytes.Buffer
			if err := writeReleaseJSON(&buf, rls); err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(rls)
			if err != nil {
				t.Fatal(err)
			}
			var got, exp helmrelease.Release
			if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
				t.Fatalf("%v: %q", err, buf.String()[:min(buf.Len(), 200)])
			}
			if err := json.Unmarshal(want, &exp); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, exp) {
				t.Errorf("read back differs from json.Marshal's: manifest %d bytes, want %d", len(got.Manifest), len(exp.Manifest))
			}
			if buf.Len() != len(want)+1 {
				t.Errorf("%d bytes, json.Marshal wrote %d (and a newline)", buf.Len(), len(want))
			}
		})
	}
	t.Run("a release with nothing else", func(t *testing.T) {
		var buf bytes.Buffer
		if err := writeReleaseJSON(&buf, &helmrelease.Release{Manifest: "m"}); err != nil {
			t.Fatal(err)
		}
		if got := buf.String(); got != "{\"manifest\":\"m\"}\n" {
			t.Errorf("got %q", got)
		}
	})
}

// writeReleaseJSON holds a piece of the manifest escaped at a time, not
// the record's whole JSON: encoding/json's Encoder, used before, encodes
// its value whole into a buffer (grown by doubling) before writing any of
// it, so encoding a record held its manifest once more, or more.
func TestWriteReleaseJSONHoldsAPiece(t *testing.T) {
	var m strings.Builder
	for i := range 2000 {
		m.WriteString("      description: \"field " + strings.Repeat("of the schema ", 8) + "\"\n")
		m.WriteString("      type: string # " + strings.Repeat("x", i%64) + "\n")
	}
	rls := &helmrelease.Release{Name: "r", Version: 1, Manifest: strings.Repeat(m.String(), 8),
		Info: &helmrelease.Info{Status: helmrelease.StatusDeployed}}
	held := func(encode func(w *heldWriter) error) uint64 {
		w := &heldWriter{}
		w.base = w.live()
		if err := encode(w); err != nil {
			t.Fatal(err)
		}
		return w.most
	}
	streamed := held(func(w *heldWriter) error { return writeReleaseJSON(w, rls) })
	whole := held(func(w *heldWriter) error { return json.NewEncoder(w).Encode(rls) })
	size := uint64(len(rls.Manifest))
	t.Logf("a %d-byte manifest: %d bytes held while writing (encoding/json's Encoder: %d)", size, streamed, whole)
	if limit := size / 8; streamed > limit {
		t.Errorf("writing a %d-byte manifest held %d more bytes of heap, want at most %d (an eighth of it)", size, streamed, limit)
	}
}

// heldWriter discards what it is given and, on every write, measures the
// live heap (collecting garbage first) over its level at the start.
type heldWriter struct{ base, most uint64 }

func (w *heldWriter) live() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func (w *heldWriter) Write(p []byte) (int, error) {
	if v := w.live(); v > w.base {
		w.most = max(w.most, v-w.base)
	}
	return len(p), nil
}
