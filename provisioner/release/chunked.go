package release

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"

	"github.com/rukpak-dev/rukpak/internal/freelist"
	"github.com/rukpak-dev/rukpak/internal/gzpool"
)

// Release records of any size.
//
// Helm keeps a release revision in one Secret, `sh.helm.release.v1.<name>.v<N>`
// (type helm.sh/release.v1, labels name/owner=helm/status/version, data
// "release" = base64 of the gzipped release JSON). The API server refuses a
// Secret whose data exceeds 1 MiB, so a bundle of a few MB of CRDs (or four
// 300 KiB ConfigMaps) could never be recorded. chunkedSecrets is a Helm
// storage driver that:
//
//   - writes a record that fits in one Secret exactly as Helm does, so
//     `helm list`, `helm history`, `helm get` and Helm's uninstall keep
//     working for it;
//   - splits a record that does not fit: the gzipped release JSON is cut
//     into immutable chunk Secrets `<key>.<digest>.<i>` (i = 1..n, digest =
//     the first 16 hex digits of the SHA-256 of the whole gzipped record),
//     type core.rukpak.io/release-chunk.v1, labelled
//     core.rukpak.io/release-name, core.rukpak.io/release-version and
//     core.rukpak.io/release-digest but not owner=helm, so Helm's own list
//     and query never see them. The record's own Secret `<key>` (the index)
//     keeps Helm's type and labels and holds the chunk count, the byte count
//     and the SHA-256, plus, under "release", a placeholder release Helm can
//     decode: `helm list` and `helm history` show the revision with its
//     status, and its manifest is a document that is not an object, so
//     Helm's rollback or upgrade from it fails instead of treating the
//     release as empty.
//
// Writes go chunks first, index last: the index appears (Create) or switches
// to the new chunks (Update, with the index's resourceVersion) in one
// request, so a crash at any point leaves either the old record or the new
// one, plus at worst unreferenced chunks. Chunk names carry the content's
// digest, so a rewrite never overwrites chunks the live index points at, and
// retrying an interrupted write finds its chunks already there. After a
// chunked write and after every Delete, chunks of the release that no index
// references (leftovers of a crash, or of a record deleted by another tool)
// are deleted. This assumes one writer per release, as Helm does; Manager
// serialises actions per release.
//
// Reads stream the chunks one at a time through the SHA-256 and gzip into
// the JSON decoder, so only one chunk and the decoded release are held; a
// missing, foreign or altered chunk (checksum, size or labels) fails with an
// error naming the record, never a wrong release; a chunk that went
// missing because a writer rewrote or deleted the record during the read
// makes the read start over from the index as it is now (a bounded number of
// times). A record's release JSON
// may be at most maxRecordBytes (DefaultMaxRecordBytes unless configured),
// checked before anything is written and while reading.
type chunkedSecrets struct {
	secrets corev1client.SecretInterface
	// writes creates and updates records (leanSecrets, or secrets).
	writes recordWriter
	// meta reads Secrets' metadata only: sweeps must not download chunks.
	meta           metadata.ResourceInterface
	maxRecordBytes int64
	// chunkBytes is the data of one chunk Secret; tests make it small.
	chunkBytes int
	timeout    time.Duration
	// index, when set and synced, answers which records a release has
	// (index.go); Query then reads them by name.
	index *recordIndex
}

var _ driver.Driver = (*chunkedSecrets)(nil)

const (
	// DefaultMaxRecordBytes bounds one release revision's JSON (about the
	// size of its manifest): 3.5x the largest real bundle in the test data
	// (4.5 MB of CRDs), and small enough that a release's history (Manager
	// reads up to maxHistory revisions at once) stays well inside the
	// provisioner's memory.
	DefaultMaxRecordBytes = 16 << 20

	// secretDataLimit is the API server's limit on the data of one Secret.
	secretDataLimit = 1 << 20

	helmSecretType  = corev1.SecretType("helm.sh/release.v1")
	chunkSecretType = corev1.SecretType("core.rukpak.io/release-chunk.v1")

	labelChunkRelease = "core.rukpak.io/release-name"
	labelChunkVersion = "core.rukpak.io/release-version"
	labelDigest       = "core.rukpak.io/release-digest"

	dataRelease = "release"
	dataChunks  = "chunks"
	dataBytes   = "bytes"
	dataSHA256  = "sha256"
	// dataChunkSHA256 lists every chunk's SHA-256, one per line, so a bad
	// chunk is caught before gzip sees it.
	dataChunkSHA256 = "chunk-sha256"
	dataChunk       = "chunk"

	placeholderMarker = "# core.rukpak.io: this release record is split across Secrets"
)

