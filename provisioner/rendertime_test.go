package provisioner_test

import (
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/provisioner/helm"
)

// The render time limit (30 s by default, for a provisioner on its own
// node) is testenv.WaitTimeout in these tests, which run dozens of API
// servers on two cores: prometheus-operator-crds (4.4 MB) renders in a
// second on an idle machine but took over 30 s beside the other tests, and
// each failed render was retried in full, for minutes of CPU per test and a
// verdict that followed the load. The limit itself is proven where it is
// set (provisioner/helm's sandbox tests); TestIntegrationHelmFairRenders
// sets its own lanes.
func init() { helm.DefaultSandboxLimits.Timeout = testenv.WaitTimeout }
