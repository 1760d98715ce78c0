package image

import (
	"fmt"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/rukpak-dev/rukpak/unpack"
)

// defaultPlatform is what an index entry without a platform is taken to
// be, as go-containerregistry does.
var defaultPlatform = v1.Platform{OS: "linux", Architecture: "amd64"}

// wantedPlatforms are tried in order: the provisioner's own platform, then
// linux/amd64 (what go-containerregistry picked before, and what bundle
// images are built for first).
func wantedPlatforms() []v1.Platform {
	own := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	if own.Architecture == defaultPlatform.Architecture {
		return []v1.Platform{own}
	}
	return []v1.Platform{own, defaultPlatform}
}

// maxListedPlatforms bounds the platforms a message lists: an index is
// remote input.
const maxListedPlatforms = 8

// choosePlatform picks the index entry to unpack. An index with no image
// for a wanted platform is a terminal error listing what it has: no retry
// can change a pinned index.
func choosePlatform(idx *v1.IndexManifest) (v1.Descriptor, error) {
	wanted := wantedPlatforms()
	for _, want := range wanted {
		for _, child := range idx.Manifests {
			p := defaultPlatform
			if child.Platform != nil {
				p = *child.Platform
			}
			if p.Satisfies(want) && !child.MediaType.IsIndex() {
				return child, nil
			}
		}
	}
	var have []string
	for _, child := range idx.Manifests {
		if len(have) == maxListedPlatforms {
			have = append(have, fmt.Sprintf("and %d more", len(idx.Manifests)-maxListedPlatforms))
			break
		}
		have = append(have, platformString(child.Platform))
	}
	if len(have) == 0 {
		have = []string{"none"}
	}
	names := make([]string, len(wanted))
	for i, w := range wanted {
		names[i] = w.String()
	}
	return v1.Descriptor{}, unpack.Terminal(fmt.Errorf("the image index has no image for %s (it has: %s)",
		strings.Join(names, " or "), strings.Join(have, ", ")))
}

// platformString is a remote platform, printable and short.
func platformString(p *v1.Platform) string {
	if p == nil {
		p = &defaultPlatform
	}
	return unpack.Shorten(unpack.Sanitize(p.String()))
}