// recordCompression is gzip's default level, where Helm uses its best: any
// level reads back the same, and on 4.5 MB of CRDs the best level took 6x the
// time (0.94 s against 0.16 s) for a record 2% smaller.
const recordCompression = gzip.DefaultCompression

// ErrCorruptRecord is wrapped by errors about release records that cannot
// be read back as they were written.
var ErrCorruptRecord = errors.New("release record is corrupt")

// ErrRecordTooLarge is wrapped by errors about releases larger than the
// configured maximum.
var ErrRecordTooLarge = errors.New("release record too large")

func newChunkedSecrets(secrets corev1client.SecretInterface, meta metadata.ResourceInterface, maxRecordBytes int64) *chunkedSecrets {
	if maxRecordBytes <= 0 {
		maxRecordBytes = DefaultMaxRecordBytes
	}
	return &chunkedSecrets{
		secrets:        secrets,
		writes:         typedWrites{secrets},
		meta:           meta,
		maxRecordBytes: maxRecordBytes,
		chunkBytes:     secretDataLimit,
		timeout:        time.Minute,
	}
}

// Name is the driver's name in Helm's logs.
func (d *chunkedSecrets) Name() string { return "ChunkedSecret" }

// fingerprint names release name's records with their resourceVersions,
// from the index; ok is false without a synced index.
func (d *chunkedSecrets) fingerprint(name string) (string, bool) {
	if d.index == nil {
		return "", false
	}
	return d.index.fingerprint(name)
}

func (d *chunkedSecrets) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d.timeout)
}

// Create records a new revision; ErrReleaseExists if key exists.
func (d *chunkedSecrets) Create(key string, rls *helmrelease.Release) error {
	ctx, cancel := d.ctx()
	defer cancel()
	gz, err := d.encode(rls)
	if err != nil {
		return err
	}
	lbs := recordLabels(rls, "createdAt")
	if fitsOneSecret(gz) {
		s, err := d.writes.Create(ctx, helmSecret(key, gz, lbs), metav1.CreateOptions{})
		if err != nil {
			d.unsure(rls.Name)
			if apierrors.IsAlreadyExists(err) {
				return driver.ErrReleaseExists
			}
			return fmt.Errorf("creating release record %s: %w", key, err)
		}
		d.wrote(rls.Name, key, s)
		return nil
	}
	// Checked first so an existing revision costs no chunk writes.
	if _, err := d.meta.Get(ctx, key, metav1.GetOptions{}); err == nil {
		return driver.ErrReleaseExists
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading release record %s: %w", key, err)
	}
	index, err := d.writeChunks(ctx, key, rls, gz, lbs)
	if err != nil {
		return err
	}
	s, err := d.writes.Create(ctx, index, metav1.CreateOptions{})
	if err != nil {
		d.unsure(rls.Name)
		if apierrors.IsAlreadyExists(err) {
			err = driver.ErrReleaseExists
		} else {
			err = fmt.Errorf("creating release record %s: %w", key, err)
		}
		return errors.Join(err, d.sweep(ctx, rls.Name))
	}
	d.wrote(rls.Name, key, s)
	return d.sweep(ctx, rls.Name)
}

// wrote tells the index about a record this process created, s as the
// create answered.
func (d *chunkedSecrets) wrote(name, key string, s *metav1.ObjectMeta) {
	if d.index != nil {
		d.index.wrote(name, key)
		d.index.wroteAt(name, key, s.UID, s.ResourceVersion)
	}
}

// track, untrack and settle are the index's (index.go), for the records
// of release name; without an index nothing is tracked and settle reports
// false.
func (d *chunkedSecrets) track(name string) {
	if d.index != nil {
		d.index.track(name)
	}
}

func (d *chunkedSecrets) untrack(name string) {
	if d.index != nil {
		d.index.untrack(name)
	}
}

func (d *chunkedSecrets) settle(name string) (string, bool) {
	if d.index == nil {
		return "", false
	}
	return d.index.settle(name)
}

// unsure tells the index that a write of one of release name's records
// may or may not have happened.
func (d *chunkedSecrets) unsure(name string) {
	if d.index != nil {
		d.index.unsure(name)
	}
}

