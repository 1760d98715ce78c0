package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/storage"
	"github.com/rukpak-dev/rukpak/unpack"
	"github.com/rukpak-dev/rukpak/unpack/upload"
)

// bundleUploaderRole is the shipped ClusterRole that may upload content
// (manifests/base/rbac).
const bundleUploaderRole = "bundle-uploader"

type runOptions struct {
	contentOptions
	bdClass     string
	bundleClass string
	timeout     time.Duration
	limits      unpack.Limits
}

func newRunCmd() *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run <bundle deployment name> <bundle directory>",
		Short: "Run a bundle from a local directory on the cluster",
		Long: `Run creates or updates the BundleDeployment <name> whose Bundle's content
is the local directory <bundle directory>, uploaded to the provisioner's
content service, as RukPak's rukpakctl run did.

The directory is archived as a deterministic tar.gz (so the same content
always has the same digest) and checked with the provisioner's limits. The
BundleDeployment's template is of source type upload and pins that digest:
the same directory again changes nothing, a changed one pivots to a new
Bundle. rukpakctl waits for the Bundle and uploads the archive to
<content service>/uploads/<bundle>.tgz.

Uploading takes create on bundles/upload for the Bundle (the bundle-uploader
ClusterRole). By default rukpakctl creates a temporary ServiceAccount in
--namespace, binds it to bundle-uploader and uploads with a 10-minute token
of it, removing both afterwards; --service-account NS/NAME uses an existing
ServiceAccount instead. The content service's address and CA are found as
for rukpakctl content: pass --content-url (and --tls-server-name) when it
is a cluster Service, through a port-forward:

  kubectl -n rukpak-system port-forward svc/rukpak-core 8443:443 &
  rukpakctl run combo ./combo --content-url https://127.0.0.1:8443 \
    --tls-server-name rukpak-core.rukpak-system.svc`,
		Example: `  rukpakctl run memcached-api ./memcached-api-v0.1.0/
  bundledeployment.core.rukpak.io "memcached-api" applied
  successfully uploaded bundle content for "memcached-api-5b9bbf8799"`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return errors.New("requires 2 arguments: <bundle deployment name> <bundle directory>")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), args[0], args[1])
		},
	}
	cmd.Flags().StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else in-cluster)")
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "rukpak-system", "the provisioner's namespace")
	cmd.Flags().StringVar(&o.contentURL, "content-url", "", "base URL of the content service (default: the one other Bundles' status.contentURL names)")
	cmd.Flags().StringVar(&o.caFile, "ca-file", "", "PEM file of the CA the content service's certificate is verified with")
	cmd.Flags().StringVar(&o.caSecret, "ca-secret", "rukpak-core-tls", "Secret in --namespace whose ca.crt verifies the content service (when --ca-file is not set)")
	cmd.Flags().StringVar(&o.serverName, "tls-server-name", "", "host name the content service's certificate must be valid for (default: the host of the URL)")
	cmd.Flags().StringVar(&o.serviceAccount, "service-account", "", "NAMESPACE/NAME of an existing ServiceAccount allowed to upload (default: a temporary one bound to bundle-uploader)")
	cmd.Flags().StringVar(&o.bdClass, "bundle-deployment-provisioner-class", rukpakv1alpha1.ProvisionerClassPlain, "provisioner class of the BundleDeployment")
	cmd.Flags().StringVar(&o.bdClass, "provisioner-class", rukpakv1alpha1.ProvisionerClassPlain, "alias of --bundle-deployment-provisioner-class")
	cmd.Flags().StringVar(&o.bundleClass, "bundle-provisioner-class", rukpakv1alpha1.ProvisionerClassPlain, "provisioner class of the Bundle")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long to wait for the Bundle and the content service")
	bindLimitFlags(cmd, &o.limits)
	return cmd
}

func (o runOptions) run(ctx context.Context, out io.Writer, name, dir string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	archivePath, digest, err := archiveDir(ctx, dir, o.limits.OrDefault())
	if err != nil {
		return err
	}
	defer os.Remove(archivePath)

	cfg := o.config
	if cfg == nil {
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
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.bundleDeployment(name, digest)), client.FieldOwner("rukpakctl"), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying BundleDeployment %q: %w", name, err)
	}
	fmt.Fprintf(out, "bundledeployment.core.rukpak.io %q applied\n", name)

	b, err := waitForBundle(ctx, c, name, digest)
	if err != nil {
		return err
	}
	if rs := b.Status.ResolvedSource; rs != nil && rs.Upload != nil && rs.Upload.Digest == digest {
		fmt.Fprintf(out, "bundle %q is already up-to-date\n", b.Name)
		return nil
	}
	base, err := o.uploadBase(ctx, c, b)
	if err != nil {
		return err
	}
	httpClient, err := o.httpClient(ctx, cs)
	if err != nil {
		return err
	}
	token, cleanup, err := o.token(ctx, cs, bundleUploaderRole, "rukpakctl-run-")
	if err != nil {
		return err
	}
	defer cleanup()
	created, err := putArchive(ctx, httpClient, strings.TrimSuffix(base, "/")+upload.Path+b.Name+".tgz", token, archivePath)
	if err != nil {
		return err
	}
	if created {
		fmt.Fprintf(out, "successfully uploaded bundle content for %q\n", b.Name)
	} else {
		fmt.Fprintf(out, "bundle %q is already up-to-date\n", b.Name)
	}
	return nil
}

