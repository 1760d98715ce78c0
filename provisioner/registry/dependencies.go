package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"github.com/rukpak-dev/rukpak/provisioner/plain"
)

// DependenciesFile declares what a bundle needs from other bundles.
const DependenciesFile = "metadata/dependencies.yaml"

type dependenciesFile struct {
	Dependencies []struct {
		Type  string          `json:"type"`
		Value json.RawMessage `json:"value"`
	} `json:"dependencies"`
}

// Dependencies returns the bundle's declared dependencies in human-readable
// form, e.g. "olm.package etcd (>=0.9.0)" or "olm.gvk example.com/v1 Foo".
// They are reported, not resolved: a bundle that installs a CR of a missing
// kind fails, and these entries say where that kind should come from. A
// bundle without the file has no dependencies.
// The file is decoded within plain.DefaultLimits.
func Dependencies(fsys fs.FS) ([]string, error) {
	var df dependenciesFile
	err := plain.DefaultLimits.UnmarshalFile(fsys, DependenciesFile, &df)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		return nil, fmt.Errorf("read %s: %w", DependenciesFile, err)
	}
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(df.Dependencies))
	for i, d := range df.Dependencies {
		s, err := describeDependency(d.Type, d.Value)
		if err != nil {
			return nil, fmt.Errorf("decode %s: dependencies[%d]: %w", DependenciesFile, i, err)
		}
		out = append(out, s)
	}
	return out, nil
}

func describeDependency(typ string, value json.RawMessage) (string, error) {
	switch typ {
	case "olm.package":
		var v struct {
			PackageName string `json:"packageName"`
			Version     string `json:"version"`
		}
		if err := json.Unmarshal(value, &v); err != nil {
			return "", fmt.Errorf("olm.package value: %w", err)
		}
		if v.PackageName == "" {
			return "", errors.New("olm.package value has no packageName")
		}
		if v.Version == "" {
			return "olm.package " + v.PackageName, nil
		}
		return fmt.Sprintf("olm.package %s (%s)", v.PackageName, v.Version), nil
	case "olm.gvk":
		var v struct{ Group, Version, Kind string }
		if err := json.Unmarshal(value, &v); err != nil {
			return "", fmt.Errorf("olm.gvk value: %w", err)
		}
		if v.Version == "" || v.Kind == "" {
			return "", errors.New("olm.gvk value needs a version and a kind")
		}
		gv := v.Version
		if v.Group != "" {
			gv = v.Group + "/" + v.Version
		}
		return fmt.Sprintf("olm.gvk %s %s", gv, v.Kind), nil
	case "":
		return "", errors.New("dependency has no type")
	default:
		// olm.label, olm.constraint and future types: show the value as is.
		compact, err := json.Marshal(value)
		if err != nil || len(value) == 0 {
			return typ, nil
		}
		return typ + " " + string(compact), nil
	}
}
