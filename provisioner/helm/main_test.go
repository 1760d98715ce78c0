package helm_test

import (
	"os"
	"testing"

	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// The integration tests take their API servers from a pool
// (testenv.Pooled), which RunShared stops after them.
func TestMain(m *testing.M) { os.Exit(testenv.RunShared(m)) }