// bundleDeployment is what run applies: unstructured, so that no zero
// value of a typed field is sent and owned.
func (o runOptions) bundleDeployment(name, digest string) *unstructured.Unstructured {
	bd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": rukpakv1alpha1.GroupVersion.String(),
		"kind":       "BundleDeployment",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"provisionerClassName": o.bdClass,
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": name}},
				"spec": map[string]any{
					"provisionerClassName": o.bundleClass,
					"source": map[string]any{
						"type":   string(rukpakv1alpha1.SourceTypeUpload),
						"upload": map[string]any{"digest": digest},
					},
				},
			},
		},
	}}
	return bd
}

// archiveDir writes dir's bundle, read with the provisioner's rules, as the
// deterministic tar.gz the content service stores, to a temporary file.
func archiveDir(ctx context.Context, dir string, limits unpack.Limits) (string, string, error) {
	b, err := openBundle(ctx, dir, limits)
	if err != nil {
		return "", "", fmt.Errorf("reading bundle directory %s: %w", dir, err)
	}
	defer b.close()
	f, err := os.CreateTemp("", "rukpakctl-run-*.tgz")
	if err != nil {
		return "", "", err
	}
	h := sha256.New()
	err = storage.WriteArchive(ctx, io.MultiWriter(f, h), b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", "", fmt.Errorf("archiving bundle directory %s: %w", dir, err)
	}
	return f.Name(), "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// waitForBundle waits for the Bundle the BundleDeployment name generates
// for digest.
func waitForBundle(ctx context.Context, c client.Client, name, digest string) (*rukpakv1alpha1.Bundle, error) {
	for {
		list := &rukpakv1alpha1.BundleList{}
		err := c.List(ctx, list, client.MatchingLabels{
			rukpakv1alpha1.LabelOwnerKind: "BundleDeployment",
			rukpakv1alpha1.LabelOwnerName: name,
		})
		if err != nil && ctx.Err() == nil {
			return nil, fmt.Errorf("listing the Bundles of BundleDeployment %q: %w", name, err)
		}
		for i := range list.Items {
			b := &list.Items[i]
			if u := b.Spec.Source.Upload; u != nil && u.Digest == digest && b.DeletionTimestamp.IsZero() {
				return b, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for BundleDeployment %q to create the Bundle of %s: %w", name, digest, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// uploadBase is --content-url, else the content service other Bundles of
// the same class name in status.contentURL.
func (o runOptions) uploadBase(ctx context.Context, c client.Client, b *rukpakv1alpha1.Bundle) (string, error) {
	if o.contentURL != "" {
		return o.contentURL, nil
	}
	list := &rukpakv1alpha1.BundleList{}
	if err := c.List(ctx, list); err != nil {
		return "", fmt.Errorf("listing Bundles to find the content service (or pass --content-url): %w", err)
	}
	for _, other := range list.Items {
		if other.Spec.ProvisionerClassName != b.Spec.ProvisionerClassName || other.Status.ContentURL == "" {
			continue
		}
		if base, ok := strings.CutSuffix(other.Status.ContentURL, storage.BundlesPath+other.Name+".tgz"); ok {
			return base, nil
		}
	}
	return "", fmt.Errorf("no Bundle of class %q names the content service yet: pass --content-url", b.Spec.ProvisionerClassName)
}

// putArchive uploads the archive at p to url, retrying while the service
// answers 503 (another upload in progress, not the leader, the Bundle not
// reconciled yet). It reports whether the content was new.
func putArchive(ctx context.Context, hc *http.Client, url, token, p string) (bool, error) {
	for {
		f, err := os.Open(p)
		if err != nil {
			return false, err
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return false, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, f)
		if err != nil {
			f.Close()
			return false, err
		}
		req.ContentLength = fi.Size()
		req.Header.Set("Content-Type", "application/gzip")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		f.Close()
		if err != nil {
			return false, fmt.Errorf("uploading to %s: %w", url, err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		msg := strings.TrimSpace(string(bytes.ToValidUTF8(body, []byte("?"))))
		switch resp.StatusCode {
		case http.StatusCreated:
			return true, nil
		case http.StatusNoContent, http.StatusOK:
			return false, nil
		case http.StatusServiceUnavailable:
			wait := time.Second
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 && s <= 60 {
				wait = time.Duration(s) * time.Second
			}
			select {
			case <-ctx.Done():
				return false, fmt.Errorf("uploading to %s: %s: %s (gave up: %w)", url, unpack.StatusText(resp.StatusCode), msg, ctx.Err())
			case <-time.After(wait):
			}
			continue
		}
		return false, fmt.Errorf("upload refused: %s: %s", unpack.StatusText(resp.StatusCode), msg)
	}
}

// bindLimitFlags binds the provisioner's limit flags, with its defaults.
func bindLimitFlags(cmd *cobra.Command, limits *unpack.Limits) {
	set := flag.NewFlagSet("limits", flag.ContinueOnError)
	limits.BindFlags(set)
	cmd.Flags().AddGoFlagSet(set)
}
