package s3

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/sluicedata/sluice/storage"
)

// A refusal that gocloud calls Unknown (a wrong signature) fails at once; a
// server error or throttling is retried. Through storage.Transient, so that
// the registration is checked too.
func TestTransientByStatus(t *testing.T) {
	for status, transient := range map[int]bool{400: false, 403: false, 404: false, 408: true, 429: true, 500: true, 503: true} {
		err := fmt.Errorf("blob (code=Unknown): %w", &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
			Err:      errors.New("api error SignatureDoesNotMatch"),
		}})
		if got := storage.Transient(err); got != transient {
			t.Errorf("%d: Transient = %t, want %t", status, got, transient)
		}
	}
}
