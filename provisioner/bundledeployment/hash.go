package bundledeployment

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

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

// ConfigHash fingerprints a BundleDeployment's spec.config: the first 16
// hex digits of the SHA-256 of its canonical JSON (keys sorted, spacing
// dropped), so the same values written differently are the same config.
func ConfigHash(cfg *apiextensionsv1.JSON) string {
	canonical := []byte("null")
	if cfg != nil && len(cfg.Raw) > 0 {
		var v any
		if err := json.Unmarshal(cfg.Raw, &v); err == nil {
			if b, err := json.Marshal(v); err == nil {
				canonical = b
			}
		} else {
			canonical = cfg.Raw
		}
	}
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:8])
}
