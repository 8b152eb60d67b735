package valuecheck

import (
	"os"
	"sync"
)

// shared is the test process's one directory for data that several tests
// read and none changes (the value matrix's datasets): written once, not
// once a test.
var shared struct {
	once sync.Once
	dir  string
	err  error
}

// SharedDir returns the process's shared directory, made on the first
// call. The package whose tests use it removes it with RemoveShared when
// they end (from TestMain); t.TempDir would remove it after the first test.
func SharedDir() (string, error) {
	shared.once.Do(func() { shared.dir, shared.err = os.MkdirTemp("", "sluice-valuecheck-") })
	return shared.dir, shared.err
}

// RemoveShared removes the shared directory, if SharedDir made it.
func RemoveShared() {
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
}
