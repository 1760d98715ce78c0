package upload

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// Path is the URL path prefix the upload handler serves.
const Path = "/uploads/"

// DefaultMaxConcurrent is how many uploads are read at once by default.
const DefaultMaxConcurrent = 4

// Handler accepts PUT /uploads/<name>.tgz: the content of the Bundle
// <name>, which must be of source type upload and have no other content.
type Handler struct {
	Store *Store
	// Authn authenticates bearer tokens of the content audience.
	Authn authenticator.Request
	// Authz decides create on bundles/upload for the Bundle's name.
	Authz authorizer.Authorizer
	// GetBundle reads a Bundle by name; nil and a NotFound error when it
	// does not exist.
	GetBundle func(ctx context.Context, name string) (*rukpakv1alpha1.Bundle, error)
	// Serves reports whether this process reconciles b (its class, its
	// shard); an upload for any other Bundle would never be unpacked.
	Serves func(b *rukpakv1alpha1.Bundle) bool
	// Leader reports whether this replica reconciles Bundles now; only the
	// leader keeps uploads (nil: always).
	Leader func() bool
	// Timeout bounds one upload, first byte to last.
	Timeout time.Duration
	// Scratch is the directory uploads are test-extracted into.
	Scratch string
	Log     logr.Logger

	slots chan struct{}
}

// NewHandler returns h ready to serve at most maxConcurrent uploads at once
// (DefaultMaxConcurrent when not positive).
func NewHandler(h Handler, maxConcurrent int) *Handler {
	if maxConcurrent <= 0 {
		maxConcurrent = DefaultMaxConcurrent
	}
	if h.Timeout <= 0 {
		h.Timeout = h.Store.limits.FetchTimeout
	}
	h.slots = make(chan struct{}, maxConcurrent)
	return &h
}

