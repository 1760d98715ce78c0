package release

import (
	"crypto/sha256"
	"encoding/base32"
	"strconv"
	"strings"

	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What a release's record says of the objects it holds, in its labels, so
// that a process that has never applied the release (after a restart) can
// tell that it still holds exactly these objects from the index of records
// (a metadata informer), without reading and decoding the record: at
// 10,000 releases that read was a GET and a few tens of KB allocated for
// each, while the release needed nothing.
//
// Only a record written as deployed, of objects applied whole (no dropped
// fields), carries them. The objects label binds the digest of the objects
// to the release's name, the record's version and its manifest's size, so
// a label copied onto another revision (Helm's upgrade and rollback carry
// a release's labels over) never matches: the revision it was written for
// is the only one it can vouch for.
const (
	labelObjects       = "core.rukpak.io/release-objects"
	labelManifestBytes = "core.rukpak.io/release-manifest-bytes"
)

// objectsEncoding writes a SHA-256 as 52 lower-case letters and digits: a
// label value (at most 63 characters, alphanumeric at both ends).
var objectsEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// objectsLabel is the objects label of revision version of release name,
// whose manifest is manifestBytes long and holds the objects of digest
// objects (memo.Digest).
func objectsLabel(name string, version, manifestBytes int, objects [sha256.Size]byte) string {
	h := sha256.New()
	h.Write([]byte("core.rukpak.io/release-objects/v1\x00"))
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write([]byte(strconv.Itoa(version)))
	h.Write([]byte{0})
	h.Write([]byte(strconv.Itoa(manifestBytes)))
	h.Write([]byte{0})
	h.Write(objects[:])
	return objectsEncoding.EncodeToString(h.Sum(nil))
}

// labelRecorded sets the labels that say rel holds exactly the objects of
// digest objects; rel is about to be written as deployed.
func labelRecorded(rel *helmrelease.Release, objects [sha256.Size]byte) {
	if rel.Labels == nil {
		rel.Labels = map[string]string{}
	}
	rel.Labels[labelObjects] = objectsLabel(rel.Name, rel.Version, len(rel.Manifest), objects)
	rel.Labels[labelManifestBytes] = strconv.Itoa(len(rel.Manifest))
}

// recordedRevision is a deployed revision as its record's labels describe
// it.
type recordedRevision struct {
	version       int
	manifestBytes int
	// records is the fingerprint of the release's records it was found
	// among (recordIndex.fingerprint).
	records string
}

// release is the revision as an Apply that changes nothing reports it:
// which revision is deployed, without its manifest (appliedReleases keeps
// no more).
func (r recordedRevision) release(name, namespace string) *helmrelease.Release {
	rel := &helmrelease.Release{Name: name, Namespace: namespace, Version: r.version, Info: &helmrelease.Info{}}
	rel.SetStatus(helmrelease.StatusDeployed, "")
	return rel
}

// deployedHolds returns release name's last revision if its record, as the
// index has it, is deployed and labelled as holding exactly the objects of
// digest objects (deployedAmong). Not while the index has not synced, has
// not shown a record this process created or shows one it deleted.
func (x *recordIndex) deployedHolds(name string, objects [sha256.Size]byte) (recordedRevision, bool) {
	if !x.informer.HasSynced() {
		return recordedRevision{}, false
	}
	objs, err := x.informer.GetIndexer().ByIndex(byReleaseName, name)
	if err != nil {
		return recordedRevision{}, false
	}
	records := make([]*metav1.PartialObjectMetadata, 0, len(objs))
	shown := make(map[string]string, len(objs))
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, o := range objs {
		m, ok := o.(*metav1.PartialObjectMetadata)
		if !ok {
			return recordedRevision{}, false
		}
		if _, deleted := x.deleted[deletedRecord{m.Name, m.UID}]; deleted {
			// Deleted by this process (an uninstall, or history pruned):
			// the informer has not caught up.
			return recordedRevision{}, false
		}
		records = append(records, m)
		shown[m.Name] = string(m.UID) + "@" + m.ResourceVersion
	}
	if x.pendingLocked(name, shown) {
		return recordedRevision{}, false
	}
	r, ok := deployedAmong(name, objects, records)
	r.records = joinVersions(shown)
	return r, ok
}

// deployedAmong returns the last revision among release name's records if
// it is deployed and labelled as holding exactly the objects of digest
// objects; not while a record is pending (the history read recovers
// those), nor when two records claim the last version or one's version is
// not a number.
func deployedAmong(name string, objects [sha256.Size]byte, records []*metav1.PartialObjectMetadata) (recordedRevision, bool) {
	var last *metav1.PartialObjectMetadata
	lastVersion := -1
	for _, m := range records {
		v, err := strconv.Atoi(m.Labels["version"])
		if err != nil || v < 0 || v == lastVersion || strings.HasPrefix(m.Labels["status"], "pending") {
			return recordedRevision{}, false
		}
		if v > lastVersion {
			last, lastVersion = m, v
		}
	}
	if last == nil || last.Labels["status"] != helmrelease.StatusDeployed.String() {
		return recordedRevision{}, false
	}
	size, err := strconv.Atoi(last.Labels[labelManifestBytes])
	if err != nil || size < 0 || last.Labels[labelObjects] != objectsLabel(name, lastVersion, size, objects) {
		return recordedRevision{}, false
	}
	return recordedRevision{version: lastVersion, manifestBytes: size}, true
}

// indexedLabels are the labels of a record the index keeps.
var indexedLabels = []string{"name", "status", "version", labelObjects, labelManifestBytes}