// Update rewrites an existing revision (Helm updates its status).
func (d *chunkedSecrets) Update(key string, rls *helmrelease.Release) error {
	ctx, cancel := d.ctx()
	defer cancel()
	gz, err := d.encode(rls)
	if err != nil {
		return err
	}
	old, err := d.meta.Get(ctx, key, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("updating release record %s: %w", key, err)
	}
	lbs := recordLabels(rls, "modifiedAt")
	var obj *corev1.Secret
	if fitsOneSecret(gz) {
		obj = helmSecret(key, gz, lbs)
	} else if obj, err = d.writeChunks(ctx, key, rls, gz, lbs); err != nil {
		return err
	}
	// Conditional on what was read: the switch to the new chunks is one
	// compare-and-swap.
	obj.ResourceVersion = old.ResourceVersion
	updated, err := d.writes.Update(ctx, obj, metav1.UpdateOptions{})
	if err != nil {
		d.unsure(rls.Name)
		err = fmt.Errorf("updating release record %s: %w", key, err)
		if obj.Labels[labelDigest] != "" {
			err = errors.Join(err, d.sweep(ctx, rls.Name))
		}
		return err
	}
	if d.index != nil {
		d.index.wroteAt(rls.Name, key, updated.UID, updated.ResourceVersion)
	}
	if old.Labels[labelDigest] != "" || obj.Labels[labelDigest] != "" {
		return d.sweep(ctx, rls.Name)
	}
	return nil
}

// Delete removes a revision and its chunks. An unreadable record is deleted
// all the same (and the error returned), so it can never block an
// uninstall for good.
func (d *chunkedSecrets) Delete(key string) (*helmrelease.Release, error) {
	ctx, cancel := d.ctx()
	defer cancel()
	s, err := d.secrets.Get(ctx, key, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, driver.ErrReleaseNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("reading release record %s: %w", key, err)
	}
	rls, readErr := d.decode(ctx, s)
	uid := s.UID
	name := s.Labels["name"]
	if rls != nil {
		name = rls.Name
	}
	if err := d.secrets.Delete(ctx, key, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
		d.unsure(name)
		if apierrors.IsNotFound(err) {
			return nil, driver.ErrReleaseNotFound
		}
		return nil, fmt.Errorf("deleting release record %s: %w", key, err)
	}
	if d.index != nil {
		d.index.deletedAt(name, key)
		d.index.gone(name, key)
		d.index.removed(key, uid)
	}
	sweepErr := d.sweep(ctx, name)
	if readErr != nil {
		return nil, errors.Join(fmt.Errorf("deleted release record %s, which was unreadable: %w", key, readErr), sweepErr)
	}
	return rls, sweepErr
}

// Get reads one revision, whole.
func (d *chunkedSecrets) Get(key string) (*helmrelease.Release, error) {
	ctx, cancel := d.ctx()
	defer cancel()
	s, err := d.secrets.Get(ctx, key, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, driver.ErrReleaseNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("reading release record %s: %w", key, err)
	}
	rls, s, err := d.decodeLatest(ctx, s)
	if err != nil {
		return nil, err
	}
	rls.Labels = filterSystemLabels(s.Labels)
	return rls, nil
}

// List returns every release in the namespace for which filter is true. As
// with Helm's driver, an unreadable record is left out (one bad record must
// not hide the others); Query, which reads one release's history, fails
// instead.
func (d *chunkedSecrets) List(filter func(*helmrelease.Release) bool) ([]*helmrelease.Release, error) {
	ctx, cancel := d.ctx()
	defer cancel()
	list, err := d.secrets.List(ctx, metav1.ListOptions{LabelSelector: labels.Set{"owner": "helm"}.String()})
	if err != nil {
		return nil, fmt.Errorf("listing release records: %w", err)
	}
	var out []*helmrelease.Release
	for i := range list.Items {
		rls, s, err := d.decodeLatest(ctx, &list.Items[i])
		if err != nil {
			continue
		}
		rls.Labels = s.Labels
		if filter(rls) {
			out = append(out, rls)
		}
		list.Items[i] = corev1.Secret{} // let the record's data go
	}
	return out, nil
}

