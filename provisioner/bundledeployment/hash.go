package bundledeployment

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// hashLength keeps generated Bundle names within the 52-character limit:
// a BundleDeployment name is at most 45 characters, plus "-" and the hash.
const hashLength = 6

// alphabet avoids vowels (no accidental words) and look-alike characters,
// like the one Kubernetes uses for generated names.
const alphabet = "bcdfghjklmnpqrstvwxz2456789"

// TemplateHash is a stable fingerprint of a BundleDeployment's template: the
// SHA-256 of the template's JSON encoding (Go's encoding/json sorts map keys,
// so labels and annotations hash the same in any order), written with the
// first hashLength bytes mapped onto alphabet. Any change to the template's
// labels, annotations or spec gives a new hash, and so a new Bundle.
func TemplateHash(t rukpakv1alpha1.BundleTemplate) (string, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return "", fmt.Errorf("encoding bundle template: %w", err)
	}
	sum := sha256.Sum256(b)
	out := make([]byte, hashLength)
	for i := range out {
		out[i] = alphabet[int(sum[i])%len(alphabet)]
	}
	return string(out), nil
}
