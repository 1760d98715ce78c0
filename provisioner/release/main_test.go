package release

import (
	"os"
	"testing"

	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// The integration tests share one API server (testenv.Shared), each in
// namespaces of its own.
func TestMain(m *testing.M) { os.Exit(testenv.RunShared(m)) }