// Query returns the revisions whose labels match; ErrReleaseNotFound if
// none does. An unreadable record is an error naming it: skipping it would
// hide a revision from the history Manager decides on.
func (d *chunkedSecrets) Query(query map[string]string) ([]*helmrelease.Release, error) {
	for k, v := range query {
		if errs := validation.IsValidLabelValue(v); len(errs) != 0 {
			return nil, fmt.Errorf("invalid label value %s=%q: %s", k, v, strings.Join(errs, "; "))
		}
	}
	ctx, cancel := d.ctx()
	defer cancel()
	if name := query["name"]; d.index != nil && name != "" && query["owner"] == "helm" {
		if keys, ok := d.index.keys(name); ok {
			return d.queryKeys(ctx, name, keys, query)
		}
	}
	list, err := d.secrets.List(ctx, metav1.ListOptions{LabelSelector: labels.Set(query).String()})
	if err != nil {
		return nil, fmt.Errorf("querying release records: %w", err)
	}
	var out []*helmrelease.Release
	for i := range list.Items {
		s := &list.Items[i]
		if s.Type == chunkSecretType {
			continue
		}
		rls, s, err := d.decodeLatest(ctx, s)
		if errors.Is(err, driver.ErrReleaseNotFound) {
			continue // deleted since the list: no longer history
		}
		if err != nil {
			return nil, err
		}
		rls.Labels = s.Labels
		out = append(out, rls)
		list.Items[i] = corev1.Secret{}
	}
	if len(out) == 0 {
		return nil, driver.ErrReleaseNotFound
	}
	return out, nil
}

