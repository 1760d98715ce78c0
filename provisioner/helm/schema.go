package helm

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
)

// Helm validates values against a chart's values.schema.json with a
// JSON-schema compiler that loads every $ref it meets: http(s) URLs are
// downloaded whole (across redirects), file: URLs read the local
// filesystem. A chart is hostile input, so validateValues validates as Helm
// does (same documents, same messages) but resolves a $ref only to a file
// of the chart itself; anything else is refused by name, without network or
// filesystem access. It runs in the render child (sandboxRender), within
// the child's limits, and the frozen chart the actions run carries no
// schema (frozen), so Helm never validates in the calling process.

// schemaURL is where Helm places a chart's schema (ValidateAgainstSingleSchema):
// a relative $ref resolves against it to file:///<path in the chart>.
const schemaURL = "file:///values.schema.json"

// maxRefShown bounds how much of a $ref a message repeats.
const maxRefShown = 200

// validateValues checks the coalesced vals against the schemas of ch and
// of its subcharts, as Helm's chartutil.ValidateAgainstSchema does, with
// the same error.
func validateValues(ch *chart.Chart, vals map[string]any) error {
	err := validateAgainstSchema(ch, vals)
	var refused *refusedRef
	switch {
	case errors.As(err, &refused):
		return err
	case err != nil:
		return fmt.Errorf("values don't meet the specifications of the schema(s) in the following chart(s):\n%s", err.Error())
	}
	return nil
}

// validateAgainstSchema is chartutil.ValidateAgainstSchema (Helm v3.22)
// with chartFiles as the only loader.
func validateAgainstSchema(ch *chart.Chart, values map[string]any) error {
	var sb strings.Builder
	if ch.Schema != nil {
		if err := validateSingle(ch, values); err != nil {
			var refused *refusedRef
			if errors.As(err, &refused) {
				// Not a verdict on the values: the schema cannot be used.
				return err
			}
			fmt.Fprintf(&sb, "%s:\n", ch.Name())
			sb.WriteString(err.Error())
		}
	}
	for _, sub := range ch.Dependencies() {
		raw, exists := values[sub.Name()]
		if !exists || raw == nil {
			continue
		}
		subValues, ok := raw.(map[string]any)
		if !ok {
			fmt.Fprintf(&sb, "%s:\ninvalid type for values: expected object (map), got %T\n", sub.Name(), raw)
			continue
		}
		if err := validateAgainstSchema(sub, subValues); err != nil {
			var refused *refusedRef
			if errors.As(err, &refused) {
				return err
			}
			sb.WriteString(err.Error())
		}
	}
	if sb.Len() > 0 {
		return errors.New(sb.String())
	}
	return nil
}

// validateSingle is chartutil.ValidateAgainstSingleSchema for ch's own
// schema.
func validateSingle(ch *chart.Chart, values chartutil.Values) (reterr error) {
	defer func() {
		if r := recover(); r != nil {
			reterr = fmt.Errorf("unable to validate schema: %s", r)
		}
	}()
	schema, err := jsonschema.UnmarshalJSON(bytes.NewReader(ch.Schema))
	if err != nil {
		return err
	}
	loader := &chartFiles{chart: ch}
	compiler := jsonschema.NewCompiler()
	compiler.UseLoader(loader)
	if err := compiler.AddResource(schemaURL, schema); err != nil {
		return err
	}
	validator, err := compiler.Compile(schemaURL)
	if err != nil {
		if loader.refused != nil {
			return loader.refused
		}
		return err
	}
	if err := validator.Validate(values.AsMap()); err != nil {
		// chartutil.JSONSchemaValidationError's text.
		return errors.New(strings.TrimPrefix(err.Error(), "jsonschema validation failed with '"+schemaURL+"#'\n") + "\n")
	}
	return nil
}

// chartFiles loads a schema's $refs from the files of one chart:
// file:///<path> is the chart's file <path> (what a relative reference
// resolves to); every other URL is refused. It reads nothing else.
type chartFiles struct {
	chart *chart.Chart
	// refused is the first reference refused, which Compile's error
	// wraps in its own words.
	refused *refusedRef
}

func (l *chartFiles) Load(ref string) (any, error) {
	name, err := chartFileName(ref)
	if err == nil {
		for _, f := range l.chart.Raw {
			if f.Name == name {
				return jsonschema.UnmarshalJSON(bytes.NewReader(f.Data))
			}
		}
		err = fmt.Errorf("chart %q has no file %q", l.chart.Name(), name)
	}
	r := &refusedRef{chart: l.chart.Name(), ref: ref, err: err}
	if l.refused == nil {
		l.refused = r
	}
	return nil, r
}

// chartFileName is the chart file a resolved $ref names, or why it names
// none.
func chartFileName(ref string) (string, error) {
	u, err := url.Parse(ref)
	if err != nil {
		return "", errors.New("not a URL")
	}
	if u.Scheme != "file" || u.Host != "" || u.User != nil || u.RawQuery != "" || u.Opaque != "" {
		return "", errors.New("not a file of the chart")
	}
	name := strings.TrimPrefix(path.Clean("/"+u.Path), "/")
	if name == "" {
		return "", errors.New("not a file")
	}
	return name, nil
}

// refusedRef is a $ref that validation does not follow.
type refusedRef struct {
	chart, ref string
	err        error
}

func (e *refusedRef) Error() string {
	ref := e.ref
	if len(ref) > maxRefShown {
		ref = ref[:maxRefShown] + "..."
	}
	return fmt.Sprintf("values.schema.json of chart %q: $ref %q refused: %v (a schema may reference only files of its chart, without network or filesystem access)", e.chart, ref, e.err)
}
