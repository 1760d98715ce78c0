// Package storage keeps each Bundle's unpacked content as a tar.gz file,
// serves it to authorised clients over HTTPS, and loads it back.
package storage

import (
	"context"
	"io/fs"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// Loader loads a Bundle's stored content.
type Loader interface {
	Load(ctx context.Context, bundle *rukpakv1alpha1.Bundle) (fs.FS, error)
}

// Storage stores, loads and deletes Bundle content.
type Storage interface {
	Loader
	// Exists reports whether the Bundle's content is stored, cheaply: it is
	// asked on every reconcile of an unpacked Bundle.
	Exists(ctx context.Context, bundle *rukpakv1alpha1.Bundle) (bool, error)
	// Store writes fsys as the Bundle's content, atomically.
	Store(ctx context.Context, bundle *rukpakv1alpha1.Bundle, fsys fs.FS) error
	// Delete removes the Bundle's content; deleting missing content is not
	// an error.
	Delete(ctx context.Context, bundle *rukpakv1alpha1.Bundle) error
	// URLFor is the URL that serves the Bundle's content.
	URLFor(ctx context.Context, bundle *rukpakv1alpha1.Bundle) (string, error)
}