// queryKeys is Query over the records the index names for release name:
// each is read by name and kept if it still exists and its labels match,
// as a LIST by label selector would have returned it.
func (d *chunkedSecrets) queryKeys(ctx context.Context, name string, keys []string, query map[string]string) ([]*helmrelease.Release, error) {
	sel := labels.SelectorFromSet(query)
	var out []*helmrelease.Release
	for _, key := range keys {
		s, err := d.secrets.Get(ctx, key, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			d.index.gone(name, key)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading release record %s: %w", key, err)
		}
		if s.Type == chunkSecretType || !sel.Matches(labels.Set(s.Labels)) {
			continue
		}
		rls, s, err := d.decodeLatest(ctx, s)
		if errors.Is(err, driver.ErrReleaseNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		rls.Labels = s.Labels
		out = append(out, rls)
	}
	if len(out) == 0 {
		return nil, driver.ErrReleaseNotFound
	}
	return out, nil
}

// encode returns the gzipped release JSON, as Helm stores it.
func (d *chunkedSecrets) encode(rls *helmrelease.Release) ([]byte, error) {
	// The manifest alone may already be too much: refuse before copying it.
	if int64(len(rls.Manifest)) > d.maxRecordBytes {
		return nil, fmt.Errorf("%w: release %q revision %d has a %d-byte manifest, more than the maximum of %d bytes", ErrRecordTooLarge, rls.Name, rls.Version, len(rls.Manifest), d.maxRecordBytes)
	}
	var buf bytes.Buffer
	// Grown once to about the compressed size (JSON manifests compress
	// five to ten times) rather than doubled up to it.
	buf.Grow(len(rls.Manifest)/6 + 4<<10)
	zw := newRecordWriter(&buf)
	defer putRecordWriter(zw)
	cw := &countingWriter{w: zw}
	if err := writeReleaseJSON(cw, rls); err != nil {
		return nil, fmt.Errorf("encoding release %q: %w", rls.Name, err)
	}
	if cw.n > d.maxRecordBytes {
		return nil, fmt.Errorf("%w: release %q revision %d is %d bytes, more than the maximum of %d bytes", ErrRecordTooLarge, rls.Name, rls.Version, cw.n, d.maxRecordBytes)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compressing release %q: %w", rls.Name, err)
	}
	return buf.Bytes(), nil
}

// fits refuses a record larger than maxRecordBytes, as encode would,
// without keeping it: a first install writes its record only after the
// apply (Manager.Apply), and must not apply what it cannot record.
func (d *chunkedSecrets) fits(rls *helmrelease.Release) error {
	if int64(len(rls.Manifest)) > d.maxRecordBytes {
		return fmt.Errorf("%w: release %q revision %d has a %d-byte manifest, more than the maximum of %d bytes", ErrRecordTooLarge, rls.Name, rls.Version, len(rls.Manifest), d.maxRecordBytes)
	}
	cw := &countingWriter{w: io.Discard}
	if err := writeReleaseJSON(cw, rls); err != nil {
		return fmt.Errorf("encoding release %q: %w", rls.Name, err)
	}
	if cw.n > d.maxRecordBytes {
		return fmt.Errorf("%w: release %q revision %d is %d bytes, more than the maximum of %d bytes", ErrRecordTooLarge, rls.Name, rls.Version, cw.n, d.maxRecordBytes)
	}
	return nil
}

// manifestPiece is how much of a manifest writeReleaseJSON escapes at once.
const manifestPiece = 32 << 10

// writeReleaseJSON writes rls as JSON, as encoding/json does but for the
// order of its fields (its manifest comes last), streaming the manifest:
// it is most of a release, and encoding the release whole (json.Marshal, or
// an Encoder, which buffers its value) held it twice more at the peak of an
// install, in the encoder's buffer and the smaller one it grew from.
func writeReleaseJSON(w io.Writer, rls *helmrelease.Release) error {
	rest := *rls
	rest.Manifest = ""
	head, err := json.Marshal(&rest)
	if err != nil {
		return err
	}
	if rls.Manifest == "" {
		_, err := w.Write(append(head, '\n'))
		return err
	}
	// head is "{...}": the manifest goes in before its closing brace.
	open := head[:len(head)-1]
	field := `,"manifest":"`
	if len(open) == 1 {
		field = field[1:]
	}
	if _, err := w.Write(append(open, field...)); err != nil {
		return err
	}
	// One Encoder and buffer for every piece, reused by the next release
	// written (fits writes each once more): json.Marshal would allocate
	// each piece's encoding anew.
	pe := pieceEncoders.Get().(*pieceEncoder)
	defer pieceEncoders.Put(pe)
	piece, enc := &pe.buf, pe.enc
	for m := rls.Manifest; m != ""; {
		n := min(len(m), manifestPiece)
		// Cut between characters: encoding/json turns half a character
		// into U+FFFD.
		for cut := n; cut > n-utf8.UTFMax && cut > 0 && cut < len(m); cut-- {
			if utf8.RuneStart(m[cut]) {
				n = cut
				break
			}
		}
		piece.Reset()
		if err := enc.Encode(m[:n]); err != nil {
			return err
		}
		// `"...."` and a newline.
		if _, err := w.Write(piece.Bytes()[1 : piece.Len()-2]); err != nil {
			return err
		}
		m = m[n:]
	}
	_, err = io.WriteString(w, "\"}\n")
	return err
}

// pieceEncoder escapes a manifest's pieces; its buffer holds one piece's
// escaping at most (six bytes per byte of manifestPiece).
type pieceEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var pieceEncoders = sync.Pool{New: func() any {
	pe := &pieceEncoder{}
	pe.enc = json.NewEncoder(&pe.buf)
	return pe
}}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// recordWriters recycles the records' compressors: each holds ~1 MiB of
// tables, allocated anew for every record written before. Two are kept
// across garbage collections (freelist), which emptied a pool.
var recordWriters = freelist.New(2, func() *gzip.Writer {
	zw, err := gzip.NewWriterLevel(io.Discard, recordCompression)
	if err != nil {
		panic(err) // only for an invalid level
	}
	return zw
})

// newRecordWriter returns a pooled compressor writing to w; put it back in
// recordWriters when done.
func newRecordWriter(w io.Writer) *gzip.Writer {
	zw := recordWriters.Get()
	zw.Reset(w)
	return zw
}

// putRecordWriter returns zw to the pool, holding none of what it wrote.
func putRecordWriter(zw *gzip.Writer) {
	zw.Reset(io.Discard)
	recordWriters.Put(zw)
}

func gzipBytes(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := newRecordWriter(&buf)
	defer putRecordWriter(zw)
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func fitsOneSecret(gz []byte) bool {
	return base64.StdEncoding.EncodedLen(len(gz)) <= secretDataLimit
}

// recordLabels are Helm's labels of a record: the release's own labels,
// the timestamp Helm sets on this write, then name/owner/status/version.
func recordLabels(rls *helmrelease.Release, stamp string) map[string]string {
	lbs := map[string]string{}
	for k, v := range rls.Labels {
		if k != labelDigest {
			lbs[k] = v
		}
	}
	lbs[stamp] = strconv.FormatInt(time.Now().Unix(), 10)
	lbs["name"] = rls.Name
	lbs["owner"] = "helm"
	lbs["status"] = rls.Info.Status.String()
	lbs["version"] = strconv.Itoa(rls.Version)
	return lbs
}

// helmSecret is the record exactly as Helm's Secrets driver writes it.
func helmSecret(key string, gz []byte, lbs map[string]string) *corev1.Secret {
	data := make([]byte, base64.StdEncoding.EncodedLen(len(gz)))
	base64.StdEncoding.Encode(data, gz)
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: key, Labels: lbs},
		Type:       helmSecretType,
		Data:       map[string][]byte{dataRelease: data},
	}
}

