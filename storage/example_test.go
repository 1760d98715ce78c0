package storage_test

import (
	"net/http"
	"os"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/rukpak-dev/rukpak/storage"
)

// How a provisioner wires storage: one LocalDirectory for its own Bundles,
// the content handler on its HTTPS server, and a fallback loader for
// BundleDeployments whose Bundles another process unpacked.
func Example() {
	log := ctrl.Log.WithName("storage")
	store := &storage.LocalDirectory{
		RootDirectory: "/var/cache/bundles",
		BaseURL:       "https://rukpak-core.rukpak-system.svc",
	}
	// Leftovers of a crash mid-Store; the grace period spares writes of
	// another process in flight.
	if err := store.RemoveStaleTempFiles(10 * time.Minute); err != nil {
		log.Error(err, "Removing stale temporary files")
	}

	handler, err := storage.NewHandler(ctrl.GetConfigOrDie(), store.RootDirectory, []string{storage.DefaultContentAudience}, log)
	if err != nil {
		log.Error(err, "Creating content handler")
		os.Exit(1)
	}
	mux := http.NewServeMux()
	mux.Handle(storage.BundlesPath, handler)
	go func() {
		srv := &http.Server{Addr: ":8443", Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		_ = srv.ListenAndServeTLS("/etc/rukpak/tls/tls.crt", "/etc/rukpak/tls/tls.key")
	}()

	caPEM, _ := os.ReadFile("/etc/rukpak/tls/ca.crt")
	client, err := storage.NewHTTPClient(caPEM)
	if err != nil {
		log.Error(err, "Creating content client")
		os.Exit(1)
	}
	// Content another process stored comes only from the configured
	// service, with a token of the content audience, verified against
	// status.contentDigest.
	loader, err := storage.NewFallbackLoader(store, store.BaseURL, client, storage.TokenFromFile(storage.ContentTokenPath))
	if err != nil {
		log.Error(err, "Creating content loader")
		os.Exit(1)
	}
	loader.Audience = storage.DefaultContentAudience
	_ = loader // use as the BundleDeployment reconciler's storage.Loader
}
