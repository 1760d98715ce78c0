package image

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rukpak-dev/rukpak/unpack"
)

// dockerAuth is one registry's entry of a docker config file.
type dockerAuth struct {
	Username      string `json:"username,omitempty"`
	Password      string `json:"password,omitempty"`
	Auth          string `json:"auth,omitempty"`
	IdentityToken string `json:"identitytoken,omitempty"`
	RegistryToken string `json:"registrytoken,omitempty"`
}

// keychain serves the credentials of a pull secret, by registry host.
type keychain map[string]dockerAuth

// pullSecretKeychain reads the named pull secret from the provisioner's
// namespace. A missing Secret is retryable (it may be created next); a
// malformed one is terminal until it changes.
func (u *Unpacker) pullSecretKeychain(ctx context.Context, secretName string) (authn.Keychain, error) {
	if secretName == "" {
		return authn.NewMultiKeychain(), nil // anonymous
	}
	key := types.NamespacedName{Namespace: u.cfg.Namespace, Name: secretName}
	var secret corev1.Secret
	if err := u.cfg.Reader.Get(ctx, key, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("pull secret %q not found in namespace %q", secretName, u.cfg.Namespace)
		}
		return nil, fmt.Errorf("reading pull secret %s: %w", key, err)
	}
	kc, err := parseDockerConfig(&secret)
	if err != nil {
		return nil, unpack.Terminal(fmt.Errorf("pull secret %s: %w", key, err))
	}
	return kc, nil
}

func parseDockerConfig(secret *corev1.Secret) (keychain, error) {
	if data, ok := secret.Data[corev1.DockerConfigJsonKey]; ok {
		var cfg struct {
			Auths map[string]dockerAuth `json:"auths"`
		}
		if err := json.Unmarshal(data, &cfg); err != nil {
			return nil, fmt.Errorf("key %s is not valid JSON: %w", corev1.DockerConfigJsonKey, err)
		}
		return normalize(cfg.Auths), nil
	}
	if data, ok := secret.Data[corev1.DockerConfigKey]; ok {
		var auths map[string]dockerAuth
		if err := json.Unmarshal(data, &auths); err != nil {
			return nil, fmt.Errorf("key %s is not valid JSON: %w", corev1.DockerConfigKey, err)
		}
		return normalize(auths), nil
	}
	return nil, fmt.Errorf("type %q has neither a %s nor a %s key (want a %s Secret)",
		secret.Type, corev1.DockerConfigJsonKey, corev1.DockerConfigKey, corev1.SecretTypeDockerConfigJson)
}

// normalize keys entries by bare host: config files also use URLs such as
// https://index.docker.io/v1/.
func normalize(auths map[string]dockerAuth) keychain {
	kc := keychain{}
	for k, v := range auths {
		host := strings.TrimPrefix(strings.TrimPrefix(k, "https://"), "http://")
		host, _, _ = strings.Cut(host, "/")
		if host == "docker.io" || host == "registry-1.docker.io" {
			host = "index.docker.io"
		}
		kc[host] = v
	}
	return kc
}

// Resolve implements authn.Keychain.
func (kc keychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	a, ok := kc[r.RegistryStr()]
	if !ok {
		return authn.Anonymous, nil
	}
	return authn.FromConfig(authn.AuthConfig{
		Username:      a.Username,
		Password:      a.Password,
		Auth:          a.Auth,
		IdentityToken: a.IdentityToken,
		RegistryToken: a.RegistryToken,
	}), nil
}
