package avro_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Plan reads footers on goroutines: none may outlive a call.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
