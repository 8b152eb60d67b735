package prefetch

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a stage starts must be gone when its iteration returns; a test that leaks one
// fails the package.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
