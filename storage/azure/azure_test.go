package azure

import (
	"fmt"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/sluicedata/sluice/storage"
)

// A refusal that gocloud calls Unknown (a wrong key) fails at once; a server
// error or throttling is retried. Through storage.Transient, so that the
// registration is checked too.
func TestTransientByStatus(t *testing.T) {
	for status, transient := range map[int]bool{400: false, 403: false, 404: false, 408: true, 429: true, 500: true, 503: true} {
		err := fmt.Errorf("blob (code=Unknown): %w", &azcore.ResponseError{StatusCode: status, ErrorCode: "AuthenticationFailed"})
		if got := storage.Transient(err); got != transient {
			t.Errorf("%d: Transient = %t, want %t", status, got, transient)
		}
	}
}
