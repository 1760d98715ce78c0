package git

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/skeema/knownhosts"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/unpack"
)

// Secret keys, as in Flux and the original RukPak.
const (
	keyUsername   = "username"
	keyPassword   = "password"
	keyPrivateKey = "ssh-privatekey"
	keyKnownHosts = "ssh-knownhosts"
)

// access is how to reach a repository: the credentials for its protocol
// (basic auth for http(s), a client configuration for ssh) and whether TLS
// is verified.
type access struct {
	basic           *githttp.BasicAuth
	ssh             *ssh.ClientConfig
	insecureSkipTLS bool
}

// endpoint parses the repository URL. Local paths and file:// URLs are
// refused: they would let a Bundle read the provisioner's own filesystem.
func endpoint(repository string) (*transport.Endpoint, error) {
	ep, err := transport.NewEndpoint(repository)
	if err != nil {
		return nil, unpack.Terminal(fmt.Errorf("invalid source.git.repository %q: %w", redact(repository), err))
	}
	switch ep.Protocol {
	case "https", "http", "ssh", "git":
		return ep, nil
	default:
		return nil, unpack.Terminal(fmt.Errorf("invalid source.git.repository %q: protocol %q is not supported (use https, http, ssh or git)", redact(repository), ep.Protocol))
	}
}

// auth builds the credentials and TLS/host-key checks for src. A Secret's
// credentials are used only for the hosts its owner listed in its
// core.rukpak.io/allowed-hosts annotation: any Bundle may name any Secret,
// and must not be able to send it to a server of its choosing.
func (u *Unpacker) auth(ctx context.Context, src *rukpakv1alpha1.GitSource, ep *transport.Endpoint) (*access, error) {
	a := &access{insecureSkipTLS: src.Auth.SkipVerify()}
	var secret *corev1.Secret
	if name := src.Auth.SecretName(); name != "" {
		secret = &corev1.Secret{}
		key := client.ObjectKey{Namespace: u.cfg.Namespace, Name: name}
		// A missing Secret may be created later: retryable.
		if err := u.cfg.Reader.Get(ctx, key, secret); err != nil {
			return nil, fmt.Errorf("getting auth Secret %s: %w", key, err)
		}
		if err := unpack.CheckSecretHost(secret, repositoryHost(src.Repository, ep)); err != nil {
			return nil, err
		}
	}

	switch ep.Protocol {
	case "ssh":
		if secret == nil {
			return nil, unpack.Terminal(fmt.Errorf("repository %q uses ssh: auth.secret must name a Secret with %s", redact(src.Repository), keyPrivateKey))
		}
		cfg, err := sshConfig(ep, secret, src.Auth.SkipVerify(), u.cfg.BaseDir)
		if err != nil {
			return nil, err
		}
		a.ssh = cfg
	case "https", "http":
		if secret == nil {
			return a, nil
		}
		user, pass := string(secret.Data[keyUsername]), string(secret.Data[keyPassword])
		if user == "" && pass == "" {
			return nil, unpack.Terminal(fmt.Errorf("auth Secret %s/%s has neither %s nor %s", secret.Namespace, secret.Name, keyUsername, keyPassword))
		}
		a.basic = &githttp.BasicAuth{Username: user, Password: pass}
	}
	return a, nil
}

// repositoryHost is the host a repository's credentials go to, with the
// port when the URL names one.
func repositoryHost(repository string, ep *transport.Endpoint) string {
	if u, err := url.Parse(repository); err == nil && u.Scheme != "" && u.Host != "" {
		return u.Host
	}
	// scp-like user@host:path has no port.
	return ep.Host
}

func sshConfig(ep *transport.Endpoint, secret *corev1.Secret, insecure bool, tmpDir string) (*ssh.ClientConfig, error) {
	ref := secret.Namespace + "/" + secret.Name
	pem := secret.Data[keyPrivateKey]
	if len(pem) == 0 {
		return nil, unpack.Terminal(fmt.Errorf("auth Secret %s has no %s", ref, keyPrivateKey))
	}
	user := ep.User
	if user == "" {
		user = "git"
	}
	keys, err := gitssh.NewPublicKeys(user, pem, "")
	if err != nil {
		return nil, unpack.Terminal(fmt.Errorf("parsing %s of auth Secret %s: %w", keyPrivateKey, ref, err))
	}
	if insecure {
		keys.HostKeyCallback = ssh.InsecureIgnoreHostKey()
		return keys.ClientConfig()
	}
	known := secret.Data[keyKnownHosts]
	if len(known) == 0 {
		return nil, unpack.Terminal(fmt.Errorf("auth Secret %s has no %s: add the server's host key or set auth.insecureSkipVerify", ref, keyKnownHosts))
	}
	db, err := knownHostsDB(known, tmpDir)
	if err != nil {
		return nil, unpack.Terminal(fmt.Errorf("parsing %s of auth Secret %s: %w", keyKnownHosts, ref, err))
	}
	port := ep.Port
	if port == 0 {
		port = 22
	}
	keys.HostKeyCallback = db.HostKeyCallback()
	// Offer only the algorithms of the keys we know, or the server may pick
	// a key type we cannot check.
	keys.HostKeyAlgorithms = db.HostKeyAlgorithms(net.JoinHostPort(ep.Host, strconv.Itoa(port)))
	return keys.ClientConfig()
}

// knownHostsDB parses known_hosts data. The parser only reads files, so the
// data goes through a short-lived private temporary file in tmpDir.
func knownHostsDB(data []byte, tmpDir string) (*knownhosts.HostKeyDB, error) {
	if err := os.MkdirAll(tmpDir, 0o755); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(tmpDir, "known-hosts-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		return nil, err
	}
	return knownhosts.NewDB(file)
}