func chunkName(key, digest string, i int) string {
	return fmt.Sprintf("%s.%s.%d", key, digest, i)
}

// writeChunks creates the chunk Secrets of gz and returns the index that
// points at them (not yet written).
func (d *chunkedSecrets) writeChunks(ctx context.Context, key string, rls *helmrelease.Release, gz []byte, lbs map[string]string) (*corev1.Secret, error) {
	sum := sha256.Sum256(gz)
	sumHex := hex.EncodeToString(sum[:])
	digest := sumHex[:16]
	n := 0
	var sums strings.Builder
	for off := 0; off < len(gz); off += d.chunkBytes {
		n++
		part := gz[off:min(off+d.chunkBytes, len(gz))]
		ps := sha256.Sum256(part)
		sums.WriteString(hex.EncodeToString(ps[:]) + "\n")
		c := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name: chunkName(key, digest, n),
				Labels: map[string]string{
					labelChunkRelease: rls.Name,
					labelChunkVersion: strconv.Itoa(rls.Version),
					labelDigest:       digest,
				},
			},
			Type:      chunkSecretType,
			Immutable: new(true),
			Data:      map[string][]byte{dataChunk: part},
		}
		_, err := d.secrets.Create(ctx, c, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// An interrupted write of the same content; anything else under
			// this name is not ours to use.
			var existing *corev1.Secret
			existing, err = d.secrets.Get(ctx, c.Name, metav1.GetOptions{})
			if err == nil && (existing.Type != chunkSecretType || !bytes.Equal(existing.Data[dataChunk], part)) {
				err = fmt.Errorf("secret %s exists with other content", c.Name)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("writing chunk %d of release record %s: %w", n, key, err)
		}
	}

	stub, err := placeholder(key, rls, n)
	if err != nil {
		return nil, err
	}
	idx := helmSecret(key, stub, lbs)
	idx.Labels[labelDigest] = digest
	idx.Data[dataChunks] = []byte(strconv.Itoa(n))
	idx.Data[dataBytes] = []byte(strconv.Itoa(len(gz)))
	idx.Data[dataSHA256] = []byte(sumHex)
	idx.Data[dataChunkSHA256] = []byte(sums.String())
	return idx, nil
}

// placeholder is the gzipped release Helm reads from an index: everything
// `helm list` and `helm history` show, and a manifest that says where the
// record is and that Helm cannot build objects from.
func placeholder(key string, rls *helmrelease.Release, chunks int) ([]byte, error) {
	stub := &helmrelease.Release{
		Name:      rls.Name,
		Namespace: rls.Namespace,
		Version:   rls.Version,
		Manifest: fmt.Sprintf("%s (%d chunk Secrets of type %s labelled %s=%s,%s=%d); only rukpak reads it whole.\ncore.rukpak.io/chunked-release-record: %s\n",
			placeholderMarker, chunks, chunkSecretType, labelChunkRelease, rls.Name, labelChunkVersion, rls.Version, key),
	}
	if rls.Info != nil {
		info := *rls.Info
		info.Notes = ""
		if len(info.Description) > 1024 {
			info.Description = info.Description[:1024] + "..."
		}
		stub.Info = &info
	}
	if rls.Chart != nil {
		stub.Chart = &chart.Chart{Metadata: rls.Chart.Metadata}
	}
	b, err := json.Marshal(stub)
	if err != nil {
		return nil, fmt.Errorf("encoding release %q: %w", rls.Name, err)
	}
	return gzipBytes(b)
}

// maxChunkRereads bounds how often decode re-reads an index whose chunks
// went missing while it read them: each re-read follows a write that
// completed meanwhile, so only a writer rewriting the record continuously
// exhausts it.
const maxChunkRereads = 5

// errChunkMissing marks a chunk that is not there, which a writer's sweep
// causes when it switches the index to new chunks (or deletes it) while a
// reader is between chunks.
var errChunkMissing = errors.New("is missing")

