package resolve

import (
	"fmt"
	"strings"

	mmsemver "github.com/Masterminds/semver/v3"
	bsemver "github.com/blang/semver/v4"
)

// maxReleaseLength is the longest build metadata that is read as a release
// (the registry+v1 convention OLM v1 follows: "1.2.3+4" is version 1.2.3,
// release 4).
const maxReleaseLength = 20

// versionRelease is a bundle version in the order OLM v1 sorts bundles: the
// semver version, then the release.
type versionRelease struct {
	version bsemver.Version
	release []bsemver.PRVersion
}

// parseVersionRelease reads a bundle version. Build metadata that is a valid
// release (at most 20 characters of dot-separated identifiers, numeric ones
// without leading zeros) becomes the release and leaves the version; any other
// build metadata stays on the version and, as semver says, never orders it.
func parseVersionRelease(s string) (versionRelease, error) {
	v, err := bsemver.Parse(s)
	if err != nil {
		return versionRelease{}, err
	}
	vr := versionRelease{version: v}
	if len(v.Build) > 0 {
		if rel, ok := parseRelease(strings.Join(v.Build, ".")); ok {
			vr.release = rel
			vr.version.Build = nil
		}
	}
	return vr, nil
}

func parseRelease(s string) ([]bsemver.PRVersion, bool) {
	if s == "" || len(s) > maxReleaseLength {
		return nil, false
	}
	parts := strings.Split(s, ".")
	rel := make([]bsemver.PRVersion, 0, len(parts))
	for _, p := range parts {
		pr, err := bsemver.NewPRVersion(p)
		if err != nil {
			return nil, false
		}
		rel = append(rel, pr)
	}
	return rel, true
}

// compare orders by version, then release: no release sorts below any
// release, releases compare identifier by identifier as pre-releases do.
func (a versionRelease) compare(b versionRelease) int {
	if c := a.version.Compare(b.version); c != 0 {
		return c
	}
	switch {
	case len(a.release) == 0 && len(b.release) == 0:
		return 0
	case len(a.release) == 0:
		return -1
	case len(b.release) == 0:
		return 1
	}
	return bsemver.Version{Pre: a.release}.Compare(bsemver.Version{Pre: b.release})
}

// mastermindsVersion is the version a range is checked against: the semver
// version without the release, as OLM v1 checks it.
func (a versionRelease) mastermindsVersion() *mmsemver.Version {
	pre := make([]string, len(a.version.Pre))
	for i, p := range a.version.Pre {
		pre[i] = p.String()
	}
	return mmsemver.New(a.version.Major, a.version.Minor, a.version.Patch,
		strings.Join(pre, "."), strings.Join(a.version.Build, "."))
}

func (a versionRelease) String() string {
	if len(a.release) == 0 {
		return a.version.String()
	}
	rel := make([]string, len(a.release))
	for i, p := range a.release {
		rel[i] = p.String()
	}
	return fmt.Sprintf("%s+%s", a.version, strings.Join(rel, "."))
}
