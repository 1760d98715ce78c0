package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/storage"
	"github.com/rukpak-dev/rukpak/unpack"
)

type contentOptions struct {
	kubeconfig     string
	namespace      string
	contentURL     string
	caFile         string
	caSecret       string
	serverName     string
	serviceAccount string
	// config, when set, is used instead of loading a kubeconfig (tests).
	config *rest.Config
}

// bundleReaderRole is the shipped ClusterRole that may download content
// (manifests/base/rbac).
const bundleReaderRole = "bundle-reader"

func newContentCmd() *cobra.Command {
	var o contentOptions
	cmd := &cobra.Command{
		Use:   "content <bundle name>",
		Short: "display contents of the specified bundle.",
		Long: `Content lists the files of an unpacked Bundle, as the provisioner stored
them, downloaded from the content service (as RukPak's rukpakctl content
did, without a Job: rukpakctl downloads it itself).

The content service answers only tokens of its own audience whose
ServiceAccount may get /bundles/* (the bundle-reader ClusterRole). By
default rukpakctl creates a temporary ServiceAccount in --namespace, binds
it to bundle-reader, requests a 10-minute token for it and removes both
afterwards; that takes the rights to create ServiceAccounts, their tokens
and ClusterRoleBindings of bundle-reader. --service-account NS/NAME uses an
existing ServiceAccount instead (it takes create on serviceaccounts/token).

The server's certificate is verified against --ca-file, else the ca.crt of
the Secret --ca-secret in --namespace, where the provisioner keeps its
content CA. The content service's address is status.contentURL's; when it
is a cluster Service not reachable from here, forward a port to it and
pass --content-url (and --tls-server-name, the Service's host name):

  kubectl -n rukpak-system port-forward svc/rukpak-core 8443:443 &
  rukpakctl content combo-tag-ref --content-url https://127.0.0.1:8443 \
    --tls-server-name rukpak-core.rukpak-system.svc

The download is verified against status.contentDigest and bounded as every
source is.`,
		Example: `  rukpakctl content combo-tag-ref`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errors.New("requires 1 argument: <bundle name>")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), args[0])
		},
	}
	cmd.Flags().StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else in-cluster)")
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "rukpak-system", "the provisioner's namespace")
	cmd.Flags().StringVar(&o.contentURL, "content-url", "", "base URL of the content service (default: the one in status.contentURL)")
	cmd.Flags().StringVar(&o.caFile, "ca-file", "", "PEM file of the CA the content service's certificate is verified with")
	cmd.Flags().StringVar(&o.caSecret, "ca-secret", "rukpak-core-tls", "Secret in --namespace whose ca.crt verifies the content service (when --ca-file is not set)")
	cmd.Flags().StringVar(&o.serverName, "tls-server-name", "", "host name the content service's certificate must be valid for (default: the host of the URL)")
	cmd.Flags().StringVar(&o.serviceAccount, "service-account", "", "NAMESPACE/NAME of an existing ServiceAccount allowed to read content (default: a temporary one)")
	return cmd
}

func (o contentOptions) run(ctx context.Context, out io.Writer, name string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	cfg := o.config
	if cfg == nil {
		var err error
		if cfg, err = (diffOptions{kubeconfig: o.kubeconfig}).restConfig(); err != nil {
			return err
		}
	}
	scheme := runtime.NewScheme()
	if err := rukpakv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	b := &rukpakv1alpha1.Bundle{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, b); err != nil {
		return fmt.Errorf("reading Bundle %q: %w", name, err)
	}
	base := o.contentURL
	if base == "" {
		if b.Status.ContentURL == "" {
			return fmt.Errorf("bundle %q has no content URL: it is not unpacked (phase %q)", name, b.Status.Phase)
		}
		base = strings.TrimSuffix(b.Status.ContentURL, storage.BundlesPath+name+".tgz")
	}
	httpClient, err := o.httpClient(ctx, cs)
	if err != nil {
		return err
	}
	token, cleanup, err := o.token(ctx, cs, bundleReaderRole, "rukpakctl-content-")
	if err != nil {
		return err
	}
	defer cleanup()
	loader, err := storage.NewFallbackLoader(nil, base, httpClient, func() (string, error) { return token, nil })
	if err != nil {
		return err
	}
	loader.Audience = storage.DefaultContentAudience
	fsys, err := loader.Load(ctx, b)
	if err != nil {
		return err
	}
	return list(out, fsys)
}