// decode reads the release a record Secret holds: Helm's format, or an
// index and its chunks. A chunk missing is read as a sign that the record
// was rewritten or deleted after s was read: the index is read again and,
// if it changed, decoded anew (bounded by maxChunkRereads); if it is gone,
// the error wraps driver.ErrReleaseNotFound. A chunk missing from an index
// that did not change is a corrupt record.
func (d *chunkedSecrets) decode(ctx context.Context, s *corev1.Secret) (*helmrelease.Release, error) {
	rls, _, err := d.decodeLatest(ctx, s)
	return rls, err
}

// decodeLatest is decode, also returning the Secret the release was read
// from: s, or the index as read again (whose labels go with the release).
func (d *chunkedSecrets) decodeLatest(ctx context.Context, s *corev1.Secret) (*helmrelease.Release, *corev1.Secret, error) {
	for reread := 0; ; reread++ {
		if _, chunked := s.Data[dataSHA256]; !chunked {
			rls, err := d.decodeSecret(s)
			return rls, s, err
		}
		rls, err := d.readChunks(ctx, s)
		if !errors.Is(err, errChunkMissing) || reread == maxChunkRereads {
			return rls, s, err
		}
		now, getErr := d.secrets.Get(ctx, s.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(getErr):
			return nil, nil, fmt.Errorf("%w: %s was deleted while it was read", driver.ErrReleaseNotFound, s.Name)
		case getErr != nil:
			return nil, nil, errors.Join(err, fmt.Errorf("reading release record %s again: %w", s.Name, getErr))
		case now.UID == s.UID && now.ResourceVersion == s.ResourceVersion:
			return nil, nil, err
		}
		s = now
	}
}

// decodeSecret reads a record in Helm's format.
func (d *chunkedSecrets) decodeSecret(s *corev1.Secret) (*helmrelease.Release, error) {
	raw := s.Data[dataRelease]
	b := make([]byte, base64.StdEncoding.DecodedLen(len(raw)))
	n, err := base64.StdEncoding.Decode(b, raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorruptRecord, s.Name, err)
	}
	b = b[:n]
	var r io.Reader = bytes.NewReader(b)
	// Helm reads records from before it compressed them as plain JSON.
	if len(b) > 3 && bytes.Equal(b[:3], []byte{0x1f, 0x8b, 0x08}) {
		zr, err := gzpool.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrCorruptRecord, s.Name, err)
		}
		defer gzpool.Put(zr)
		r = zr
	}
	rls, err := d.decodeJSON(s.Name, r)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(rls.Manifest, placeholderMarker) {
		return nil, fmt.Errorf("%w: %s holds only the placeholder of a record split across Secrets (another tool rewrote it without its chunk references)", ErrCorruptRecord, s.Name)
	}
	return rls, nil
}

// decodeJSON decodes a release from r, reading at most maxRecordBytes and
// then r to its end (which makes gzip verify its checksum).
func (d *chunkedSecrets) decodeJSON(key string, r io.Reader) (*helmrelease.Release, error) {
	lr := &io.LimitedReader{R: r, N: d.maxRecordBytes + 1}
	var rls helmrelease.Release
	err := json.NewDecoder(lr).Decode(&rls)
	if err == nil {
		_, err = io.Copy(io.Discard, lr)
	}
	if lr.N <= 0 {
		return nil, fmt.Errorf("%w: %s is more than the maximum of %d bytes", ErrRecordTooLarge, key, d.maxRecordBytes)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorruptRecord, key, err)
	}
	return &rls, nil
}

