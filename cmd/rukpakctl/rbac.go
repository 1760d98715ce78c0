package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/rukpak-dev/rukpak/provisioner/helm"
	"github.com/rukpak-dev/rukpak/provisioner/identity"
)

type rbacOptions struct {
	render         renderOptions
	serviceAccount string
	name           string
}

func newRBACCmd() *cobra.Command {
	o := rbacOptions{}
	cmd := &cobra.Command{
		Use:   "rbac DIR|IMAGE --service-account NAMESPACE/NAME",
		Short: "Print the RBAC a ServiceAccount needs to install a bundle",
		Long: `Rbac prints, as YAML documents, the smallest ClusterRole and Roles (with
their bindings to --service-account) that let a BundleDeployment naming that
ServiceAccount in spec.serviceAccount install, upgrade, correct and uninstall
the bundle: create, delete, get and patch on the resource of every object it
installs, in the namespace it goes to (cluster-wide for cluster-scoped kinds
and for namespaces the bundle creates, where no Role can exist before the
install); plus, because the API server lets no one grant permissions they do
not hold, every rule of the bundle's own Roles and ClusterRoles (escalate on a
ClusterRole with an aggregationRule, bind on a role the bundle binds but does
not ship). The provisioner runs the same check before it installs.

DIR, IMAGE, --format, --install-namespace and --watch-namespaces are read as
by render: the rules are for the objects render prints. For plain+v0 bundles
--install-namespace places objects that name no namespace, as a
BundleDeployment's spec.config.installNamespace does (for a plain+v0 IMAGE,
with --format plain+v0). For a chart (DIR, CHART.tgz or IMAGE), --values,
--set and --release-name are read as by render and --install-namespace is
the release's namespace: the rules cover crds/, the manifest and every
hook, with list and watch on hook Jobs and Pods, which Helm waits for.

Kinds are mapped without a cluster: built-in kinds by their known scope, the
bundle's own CRDs by their spec, other kinds as namespaced when the object
names a namespace.`,
		Example: `  rukpakctl rbac ./my-bundle --service-account tenant-a/installer --install-namespace tenant-a | kubectl apply -f -
  rukpakctl rbac 127.0.0.1:5001/etcd-bundle:v0.9.4 --service-account etcd/installer --install-namespace etcd --watch-namespaces etcd`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), args[0])
		},
	}
	cmd.Flags().StringVar(&o.serviceAccount, "service-account", "", "NAMESPACE/NAME of the ServiceAccount the BundleDeployment names (required)")
	cmd.Flags().StringVar(&o.name, "name", "", "name of the printed roles and bindings (default: rukpak-install-<service account name>)")
	bindRenderFlags(cmd, &o.render)
	return cmd
}

func (o rbacOptions) run(ctx context.Context, out io.Writer, arg string) error {
	if o.serviceAccount == "" {
		return errors.New("--service-account NAMESPACE/NAME is required")
	}
	sa, err := identity.Parse(o.serviceAccount)
	if err != nil {
		return err
	}
	name := o.name
	if name == "" {
		name = "rukpak-install-" + sa.Name
	}
	objs, err := o.objects(ctx, arg)
	if err != nil {
		return err
	}
	rbac, err := identity.RBAC(objs, sa, name)
	if err != nil {
		return err
	}
	for _, o := range rbac {
		b, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		// ObjectMeta's creationTimestamp: null is noise to paste.
		b = bytes.Replace(b, []byte("  creationTimestamp: null\n"), nil, 1)
		if _, err := fmt.Fprintf(out, "---\n%s", b); err != nil {
			return err
		}
	}
	return nil
}

// objects are the objects render prints for arg (so what it prints is
// what these rules are for), placed as the provisioner places them.
func (o rbacOptions) objects(ctx context.Context, arg string) ([]*unstructured.Unstructured, error) {
	ro := o.render
	installNS := ro.installNS
	plainFormat := ro.format == formatPlain
	chartDir := false
	if ro.format == "" && !isImageRef(arg) {
		if b, err := openBundle(ctx, arg, ro.limits); err == nil {
			// A chart is rendered in --install-namespace (its templates
			// may name .Release.Namespace); what names no namespace goes
			// there too, as the provisioner places it.
			chartDir = helm.IsChart(b)
			plainFormat = !chartDir && detectFormat(b) == formatPlain
			b.close()
		}
	}
	if plainFormat {
		ro.installNS = ""
	}
	var rendered bytes.Buffer
	if err := ro.run(ctx, &rendered, arg); err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(&rendered, 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("reading rendered objects: %w", err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if (plainFormat || chartDir) && installNS != "" && u.GetNamespace() == "" {
			u.SetNamespace(installNS)
		}
		objs = append(objs, u)
	}
}
