// Package helm is the Helm chart format of the core-rukpak-io-helm class:
// loading a chart from stored bundle content with Helm's own loader, and
// (render.go, install) turning it into a release.
//
// Where the chart may be in unpacked content, whatever the source:
//   - a chart directory at the root (Chart.yaml at the root: git with
//     `directory`, configMaps, a bundle image built from a chart directory);
//   - or a single top-level directory holding Chart.yaml (a chart .tgz as
//     chart repositories publish it and `helm package` writes it, unpacked by
//     the http source; Helm's OCI chart artifact, unpacked by the image
//     source);
//   - or a single chart archive (*.tgz) at the root (for example one
//     binaryData key of a ConfigMap).
//
// Stored content is always the same shape (Content): the files Helm loaded
// (.helmignore applied, archives expanded) under ChartDir. LoadChart reads
// it back like any other layout.
package helm

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"path"
	"slices"
	"strings"
	"testing/fstest"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/ignore"

	"github.com/rukpak-dev/rukpak/internal/jsonmap"
	"github.com/rukpak-dev/rukpak/provisioner/plain"
)

// ChartDir is the directory of stored content that holds the chart.
const ChartDir = "chart"

// Content is ch as stored content: every file Helm loaded it from
// (Chart.Raw: the chart's own files, subcharts under charts/ included),
// under ChartDir.
func Content(ch *chart.Chart) fs.FS {
	m := make(fstest.MapFS, len(ch.Raw))
	for _, f := range ch.Raw {
		m[path.Join(ChartDir, f.Name)] = &fstest.MapFile{Data: f.Data, Mode: 0o644}
	}
	return m
}

// Limits bound what loading one chart may cost: Helm holds a chart's files
// in memory, so they are counted and sized before they are read, and chart
// archives (the chart itself, or subcharts under charts/) are measured by
// streaming through them before Helm expands them.
//
// Unset (zero) fields take DefaultLimits.
type Limits struct {
	// MaxFiles is the number of files of a chart, subcharts and the files
	// of their archives included.
	MaxFiles int
	// MaxTotalBytes is the size of all of a chart's files together,
	// archives counted expanded.
	MaxTotalBytes int64
	// MaxFileBytes is the size of one file (an archive counted both as it
	// is and by each file it holds).
	MaxFileBytes int64
	// YAML bounds the YAML files Helm decodes whole (yamlFiles: Chart.yaml,
	// values.yaml, ...), each and together; unset fields take
	// plain.DefaultLimits, which the provisioner sets from its flags.
	YAML plain.Limits
}

// DefaultLimits fit every chart in the shared test data with room to spare
// (the largest, prometheus-operator-crds, is 4.4 MB in 26 files, its largest
// file 833 KB). MaxFileBytes is Helm's own bound on one chart file
// (loader.MaxDecompressedFileSize); MaxTotalBytes is the plain class's bound
// on a bundle's manifests, far under Helm's 100 MiB.
var DefaultLimits = Limits{
	MaxFiles:      10_000,
	MaxTotalBytes: 32 << 20,
	MaxFileBytes:  5 << 20,
}

// OrDefault fills unset fields from DefaultLimits.
func (l Limits) OrDefault() Limits {
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultLimits.MaxFiles
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = DefaultLimits.MaxTotalBytes
	}
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = DefaultLimits.MaxFileBytes
	}
	return l
}

// LoadChart loads the chart of stored content (see the package comment for
// where it may be) within DefaultLimits, and checks that it can be installed
// the way `helm install` does: Chart.yaml present and valid, apiVersion v1
// or v2, dependencies of Chart.yaml present in charts/, not a library chart.
// Errors carry Helm's own messages.
func LoadChart(fsys fs.FS) (*chart.Chart, error) {
	return LoadChartLimited(fsys, DefaultLimits)
}

