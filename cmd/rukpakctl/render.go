package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/rukpak-dev/rukpak/provisioner/helm"
	"github.com/rukpak-dev/rukpak/provisioner/plain"
	"github.com/rukpak-dev/rukpak/provisioner/registry"
	"github.com/rukpak-dev/rukpak/provisioner/servingcert"
	"github.com/rukpak-dev/rukpak/unpack"
)

const (
	formatPlain    = "plain+v0"
	formatRegistry = "registry+v1"
)

type renderOptions struct {
	format          string
	installNS       string
	watchNamespaces []string
	certProvider    string
	image           imageOptions
	limits          unpack.Limits
	chart           chartOptions
}

func newRenderCmd() *cobra.Command {
	var o renderOptions
	cmd := &cobra.Command{
		Use:   "render DIR|CHART.tgz|IMAGE",
		Short: "Print the objects a bundle would install",
		Long: `Render validates a bundle and prints, as YAML documents, the objects a
BundleDeployment of it would install. An invalid bundle prints the message its
Bundle's Unpacked condition would carry and exits non-zero.

DIR is a bundle directory (manifests/ and, for registry+v1, metadata/) or an
OCI image layout directory (one holding an "oci-layout" file) with a single
bundle image. Either is read under the provisioner's rules and limits: a
symlink that leaves the bundle is an error, other symlinks are ignored (the
provisioner never materialises links), hard-linked files are regular files. IMAGE is a bundle image reference, pulled as the provisioner
pulls it (anonymously; --ca-file and --insecure-skip-tls-verify as a Bundle's
certificateData and insecureSkipTLSVerify). The format is helm for a chart
(a chart directory, a chart .tgz, a bundle image of a chart directory or a Helm
OCI chart artifact), registry+v1 when metadata/annotations.yaml says so,
plain+v0 otherwise, unless --format is given.

A chart renders as the helm class installs it, with Helm's install action: CRDs
of crds/ first, then pre-install hooks, the manifest, post-install hooks, each
hook document after a "# hook: <events>, weight <n>, delete policy <p>" line;
hooks of no install event last. --values and --set are Helm's flags
(spec.config.valuesFrom and spec.config.values of a BundleDeployment), and
--install-namespace is spec.config.installNamespace (default "default").
Without a cluster, Helm's lookup finds nothing and capabilities are Helm's
defaults unless --kube-version and --api-versions say otherwise.

--install-namespace, --watch-namespaces and --certificate-provider apply to
registry+v1 bundles and mean what spec.config.installNamespace,
spec.config.watchNamespaces and spec.config.certificateProvider of a
BundleDeployment mean. Webhook certificates and CA bundles, issued at
install, show as placeholders.`,
		Example: `  rukpakctl render ./my-bundle
  rukpakctl render ./etcd-bundle --install-namespace etcd --watch-namespaces etcd
  rukpakctl render 127.0.0.1:5001/etcd-bundle:v0.9.4
  rukpakctl render ./hello-world --install-namespace web --values prod.yaml --set replicaCount=3`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), args[0])
		},
	}
	bindRenderFlags(cmd, &o)
	return cmd
}

// bindRenderFlags binds the flags saying how a bundle is read and converted
// (render's, and rbac's for the objects render prints).
func bindRenderFlags(cmd *cobra.Command, o *renderOptions) {
	cmd.Flags().StringVar(&o.format, "format", "", "bundle format: plain+v0, registry+v1 or helm (default: detected)")
	cmd.Flags().StringVar(&o.installNS, "install-namespace", "", "registry+v1: namespace the operator is installed in; helm: the release's namespace")
	bindSourceFlags(cmd, &o.image, &o.limits)
	bindChartFlags(cmd, &o.chart)
	cmd.Flags().StringVar(&o.certProvider, "certificate-provider", "", "registry+v1: issuer of the webhooks' serving certificates, rukpak (the provisioner, default) or cert-manager")
	cmd.Flags().StringSliceVar(&o.watchNamespaces, "watch-namespaces", nil, "registry+v1: comma-separated namespaces the operator watches (default: all namespaces if the CSV supports AllNamespaces, else the install namespace if it supports OwnNamespace)")
}

func (o renderOptions) run(ctx context.Context, out io.Writer, arg string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	fsys, closeSource, err := openSource(ctx, arg, o.image, o.limits)
	if err != nil {
		return err
	}
	defer closeSource()
	format := o.format
	switch {
	case format == "" && helm.IsChart(fsys):
		format = formatHelm
	case format == "":
		format = detectFormat(fsys)
	}
	if format == formatHelm {
		if len(o.watchNamespaces) > 0 {
			return errors.New("--watch-namespaces only applies to registry+v1 bundles")
		}
		if o.certProvider != "" {
			return errors.New("--certificate-provider only applies to registry+v1 bundles")
		}
		return o.chart.render(ctx, out, fsys, o.installNS)
	}
	if o.chart.set() {
		return errors.New("--values, --set, --release-name, --kube-version and --api-versions only apply to helm charts")
	}
	var objs []*unstructured.Unstructured
	switch format {
	case formatPlain:
		if o.installNS != "" || len(o.watchNamespaces) > 0 {
			return errors.New("--install-namespace and --watch-namespaces only apply to registry+v1 bundles")
		}
		if o.certProvider != "" {
			return errors.New("--certificate-provider only applies to registry+v1 bundles")
		}
		if err := plain.Validate(fsys); err != nil {
			return err
		}
		if objs, err = plain.Objects(fsys); err != nil {
			return err
		}
	case formatRegistry:
		converted, err := registry.Convert(fsys, registry.Options{InstallNamespace: o.installNS, WatchNamespaces: o.watchNamespaces, CertificateProvider: o.certProvider})
		if err != nil {
			return err
		}
		if objs, err = plain.Objects(converted); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown format %q: use %s, %s or %s", format, formatPlain, formatRegistry, formatHelm)
	}
	// Certificates and CA bundles are issued at install: show where they go.
	if err := servingcert.Placeholder(objs); err != nil {
		return err
	}
	return writeYAML(out, objs)
}

// detectFormat follows the bundle's own annotations: a registry+v1 media type,
// or a package annotation with no media type, means registry+v1.
func detectFormat(fsys fs.FS) string {
	data, err := fs.ReadFile(fsys, registry.AnnotationsFile)
	if err != nil {
		return formatPlain
	}
	var f struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.Unmarshal(data, &f); err != nil {
		// Let registry+v1 validation report the malformed file.
		return formatRegistry
	}
	if mt, ok := f.Annotations[registry.AnnotationMediaType]; ok {
		if mt == formatRegistry {
			return formatRegistry
		}
		return formatPlain
	}
	if f.Annotations[registry.AnnotationPackage] != "" {
		return formatRegistry
	}
	return formatPlain
}

func writeYAML(out io.Writer, objs []*unstructured.Unstructured) error {
	for _, obj := range objs {
		data, err := yaml.Marshal(obj.Object)
		if err != nil {
			return fmt.Errorf("encode %s %q: %w", obj.GetKind(), obj.GetName(), err)
		}
		if _, err := fmt.Fprintf(out, "---\n%s", data); err != nil {
			return err
		}
	}
	return nil
}