// httpClient is a client of the content service: its certificate verified
// against the content CA, for --tls-server-name when set.
func (o contentOptions) httpClient(ctx context.Context, cs kubernetes.Interface) (*http.Client, error) {
	caPEM, err := o.ca(ctx, cs)
	if err != nil {
		return nil, err
	}
	httpClient, err := storage.NewHTTPClient(caPEM)
	if err != nil {
		return nil, err
	}
	if o.serverName != "" {
		t, ok := httpClient.Transport.(*http.Transport)
		if !ok || t.TLSClientConfig == nil {
			return nil, errors.New("the content client has no TLS configuration to set a server name on")
		}
		t.TLSClientConfig.ServerName = o.serverName
	}
	return httpClient, nil
}

// ca returns the PEM the content service's certificate is verified with.
func (o contentOptions) ca(ctx context.Context, cs kubernetes.Interface) ([]byte, error) {
	if o.caFile != "" {
		pem, err := os.ReadFile(o.caFile)
		if err != nil {
			return nil, fmt.Errorf("reading --ca-file: %w", err)
		}
		return pem, nil
	}
	s, err := cs.CoreV1().Secrets(o.namespace).Get(ctx, o.caSecret, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the content CA from Secret %s/%s (or pass --ca-file): %w", o.namespace, o.caSecret, err)
	}
	pem := s.Data["ca.crt"]
	if len(pem) == 0 {
		return nil, fmt.Errorf("secret %s/%s has no ca.crt (pass --ca-file)", o.namespace, o.caSecret)
	}
	return pem, nil
}

// token returns a token of the content audience for --service-account, or
// for a temporary ServiceAccount (named prefix + a random suffix) bound to
// the ClusterRole role, and what removes the temporary objects.
func (o contentOptions) token(ctx context.Context, cs kubernetes.Interface, role, prefix string) (string, func(), error) {
	noop := func() {}
	ns, sa := o.namespace, ""
	cleanup := noop
	if o.serviceAccount != "" {
		var ok bool
		ns, sa, ok = strings.Cut(o.serviceAccount, "/")
		if !ok || ns == "" || sa == "" {
			return "", noop, fmt.Errorf("--service-account %q: want NAMESPACE/NAME", o.serviceAccount)
		}
	} else {
		var err error
		if sa, cleanup, err = temporaryAccount(ctx, cs, ns, role, prefix); err != nil {
			return "", noop, err
		}
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences:         []string{storage.DefaultContentAudience},
		ExpirationSeconds: ptrTo(int64(600)),
	}}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		cleanup()
		return "", noop, fmt.Errorf("requesting a token of ServiceAccount %s/%s: %w", ns, sa, err)
	}
	return tr.Status.Token, cleanup, nil
}

// temporaryAccount creates a ServiceAccount in ns bound to role, as
// RukPak's rukpakctl content did with bundle-reader. The ServiceAccount is
// owned by its binding, so the garbage collector removes it even if the
// removal here is interrupted.
func temporaryAccount(ctx context.Context, cs kubernetes.Interface, ns, role, prefix string) (string, func(), error) {
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		return "", nil, err
	}
	name := prefix + hex.EncodeToString(suffix)
	crb, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/managed-by": "rukpakctl"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", nil, fmt.Errorf("binding a temporary ServiceAccount to %s (or pass --service-account): %w", role, err)
	}
	cleanup := func() {
		// Not the command's context: a cancelled command still cleans up.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		bg := metav1.DeletePropagationBackground
		if err := cs.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil && !apierrors.IsNotFound(err) {
			fmt.Fprintf(os.Stderr, "warning: removing ClusterRoleBinding %s: %v\n", name, err)
		}
		if err := cs.CoreV1().ServiceAccounts(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			fmt.Fprintf(os.Stderr, "warning: removing ServiceAccount %s/%s: %v\n", ns, name, err)
		}
	}
	_, err = cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: ns, Labels: map[string]string{"app.kubernetes.io/managed-by": "rukpakctl"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding", Name: name, UID: crb.UID}},
	}}, metav1.CreateOptions{})
	if err != nil {
		cleanup()
		return "", nil, fmt.Errorf("creating a temporary ServiceAccount in %s (or pass --service-account): %w", ns, err)
	}
	return name, cleanup, nil
}

// list prints fsys as `tar -tv` does (RukPak's rukpakctl content printed
// tar's listing): mode, owner, size, time and path, directories first in
// walk order with a trailing slash.
func list(out io.Writer, fsys fs.FS) error {
	return fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		name, size := unpack.Sanitize(p), fi.Size()
		if d.IsDir() {
			name, size = name+"/", 0
		}
		_, err = fmt.Fprintf(out, "%s 0/0 %9d %s %s\n", fi.Mode().String(), size, fi.ModTime().UTC().Format("2006-01-02 15:04"), name)
		return err
	})
}

func ptrTo[T any](v T) *T { return &v }
