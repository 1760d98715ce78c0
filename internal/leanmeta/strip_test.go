package leanmeta

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	s.AddKnownTypes(metav1.SchemeGroupVersion, &metav1.PartialObjectMetadata{}, &metav1.PartialObjectMetadataList{}, &metav1.Status{}, &metav1.WatchEvent{})
	return s
}()

var (
	objects = protobuf.NewSerializer(scheme, scheme)
	events  = protobuf.NewRawSerializer(scheme, scheme)
)

// partial is an object's metadata as an API server sends it, managed
// fields and all.
func partial(name string, managedBytes int) *metav1.PartialObjectMetadata {
	now := metav1.NewTime(time.Unix(1_700_000_000, 0))
	grace := int64(30)
	m := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "ns", UID: types.UID("uid-" + name), ResourceVersion: "42", Generation: 7,
			CreationTimestamp: now, DeletionTimestamp: &now, DeletionGracePeriodSeconds: &grace,
			Labels:          map[string]string{"a": "1", "b": "2"},
			Annotations:     map[string]string{"note": strings.Repeat("x", 300)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "o"}},
			Finalizers:      []string{"f1", "f2"},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "rukpak", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1", FieldsType: "FieldsV1",
					FieldsV1: metav1.NewFieldsV1(`{"f:data":{` + strings.Repeat(`"f:k":{},`, managedBytes/9) + `"f:z":{}}}`)},
				{Manager: "kube-apiserver", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", Time: &now},
			},
		},
	}
	return m
}

func lean(m *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
	m = m.DeepCopy()
	m.ManagedFields = nil
	return m
}

