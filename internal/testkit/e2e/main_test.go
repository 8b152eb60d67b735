package e2e_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The cloud SDKs keep idle HTTP connections in pools that a closed bucket
// cannot reach (s3blob and azureblob expose no way to close them), and a
// request cancelled while its connection was being dialled leaves that fresh
// connection in the pool until the SDK's idle timeout (90s) or the server
// closes it. Their two goroutines per connection are the SDKs', not sluice's:
// everything else must still be gone when the tests end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	)
}
