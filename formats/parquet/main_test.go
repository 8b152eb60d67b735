package parquet_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Plan reads footers on goroutines and arrow-go starts its own while
// decoding: none may outlive a call.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
