// Package s3 links the S3 backend into sluice: importing it for its side
// effect, as gocloud.dev/blob/s3blob is imported,
//
//	import _ "github.com/sluicedata/sluice/storage/s3"
//
// opens s3:// URLs in stream.Options.URLs, checkpoint.OpenBucketStoreURL and
// the formats, and lets retries tell an S3 refusal from a server fault.
//
// s3://BUCKET/PREFIX?region=R
//
// Credentials and region come from the AWS SDK's usual chain
// (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, ~/.aws, IMDS).
// Query parameters: region, endpoint (a full URL, for S3-compatible servers
// such as MinIO or versitygw), use_path_style=true (or s3ForcePathStyle=true;
// most servers other than AWS need it), disable_https=true,
// hostname_immutable, profile, anonymous=true, fips, dualstack, accelerate,
// rate_limiter_capacity, role (an ARN to assume), ssetype and kmskeyid
// (writes only), request_checksum_calculation and
// response_checksum_validation ("when_required" for servers that reject the
// SDK's default checksums). Any other parameter is an error. The query
// reaches gocloud's opener as it is; sluice never shows it in an error.
package s3

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"sync"
	"weak"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"gocloud.dev/blob/s3blob"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/internal/httppool"
)

func init() {
	storage.Register(storage.Driver{
		Scheme:      s3blob.Scheme,
		HTTPStatus:  httpStatus,
		HTTPHeader:  httpHeader,
		Version:     version,
		VersionName: "ETag",
		PrepareRead: prepareRead,
	})
}

// version is an object's ETag, as a listing, a HEAD or a GET gives it.
func version(as func(any) bool) string {
	var o types.Object
	if as(&o) {
		return aws.ToString(o.ETag)
	}
	var h s3.HeadObjectOutput
	if as(&h) {
		return aws.ToString(h.ETag)
	}
	var g s3.GetObjectOutput
	if as(&g) {
		return aws.ToString(g.ETag)
	}
	return ""
}

// prepareRead asks for the planned ETag (If-Match: S3 answers 412
// PreconditionFailed where the object is another now) and turns the SDK's
// retries off, which would otherwise retry each of sluice's attempts.
func prepareRead(ctx context.Context, etag string) (context.Context, func(as func(any) bool) error) {
	return ctx, func(as func(any) bool) error {
		var in *s3.GetObjectInput
		if etag != "" && as(&in) {
			in.IfMatch = aws.String(etag)
		}
		var opts *[]func(*s3.Options)
		if as(&opts) {
			*opts = append(*opts, func(o *s3.Options) {
				o.Retryer = aws.NopRetryer{}
				o.HTTPClient = readClient(o.HTTPClient)
			})
		}
		return nil
	}
}

// readClients holds each S3 client's HTTP client for reads, keyed weakly by
// the SDK's client it was derived from, so that a closed bucket's entry goes
// with it.
var readClients sync.Map // weak.Pointer[awshttp.BuildableClient] -> *awshttp.BuildableClient

// readClient is the SDK's HTTP client with an idle pool of
// httppool.IdleConnsPerHost (the SDK keeps 10).
// gocloud's s3:// opener builds the SDK's client from the URL and the
// environment with no way to pass a transport, so reads swap it per request,
// for a copy of the same settings (dialer, TLS, timeouts, proxy) with a
// larger pool; one copy per client, so that its reads share the pool. Lists
// and HEADs keep the SDK's client. A client that is not the SDK's buildable
// one is the user's choice and is kept.
func readClient(c s3.HTTPClient) s3.HTTPClient {
	bc, ok := c.(*awshttp.BuildableClient)
	if !ok {
		return c
	}
	key := weak.Make(bc)
	if rc, ok := readClients.Load(key); ok {
		return rc.(*awshttp.BuildableClient)
	}
	rc, loaded := readClients.LoadOrStore(key, bc.WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConnsPerHost = max(t.MaxIdleConnsPerHost, httppool.IdleConnsPerHost)
		t.MaxIdleConns = max(t.MaxIdleConns, 4*httppool.IdleConnsPerHost)
	}))
	if !loaded {
		runtime.AddCleanup(bc, func(k weak.Pointer[awshttp.BuildableClient]) { readClients.Delete(k) }, key)
	}
	return rc.(*awshttp.BuildableClient)
}

func httpHeader(err error) http.Header {
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.Response != nil {
		return re.Response.Header
	}
	return nil
}

// httpStatus reads the status of the AWS SDK's ResponseError (and smithy's,
// which it wraps) through the method both have.
func httpStatus(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}
