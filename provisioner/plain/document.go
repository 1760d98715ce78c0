package plain

import (
	"context"
	"fmt"
	"io"
	"io/fs"

	"sigs.k8s.io/yaml"
)

// UnmarshalFile decodes the file at name, one YAML document (bundle
// metadata, say), into v as sigs.k8s.io/yaml.Unmarshal does, within l:
// the file may be no larger than MaxDocumentBytes, and its nodes and depth
// are checked before it is decoded. Errors opening the file are returned
// wrapped, so errors.Is(err, fs.ErrNotExist) tells a missing file.
func (l Limits) UnmarshalFile(fsys fs.FS, name string, v any) error {
	l = l.OrDefault()
	if err := reading.Acquire(context.Background(), 1); err != nil {
		return err
	}
	defer reading.Release(1)
	f, err := fsys.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, l.MaxDocumentBytes+1))
	if err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	if int64(len(data)) > l.MaxDocumentBytes {
		return fmt.Errorf("decode %s: file is larger than %s", name, formatBytes(l.MaxDocumentBytes))
	}
	cost, err := l.check(data)
	if err != nil {
		return fmt.Errorf("decode %s: document 0 %w", name, err)
	}
	w := weight(cost, data)
	if err := decoding.Acquire(context.Background(), w); err != nil {
		return err
	}
	defer decoding.Release(w)
	if err := yaml.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %s: %w", name, err)
	}
	return nil
}
