package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner"
	"github.com/rukpak-dev/rukpak/provisioner/bundledeployment"
	"github.com/rukpak-dev/rukpak/provisioner/helm/install"
	"github.com/rukpak-dev/rukpak/provisioner/release"
	"github.com/rukpak-dev/rukpak/unpack"
)

type diffOptions struct {
	kubeconfig string
	namespace  string
	image      imageOptions
	limits     unpack.Limits
	// config, when set, is used instead of loading a kubeconfig (tests).
	config *rest.Config
}

func newDiffCmd() *cobra.Command {
	var o diffOptions
	cmd := &cobra.Command{
		Use:   "diff BUNDLEDEPLOYMENT DIR|CHART.tgz|IMAGE",
		Short: "Show what pivoting a BundleDeployment to a bundle would change",
		Long: `Diff shows, before a pivot, which objects installing a bundle would create,
change (with the changed field paths) or delete for a BundleDeployment, and
which it would be refused. It reads the BundleDeployment and its current
release from the cluster, renders the bundle with the BundleDeployment's
provisioner class and spec.config, and compares with server-side dry-run
applies, so the API server's defaulting and admission are accounted for.
Nothing is changed.

For a helm-class BundleDeployment, the chart (DIR, CHART.tgz or IMAGE) is
rendered with the BundleDeployment's spec.config values (valuesFrom read
from --namespace) as its next upgrade would, and the hooks that upgrade
would run are listed apart ("hook ... would run"); they are not part of
the release.

DIR and IMAGE are read as "rukpakctl render" reads them. The release records
are Secrets in the provisioner's namespace (--namespace): diff needs to read
them, as well as every object the bundle holds.`,
		Example: `  rukpakctl diff combo ./combo-v0.0.3
  rukpakctl diff etcd 127.0.0.1:5001/etcd-bundle:v0.9.5`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), args[0], args[1])
		},
	}
	cmd.Flags().StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else in-cluster)")
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "rukpak-system", "the provisioner's namespace, holding the release records")
	bindSourceFlags(cmd, &o.image, &o.limits)
	return cmd
}

func (o diffOptions) restConfig() (*rest.Config, error) {
	if o.config != nil {
		return o.config, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	return cfg, nil
}

func (o diffOptions) run(ctx context.Context, out io.Writer, name, arg string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	cfg, err := o.restConfig()
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := rukpakv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	bd := &rukpakv1alpha1.BundleDeployment{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, bd); err != nil {
		return fmt.Errorf("reading BundleDeployment %q: %w", name, err)
	}
	handler, err := provisioner.HandlerFor(bd.Spec.ProvisionerClassName)
	if err != nil {
		return err
	}
	fsys, closeSource, err := openSource(ctx, arg, o.image, o.limits)
	if err != nil {
		return err
	}
	defer closeSource()
	// The content as the Bundle controller stores it, then the objects as
	// the BundleDeployment controller installs them.
	content, err := handler.Handle(ctx, fsys, &rukpakv1alpha1.Bundle{Spec: bd.Spec.Template.Spec})
	if err != nil {
		return err
	}
	if bd.Spec.ProvisionerClassName == rukpakv1alpha1.ProvisionerClassHelm {
		// The chart rendered with the BundleDeployment's values (its
		// valuesFrom read from the provisioner's namespace), as the
		// installer's next upgrade would.
		releases, err := release.NewManager(cfg, o.namespace)
		if err != nil {
			return err
		}
		plan, err := bundledeployment.PlanRender(ctx, releases, &install.Installer{Releases: releases, Reader: c}, bd, content)
		if err != nil {
			return err
		}
		return writePlan(out, bd, plan)
	}
	objs, err := provisioner.DeploymentObjects(ctx, c, content, bd)
	if err != nil {
		return err
	}
	if err := provisioner.PrepareObjects(ctx, c, o.namespace, bd, objs); err != nil {
		return err
	}
	releases, err := release.NewManager(cfg, o.namespace)
	if err != nil {
		return err
	}
	plan, err := bundledeployment.PlanPivot(ctx, releases, bd, objs)
	if err != nil {
		return err
	}
	return writePlan(out, bd, plan)
}

// writePlan prints a plan, one object a line, changed fields indented
// under their object.
func writePlan(out io.Writer, bd *rukpakv1alpha1.BundleDeployment, p *release.Plan) error {
	w := &errWriter{w: out}
	if p.Revision == 0 {
		w.printf("BundleDeployment %s has no release installed: everything is created\n", bd.Name)
	} else {
		w.printf("BundleDeployment %s: release revision %d (active bundle %s)\n", bd.Name, p.Revision, bd.Status.ActiveBundle)
	}
	for _, o := range p.Create {
		w.printf("create  %s\n", o)
	}
	for _, ch := range p.Change {
		w.printf("change  %s\n", ch.Object)
		for _, f := range ch.Fields {
			w.printf("          %s\n", f)
		}
		if ch.More > 0 {
			w.printf("          and %d more fields\n", ch.More)
		}
	}
	for _, o := range p.Delete {
		w.printf("delete  %s\n", o)
	}
	for _, o := range p.Refused {
		w.printf("refused %s\n", o)
	}
	for _, h := range p.Hooks {
		w.printf("hook    %s would run\n", h)
	}
	w.printf("%d to create, %d to change, %d to delete, %d unchanged", len(p.Create), len(p.Change), len(p.Delete), p.Unchanged)
	if len(p.Refused) > 0 {
		w.printf(", %d refused", len(p.Refused))
	}
	w.printf("\n")
	return w.err
}

// errWriter keeps the first write error, so printing reads straight.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}