// LoadChartLimited is LoadChart within limits.
func LoadChartLimited(fsys fs.FS, limits Limits) (*chart.Chart, error) {
	b := &budget{Limits: limits.OrDefault()}
	ch, err := load(fsys, b)
	if err != nil {
		return nil, fmt.Errorf("loading the chart: %w", err)
	}
	if err := installable(ch); err != nil {
		return nil, fmt.Errorf("invalid chart %q: %w", ch.Name(), err)
	}
	// The scan before Helm's loader estimates nesting; the values it
	// decoded, here and in every subchart, are held to the limit exactly.
	maxDepth := b.YAML.OrDefault().MaxDepth
	for c := range chartsOf(ch) {
		dir := strings.TrimPrefix(strings.TrimPrefix(c.ChartFullPath(), ch.ChartFullPath()), "/")
		if jsonmap.Nesting(c.Values, maxDepth) > maxDepth {
			return nil, fmt.Errorf("loading the chart: chart file %q is nested more than %d levels deep", path.Join(dir, "values.yaml"), maxDepth)
		}
		// Chart.yaml's fields are fixed but for a dependency's
		// import-values.
		if c.Metadata != nil {
			for _, d := range c.Metadata.Dependencies {
				if d != nil && jsonmap.Nesting(d.ImportValues, maxDepth-3) > maxDepth-3 {
					return nil, fmt.Errorf("loading the chart: chart file %q is nested more than %d levels deep", path.Join(dir, "Chart.yaml"), maxDepth)
				}
			}
		}
	}
	return ch, nil
}

// chartsOf is ch and its subcharts, at any depth.
func chartsOf(ch *chart.Chart) iter.Seq[*chart.Chart] {
	return func(yield func(*chart.Chart) bool) {
		stack := []*chart.Chart{ch}
		for len(stack) > 0 {
			c := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if !yield(c) {
				return
			}
			stack = append(stack, c.Dependencies()...)
		}
	}
}

// load locates the chart in fsys and loads it with Helm's loader.
func load(fsys fs.FS, b *budget) (*chart.Chart, error) {
	if exists(fsys, "Chart.yaml") {
		return loadDir(fsys, ".", b)
	}
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("reading the content's root: %w", err)
	}
	if len(entries) == 1 {
		e := entries[0]
		switch {
		case e.IsDir() && exists(fsys, path.Join(e.Name(), "Chart.yaml")):
			return loadDir(fsys, e.Name(), b)
		case e.Type().IsRegular() && isArchiveName(e.Name()):
			data, err := b.readFile(fsys, e.Name())
			if err != nil {
				return nil, err
			}
			if err := b.measureArchive(e.Name(), data); err != nil {
				return nil, err
			}
			return loader.LoadArchive(bytes.NewReader(data))
		}
	}
	// Helm's loader names what is missing; where it looked is ours to say.
	ch, err := loadDir(fsys, ".", b)
	if err != nil && ch != nil && ch.Metadata == nil {
		err = fmt.Errorf("%w (looked for at the content's root, in its only directory, and as its only file, a chart .tgz)", err)
	}
	return ch, err
}

// IsChart reports whether fsys holds a chart where LoadChart looks for one
// (without loading or validating it).
func IsChart(fsys fs.FS) bool {
	if exists(fsys, "Chart.yaml") {
		return true
	}
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil || len(entries) != 1 {
		return false
	}
	e := entries[0]
	return (e.IsDir() && exists(fsys, path.Join(e.Name(), "Chart.yaml"))) || (e.Type().IsRegular() && isArchiveName(e.Name()))
}

func exists(fsys fs.FS, name string) bool {
	fi, err := fs.Stat(fsys, name)
	return err == nil && fi.Mode().IsRegular()
}

func isArchiveName(name string) bool {
	return strings.HasSuffix(name, ".tgz") || strings.HasSuffix(name, ".tar.gz")
}

var utf8bom = []byte{0xEF, 0xBB, 0xBF}