func encode(t *testing.T, o runtime.Object) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := objects.Encode(o, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// frames encodes events as a protobuf watch stream.
func frames(t *testing.T, evs ...watch.Event) []byte {
	t.Helper()
	var b bytes.Buffer
	w := protobuf.LengthDelimitedFramer.NewFrameWriter(&b)
	for _, ev := range evs {
		var e bytes.Buffer
		if err := events.Encode(&metav1.WatchEvent{Type: string(ev.Type), Object: runtime.RawExtension{Raw: encode(t, ev.Object)}}, &e); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(e.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// decodeEvents reads a protobuf watch stream as client-go does.
func decodeEvents(t *testing.T, r io.Reader) ([]watch.Event, error) {
	t.Helper()
	d := streaming.NewDecoder(protobuf.LengthDelimitedFramer.NewFrameReader(io.NopCloser(r)), events)
	var out []watch.Event
	for {
		var ev metav1.WatchEvent
		if _, _, err := d.Decode(nil, &ev); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		o, _, err := objects.Decode(ev.Object.Raw, nil, nil)
		if err != nil {
			return out, err
		}
		out = append(out, watch.Event{Type: watch.EventType(ev.Type), Object: o})
	}
}

func TestAppendObject(t *testing.T) {
	list := &metav1.PartialObjectMetadataList{
		TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadataList"},
		ListMeta: metav1.ListMeta{ResourceVersion: "9", Continue: "next"},
		Items:    []metav1.PartialObjectMetadata{*partial("a", 10), *partial("b", 200_000), *partial("c", 0)},
	}
	for i := range list.Items {
		list.Items[i].TypeMeta = metav1.TypeMeta{} // not encoded in a list
	}
	leanList := list.DeepCopy()
	for i := range leanList.Items {
		leanList.Items[i].ManagedFields = nil
	}
	status := &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "Status"}, Status: "Failure", Reason: metav1.StatusReasonNotFound, Code: 404}
	for _, tc := range []struct {
		name string
		in   runtime.Object
		want runtime.Object // nil: not rewritten
	}{
		{"object", partial("big", 100_000), lean(partial("big", 100_000))},
		{"object without managed fields", lean(partial("x", 0)), lean(partial("x", 0))},
		{"list", list, leanList},
		{"empty list", &metav1.PartialObjectMetadataList{TypeMeta: list.TypeMeta}, &metav1.PartialObjectMetadataList{TypeMeta: list.TypeMeta}},
		{"status", status, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := encode(t, tc.in)
			out, ok := appendObject(nil, in)
			if tc.want == nil {
				if ok {
					t.Fatalf("rewrote a %T", tc.in)
				}
				return
			}
			if !ok {
				t.Fatal("not rewritten")
			}
			got, _, err := objects.Decode(out, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Fatalf("decoded (-want +got):\n%s", d)
			}
		})
	}
}

// Anything malformed is refused, never half rewritten, and never panics.
func TestAppendObjectMalformed(t *testing.T) {
	in := encode(t, partial("m", 1000))
	for n := range len(in) {
		if _, ok := appendObject(nil, in[:n]); ok && n < len(in) {
			// A cut between fields is still a well-formed message; it
			// must then decode as that message does.
			out, _ := appendObject(nil, in[:n])
			if _, _, err := objects.Decode(out, nil, nil); err != nil {
				if _, _, err2 := objects.Decode(in[:n], nil, nil); err2 == nil {
					t.Fatalf("cut at %d: rewritten form fails to decode (%v) where the original does not", n, err)
				}
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20_000 {
		b := bytes.Clone(in)
		for range 1 + r.IntN(4) {
			b[4+r.IntN(len(b)-4)] = byte(r.Uint32())
		}
		_, _ = appendObject(nil, b)
		_, _ = appendWatchEvent(nil, b[4:])
	}
}

func TestWatchBody(t *testing.T) {
	big := partial("crd", 500_000)
	bookmark := &metav1.PartialObjectMetadata{TypeMeta: big.TypeMeta, ObjectMeta: metav1.ObjectMeta{ResourceVersion: "77", Annotations: map[string]string{"k8s.io/initial-events-end": "true"}}}
	status := &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "Status"}, Status: "Failure", Reason: metav1.StatusReasonExpired, Code: 410}
	in := []watch.Event{
		{Type: watch.Added, Object: partial("a", 10)},
		{Type: watch.Modified, Object: big},
		{Type: watch.Bookmark, Object: bookmark},
		{Type: watch.Error, Object: status},
		{Type: watch.Deleted, Object: partial("b", 3000)},
	}
	want := []watch.Event{
		{Type: watch.Added, Object: lean(partial("a", 10))},
		{Type: watch.Modified, Object: lean(big)},
		{Type: watch.Bookmark, Object: bookmark},
		{Type: watch.Error, Object: status},
		{Type: watch.Deleted, Object: lean(partial("b", 3000))},
	}
	stream := frames(t, in...)
	for _, read := range []struct {
		name string
		wrap func(io.Reader) io.Reader
	}{
		{"whole", func(r io.Reader) io.Reader { return r }},
		{"a byte at a time", iotest.OneByteReader},
		{"half reads", iotest.HalfReader},
	} {
		t.Run(read.name, func(t *testing.T) {
			body := &watchBody{body: io.NopCloser(read.wrap(bytes.NewReader(stream)))}
			got, err := decodeEvents(t, body)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("events (-want +got):\n%s", d)
			}
		})
	}

	t.Run("cut off", func(t *testing.T) {
		for _, cut := range []int{2, 6, len(stream) - 3} {
			body := &watchBody{body: io.NopCloser(bytes.NewReader(stream[:cut]))}
			out, err := io.ReadAll(body)
			if err == nil || !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("cut at %d: error %v, want unexpected EOF", cut, err)
			}
			if cut < 10 && !bytes.Equal(out, stream[:cut]) {
				t.Fatalf("cut at %d: passed on %q, want the bytes read", cut, out)
			}
		}
	})

	t.Run("malformed frame passed on as it came", func(t *testing.T) {
		junk := []byte{0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0xff}
		body := &watchBody{body: io.NopCloser(bytes.NewReader(append(bytes.Clone(junk), stream...)))}
		out, err := io.ReadAll(body)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(out, junk) {
			t.Fatalf("malformed frame rewritten: %x", out[:len(junk)])
		}
	})

	t.Run("oversized frame passed on unread", func(t *testing.T) {
		var header [4]byte
		binary.BigEndian.PutUint32(header[:], maxFrame+1)
		huge := append(header[:], bytes.Repeat([]byte{7}, maxFrame+1)...)
		body := &watchBody{body: io.NopCloser(bytes.NewReader(append(huge, stream...)))}
		out, err := io.ReadAll(body)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out[:len(huge)], huge) {
			t.Fatal("oversized frame changed")
		}
		got, err := decodeEvents(t, bytes.NewReader(out[len(huge):]))
		if err != nil || len(got) != len(want) {
			t.Fatalf("after an oversized frame: %d events, %v", len(got), err)
		}
	})
}

