package provisioner_test

import (
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/rukpak-dev/rukpak/internal/leanmeta"
	"github.com/rukpak-dev/rukpak/provisioner"
)

// A manager whose config wraps its transport would hand Helm's child
// renderer a config it refuses: Setup asks for the plain one instead.
func TestSetupNeedsPlainConfigBesideAWrappedManager(t *testing.T) {
	mgr, err := ctrl.NewManager(leanmeta.Config(&rest.Config{Host: "https://127.0.0.1:1"}), manager.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := provisioner.Setup(mgr, provisioner.Options{}); err == nil || !strings.Contains(err.Error(), "RESTConfig is required") {
		t.Fatalf("Setup without RESTConfig: %v", err)
	}
}