// uploadRole is the shipped ClusterRole that grants uploads.
const uploadRole = "bundle-uploader"

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPut {
		w.Header().Set("Allow", http.MethodPut)
		http.Error(w, "method not allowed: upload with PUT", http.StatusMethodNotAllowed)
		return
	}
	name, ok := requestedBundle(r)
	if !ok {
		http.NotFound(w, r)
		return
	}
	if h.Leader != nil && !h.Leader() {
		unavailable(w, 5, "this provisioner replica is not the leader; only the leader keeps uploads: retry")
		return
	}
	resp, ok, err := h.Authn.AuthenticateRequest(r)
	if err != nil || !ok {
		if err != nil {
			h.Log.V(1).Info("Authentication failed", "path", r.URL.Path, "reason", err.Error())
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="rukpak"`)
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	r.Header.Del("Authorization")
	user := resp.User
	attrs := authorizer.AttributesRecord{
		User: user, Verb: "create", APIGroup: rukpakv1alpha1.GroupVersion.Group, APIVersion: rukpakv1alpha1.GroupVersion.Version,
		Resource: "bundles", Subresource: "upload", Name: name, ResourceRequest: true,
	}
	decision, reason, err := h.Authz.Authorize(r.Context(), attrs)
	if err != nil {
		h.Log.Error(err, "Authorization failed", "user", user.GetName(), "bundle", name)
		http.Error(w, "authorization check failed", http.StatusInternalServerError)
		return
	}
	if decision != authorizer.DecisionAllow {
		h.Log.V(1).Info("Forbidden", "user", user.GetName(), "bundle", name, "reason", reason)
		http.Error(w, fmt.Sprintf("user %q cannot create resource \"bundles/upload\" in API group %q for bundle %q: uploading takes that right (the %s ClusterRole grants it)",
			user.GetName(), rukpakv1alpha1.GroupVersion.Group, name, uploadRole), http.StatusForbidden)
		return
	}
	limit := h.Store.limits.MaxFetchBytes
	if r.ContentLength > limit {
		http.Error(w, fmt.Sprintf("the upload declares %d bytes, more than the limit of %d", r.ContentLength, limit), http.StatusRequestEntityTooLarge)
		return
	}
	select {
	case h.slots <- struct{}{}:
		defer func() { <-h.slots }()
	default:
		unavailable(w, 2, fmt.Sprintf("%d uploads are in progress, the most this provisioner reads at once: retry", cap(h.slots)))
		return
	}
	b, status, msg := h.bind(r.Context(), name)
	if b == nil {
		if status == http.StatusServiceUnavailable {
			unavailable(w, 1, msg)
			return
		}
		http.Error(w, msg, status)
		return
	}
	h.receive(w, r, b, user.GetName())
}

// bind finds the one Bundle an upload to name is for: of type upload,
// served here, not being deleted. Otherwise it returns the answer.
func (h *Handler) bind(ctx context.Context, name string) (*rukpakv1alpha1.Bundle, int, string) {
	b, err := h.GetBundle(ctx, name)
	switch {
	case apierrors.IsNotFound(err):
		return nil, http.StatusNotFound, fmt.Sprintf("bundle %q not found", name)
	case err != nil:
		h.Log.Error(err, "Reading bundle for an upload", "bundle", name)
		return nil, http.StatusServiceUnavailable, fmt.Sprintf("reading bundle %q failed: retry", name)
	case b.Spec.Source.Type != rukpakv1alpha1.SourceTypeUpload:
		return nil, http.StatusConflict, fmt.Sprintf("bundle %q has source type %q: only Bundles of source type \"upload\" take uploads", name, b.Spec.Source.Type)
	case !b.DeletionTimestamp.IsZero():
		return nil, http.StatusConflict, fmt.Sprintf("bundle %q is being deleted", name)
	case h.Serves != nil && !h.Serves(b):
		return nil, http.StatusNotFound, fmt.Sprintf("bundle %q (provisioner class %q) is not reconciled by this provisioner", name, b.Spec.ProvisionerClassName)
	case !controllerutil.ContainsFinalizer(b, rukpakv1alpha1.FinalizerDeleteCachedBundle):
		// Without the finalizer a deletion would leave the upload behind.
		return nil, http.StatusServiceUnavailable, fmt.Sprintf("bundle %q is not reconciled yet: retry", name)
	}
	return b, 0, ""
}

func (h *Handler) receive(w http.ResponseWriter, r *http.Request, b *rukpakv1alpha1.Bundle, user string) {
	deadline := time.Now().Add(h.Timeout)
	ctx, cancel := context.WithDeadline(r.Context(), deadline)
	defer cancel()
	// A client that stops sending must not hold a slot past the deadline.
	_ = http.NewResponseController(w).SetReadDeadline(deadline)
	rec, err := h.Store.Receive(ctx, r.Body, h.Scratch)
	if err != nil {
		switch {
		case errors.Is(err, ErrTooLarge):
			http.Error(w, "the upload is "+err.Error(), http.StatusRequestEntityTooLarge)
		case errors.Is(err, ErrContent):
			http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		case !time.Now().Before(deadline):
			// The read deadline (a net error) or the context's
			// (cancelling the request), whichever came first.
			w.Header().Set("Connection", "close")
			http.Error(w, fmt.Sprintf("the upload was not complete within %s", h.Timeout), http.StatusRequestTimeout)
		default:
			h.Log.V(1).Info("Upload failed", "bundle", b.Name, "reason", err.Error())
			http.Error(w, "reading the upload failed: "+err.Error(), http.StatusBadRequest)
		}
		return
	}
	if pin := b.Spec.Source.Upload.Digest; pin != "" && pin != rec.Digest {
		rec.Discard()
		http.Error(w, fmt.Sprintf("the upload has digest %s, bundle %q pins %s", rec.Digest, b.Name, pin), http.StatusConflict)
		return
	}
	result, current, err := h.Store.Commit(b.UID, rec, resolvedDigest(b))
	if err != nil {
		h.Log.Error(err, "Storing an upload", "bundle", b.Name)
		http.Error(w, "storing the upload failed", http.StatusInternalServerError)
		return
	}
	if result == Conflict {
		http.Error(w, fmt.Sprintf("bundle %q already has content %s; its content never changes: create another Bundle", b.Name, current), http.StatusConflict)
		return
	}
	// The Bundle may have been deleted (its finalizer run) or replaced
	// while the body was read: never keep content nobody will release.
	if now, err := h.GetBundle(r.Context(), b.Name); err != nil || now.UID != b.UID || !now.DeletionTimestamp.IsZero() {
		if result == Created {
			_ = h.Store.Release(b.UID)
		}
		http.Error(w, fmt.Sprintf("bundle %q was deleted during the upload", b.Name), http.StatusConflict)
		return
	}
	w.Header().Set("Docker-Content-Digest", rec.Digest)
	if result == Unchanged {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	h.Log.Info("Content uploaded", "bundle", b.Name, "digest", rec.Digest, "bytes", rec.Size, "user", user)
	w.WriteHeader(http.StatusCreated)
}

// requestedBundle is the Bundle name of /uploads/<name>.tgz, judged on the
// raw path too, so that encoded slashes or dots cannot pass.
func requestedBundle(r *http.Request) (string, bool) {
	if r.URL.EscapedPath() != r.URL.Path {
		return "", false
	}
	rest, ok := strings.CutPrefix(r.URL.Path, Path)
	if !ok {
		return "", false
	}
	name, ok := strings.CutSuffix(rest, archiveSuffix)
	if !ok || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return "", false
	}
	return name, true
}

func unavailable(w http.ResponseWriter, retryAfter int, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	http.Error(w, msg, http.StatusServiceUnavailable)
}

// KeepUIDs is what Sweep keeps: the UIDs of uids.
func KeepUIDs(uids []types.UID) func(types.UID) bool {
	set := make(map[types.UID]bool, len(uids))
	for _, u := range uids {
		set[u] = true
	}
	return func(u types.UID) bool { return set[u] }
}