// readChunks reassembles a chunked record, verifying every chunk's labels,
// the byte count and the checksum before returning anything.
func (d *chunkedSecrets) readChunks(ctx context.Context, idx *corev1.Secret) (*helmrelease.Release, error) {
	corrupt := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrCorruptRecord, idx.Name, fmt.Sprintf(format, a...))
	}
	n, err1 := strconv.Atoi(string(idx.Data[dataChunks]))
	size, err2 := strconv.ParseInt(string(idx.Data[dataBytes]), 10, 64)
	sum, err3 := hex.DecodeString(string(idx.Data[dataSHA256]))
	sums := strings.Fields(string(idx.Data[dataChunkSHA256]))
	if err := errors.Join(err1, err2, err3); err != nil || len(sum) != sha256.Size || n < 1 || size < int64(n) || len(sums) != n {
		return nil, corrupt("unreadable chunk index")
	}
	// Gzip never grows data by more than a few bytes per 32 KiB block.
	if size > d.maxRecordBytes+d.maxRecordBytes/64+1024 {
		return nil, fmt.Errorf("%w: %s is %d bytes compressed, more than the maximum of %d bytes", ErrRecordTooLarge, idx.Name, size, d.maxRecordBytes)
	}
	cr := &chunkReader{
		ctx: ctx, secrets: d.secrets, key: idx.Name, total: n, size: size,
		digest: hex.EncodeToString(sum)[:16], hash: sha256.New(), sums: sums,
		name: idx.Labels["name"], version: idx.Labels["version"],
	}
	zr, err := gzpool.NewReader(cr)
	if err != nil {
		if cr.err != nil {
			return nil, cr.err
		}
		return nil, corrupt("%v", err)
	}
	defer gzpool.Put(zr)
	rls, err := d.decodeJSON(idx.Name, zr)
	if cr.err != nil {
		return nil, cr.err
	}
	if err != nil {
		return nil, err
	}
	// Drain what gzip did not need (there should be nothing).
	if _, err := io.Copy(io.Discard, cr); err != nil {
		return nil, cr.err
	}
	if cr.read != size || !bytes.Equal(cr.hash.Sum(nil), sum) {
		return nil, corrupt("its %d chunks do not match its checksum (altered or mixed chunks)", n)
	}
	return rls, nil
}

// chunkReader reads a record's chunks in order, fetching one at a time.
type chunkReader struct {
	ctx           context.Context
	secrets       corev1client.SecretInterface
	key, digest   string
	name, version string
	total         int
	sums          []string
	size, read    int64
	next          int
	cur           []byte
	hash          hash.Hash
	err           error
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if r.next == r.total {
			return 0, io.EOF
		}
		r.next++
		r.err = r.fetch()
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

func (r *chunkReader) fetch() error {
	name := chunkName(r.key, r.digest, r.next)
	fail := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s: chunk %d of %d (Secret %s) %s", ErrCorruptRecord, r.key, r.next, r.total, name, fmt.Sprintf(format, a...))
	}
	s, err := r.secrets.Get(r.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: %s: chunk %d of %d (Secret %s) %w", ErrCorruptRecord, r.key, r.next, r.total, name, errChunkMissing)
	}
	if err != nil {
		return fmt.Errorf("reading chunk %d of release record %s: %w", r.next, r.key, err)
	}
	if s.Type != chunkSecretType || s.Labels[labelChunkRelease] != r.name || s.Labels[labelChunkVersion] != r.version || s.Labels[labelDigest] != r.digest {
		return fail("belongs to another record")
	}
	data := s.Data[dataChunk]
	if len(data) == 0 {
		return fail("is empty")
	}
	if ps := sha256.Sum256(data); hex.EncodeToString(ps[:]) != r.sums[r.next-1] {
		return fail("does not match its checksum")
	}
	r.read += int64(len(data))
	if r.read > r.size {
		return fail("makes the record longer than its recorded %d bytes", r.size)
	}
	r.hash.Write(data)
	r.cur = data
	return nil
}

// sweep deletes the chunks of release name that no record references.
func (d *chunkedSecrets) sweep(ctx context.Context, name string) error {
	if name == "" {
		return nil
	}
	records, err := d.meta.List(ctx, metav1.ListOptions{LabelSelector: labels.Set{"owner": "helm", "name": name}.String()})
	if err != nil {
		return fmt.Errorf("listing release records of %q: %w", name, err)
	}
	live := map[string]bool{}
	for _, r := range records.Items {
		if dg := r.Labels[labelDigest]; dg != "" {
			live[r.Labels["version"]+"/"+dg] = true
		}
	}
	chunks, err := d.meta.List(ctx, metav1.ListOptions{LabelSelector: labels.Set{labelChunkRelease: name}.String()})
	if err != nil {
		return fmt.Errorf("listing release record chunks of %q: %w", name, err)
	}
	var errs []error
	for _, c := range chunks.Items {
		if live[c.Labels[labelChunkVersion]+"/"+c.Labels[labelDigest]] {
			continue
		}
		uid := c.UID
		if err := d.meta.Delete(ctx, c.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting unreferenced release record chunk %s: %w", c.Name, err))
		}
	}
	return errors.Join(errs...)
}

// filterSystemLabels drops the labels a record's driver sets itself, as
// Helm's Get does.
func filterSystemLabels(lbs map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range lbs {
		switch k {
		case "name", "owner", "status", "version", "createdAt", "modifiedAt", labelDigest, labelObjects, labelManifestBytes:
		default:
			out[k] = v
		}
	}
	return out
}
