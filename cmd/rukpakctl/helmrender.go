package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing/fstest"

	"github.com/spf13/cobra"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/cli/values"
	"helm.sh/helm/v3/pkg/getter"

	"github.com/rukpak-dev/rukpak/provisioner/helm"
	"github.com/rukpak-dev/rukpak/unpack"
)

const formatHelm = "helm"

// chartOptions say how a Helm chart is rendered: what a helm-class
// BundleDeployment's spec.config and name, and the cluster, say.
type chartOptions struct {
	valueFiles  []string
	setValues   []string
	releaseName string
	kubeVersion string
	apiVersions []string
}

func bindChartFlags(cmd *cobra.Command, o *chartOptions) {
	cmd.Flags().StringArrayVarP(&o.valueFiles, "values", "f", nil, "helm: a values YAML file (repeatable; later files win, as spec.config.valuesFrom and then spec.config.values)")
	cmd.Flags().StringArrayVar(&o.setValues, "set", nil, "helm: a value as key=value, Helm's --set syntax (repeatable; over the --values files)")
	cmd.Flags().StringVar(&o.releaseName, "release-name", "release-name", "helm: the release name, which is the BundleDeployment's name")
	cmd.Flags().StringVar(&o.kubeVersion, "kube-version", "", "helm: the cluster's Kubernetes version for .Capabilities.KubeVersion (default: Helm's)")
	cmd.Flags().StringArrayVar(&o.apiVersions, "api-versions", nil, "helm: an API version the cluster serves, for .Capabilities.APIVersions (repeatable)")
}

// set reports whether any chart flag was given, which only charts take.
func (o chartOptions) set() bool {
	return len(o.valueFiles) > 0 || len(o.setValues) > 0 || o.kubeVersion != "" || len(o.apiVersions) > 0 || o.releaseName != "release-name"
}

// render prints what installing the chart in fsys applies, hooks marked.
func (o chartOptions) render(ctx context.Context, out io.Writer, fsys fs.FS, namespace string) error {
	ch, err := helm.LoadChart(fsys)
	if err != nil {
		return err
	}
	// No getters: --values names local files (or - for stdin), never URLs.
	vals, err := (&values.Options{ValueFiles: o.valueFiles, Values: o.setValues}).MergeValues(getter.Providers{})
	if err != nil {
		return err
	}
	if namespace == "" {
		namespace = "default"
	}
	opts := helm.RenderOptions{ReleaseName: o.releaseName, Namespace: namespace, APIVersions: o.apiVersions}
	if o.kubeVersion != "" {
		if opts.KubeVersion, err = chartutil.ParseKubeVersion(o.kubeVersion); err != nil {
			return fmt.Errorf("--kube-version: %w", err)
		}
	}
	r, err := helm.Render(ctx, ch, vals, opts)
	if err != nil {
		return err
	}
	return r.Write(out)
}

// isChartArchive is true for a chart .tgz file on disk (`helm package`
// output, or a chart repository's download).
func isChartArchive(arg string) bool {
	fi, err := os.Stat(arg)
	return err == nil && fi.Mode().IsRegular() && (strings.HasSuffix(arg, ".tgz") || strings.HasSuffix(arg, ".tar.gz"))
}

// openChartArchive is a chart archive as content holding it, as a
// ConfigMap's binaryData would; read within the fetch limit an http
// source would download it in.
func openChartArchive(file string, limits unpack.Limits) (fs.FS, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	limit := limits.OrDefault().MaxFetchBytes
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than the fetch limit of %d bytes", file, limit)
	}
	return fstest.MapFS{filepath.Base(file): {Data: data, Mode: 0o644}}, nil
}
