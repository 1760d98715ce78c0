package release

import (
	"crypto/sha256"
	"sync"

	helmrelease "helm.sh/helm/v3/pkg/release"
)

// appliedReleases remembers, per release, the digest of the objects its
// deployed revision holds and the fingerprint of its records (names, UIDs
// and resourceVersions, from the record index) when an Apply last found
// nothing to change, or as an Apply's own writes of them left them
// (recordIndex.settle). An Apply of the same objects while the records are
// still those changes nothing either: it renders no manifest and reads no
// record. Any write of a record (by this process, Helm or anyone) changes
// the fingerprint. Drift is not its business: the reconciler compares the
// live objects' resourceVersions on every reconcile, whatever Apply did.
//
// One entry per release, without its manifest: a few hundred bytes each.
type appliedReleases struct {
	mu     sync.Mutex
	byName map[string]appliedRelease
}

type appliedRelease struct {
	objects      [sha256.Size]byte
	records      string
	release      *helmrelease.Release
	manifestSize int
	// drops are the fields the deployed objects were applied without, by
	// object (recordedDrops): stamped objects carry them again.
	drops map[string]string
}

// unchanged returns the deployed revision remembered for name if it was
// remembered for these objects and records.
func (a *appliedReleases) unchanged(name string, objects [sha256.Size]byte, records string) (appliedRelease, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.byName[name]
	if !ok || e.objects != objects || e.records != records {
		return appliedRelease{}, false
	}
	return e, true
}

// remember notes that deployed, the last revision of release name, holds
// exactly the objects of digest objects (less drops) in a manifest of
// manifestSize bytes while its records are records.
func (a *appliedReleases) remember(name string, objects [sha256.Size]byte, records string, deployed *helmrelease.Release, manifestSize int, drops map[string]string) {
	// Kept without the manifest (the largest part by far), the chart or
	// the labels: the Result only says which revision is deployed.
	kept := *deployed
	kept.Manifest = ""
	kept.Chart = nil
	kept.Config = nil
	kept.Labels = nil // the index reads them: ~650 bytes per release
	if deployed.Info != nil {
		info := *deployed.Info
		kept.Info = &info
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.byName[name] = appliedRelease{objects: objects, records: records, release: &kept, manifestSize: manifestSize, drops: drops}
}

// forget drops what is remembered for name: it is about to change.
func (a *appliedReleases) forget(name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.byName, name)
}