// archiveName is the name Helm's archive loader gives an entry: the first
// path element dropped, Windows separators turned into slashes, cleaned.
func archiveName(entry string) string {
	delimiter := "/"
	if strings.ContainsRune(entry, '\\') {
		delimiter = "\\"
	}
	parts := strings.Split(entry, delimiter)
	return path.Clean(strings.Join(parts[1:], "/"))
}

// loadDir loads the chart directory dir of fsys the way Helm's
// loader.LoadDir loads one from disk: .helmignore and Helm's default ignore
// rules apply, only regular files are loaded, byte order marks are dropped.
func loadDir(fsys fs.FS, dir string, b *budget) (*chart.Chart, error) {
	rules := ignore.Empty()
	if exists(fsys, path.Join(dir, ignore.HelmIgnore)) {
		data, err := b.readFile(fsys, path.Join(dir, ignore.HelmIgnore))
		if err != nil {
			return nil, err
		}
		if rules, err = ignore.Parse(bytes.NewReader(data)); err != nil {
			return nil, fmt.Errorf("parsing %s: %w", ignore.HelmIgnore, err)
		}
		b.release(int64(len(data)))
	}
	rules.AddDefaults()

	var files []*loader.BufferedFile
	err := fs.WalkDir(fsys, dir, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(name, dir), "/")
		if dir == "." {
			rel = name
		}
		if rel == "." || rel == "" {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if rules.Ignore(rel, fi) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("cannot load irregular file %s as it has file mode type bits set", rel)
		}
		data, err := b.readFile(fsys, name)
		if err != nil {
			return err
		}
		data = bytes.TrimPrefix(data, utf8bom)
		switch {
		case isSubchartArchive(rel):
			err = b.measureArchive(rel, data)
		case isChartYAML(rel):
			err = b.checkYAML(rel, data)
		}
		if err != nil {
			return err
		}
		files = append(files, &loader.BufferedFile{Name: rel, Data: data})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return loader.LoadFiles(files)
}

// isSubchartArchive is true for the files Helm's loader expands as
// subcharts: charts/<name>.tgz of the chart or of any subchart.
func isSubchartArchive(name string) bool {
	parts := strings.Split(name, "/")
	last := parts[len(parts)-1]
	return len(parts)%2 == 0 && inChartDirs(parts) && path.Ext(last) == ".tgz" && strings.IndexAny(last, "_.") != 0
}

// yamlFiles are the files Helm decodes whole when it loads (or validates
// values against) a chart or subchart: they are checked with the plain
// class's YAML cost bounds first (5 MiB of "0," in values.yaml took Helm's
// loader 514 MiB and 4.5 s).
var yamlFiles = []string{"Chart.yaml", "values.yaml", "values.schema.json", "Chart.lock", "requirements.yaml", "requirements.lock"}

// isChartYAML is true for a yamlFiles file at the root of the chart or of
// a subchart directory (charts/<name>/..., at any depth).
func isChartYAML(name string) bool {
	parts := strings.Split(name, "/")
	return len(parts)%2 == 1 && inChartDirs(parts) && slices.Contains(yamlFiles, parts[len(parts)-1])
}

// inChartDirs is true when the directories of parts (all but the last
// element) are charts/<name>/ pairs Helm loads as subcharts: it skips names
// starting with _ or ".".
func inChartDirs(parts []string) bool {
	for i := 0; i < len(parts)-1; i++ {
		if i%2 == 0 && parts[i] != "charts" || i%2 == 1 && strings.IndexAny(parts[i], "_.") == 0 {
			return false
		}
	}
	return true
}

// installable refuses what `helm install` refuses after loading a chart.
func installable(ch *chart.Chart) error {
	// Helm's loader accepts any apiVersion; helm lint names the bad ones
	// with this message, and no Helm release of another version exists.
	if v := ch.Metadata.APIVersion; v != chart.APIVersionV1 && v != chart.APIVersionV2 {
		return fmt.Errorf("apiVersion '%s' is not valid. The value must be either \"v1\" or \"v2\"", v)
	}
	if t := ch.Metadata.Type; t != "" && t != "application" {
		return fmt.Errorf("%s charts are not installable", t)
	}
	if deps := ch.Metadata.Dependencies; deps != nil {
		if err := action.CheckDependencies(ch, deps); err != nil {
			return fmt.Errorf("%w (run `helm dependency build` and include charts/ in the bundle)", err)
		}
	}
	return nil
}