// roundTripFunc answers every request with one fixed answer.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestRoundTripperChoosesAnswers(t *testing.T) {
	obj := encode(t, partial("p", 5000))
	for _, tc := range []struct {
		name, accept, contentType string
		rewritten                 bool
	}{
		{"metadata in protobuf", "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json", "application/vnd.kubernetes.protobuf", true},
		{"not asked for metadata", "application/vnd.kubernetes.protobuf,application/json", "application/vnd.kubernetes.protobuf", false},
		{"answered in JSON", "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json", "application/json", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := Wrap(roundTripFunc(func(*http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {tc.contentType}, "Content-Length": {"1"}}, ContentLength: int64(len(obj)), Body: io.NopCloser(bytes.NewReader(obj))}, nil
			}))
			req, _ := http.NewRequest(http.MethodGet, "https://example.invalid/api/v1/namespaces/ns/configmaps/p", nil)
			req.Header.Set("Accept", tc.accept)
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			out, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if changed := !bytes.Equal(out, obj); changed != tc.rewritten {
				t.Fatalf("rewritten %v, want %v", changed, tc.rewritten)
			}
			if tc.rewritten && (resp.ContentLength != int64(len(out)) || resp.Header.Get("Content-Length") != "") {
				t.Fatalf("content length %d (header %q) for %d bytes", resp.ContentLength, resp.Header.Get("Content-Length"), len(out))
			}
		})
	}

	t.Run("read error passed on", func(t *testing.T) {
		boom := errors.New("connection reset")
		rt := Wrap(roundTripFunc(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/vnd.kubernetes.protobuf"}}, Body: io.NopCloser(io.MultiReader(bytes.NewReader(obj[:10]), iotest.ErrReader(boom)))}, nil
		}))
		req, _ := http.NewRequest(http.MethodGet, "https://example.invalid/", nil)
		req.Header.Set("Accept", "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1")
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		out, err := io.ReadAll(resp.Body)
		if !errors.Is(err, boom) || !bytes.Equal(out, obj[:10]) {
			t.Fatalf("read %d bytes, %v; want 10 and %v", len(out), err, boom)
		}
	})
}

// Watches are known by their request, and an answer not read whole here
// is passed on unread.
func TestRoundTripperPassesOnUnread(t *testing.T) {
	accept := "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
	for _, tc := range []struct {
		name, url, contentType string
		length                 int64
	}{
		{"watch answered without stream=watch", "https://x.invalid/api/v1/configmaps?watch=true", "application/vnd.kubernetes.protobuf", -1},
		{"old watch path", "https://x.invalid/api/v1/watch/configmaps", "application/vnd.kubernetes.protobuf", -1},
		{"a stream answering a request that is no watch", "https://x.invalid/api/v1/configmaps", "application/vnd.kubernetes.protobuf;stream=watch", -1},
		{"longer than an answer rewritten whole", "https://x.invalid/api/v1/configmaps", "application/vnd.kubernetes.protobuf", maxAnswer + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr, pw := io.Pipe() // never written: reading it would block
			defer func() { _ = pw.Close() }()
			rt := Wrap(roundTripFunc(func(*http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {tc.contentType}}, ContentLength: tc.length, Body: pr}, nil
			}))
			req, _ := http.NewRequest(http.MethodGet, tc.url, nil)
			req.Header.Set("Accept", accept)
			done := make(chan *http.Response, 1)
			go func() {
				resp, _ := rt.RoundTrip(req)
				done <- resp
			}()
			select {
			case resp := <-done:
				if resp.Body != io.ReadCloser(pr) {
					t.Fatalf("body wrapped: %T", resp.Body)
				}
			case <-time.After(time.Minute):
				t.Fatal("RoundTrip read the answer")
			}
		})
	}
}

// managedFields the API server would not send (not length-delimited) are
// left for the decoder to refuse, not dropped.
func TestMalformedManagedFieldsNotDropped(t *testing.T) {
	meta := protowire.AppendTag(nil, 1, protowire.BytesType) // name: "n"
	meta = protowire.AppendString(meta, "n")
	meta = protowire.AppendTag(meta, objectMetaManaged, protowire.VarintType)
	meta = protowire.AppendVarint(meta, 1)
	b := protowire.AppendTag(nil, partialMetadata, protowire.BytesType)
	b = protowire.AppendBytes(b, meta)
	if _, ok := appendPartial(nil, b); ok {
		t.Fatal("rewrote managedFields of the wrong wire type")
	}
	// The same, length-delimited, is dropped.
	meta = protowire.AppendTag(meta[:3], objectMetaManaged, protowire.BytesType)
	meta = protowire.AppendBytes(meta, []byte{0x0a, 0x01, 'm'})
	b = protowire.AppendBytes(protowire.AppendTag(nil, partialMetadata, protowire.BytesType), meta)
	out, ok := appendPartial(nil, b)
	want := protowire.AppendBytes(protowire.AppendTag(nil, partialMetadata, protowire.BytesType), meta[:3])
	if !ok || !bytes.Equal(out, want) {
		t.Fatalf("rewrote to %x, want %x", out, want)
	}
}

func TestWrapped(t *testing.T) {
	other := func(rt http.RoundTripper) http.RoundTripper { return roundTripFunc(rt.RoundTrip) }
	plain := &rest.Config{Host: "https://x.invalid"}
	withOther := rest.CopyConfig(plain)
	withOther.WrapTransport = other
	for _, tc := range []struct {
		name string
		cfg  *rest.Config
		want bool
	}{
		{"plain", plain, false},
		{"another wrapper", withOther, false},
		{"leanmeta", Config(plain), true},
		{"leanmeta over another wrapper", Config(withOther), true},
		{"leanmeta twice", Config(Config(plain)), true},
	} {
		if got := Wrapped(tc.cfg); got != tc.want {
			t.Errorf("%s: Wrapped = %v, want %v", tc.name, got, tc.want)
		}
	}
}
