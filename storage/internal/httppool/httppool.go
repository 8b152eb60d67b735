// Package httppool holds the HTTP transport that sluice's cloud drivers read
// through where they can choose it, with an idle pool sized for the requests
// sluice keeps in flight.
package httppool

import (
	"net/http"
	"sync"
)

// IdleConnsPerHost bounds the connections a bucket's client keeps open
// between requests. It must hold at least the requests sluice keeps in flight
// to a bucket (Storage.MaxRequests): a pool smaller than a round of requests
// closes the surplus connections after each round, and the next round opens
// new ones, a TCP and TLS handshake (one or two round trips) each, which is
// latency the requests in flight were meant to hide. Go's default keeps 2,
// the Azure and AWS SDKs 10. Larger pools cost idle sockets only.
const IdleConnsPerHost = 64

// Transport is shared by every bucket of a driver, so that buckets on one
// host (storage.googleapis.com) share one pool; the Azure driver reads
// through a clone with its SDK's TLS settings. It is a clone of http.DefaultTransport (proxy settings,
// timeouts, HTTP/2), which belongs to the user's program and is left as it
// is; a program that replaced it with a RoundTripper of its own keeps that.
var Transport = sync.OnceValue(func() http.RoundTripper {
	def, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return http.DefaultTransport
	}
	t := def.Clone()
	t.MaxIdleConnsPerHost = IdleConnsPerHost
	t.MaxIdleConns = max(t.MaxIdleConns, 4*IdleConnsPerHost)
	return t
})