// budget counts a chart's files and bytes against its Limits.
type budget struct {
	Limits
	files int
	bytes int64
	nodes int
}

// checkYAML holds a file Helm decodes to the YAML bounds.
func (b *budget) checkYAML(name string, data []byte) error {
	n, err := b.YAML.CheckYAML(data)
	if err != nil {
		return fmt.Errorf("chart file %q %w", name, err)
	}
	if limit := b.YAML.OrDefault().MaxTotalNodes; b.nodes+n > limit {
		return fmt.Errorf("the chart's %s files have more than %d YAML nodes together", strings.Join(yamlFiles, ", "), limit)
	}
	b.nodes += n
	return nil
}

func (b *budget) take(name string, size int64) error {
	if b.files++; b.files > b.MaxFiles {
		return fmt.Errorf("the chart has more than %d files", b.MaxFiles)
	}
	if size > b.MaxFileBytes {
		return fmt.Errorf("chart file %q is larger than the maximum file size %d", name, b.MaxFileBytes)
	}
	if b.bytes += size; b.bytes > b.MaxTotalBytes {
		return fmt.Errorf("the chart's files are larger than the maximum total size %d", b.MaxTotalBytes)
	}
	return nil
}

// release gives back bytes read only to be parsed (.helmignore).
func (b *budget) release(size int64) {
	b.files--
	b.bytes -= size
}

// capReader fails with err once more than left bytes are read.
type capReader struct {
	r    io.Reader
	left int64
	err  error
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, c.err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// readFile reads one file of fsys within the budget, trusting neither the
// size the file system reports nor that it stays the same while read.
func (b *budget) readFile(fsys fs.FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := b.take(name, fi.Size()); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, fi.Size()+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if int64(len(data)) != fi.Size() {
		return nil, fmt.Errorf("reading %s: the file changed size while it was read", name)
	}
	return data, nil
}

// measureArchive streams through a chart archive before Helm's loader
// expands it (Helm allows 100 MiB), counting its files against the budget
// and measuring the subchart archives it holds the same way.
func (b *budget) measureArchive(name string, data []byte) error {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("file '%s' does not appear to be a gzipped archive: %w", name, err)
	}
	defer zr.Close()
	// Entries that are no files (skipped here, read through by Helm) count
	// too: the whole expanded stream is bounded, headers and padding
	// allowed for.
	expanded := b.MaxTotalBytes + int64(b.MaxFiles+1)*2048
	tr := tar.NewReader(&capReader{r: zr, left: expanded, err: fmt.Errorf("it expands to more than %d bytes", expanded)})
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading chart archive %s: %w", name, err)
		}
		// What Helm's archive loader reads as a file: every entry but
		// directories and PAX headers.
		if hdr.FileInfo().IsDir() || hdr.Typeflag == tar.TypeXGlobalHeader || hdr.Typeflag == tar.TypeXHeader {
			continue
		}
		entry := name + ":" + hdr.Name
		if err := b.take(entry, hdr.Size); err != nil {
			return err
		}
		inChart := archiveName(hdr.Name)
		subchart, yaml := isSubchartArchive(inChart), isChartYAML(inChart)
		if !subchart && !yaml {
			continue
		}
		// Within MaxFileBytes (take).
		data, err := io.ReadAll(io.LimitReader(tr, hdr.Size))
		if err != nil {
			return fmt.Errorf("reading chart archive %s: %w", name, err)
		}
		if subchart {
			err = b.measureArchive(entry, data)
		} else {
			err = b.checkYAML(entry, bytes.TrimPrefix(data, utf8bom))
		}
		if err != nil {
			return err
		}
	}
}
