// Package unpack fetches a Bundle's source (an OCI image, a git repository,
// ConfigMaps or an HTTP archive) into a local filesystem tree, in process.
package unpack

import (
	"context"
	"errors"
	"io/fs"

	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// State is how far an unpack got.
type State string

const (
	// StatePending means the source is not available yet (for example a
	// referenced object does not exist); try again later.
	StatePending State = "Pending"
	// StateUnpacking means the unpack is in progress in the background.
	StateUnpacking State = "Unpacking"
	// StateUnpacked means FS holds the whole content.
	StateUnpacked State = "Unpacked"
)

// Result is the outcome of an unpack.
type Result struct {
	// FS is the bundle's content root, valid until Close. Set when State is
	// StateUnpacked.
	FS fs.FS
	// ResolvedSource is the source pinned to exactly what was unpacked: an
	// image by digest, a git repository by commit.
	ResolvedSource *rukpakv1alpha1.BundleSource
	// State is how far the unpack got; Message explains a non-final state.
	State   State
	Message string

	cleanup func() error
}

// Unpacked is a finished unpack of fsys; cleanup (may be nil) runs on Close.
func Unpacked(fsys fs.FS, resolved *rukpakv1alpha1.BundleSource, cleanup func() error) *Result {
	return &Result{FS: fsys, ResolvedSource: resolved, State: StateUnpacked, cleanup: cleanup}
}

// Pending is an unpack that cannot start yet, with the reason.
func Pending(message string) *Result {
	return &Result{State: StatePending, Message: message}
}

// Close releases whatever backs FS (a temporary directory, usually).
func (r *Result) Close() error {
	if r == nil || r.cleanup == nil {
		return nil
	}
	err := r.cleanup()
	r.cleanup = nil
	return err
}

// Unpacker fetches a Bundle's content.
//
// Implementations use bundle.Status.ResolvedSource when it is set, so a
// moved tag or branch can never change the content of an existing Bundle.
type Unpacker interface {
	Unpack(ctx context.Context, bundle *rukpakv1alpha1.Bundle) (*Result, error)
}

// terminalError marks a failure that retrying cannot fix: a bad reference, a
// missing tag, denied credentials, invalid content.
type terminalError struct{ err error }

func (e *terminalError) Error() string { return e.err.Error() }
func (e *terminalError) Unwrap() error { return e.err }

// Terminal marks err as not worth retrying until the object changes.
func Terminal(err error) error {
	if err == nil {
		return nil
	}
	return &terminalError{err: err}
}

// IsTerminal reports whether err, or an error it wraps, was marked Terminal.
func IsTerminal(err error) bool {
	var t *terminalError
	return errors.As(err, &t)
}

// Config is shared by every source's Unpacker.
type Config struct {
	// Reader reads Secrets and ConfigMaps in Namespace.
	Reader client.Reader
	// Namespace is the provisioner's namespace: pull secrets, git and http
	// auth Secrets and ConfigMap sources are looked up there.
	Namespace string
	// BaseDir holds unpacked trees and source caches; it is created if
	// missing.
	BaseDir string
	// Limits bound what one Bundle may unpack to.
	Limits Limits
}
