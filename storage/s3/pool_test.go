package s3_test

import (
	"testing"

	"github.com/sluicedata/sluice/internal/testkit/scratch"
)

// Rounds of as many concurrent range reads as sluice keeps in flight to a
// bucket reuse their connections: the AWS SDK's transport keeps 10 idle per
// host, so each round after the first opened 6 new ones (a TCP and, on real
// S3, a TLS handshake each): 62 connections in all.
func TestConcurrentReadsReuseConnections(t *testing.T) { scratch.CheckConnsReused(t, scratch.S3) }
