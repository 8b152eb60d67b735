package orc_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Plan and Fetch run goroutines: none may outlive a call.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
